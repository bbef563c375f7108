"""Tools across processes: `cabal run` refusing a mission whose required server is down, and a
kill -9 in the middle of a tool call, then `cabal resume`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cabal import resume_mission, run_mission
from cabal.errors import ToolServerUnavailable
from cabal.graph import ContextGraph
from tests.polling import wait_until
from tests.rounds.test_processes import facts, kill_group
from tests.tools.test_tools import CABAL, QUOTE, mission, tool_moments


@pytest.fixture(scope="module")
def home(graph_server) -> str:
    return str(graph_server.home)


def test_a_required_server_that_cannot_start_refuses_the_mission_with_exit_2_before_round_1(home,
                                                                                            tmp_path) -> None:
    path = mission(tmp_path, "dead", server={"required": True})

    refused = subprocess.run([str(CABAL), "run", str(path), "--home", home], capture_output=True, text=True,
                             stdin=subprocess.DEVNULL, timeout=60)

    assert refused.returncode == 2
    assert refused.stderr.splitlines()[0] == (
        "cabal: required tool server 'prices' is unavailable: MCPError: Connection closed (its last words on "
        "stderr: this server refuses to start)")
    assert "mission" not in refused.stdout  # no mission was written
    with pytest.raises(ToolServerUnavailable):
        run_mission(path, home=home)


# -------------------------------------------------------------------------- kill -9


def run_killed_at(path: Path, home: str, events: Path, marker: str, what: str) -> str:
    """``cabal run path`` in a process of its own, killed -9 as soon as its events log holds a
    line with ``marker``; returns the mission's id."""
    process = subprocess.Popen([str(CABAL), "run", str(path), "--home", home, "--quiet", "--events", str(events)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        seen = wait_until(lambda: events.exists() and [json.loads(line) for line in events.read_text().splitlines()
                                                       if marker in line], timeout=60, what=what)
        kill_group(process)
    finally:
        kill_group(process)
    return str(seen[0]["mission"])


def test_kill_9_in_the_middle_of_a_tool_call_then_resume_calls_it_again_and_leaves_a_clean_runs_graph(
        home, tmp_path) -> None:
    clean = run_mission(mission(tmp_path, "leisurely", server={"env": {"TOOL_DELAY_S": "0.5"}}), home=home)
    path = mission(tmp_path, "leisurely", server={"env": {"TOOL_DELAY_S": "3"}})
    mission_id = run_killed_at(path, home, tmp_path / "events.jsonl", '"tool_call"', "the tool call to start")
    assert not tool_moments(mission_id, home)  # the call was in flight: nothing of its turn committed

    resumed = resume_mission(mission_id, home=home)

    assert (resumed.state, resumed.stop_reason) == ("done", "concluded")
    with ContextGraph.open(name=clean.mission_id, home=home) as graph:
        expected = facts(graph, clean.mission_id)
    with ContextGraph.open(name=mission_id, home=home) as graph:
        assert facts(graph, mission_id) == expected
    assert [(m["id"], m["outcome"], m["digest"]) for m in tool_moments(mission_id, home)] == [
        ("r1.write.operative-1.tool1", "ok", QUOTE)]
