"""Replaying a recorded mission: the same request, team and answers, with a model that answers
from the recording's cassette (``llm/replay.py``). ``cabal replay ID`` is this module.

The replay is a new mission (its own id, graph and cassette) on the current project: a strict
replay on an unchanged project reproduces the recorded mission's graph; a change to a prompt, a
role card or a protocol that alters what a model is asked stops it where the call differs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from cabal.llm.cassette import CASSETTE_FILE
from cabal.llm.replay import replay_spec
from cabal.rounds.control import MissionResult
from cabal.rounds.events import MissionEvent
from cabal.rounds.workspace import Workspace, mission_graph, mission_node


def recorded_request(mission_id: str, *, home: str | Path | None = None, url: str | None = None) -> dict:
    """The mission file of a recorded mission, as run: its spec, its round limit as last set, and
    every answer the user or the file gave its Chair, in the order they were given."""
    workspace = Workspace.at(home, url, reading=True)
    with mission_graph(workspace, mission_id) as graph:
        node = mission_node(graph, mission_id)
        # A gate's answer (a plan signed off, a tool call decided) is asked again of whoever replays.
        halts = [h for h in graph.find("halt") if h.get("status") == "answered" and h.get("answer") is not None
                 and not h.get("gate")]
    spec = json.loads(node["spec"])
    halts.sort(key=lambda h: (int(h.get("answered_round") or 0), str(h["id"])))
    spec["answers"] = [str(h["answer"]) for h in halts]
    spec["rounds"] = int(node.get("rounds") or spec.get("rounds") or 1)
    spec.pop("model", None)
    return spec


def replay_mission(mission_id: str, *, mode: str = "strict", fallback: str | None = None,
                   home: str | Path | None = None, url: str | None = None, record: bool = True,
                   on_event: Callable[[MissionEvent], None] | None = None) -> MissionResult:
    """Run mission ``mission_id`` again from its cassette, as a new mission."""
    from cabal.rounds.api import run_mission

    spec = recorded_request(mission_id, home=home, url=url)
    cassette = Workspace.at(home, url, reading=True).mission_dir(mission_id) / CASSETTE_FILE
    return run_mission(spec, model=replay_spec(str(cassette), mode, fallback), home=home, url=url,
                       on_event=on_event, record=record)
