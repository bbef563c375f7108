"""``cabal a2a``: the workspace's team as an A2A agent (``cabal.a2a``, the ``cabal-agents[a2a]`` extra).

The SDK, the server and the engine are imported when the command runs, not when the parser is built."""

from __future__ import annotations

import argparse

from cabal.cli import exits
from cabal.cli.options import add_graph_options
from cabal.errors import ConfigError
from cabal.vocabulary import install_command

DEFAULT_PORT = 8766  # cabal.a2a.DEFAULT_PORT, without importing the SDK to build the parser


def cmd_a2a(args: argparse.Namespace) -> int:
    try:
        from cabal.a2a.server import A2AServer
    except ImportError as missing:
        raise ConfigError(f"cabal a2a needs the A2A SDK ({missing.name} is not installed)",
                          hint=install_command("a2a")) from None
    from cabal.rounds.workspace import Workspace

    server = A2AServer(Workspace.at(args.home, args.url), args.mission, model=args.model, host=args.host,
                       port=args.port)
    print(server.banner(), flush=True)
    try:
        server.run()
    except KeyboardInterrupt:
        return exits.CTRL_C
    return exits.DONE


def register(commands: argparse._SubParsersAction) -> None:
    from cabal.web import DEFAULT_HOST

    a2a = add_graph_options(commands.add_parser(
        "a2a", help="serve the team as an A2A agent: each message starts a mission of MISSION's team"))
    a2a.add_argument("mission", help="the mission file whose team, rounds and model serve every request "
                                     "(a caller's message is the request)")
    a2a.add_argument("--model", help="the model of every agent, over the mission file's")
    a2a.add_argument("--host", default=DEFAULT_HOST,
                     help=f"address to listen on (default {DEFAULT_HOST}: this machine only); any other address "
                          "requires the bearer token printed at start")
    a2a.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free one)")
    a2a.set_defaults(func=cmd_a2a)
