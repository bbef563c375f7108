"""The ``cabal`` command line.

Every subcommand is a function ``cmd_*(args) -> int``; ``main`` turns any ``CabalError`` into
a one-line message (plus its hint) on stderr and exit status 1, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from cabal.errors import CabalError

Command = Callable[[argparse.Namespace], int]


def add_graph_options(parser: argparse.ArgumentParser, *, url: bool = True) -> argparse.ArgumentParser:
    """--home (and --url): where the graph is. Every command that touches a graph takes these."""
    if url:
        parser.add_argument("--url", help="FalkorDB URL (redis://, rediss://, unix://); default: FALKORDB_URL or embedded")
    parser.add_argument("--home", help="workspace directory (default: CABAL_HOME or ./.cabal)")
    return parser


def cmd_graph_status(args: argparse.Namespace) -> int:
    from cabal.config import resolve_server
    from cabal.graph import ContextGraph, EmbeddedServer
    from cabal.graph.context_graph import connect

    address = resolve_server(args.url, args.home)
    if address.embedded:
        server = EmbeddedServer(address.home)
        if args.start:
            server.start()
        running = server.is_running()
        state = f"running (pid {server.pid()})" if running else "not running (starts on first use)"
        print(f"server: embedded, {server.address}, {state}")
        if not running:
            return 0
    else:
        print(f"server: {address.describe()}")
    db, server = connect(address)
    try:
        names = sorted(db.list_graphs())  # listing selects no graph, so status creates none
        print(f"graphs: {len(names)}")
        for name in names:
            counts = ContextGraph(db, name, address, server).counts()
            print(f"  {name}: {counts['nodes']} nodes, {counts['links']} links")
    finally:
        db.connection.close()
    return 0


def cmd_graph_stop(args: argparse.Namespace) -> int:
    from cabal.config import resolve_home
    from cabal.graph import EmbeddedServer

    server = EmbeddedServer(resolve_home(args.home))
    print("stopped" if server.stop() else "no embedded server was running", f"({server.home})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cabal", description="Run teams of AI agents in rounds over a FalkorDB context graph."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    graph = commands.add_parser("graph", help="the context graph server")
    graph_commands = graph.add_subparsers(dest="graph_command", metavar="COMMAND", required=True)
    status = graph_commands.add_parser("status", help="show the server, its graphs and their sizes")
    add_graph_options(status)
    status.add_argument("--start", action="store_true", help="start the embedded server if it is not running")
    status.set_defaults(func=cmd_graph_status)
    stop = graph_commands.add_parser("stop", help="stop the embedded server of a workspace")
    add_graph_options(stop, url=False)
    stop.set_defaults(func=cmd_graph_stop)

    for module in COMMAND_MODULES:
        importlib.import_module(module).register(commands)
    return parser


# Each subsystem keeps its commands beside its code: a module with register(subparsers).
COMMAND_MODULES = (
    "cabal.rounds.commands",     # run, resume, chat, say, status, transcript, stop, schema
    "cabal.membrane.commands",   # protocols list/show/check, doctor
    "cabal.mcp_server",          # mcp
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return args.func(args)
    except CabalError as error:
        print(f"cabal: {error}", file=sys.stderr)
        if error.hint:
            print(f"hint: {error.hint}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("cabal: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
