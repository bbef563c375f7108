"""The wheel ships the team's data folders, where cabal.resources finds them after install."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
                   check=True, capture_output=True, timeout=300)
    (path,) = out.glob("cabal-*.whl")
    return zipfile.ZipFile(path)


def test_data_folders_are_inside_the_package(wheel):
    names = set(wheel.namelist())
    for kind in ("agents", "protocols", "skills", "prompts", "procedures", "examples"):
        shipped = {n for n in names if n.startswith(f"cabal/_data/{kind}/")}
        on_disk = {f"cabal/_data/{p.relative_to(ROOT).as_posix()}" for p in (ROOT / kind).rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts}
        assert on_disk and on_disk <= shipped, f"{kind}: missing {sorted(on_disk - shipped)[:5]}"


def test_console_script_and_package(wheel):
    entry_points = next(n for n in wheel.namelist() if n.endswith("entry_points.txt"))
    assert "cabal = cabal.cli:entry" in wheel.read(entry_points).decode()
    assert "cabal/graph/context_graph.py" in wheel.namelist()
    assert "cabal/report/templates/report.html.j2" in wheel.namelist()  # the HTML report's template


def test_the_web_pages_ship_every_asset_they_serve(wheel):
    """`cabal serve` works offline: its templates, stylesheets and script come from the package."""
    names = set(wheel.namelist())
    web = {f"cabal/{p.relative_to(ROOT / 'cabal').as_posix()}" for p in (ROOT / "cabal" / "web").rglob("*")
           if p.is_file() and "__pycache__" not in p.parts}
    sections = {f"cabal/report/templates/sections/{p.name}"
                for p in (ROOT / "cabal" / "report" / "templates" / "sections").iterdir()}
    assert {"cabal/web/static/live.js", "cabal/web/static/web.css", "cabal/web/templates/mission.html.j2"} <= web
    assert web | sections | {"cabal/report/templates/report.css"} <= names
    metadata = wheel.read(next(n for n in wheel.namelist() if n.endswith("METADATA"))).decode()
    for requirement in ("starlette>=1.10", "uvicorn>=0.54", "sse-starlette>=3.7", "python-multipart>=0.0.20"):
        assert f"Requires-Dist: {requirement}\n" in metadata


def test_the_otel_extra_and_the_report_dependencies_are_declared(wheel):
    metadata = wheel.read(next(n for n in wheel.namelist() if n.endswith("METADATA"))).decode()
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
