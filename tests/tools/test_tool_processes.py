"""Tools across processes: `cabal run` refusing a mission whose required server is down, and a
kill -9 in the middle of a tool call, then `cabal resume`; a server that never completes MCP's
handshake, which ends with the run however the run ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from cabal import resume_mission, run_mission
from cabal.errors import ToolServerUnavailable
from cabal.graph import ContextGraph
from cabal.tools.spec import ToolServerSpec
from tests.polling import wait_until
from tests.rounds.test_processes import facts, kill_group
from tests.tools.test_tools import CABAL, QUOTE, entries, mission, tool_moments


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


# ------------------------------------------------------------- a server hung before its handshake


def gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie awaiting its reaper has)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] == "Z"
    except OSError:
        return True


def hung_run(home: str, tmp_path, *, required: bool = False, startup_timeout_s: float = 1) -> tuple[list[str], Path]:
    pid_file = tmp_path / "server.pid"
    path = mission(tmp_path, "hung", script=[e for e in entries() if e["tool"] != "prices__lookup"],
                   server={"required": required, "startup_timeout_s": startup_timeout_s,
                           "env": {"PID_FILE": str(pid_file)}})
    return [str(CABAL), "run", str(path), "--home", home], pid_file


def test_a_server_that_never_completes_the_handshake_is_one_warning_and_ends_with_the_run(home, tmp_path) -> None:
    command, pid_file = hung_run(home, tmp_path)

    ran = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)

    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "Traceback" not in ran.stdout + ran.stderr
    assert ("tool server 'prices' is left out: it did not complete MCP's handshake within 1 s (the entry's "
            "startup_timeout_s)") in ran.stdout + ran.stderr
    assert gone(int(pid_file.read_text()))


def test_a_required_server_that_never_completes_the_handshake_refuses_the_mission_with_exit_2(home, tmp_path) -> None:
    command, pid_file = hung_run(home, tmp_path, required=True)

    refused = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)

    assert refused.returncode == 2
    assert refused.stderr.splitlines()[0] == (
        "cabal: required tool server 'prices' is unavailable: it did not complete MCP's handshake within 1 s (the "
        "entry's startup_timeout_s)")
    assert gone(int(pid_file.read_text()))


def test_kill_9_of_the_run_while_a_server_hangs_in_its_handshake_ends_the_server_too(home, tmp_path) -> None:
    command, pid_file = hung_run(home, tmp_path, startup_timeout_s=60)
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        pid = int(wait_until(lambda: pid_file.exists() and pid_file.read_text(), timeout=60,
                             what="the server to start"))
        assert not gone(pid)
        os.kill(process.pid, signal.SIGKILL)  # the run alone: the server has a session of its own
        process.wait(timeout=10)
    finally:
        kill_group(process)

    assert wait_until(lambda: gone(pid), timeout=10, what="the hung server to end with the run")


def test_the_handshake_timeout_is_a_field_of_the_tool_entry_10_s_unless_set() -> None:
    assert ToolServerSpec(name="prices", command="python").startup_timeout_s == 10
    assert ToolServerSpec(name="prices", command="python", startup_timeout_s=2.5).startup_timeout_s == 2.5
