"""The engine's in-memory view of a mission equals a fresh read of the graph, at every step.

The engine reads a mission once, then keeps that snapshot current from the clusters it commits
(and from the user's writes, at each round start). If the two ever differed, agents would see
a mission that is not the graph's, and short ids would follow a different order.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from cabal.rounds.run import MissionRun
from cabal.rounds.api import run_mission
from cabal.rounds.snapshot import Snapshot, load_snapshot

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def table(snapshot: Snapshot, name: str):
    value = getattr(snapshot, name)
    if isinstance(value, dict) and name != "mission":
        return list(value.items())  # order included: short ids follow it
    return value


@pytest.mark.parametrize("mission", ["launch/launch.mission.yaml", "research/research.mission.yaml"])
def test_the_view_is_the_graph_at_every_step(graph_server, monkeypatch, mission):
    compared: list[tuple[int, int]] = []
    kept = MissionRun.snapshot

    def checked(self, round_number):
        view = kept(self, round_number)
        fresh = load_snapshot(self.graph, self.mission_id, round_number)
        for field in fields(Snapshot):
            if field.name.startswith("_"):
                continue
            assert table(view, field.name) == table(fresh, field.name), (round_number, field.name)
        assert view.new_versions() == fresh.new_versions()
        compared.append((round_number, len(view.versions)))
        return view

    monkeypatch.setattr(MissionRun, "snapshot", checked)
    result = run_mission(EXAMPLES / mission, home=graph_server.home)
    assert result.state == "done" and result.stop_reason == "concluded"
    assert len(compared) > 20 and compared[-1][1] > 0
