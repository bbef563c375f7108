"""The A2A server: the SDK's routes (the Agent Card, JSON-RPC with its SSE streams) behind the
guard of ``cabal serve`` (loopback only, else its token), served by uvicorn on a socket bound
first, as ``cabal.web.server`` does."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator
from pathlib import Path

from a2a.server.agent_execution import SimpleRequestContextBuilder
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from starlette.applications import Starlette

from cabal.a2a import DEFAULT_PORT
from cabal.a2a.card import agent_card
from cabal.a2a.executor import MissionIds, ServedTeam, TeamExecutor
from cabal.a2a.tasks import WorkspaceTaskStore
from cabal.rounds.mission import load_mission
from cabal.rounds.workspace import Workspace
from cabal.web import DEFAULT_HOST
from cabal.web.security import Guard, Security, is_loopback
from cabal.web.server import listen, uvicorn_server


class A2AServer:
    """``cabal a2a MISSION`` on ``host``:``port`` (0: any free port) for one workspace."""

    def __init__(self, workspace: Workspace, mission: str | Path, *, model: str | None = None,
                 host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> None:
        spec, _ = load_mission(mission)  # a bad mission file is refused now, before anything listens
        self.workspace = workspace
        self.host = host
        self.socket = listen(host, port)
        self.security = Security.for_address(host, self.port)
        self.team = ServedTeam(workspace, Path(mission).resolve(), model)
        self.card = agent_card(spec, self.url, token=self.security.token is not None)
        store = WorkspaceTaskStore(workspace, self.team.outcome, self.team.stop)
        handler = DefaultRequestHandler(agent_executor=TeamExecutor(self.team), task_store=store,
                                        agent_card=self.card,
                                        request_context_builder=SimpleRequestContextBuilder(
                                            task_id_generator=MissionIds()))

        @contextlib.asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            yield
            await handler.aclose()

        app = Starlette(routes=[*create_agent_card_routes(self.card), *create_jsonrpc_routes(handler, "/")],
                        lifespan=lifespan)
        self.app = Guard(app, self.security)
        self.server = uvicorn_server(self.app)

    @property
    def port(self) -> int:
        return int(self.socket.getsockname()[1])

    @property
    def url(self) -> str:
        """The address callers use (the JSON-RPC endpoint; the card is at /.well-known/agent-card.json)."""
        host = socket.gethostname() if self.host in ("0.0.0.0", "::", "") else self.host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}/"

    def banner(self) -> str:
        lines = [f"Cabal serves the team of {self.team.mission} over A2A (workspace {self.workspace.home})",
                 f"    agent card: {self.url}.well-known/agent-card.json", f"    JSON-RPC:   {self.url}"]
        if not is_loopback(self.host):
            lines.append(f"It listens beyond this machine: callers send the header 'Authorization: Bearer "
                         f"{self.security.token}' (keep it secret; it changes at every start).")
        lines.append("Ctrl-C stops it; a mission it is running pauses, and its task is answerable after a restart.")
        return "\n".join(lines)

    def run(self) -> None:
        """Serve until stopped (Ctrl-C, or ``stop()`` from another thread)."""
        self.server.run(sockets=[self.socket])

    def stop(self) -> None:
        self.server.should_exit = True
