"""``cabal graph start|status|stop``: the context graph server of a workspace."""

from __future__ import annotations

import argparse
from typing import Any

from cabal.cli.options import add_graph_options


def register(commands: Any) -> None:
    graph = commands.add_parser("graph", help="the context graph server")
    graph_commands = graph.add_subparsers(dest="graph_command", metavar="COMMAND", required=True)
    start = graph_commands.add_parser("start", help="start the embedded server of a workspace (commands start it "
                                                    "when they need it)")
    add_graph_options(start, url=False)
    start.add_argument("--idle-minutes", type=float, metavar="N",
                       help="stop by itself after N minutes with no client and no mission running (default: "
                            "CABAL_GRAPH_IDLE_MINUTES, else 15; 0: never)")
    start.set_defaults(func=cmd_graph_start)
    status = graph_commands.add_parser("status", help="show the server, its graphs and their sizes, and when it stops")
    add_graph_options(status)
    status.add_argument("--start", action="store_true", help="start the embedded server if it is not running")
    status.set_defaults(func=cmd_graph_status)
    stop = graph_commands.add_parser("stop", help="stop the embedded server of a workspace")
    add_graph_options(stop, url=False)
    stop.set_defaults(func=cmd_graph_stop)


def cmd_graph_status(args: argparse.Namespace) -> int:
    from cabal.config import resolve_server
    from cabal.graph import ContextGraph, EmbeddedServer
    from cabal.errors import SchemaError
    from cabal.graph.context_graph import connect

    address = resolve_server(args.url, args.home)
    if address.embedded:
        embedded = EmbeddedServer(address.home)
        if args.start:
            embedded.start()
        running = embedded.is_running()
        state = f"running (pid {embedded.pid()})" if running else "not running (starts on first use)"
        print(f"server: embedded, {embedded.address}, {state}")
        if not running:
            return 0
        print(f"idle stop: {idle_line(embedded)}")
    else:
        print(f"server: {address.describe()}")
    db, server = connect(address)
    try:
        names = sorted(db.list_graphs())  # listing selects no graph, so status creates none
        print(f"graphs: {len(names)}")
        for name in names:
            try:
                counts = ContextGraph(db, name, address, server).counts()
            except SchemaError:  # a graph another client named with control characters
                print(f"  {name!r}: a name Cabal does not open")
                continue
            print(f"  {name}: {counts['nodes']} nodes, {counts['links']} links")
    finally:
        db.connection.close()
    return 0


def cmd_graph_start(args: argparse.Namespace) -> int:
    from cabal.config import resolve_home
    from cabal.graph import EmbeddedServer

    server = EmbeddedServer(resolve_home(args.home))
    started = server.start(idle_minutes=args.idle_minutes)
    print(f"{'started' if started else 'already running'}: {server.address} (pid {server.pid()})")
    print(f"idle stop: {idle_line(server)}")
    return 0


def idle_line(server: Any) -> str:
    """When the server stops by itself, as its watcher last saw it."""
    from cabal.graph.idle import read_state
    from cabal.graph.server import IDLE_VARIABLE

    state = read_state(server.data_dir)
    if state is None:
        return f"none: it runs until `cabal graph stop` (no idle watcher; {IDLE_VARIABLE}=0, or an older server)"
    return state.describe()


def cmd_graph_stop(args: argparse.Namespace) -> int:
    from cabal.config import resolve_home
    from cabal.graph import EmbeddedServer

    server = EmbeddedServer(resolve_home(args.home))
    print("stopped" if server.stop() else "no embedded server was running", f"({server.home})")
    return 0
