"""A model for the graph-outage tests: the simulated team, which kills the workspace's embedded
graph server (SIGKILL, as the kernel's OOM killer would) the first time it is asked for one
chosen turn, then answers it as usual. Also a ``py:`` factory for the command line."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

from cabal.graph import EmbeddedServer
from cabal.llm import FunctionChatModel, ModelRequest
from cabal.rounds.simulated import simulated_team
from tests.polling import wait_until

KILL_AT = (1, "write", "operative-2")


class ServerKiller:
    def __init__(self, home: Path, kills: int = 1, at: tuple[int, str, str] = KILL_AT) -> None:
        self.server = EmbeddedServer(home)
        self.kills_left = kills
        self.at = at
        self.team = simulated_team().fn
        self.killed: list[int] = []
        self._lock = threading.Lock()

    def __call__(self, request: ModelRequest):
        with self._lock:
            if (request.key.round, request.key.step, request.key.agent) == self.at and self.kills_left:
                self.kills_left -= 1
                pid = self.server.pid()
                os.kill(pid, signal.SIGKILL)
                wait_until(lambda: not self.server.is_running(), timeout=10, what="the killed server to be gone")
                self.killed.append(pid)
        return self.team(request)


def killer() -> FunctionChatModel:
    """``--model py:tests.rounds.graph_outage:killer``: kills the server of CABAL_HOME once."""
    return FunctionChatModel(ServerKiller(Path(os.environ["CABAL_HOME"])))
