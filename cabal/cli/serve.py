"""``cabal serve``: the team's room in a browser (``cabal.web``).

The web server and the engine are imported when the command runs, not when the parser is
built, so ``cabal --help`` stays fast.
"""

from __future__ import annotations

import argparse

from cabal.cli import exits
from cabal.cli.options import add_graph_options
from cabal.web import DEFAULT_HOST, DEFAULT_PORT


def cmd_serve(args: argparse.Namespace) -> int:
    from cabal.rounds.workspace import Workspace
    from cabal.web.server import WebServer

    # The workspace is created on first use, as `cabal run` creates it.
    web = WebServer(Workspace.at(args.home, args.url), args.host, args.port, max_runs=args.max_runs)
    print(web.banner(), flush=True)
    interrupted = False
    try:
        web.run()
    except KeyboardInterrupt:  # uvicorn stops on Ctrl-C, then raises it again here
        interrupted = True
    running = web.running()
    print("\ncabal: stopped serving" + (f"; {running} mission(s) it was running are paused: resume them from their "
                                       "page or with `cabal resume ID`" if running else ""), flush=True)
    # With runs in flight, leave at once (the console script does for this status) rather than wait
    # for their model calls: each turn commits whole or not at all, and the missions show interrupted.
    return exits.CTRL_C if interrupted or running else exits.DONE


def register(commands: argparse._SubParsersAction) -> None:
    serve = add_graph_options(commands.add_parser(
        "serve", help="the team's room in a browser: follow missions live, answer, judge the work, start missions; "
                      "AG-UI front ends run missions at POST /ag-ui (the agui extra)"))
    serve.add_argument("--host", default=DEFAULT_HOST,
                       help=f"address to listen on (default {DEFAULT_HOST}: this machine only); any other address "
                            "requires the token printed at start")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free one)")
    serve.add_argument("--max-runs", type=int, default=4, metavar="N",
                       help="how many missions the server runs at once (default 4)")
    serve.set_defaults(func=cmd_serve)
