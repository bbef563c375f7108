"""The embedded server's lifecycle, and connecting to configured servers."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time

import pytest

from cabal.config import resolve_server
from cabal.errors import ConfigError, GraphUnavailable
from cabal.graph import ContextGraph, EmbeddedServer
from tests.polling import wait_until

NODE = {"id": "keep", "node_type": "thing", "type": "file", "name": "kept.txt"}


@pytest.fixture
def own_server(tmp_path):
    """A server of its own (not the session's), for tests that stop or kill it."""
    server = EmbeddedServer(tmp_path / "ws")
    yield server
    server.stop()


def test_data_survives_a_clean_restart(own_server):
    assert own_server.start() is True
    with ContextGraph.open(name="persist", home=own_server.home) as graph:
        graph.create_cluster([NODE])
    assert own_server.stop() is True
    assert own_server.is_running() is False
    assert own_server.start() is True
    with ContextGraph.open(name="persist", home=own_server.home) as graph:
        assert graph.get("keep") == NODE


def test_data_survives_a_killed_server(own_server):
    own_server.start()
    with ContextGraph.open(name="persist", home=own_server.home) as graph:
        graph.create_cluster([NODE])
    os.kill(own_server.pid(), signal.SIGKILL)
    wait_until(lambda: not own_server.is_running(), timeout=5, what="the killed server to be gone", every=0.01)
    assert own_server.is_running() is False
    assert own_server.start() is True  # a stale socket is no obstacle
    with ContextGraph.open(name="persist", home=own_server.home) as graph:
        assert graph.get("keep") == NODE


def test_a_second_process_attaches_instead_of_starting(own_server):
    own_server.start()
    pid = own_server.pid()
    with ContextGraph.open(name="shared", home=own_server.home) as graph:
        graph.create_cluster([NODE])
    script = textwrap.dedent(
        f"""
        from cabal.graph import ContextGraph, EmbeddedServer
        server = EmbeddedServer({str(own_server.home)!r})
        print(server.start())
        with ContextGraph.open(name="shared", home={str(own_server.home)!r}) as graph:
            print(graph.get("keep")["name"])
        print(server.pid())
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.split() == ["False", "kept.txt", str(pid)]


def test_stop_is_fast_and_idempotent(own_server):
    own_server.start()
    started = time.monotonic()
    assert own_server.stop() is True
    assert time.monotonic() - started < 2.0
    assert own_server.stop() is False


def test_deep_workspace_gets_a_short_socket(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    server = EmbeddedServer(deep)
    assert len(str(server.socket_path)) <= 107
    assert EmbeddedServer(deep).socket_path == server.socket_path
    try:
        server.start()
        with ContextGraph.open(name="deep", home=deep) as graph:
            assert graph.counts() == {"nodes": 0, "links": 0}
    finally:
        server.stop()


def test_unreachable_url_names_the_address(monkeypatch):
    monkeypatch.setenv("FALKORDB_URL", "redis://127.0.0.1:1")
    with pytest.raises(GraphUnavailable) as caught:
        ContextGraph.open()
    assert caught.value.address == "redis://127.0.0.1:1"
    assert "redis://127.0.0.1:1" in str(caught.value)
    assert "FALKORDB_URL" in caught.value.hint


def test_password_is_not_shown(monkeypatch):
    monkeypatch.setenv("FALKORDB_URL", "redis://user:s3cret@127.0.0.1:1")
    with pytest.raises(GraphUnavailable) as caught:
        ContextGraph.open()
    assert "s3cret" not in str(caught.value)
    assert "redis://user:***@127.0.0.1:1" in str(caught.value)


def test_url_resolution(monkeypatch, tmp_path):
    for key in ("FALKORDB_URL", "NGRAM_FALKORDB_HOST", "NGRAM_FALKORDB_PORT", "CABAL_HOME"):
        monkeypatch.delenv(key, raising=False)
    assert resolve_server(home=tmp_path).embedded is True
    monkeypatch.setenv("NGRAM_FALKORDB_HOST", "db.local")
    assert resolve_server().url == "redis://db.local:6379"
    monkeypatch.setenv("NGRAM_FALKORDB_PORT", "7000")
    assert resolve_server().url == "redis://db.local:7000"
    monkeypatch.setenv("FALKORDB_URL", "unix:///run/falkor.sock")
    assert resolve_server().url == "unix:///run/falkor.sock"
    assert resolve_server("rediss://h:1").url == "rediss://h:1"
    monkeypatch.setenv("CABAL_HOME", str(tmp_path / "elsewhere"))
    assert resolve_server().home == tmp_path / "elsewhere"
    with pytest.raises(ConfigError, match="unsupported graph URL scheme 'http'"):
        resolve_server("http://h:1")


def test_external_unix_url_connects(graph_server):
    with ContextGraph.open(f"unix://{graph_server.socket_path}", name="via_url") as graph:
        assert graph.address.embedded is False
        graph.create_cluster([NODE])
        assert graph.get("keep") == NODE
        graph.delete_graph()


def test_the_socket_folder_of_a_deep_workspace_is_private_and_one_open_to_others_is_refused(tmp_path):
    server = EmbeddedServer(tmp_path / ("d" * 60) / ("e" * 60))
    folder = server.socket_path.parent  # in the temporary directory, which every user shares
    try:
        server.start()
        made = os.lstat(folder)
        assert (stat.S_IMODE(made.st_mode), made.st_uid) == (0o700, os.getuid())
        server.stop()
        os.chmod(folder, 0o777)  # as someone who got there first would leave it

        with pytest.raises(GraphUnavailable) as refused:
            server.start()

        assert str(refused.value) == (f"cannot reach the graph server at unix://{server.socket_path}: refusing to use "
                                      f"{folder}: others may use it (mode 777); a folder in a shared place must be "
                                      "yours with mode 700")
        assert refused.value.hint == f"remove {folder} if nothing of yours uses it"
        assert not server.is_running() and stat.S_IMODE(os.lstat(folder).st_mode) == 0o777  # left as found
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.skipif(os.getuid() != 0, reason="giving a folder to another user needs root")
def test_a_socket_folder_another_user_owns_is_refused(tmp_path):
    server = EmbeddedServer(tmp_path / ("d" * 60) / ("e" * 60))
    folder = server.socket_path.parent
    folder.mkdir(mode=0o700)
    os.chown(folder, 65534, 65534)
    try:
        with pytest.raises(GraphUnavailable, match=rf"refusing to use {folder}: it belongs to another user \(uid 65534\)"):
            server.start()
        assert not server.is_running()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
