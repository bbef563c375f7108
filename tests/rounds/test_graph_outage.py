"""The embedded graph server dies mid-run (SIGKILL, as an out-of-memory kill would): Cabal starts
it again and replays the step by itself, with nothing lost or written twice; past its restarts
the mission pauses `interrupted` (exit 5), never `failed`, and `cabal resume` finishes it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cabal.cli import exits, main
from cabal.graph import EmbeddedServer
from cabal.llm import FunctionChatModel
from cabal.rounds.api import run_mission
from cabal.rounds.control import mission_status
from cabal.rounds.events import GraphRestarted, MissionInterrupted

from .graph_outage import ServerKiller
from .test_outages import the_work

MISSION = {"name": "outage", "request": "Plan a small launch.", "team": {"operatives": 2}, "rounds": 2}


@pytest.fixture
def home(tmp_path: Path):
    """A workspace whose server the test may kill (not the session's)."""
    home = tmp_path / ".cabal"
    yield home
    EmbeddedServer(home).stop()


def test_a_killed_graph_server_is_started_again_and_the_step_replayed(home: Path) -> None:
    calm = run_mission(MISSION, model="py:cabal.rounds.simulated:team", home=home)
    killer = ServerKiller(home)
    events: list = []

    result = run_mission(MISSION, model=FunctionChatModel(killer), home=home, on_event=events.append)

    assert (result.state, result.stop_reason) == (calm.state, calm.stop_reason) == ("done", "concluded")
    restarts = [event for event in events if isinstance(event, GraphRestarted)]
    assert [(e.round, e.restart, e.max_restarts) for e in restarts] == [(1, 1, 3)]
    assert restarts[0].detail  # what the client saw: the connection refused or closed
    assert len(killer.killed) == 1 and EmbeddedServer(home).pid() not in (None, killer.killed[0])
    assert not any(isinstance(event, MissionInterrupted) for event in events)
    # The same work as an undisturbed run: no turn lost, none written twice.
    assert the_work(home, result.mission_id) == the_work(home, calm.mission_id)


def test_past_its_restarts_the_mission_pauses_interrupted_and_resume_finishes_it(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    calm = run_mission(MISSION, model="py:cabal.rounds.simulated:team", home=home)
    mission_file = tmp_path / "outage.mission.yaml"
    mission_file.write_text(yaml.safe_dump(MISSION))
    monkeypatch.setenv("CABAL_HOME", str(home))
    monkeypatch.setenv("CABAL_GRAPH_RESTARTS", "0")

    status = main(["run", str(mission_file), "--model", "py:tests.rounds.graph_outage:killer", "--quiet"])

    out = capsys.readouterr().out
    assert status == exits.INTERRUPTED, out
    mission_id = out.split("mission: ", 1)[1].split()[0]
    assert "state: interrupted, round 0: the graph server is unavailable: " in out
    monkeypatch.delenv("CABAL_GRAPH_RESTARTS")

    assert main(["resume", mission_id, "--model", "py:cabal.rounds.simulated:team", "--quiet"]) == exits.DONE
    assert mission_status(mission_id, home=home).stop_reason == "concluded"
    assert the_work(home, mission_id) == the_work(home, calm.mission_id)


def test_the_number_of_restarts_is_a_whole_number(monkeypatch: pytest.MonkeyPatch) -> None:
    from cabal.errors import ConfigError
    from cabal.rounds.api import graph_restarts

    monkeypatch.delenv("CABAL_GRAPH_RESTARTS", raising=False)
    assert graph_restarts() == 3
    monkeypatch.setenv("CABAL_GRAPH_RESTARTS", "many")
    with pytest.raises(ConfigError, match=r"CABAL_GRAPH_RESTARTS='many': write a whole number"):
        graph_restarts()
