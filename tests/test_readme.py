"""The README's snippets run as written, and its tables say what the code does.

Each Python block runs in a fresh namespace from the repository's root, against the session's
graph server (CABAL_HOME points at it), on fresh graphs: the ones a snippet names are dropped
before it runs. Shell blocks are the set-up (a virtual environment) and the commands whose
behaviour the CLI tests check; the YAML and JSON blocks are parsed as what they claim to be.
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
from cabal.rounds.event_schema import event_fields
from cabal.rounds.events import EVENT_TYPES
from cabal.rounds.mission import parse_mission

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
PYTHON = [code for language, code in BLOCK.findall(README) if language == "python"]


def test_the_readme_has_its_snippets() -> None:
    assert len(PYTHON) == 9
    assert [language for language, _ in BLOCK.findall(README)].count("yaml") == 2  # a mission file, a batch file


@pytest.mark.parametrize("code", PYTHON, ids=[code.splitlines()[-1][:40] for code in PYTHON])
def test_a_python_snippet_runs_as_written(code: str, graph_server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    named = set(re.findall(r'name="([\w-]+)"', code))
    for name in named:  # a fresh graph, whatever ran before
        with ContextGraph.open(name=name, home=graph_server.home) as graph:
            graph.delete_graph()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        # As a script: the batch snippet's `if __name__ == "__main__":` guard runs its body.
        exec(compile(code, "README.md", "exec"), {"__name__": "__main__"})  # noqa: S102 - our own README
    assert printed.getvalue().strip(), "every snippet shows something"
    for name in named:
        with ContextGraph.open(name=name, home=graph_server.home) as graph:
            graph.delete_graph()


def test_the_membrane_and_procedure_snippets_print_what_their_comments_say(graph_server,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    for code, expected in ((next(c for c in PYTHON if "add_invariant" in c), "complete validation One session per "
                                                                               "login added to auth\n"),
                           (next(c for c in PYTHON if "write_adr" in c), "options None\n")):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, "README.md", "exec"), {"__name__": "readme"})  # noqa: S102
        assert printed.getvalue().endswith(expected)
    with ContextGraph.open(name="demo", home=graph_server.home) as graph:
        graph.delete_graph()


def test_the_mission_file_example_is_a_valid_mission() -> None:
    mission, _ = [code for language, code in BLOCK.findall(README) if language == "yaml"]

    spec = parse_mission(yaml.safe_load(mission))

    assert (spec.team.operatives, spec.rounds, spec.budget.tokens) == (2, 4, 400000)


def test_the_batch_file_example_is_a_valid_batch_file() -> None:
    from cabal.batch.plan import BatchSpec

    _, batch = [code for language, code in BLOCK.findall(README) if language == "yaml"]

    spec = BatchSpec.model_validate(yaml.safe_load(batch))

    assert (spec.name, spec.repeat, spec.budget.tokens, spec.budget.cost_usd) == ("launches", 2, 2_000_000, 20)
    assert (spec.mission.team.operatives, spec.requests.column, spec.matrix.operatives) == (2, "request", [1, 2, 3])


def test_the_json_blocks_parse() -> None:
    blocks = [code for language, code in BLOCK.findall(README) if language == "json"]
    assert blocks and all(json.loads(code) for code in blocks)


def test_the_events_table_lists_every_kind_with_its_fields() -> None:
    rows = dict(re.findall(r"^\| `(\w+)` \| ([a-z_, ]+) \|", README, re.MULTILINE))
    documented = {kind: fields for kind, fields in rows.items() if kind in EVENT_TYPES or "_" in kind}

    assert list(documented) == list(EVENT_TYPES)
    for kind, event_type in EVENT_TYPES.items():
        assert documented[kind].split(", ") == event_fields(event_type), kind


def test_the_command_table_names_every_mission_command() -> None:
    for command in ("run", "chat", "resume", "show", "export", "say", "status", "transcript", "stop", "missions",
                    "schema"):
        assert re.search(rf"^\| `cabal {command}\b", README, re.MULTILINE), command
    assert os.path.exists(ROOT / "docs" / "schemas" / "mission-report.schema.json")
