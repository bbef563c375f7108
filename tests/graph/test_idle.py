"""The embedded server stops by itself once no client is connected and no mission runs for its
idle time (here about a second), and `cabal graph status` says when it will."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cabal.cli import main
from cabal.errors import ConfigError
from cabal.graph import ContextGraph, EmbeddedServer
from cabal.graph.idle import read_state
from cabal.graph.server import idle_time as idle_minutes
from cabal.locks import exclusive
from tests.polling import wait_until

IDLE = 0.02  # minutes: 1.2 s


@pytest.fixture
def server(tmp_path: Path):
    server = EmbeddedServer(tmp_path / "ws")
    yield server
    server.stop()


def test_an_unused_server_stops_by_itself_after_its_idle_time(server: EmbeddedServer,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    assert server.start(idle_minutes=IDLE) is True
    wait_until(lambda: read_state(server.data_dir) is not None, timeout=10, what="the watcher's first look")

    assert main(["graph", "status", "--home", str(server.home)]) == 0
    line = [text for text in capsys.readouterr().out.splitlines() if text.startswith("idle stop: ")]
    # The status command is itself a client while it runs; the watcher's last look saw none.
    assert line and line[0].startswith("idle stop: idle: stops by itself at ") and "unless a client connects" in line[0]

    wait_until(lambda: not server.is_running(), timeout=15, what="the idle server to stop", every=0.05)
    assert time.monotonic() - started >= IDLE * 60
    assert server.pid_path.exists() is False and read_state(server.data_dir) is None  # a clean shutdown, watcher gone


def test_a_connected_client_keeps_it_up_and_it_stops_once_the_client_leaves(server: EmbeddedServer) -> None:
    server.start(idle_minutes=IDLE)
    graph = ContextGraph.open(name="kept", home=server.home)
    graph.create_cluster([{"id": "n", "node_type": "thing", "type": "file", "name": "n"}])

    time.sleep(IDLE * 60 * 2.5)
    assert server.is_running()
    state = read_state(server.data_dir)
    assert (state.idle_since, state.clients) == (None, 1)
    assert state.describe() == "in use (1 client): stops by itself after 0.02 idle minutes"

    graph.close()
    wait_until(lambda: not server.is_running(), timeout=15, what="the server to stop once idle", every=0.05)
    assert server.start(idle_minutes=0) is True  # the next command starts it again, on the same data
    with ContextGraph.open(name="kept", home=server.home) as again:
        assert again.get("n")["name"] == "n"


def test_a_running_mission_keeps_it_up_even_with_no_client(server: EmbeddedServer) -> None:
    server.start(idle_minutes=IDLE)
    lock = server.home / "missions" / "m-busy-000001" / "lock"

    with exclusive(lock, lambda: AssertionError("the lock is free")):
        time.sleep(IDLE * 60 * 2.5)
        assert server.is_running()
        assert read_state(server.data_dir).describe() == (
            "in use (0 clients, 1 mission running): stops by itself after 0.02 idle minutes")

    wait_until(lambda: not server.is_running(), timeout=15, what="the server to stop once the mission ended")


def test_zero_minutes_means_no_watcher_and_status_says_so(server: EmbeddedServer,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["graph", "start", "--home", str(server.home), "--idle-minutes", "0"]) == 0
    out = capsys.readouterr().out.splitlines()

    assert out[0].startswith("started: unix://") and read_state(server.data_dir) is None
    assert out[1] == ("idle stop: none: it runs until `cabal graph stop` (no idle watcher; "
                      "CABAL_GRAPH_IDLE_MINUTES=0, or an older server)")


def test_the_idle_time_comes_from_the_option_then_the_environment_then_15_minutes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CABAL_GRAPH_IDLE_MINUTES")
    assert idle_minutes() == 15
    monkeypatch.setenv("CABAL_GRAPH_IDLE_MINUTES", "2.5")
    assert (idle_minutes(), idle_minutes(1)) == (2.5, 1)
    monkeypatch.setenv("CABAL_GRAPH_IDLE_MINUTES", "soon")
    with pytest.raises(ConfigError, match=r"CABAL_GRAPH_IDLE_MINUTES='soon': write a number of minutes"):
        idle_minutes()
