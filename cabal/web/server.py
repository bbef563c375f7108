"""The web server itself: a listening socket, the application, and uvicorn to serve it.

The socket is bound before anything else, so a port in use is one clear error and ``--port 0``
knows its port (and its token cookie's name) before the first request. Uvicorn writes no access
log (a request's query string may hold the token) and only its warnings.
"""

from __future__ import annotations

import socket

import uvicorn
from starlette.types import ASGIApp

from cabal.config import is_loopback
from cabal.errors import ConfigError
from cabal.rounds.workspace import Workspace
from cabal.web import DEFAULT_HOST, DEFAULT_PORT
from cabal.web.app import create_app
from cabal.web.security import Security


class WebServer:
    """``cabal serve`` on ``host``:``port`` (0: any free port) for one workspace."""

    def __init__(self, workspace: Workspace, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *,
                 max_runs: int = 4, poll_s: float = 1.0) -> None:
        self.workspace = workspace
        self.host = host
        self.socket = listen(host, port)
        self.security = Security.for_address(host, self.port)
        self.app = create_app(workspace, self.security, max_runs=max_runs, poll_s=poll_s)
        self.server = uvicorn_server(self.app)

    @property
    def port(self) -> int:
        return self.socket.getsockname()[1]

    def urls(self) -> list[str]:
        """The addresses to open, the token in them when there is one."""
        if self.host in ("0.0.0.0", "::", ""):
            hosts = [socket.gethostname(), "127.0.0.1"]
        else:
            hosts = [f"[{self.host}]" if ":" in self.host else self.host]
        query = f"?token={self.security.token}" if self.security.token else ""
        return [f"http://{host}:{self.port}/{query}" for host in hosts]

    def banner(self) -> str:
        lines = [f"Cabal serves the workspace {self.workspace.home}", "Open in a browser:"]
        lines += [f"    {url}" for url in self.urls()]
        bearer = " with the header 'Authorization: Bearer <the token>'" if self.security.token else ""
        lines.append(f"AG-UI clients (CopilotKit, ...) post runs to {self.urls()[-1].split('?')[0]}ag-ui{bearer}")
        if not is_loopback(self.host):
            lines.append("It listens beyond this machine, so it asks for the token in that address "
                         "(keep it secret; it changes at every start).")
        lines.append("Ctrl-C stops it; a mission it is running pauses, and resumes from its page.")
        return "\n".join(lines)

    def run(self) -> None:
        """Serve until stopped (Ctrl-C, or ``stop()`` from another thread)."""
        self.server.run(sockets=[self.socket])

    def stop(self) -> None:
        self.server.should_exit = True

    def running(self) -> int:
        """How many missions this server is running now."""
        room = getattr(self.app.state, "room", None)
        return room.runner.running() if room else 0


def uvicorn_server(app: ASGIApp) -> uvicorn.Server:
    """Uvicorn for one of Cabal's servers: no access log (a query string may hold the token),
    only warnings, no server header, no websockets, a short graceful shutdown."""
    return uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, server_header=False, ws="none",
                                         lifespan="on", timeout_graceful_shutdown=2))


def listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {error.strerror or error}",
                          hint="choose another --port (0 picks a free one), or check --host") from None
    return sock
