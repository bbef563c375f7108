"""The README's and the docs site's snippets run as written, and their tables say what the code does.

Each Python block runs in a fresh namespace from the repository's root, against the session's
graph server (CABAL_HOME points at it), on fresh graphs: the ones a snippet names are dropped
before it runs. Shell blocks are the set-up (a virtual environment) and the commands whose
behaviour the CLI tests check; the YAML and JSON blocks are parsed as what they claim to be (a
YAML block with a `request` is a mission file, one with `mission` and `requests` a batch file).

The pages read are README.md and docs/**/*.md except docs/guide/, whose pages other features
write and test themselves.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
from pathlib import Path

import pytest
import yaml

from cabal.graph import ContextGraph
from cabal.rounds.mission import parse_mission

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
PAGES = [ROOT / "README.md", *sorted(page for page in (ROOT / "docs").rglob("*.md")
                                     if "guide" not in page.relative_to(ROOT / "docs").parts)]


def blocks(language: str, pages: list[Path] = PAGES) -> list[tuple[str, str]]:
    """``(page, code)`` of every block in ``language``, page by page."""
    return [(str(page.relative_to(ROOT)), code) for page in pages
            for found, code in BLOCK.findall(page.read_text()) if found == language]


README = ROOT / "README.md"
PYTHON = blocks("python")


def snippet(marker: str) -> str:
    return next(code for _, code in PYTHON if marker in code)


def test_the_readme_is_a_short_front_door_with_its_snippets() -> None:
    assert len(README.read_text().splitlines()) <= 250
    assert len(blocks("python", [README])) == 1  # run, then answer the Chair's question
    assert len(blocks("yaml", [README])) == 1  # a mission file


def test_the_site_keeps_what_the_readme_moved_out() -> None:
    assert len(PYTHON) == 10
    markers = ("add_invariant", "write_adr", "file_root=project", "run_batch", "stream_mission", "SpanRecorder",
               "graph.find(\"narrative\"", "mission_report(result.mission_id)", "resume_mission(result.mission_id",
               "make_model(")
    for marker in markers:
        assert snippet(marker), marker


@pytest.mark.parametrize("page,code", PYTHON, ids=[f"{page}:{code.splitlines()[-1][:40]}" for page, code in PYTHON])
def test_a_python_snippet_runs_as_written(page: str, code: str, graph_server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    named = set(re.findall(r'name="([\w-]+)"', code))
    for name in named:  # a fresh graph, whatever ran before
        with ContextGraph.open(name=name, home=graph_server.home) as graph:
            graph.delete_graph()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        # As a script: the batch snippet's `if __name__ == "__main__":` guard runs its body.
        exec(compile(code, page, "exec"), {"__name__": "__main__"})  # noqa: S102 - our own docs
    assert printed.getvalue().strip(), "every snippet shows something"
    for name in named:
        with ContextGraph.open(name=name, home=graph_server.home) as graph:
            graph.delete_graph()


def test_the_snippets_print_what_their_comments_say(graph_server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    for marker, expected in (("add_invariant", "complete validation One session per login added to auth\n"),
                             ("write_adr", "options None\n"),
                             ("make_model(", "True cabal-function\n")):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(snippet(marker), marker, "exec"), {"__name__": "docs"})  # noqa: S102
        assert printed.getvalue().endswith(expected)
    with ContextGraph.open(name="demo", home=graph_server.home) as graph:
        graph.delete_graph()


def test_the_readme_question_snippet_takes_its_halted_branch(graph_server, monkeypatch: pytest.MonkeyPatch) -> None:
    """The mission has no answers on file, so the Chair's question comes to the caller."""
    monkeypatch.chdir(ROOT)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(blocks("python", [README])[0][1], "README.md", "exec"), {"__name__": "__main__"})  # noqa: S102
    first, last = printed.getvalue().splitlines()[0], printed.getvalue().splitlines()[-1]
    assert first.startswith("the Chair asks: Who is Margin for at launch")
    assert last.startswith("done concluded ")


def test_the_yaml_blocks_parse_and_mission_files_are_valid() -> None:
    from cabal.batch.plan import BatchSpec

    missions, batches = [], []
    for page, code in blocks("yaml"):
        data = yaml.safe_load(code)
        assert isinstance(data, dict), page
        if "request" in data:
            missions.append(parse_mission(data, source=page))
        elif "mission" in data and "requests" in data:
            batches.append(BatchSpec.model_validate(data))
    assert len(missions) == 5 and len(batches) == 1
    readme_mission = parse_mission(yaml.safe_load(blocks("yaml", [README])[0][1]))
    assert (readme_mission.team.operatives, readme_mission.rounds, readme_mission.budget.tokens) == (2, 4, 400000)
    (batch,) = batches
    assert (batch.name, batch.repeat, batch.budget.tokens, batch.budget.cost_usd) == ("launches", 2, 2_000_000, 20)
    assert (batch.mission.team.operatives, batch.requests.column, batch.matrix.operatives) == (2, "request", [1, 2, 3])


def test_the_json_blocks_parse() -> None:
    found = blocks("json")
    assert found and all(json.loads(code) for _, code in found)


def test_the_readme_table_names_every_mission_command() -> None:
    readme = README.read_text()
    for command in ("show", "export", "status", "transcript", "stop", "missions", "schema"):
        assert re.search(rf"^\| `cabal {command}\b", readme, re.MULTILINE), command
    for command in ("run", "chat", "resume", "say", "batch", "serve"):
        assert f"cabal {command} " in readme, command
    assert "`cabal schema [mission\\|batch\\|export\\|events]`" in readme
    assert os.path.exists(ROOT / "docs" / "schemas" / "mission-report.schema.json")


def test_the_readme_links_only_to_files_that_exist() -> None:
    for target in re.findall(r"\]\(((?:docs/)[^)#]+)", README.read_text()):
        if not target.startswith("docs/guide/"):  # guide pages come from other branches
            assert (ROOT / target).is_file(), target


# A tool the README tells a reader to run (Cabal's own commands are named in its prose as `cabal run`;
# its shell blocks run them): mkdocs, pytest and the checks, anywhere; cabal, at a block's line start.
TOOL_RUN = re.compile(r"(?<![\w/.-])((?:\.venv/bin/)?(?:mkdocs|pytest|lint-imports|mypy|ruff))\s+[a-z-]")
BLOCK_RUN = re.compile(r"^(?:[A-Z_]+=\S+\s+)*(\S+)", re.MULTILINE)


def test_every_command_the_readme_runs_is_the_virtual_environments_and_is_installed_there() -> None:
    """The README installs into .venv (its set-up's two commands), so every command it runs is
    .venv/bin/NAME: a bare `mkdocs serve` was "command not found" after the README's install.
    Each exists beside this test's Python (the test and docs extras installed, as the README does)."""
    import sys

    text = README.read_text()
    tools = [match[1] for match in TOOL_RUN.finditer(text)]
    started = [match[1] for language in ("bash", "sh", "console") for _, code in blocks(language, [README])
               for match in BLOCK_RUN.finditer(code)]
    commands = tools + [command for command in started if command.endswith(("cabal", "mkdocs", "pytest"))]
    assert sorted({command for command in commands if not command.startswith(".venv/bin/")}) == []
    assert {".venv/bin/cabal", ".venv/bin/mkdocs", ".venv/bin/pytest"} <= set(commands)
    for command in set(commands):
        assert Path(sys.executable).with_name(command.removeprefix(".venv/bin/")).exists(), command
