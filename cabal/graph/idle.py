"""The embedded server stops by itself once nothing has used it for a while.

An embedded server outlives the command that started it, so the next command attaches at once;
left alone it would run until ``cabal graph stop``. When a process starts the server, it also
starts this watcher: a small detached process (``python -m cabal.graph.idle HOME MINUTES``)
that asks the server, every few seconds, whether it is in use:

- a **client** is connected besides the watcher itself (``INFO clients``: ``connected_clients``
  above 1; a command, a running mission, ``cabal serve`` and ``cabal mcp`` all hold one), or
- a **mission or a batch runs** in the workspace (its process lock is held: ``cabal.locks``).

Once neither has been true for the idle time, the watcher shuts the server down (as ``cabal
graph stop`` does: the append-only file is flushed) and exits; it also exits when the server
is gone. The next command that needs the graph starts the server (and a watcher) again, on the
same data. ``idle.json`` in the server's folder says what the watcher last saw, for ``cabal graph
status``. The idle time is ``CABAL_GRAPH_IDLE_MINUTES`` (default 15; 0: never stop) or ``cabal
graph start --idle-minutes N``.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from cabal.graph.server import EmbeddedServer
from cabal.locks import alive, is_held
from cabal.private import write_private

STATE_FILE = "idle.json"
LONGEST_POLL_S = 5.0


@dataclass(frozen=True)
class IdleState:
    """What the watcher saw last: ``idle_since`` is None while the server is in use."""

    watcher_pid: int
    idle_minutes: float
    checked_at: float
    idle_since: float | None
    clients: int
    missions_running: int

    @property
    def stops_at(self) -> float | None:
        return None if self.idle_since is None else self.idle_since + self.idle_minutes * 60

    def describe(self, now: float | None = None) -> str:
        """One line for ``cabal graph status``."""
        after = f"{self.idle_minutes:g} idle minute{'s' if self.idle_minutes != 1 else ''}"
        if self.stops_at is None:
            using = [f"{self.clients} client{'s' if self.clients != 1 else ''}"] + (
                [f"{self.missions_running} mission{'s' if self.missions_running != 1 else ''} running"]
                if self.missions_running else [])
            return f"in use ({', '.join(using)}): stops by itself after {after}"
        left = max(0.0, self.stops_at - (now if now is not None else time.time()))
        clock = time.strftime("%H:%M:%S", time.localtime(self.stops_at))
        return f"idle: stops by itself at {clock} (in {_duration(left)}) unless a client connects"


def read_state(data_dir: Path) -> IdleState | None:
    """The watcher's last word, or None when no watcher is alive (an older server, or 0 minutes)."""
    try:
        state = IdleState(**json.loads((data_dir / STATE_FILE).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    return state if alive(state.watcher_pid) else None


class Watcher:
    """Polls one workspace's server until it is gone or idle for ``minutes``."""

    def __init__(self, home: Path, minutes: float) -> None:
        self.home = Path(home)
        self.server = EmbeddedServer(self.home)
        self.idle_s = minutes * 60
        self.minutes = minutes
        self.poll_s = min(LONGEST_POLL_S, max(0.1, self.idle_s / 8))  # a short idle time is checked often
        self.server_pid = self.server.pid()

    def run(self) -> str:
        """Watch; returns why it stopped watching."""
        idle_since: float | None = None
        while True:
            clients = self.clients()
            if clients is None:
                return "the server is gone"
            if self.server.pid() != self.server_pid:  # stopped and started again: its own watcher came with it
                return "another server took the workspace's socket"
            missions = self.missions_running()
            now = time.time()
            idle_since = None if clients > 1 or missions else (idle_since or now)
            self.record(IdleState(os.getpid(), self.minutes, now, idle_since, max(0, clients - 1), missions))
            if idle_since is not None and now - idle_since >= self.idle_s and self.stop_if_still_idle():
                return f"stopped the server after {self.minutes:g} idle minutes"
            time.sleep(self.poll_s)

    def clients(self) -> int | None:
        """``connected_clients`` (this probe included), or None when the server does not answer."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
                raw.settimeout(5)
                raw.connect(str(self.server.socket_path))
                raw.sendall(b"*2\r\n$4\r\nINFO\r\n$7\r\nclients\r\n")
                reply = b""
                while b"connected_clients:" not in reply or not reply.endswith(b"\r\n"):
                    chunk = raw.recv(4096)
                    if not chunk:
                        break
                    reply += chunk
        except OSError:
            return None
        for line in reply.decode(errors="replace").splitlines():
            if line.startswith("connected_clients:"):
                return int(line.partition(":")[2])
        return None

    def missions_running(self) -> int:
        locks = [*self.home.glob("missions/*/lock"), *self.home.glob("batches/*/lock")]
        return sum(is_held(lock) for lock in locks)

    def stop_if_still_idle(self) -> bool:
        """Shut the server down, unless a client came meanwhile. Under the server's start lock, so
        a command that starts it at this moment either sees it in use or starts a new one after."""
        with self.server.start_lock():
            if (self.clients() or 0) > 1 or self.missions_running():
                return False
            self.server.stop()
            return True

    def record(self, state: IdleState) -> None:
        write_private(self.server.data_dir / STATE_FILE, json.dumps(state.__dict__))


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min"


def main(argv: list[str]) -> int:
    home, minutes = Path(argv[0]), float(argv[1])
    why = Watcher(home, minutes).run()
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} idle watcher {os.getpid()}: {why}", flush=True)
    (Path(home) / "falkordb" / STATE_FILE).unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
