"""`cabal graph status|stop` as a user runs them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CABAL = [sys.executable, "-m", "cabal.cli"]


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    merged = {**os.environ, **(env or {})}
    return subprocess.run([*CABAL, *args], capture_output=True, text=True, timeout=60, env=merged)


def test_help_lists_the_commands():
    out = run("--help").stdout
    for command in ("graph", "run", "resume", "chat", "say", "status", "transcript", "protocols", "doctor", "mcp"):
        assert command in out


def test_status_shows_embedded_server_and_graph_counts(graph):
    graph.create_cluster([{"id": "a", "node_type": "thing", "type": "file", "name": "a"},
                          {"id": "b", "node_type": "thing", "type": "file", "name": "b"}],
                         [{"type": "relates", "from": "a", "to": "b"}])
    result = run("graph", "status", "--home", str(graph.address.home))
    assert result.returncode == 0, result.stderr
    assert f"server: embedded, unix://{graph.server.socket_path}, running" in result.stdout
    assert f"  {graph.name}: 2 nodes, 1 links" in result.stdout


def test_stop_then_status_on_a_workspace_of_its_own(tmp_path: Path):
    home = tmp_path / "ws"
    started = run("graph", "status", "--start", "--home", str(home))
    assert started.returncode == 0 and "graphs: 0" in started.stdout
    stopped = run("graph", "stop", "--home", str(home))
    assert stopped.stdout.startswith("stopped")
    again = run("graph", "stop", "--home", str(home))
    assert again.stdout.startswith("no embedded server was running")
    assert "not running" in run("graph", "status", "--home", str(home)).stdout


def test_unreachable_url_is_a_clear_error_without_traceback():
    result = run("graph", "status", env={"FALKORDB_URL": "redis://127.0.0.1:1"})
    assert result.returncode == 1
    assert result.stderr.startswith("cabal: cannot reach the graph server at redis://127.0.0.1:1")
    assert "hint: " in result.stderr and "FALKORDB_URL" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_url_scheme_is_a_clear_error():
    result = run("graph", "status", "--url", "http://127.0.0.1:1")
    assert result.returncode == 2  # a usage error: the URL is wrong
    assert "unsupported graph URL scheme 'http'" in result.stderr and "Traceback" not in result.stderr
