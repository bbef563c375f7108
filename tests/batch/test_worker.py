"""A batch's worker resolves its workspace and the graph server once for all its missions
(issue 25): the worker keeps one ``Workspace``, the engine is given it instead of resolving
``home`` and ``url`` again, and every graph of it is opened on the one resolved server."""

from __future__ import annotations

from pathlib import Path

import pytest

from cabal.batch import worker
from cabal.batch.limits import FileLimits
from cabal.batch.worker import MissionTask, run_task
from cabal.rounds import workspace as workspace_module
from cabal.rounds.mission import parse_mission
from cabal.rounds.workspace import Workspace


def test_a_worker_resolves_its_workspace_and_graph_server_once_for_all_its_missions(
        graph_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[tuple] = []
    resolved: list[tuple] = []
    real_at, real_resolve = Workspace.at.__func__, workspace_module.resolve_server
    monkeypatch.setattr(Workspace, "at", classmethod(lambda cls, *args, **kw: opened.append(args) or real_at(cls, *args, **kw)))
    monkeypatch.setattr(workspace_module, "resolve_server", lambda *args: resolved.append(args) or real_resolve(*args))
    worker._workspace.cache_clear()
    limits = FileLimits(str(tmp_path / "limits"))
    limits.prepare()
    spec = parse_mission({"request": "Write a short guide to brewing tea.", "rounds": 1, "model": "simulated"})

    outcomes = [run_task(MissionTask("b-worker", f"m-worker-{n}", f"r{n}", spec, str(graph_server.home), None, None,
                                     limits), lambda event: None) for n in range(3)]

    assert [outcome.state for outcome in outcomes] == ["done", "done", "done"]
    assert (len(opened), len(resolved)) == (1, 1)  # three missions: one workspace, one server resolved
    worker._workspace.cache_clear()
