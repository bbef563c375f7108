"""``cabal mcp``: the membrane and procedure runs as MCP tools over stdio (see ``cabal.mcp_server``)."""

from __future__ import annotations

import argparse
from typing import Any

from cabal.cli.options import add_graph_options
from cabal.vocabulary import MCP_ACTOR


def register(commands: Any) -> None:
    """Add ``cabal mcp`` to the cabal parser."""
    mcp = commands.add_parser(
        "mcp",
        help="run an MCP server over stdio (membrane, procedure and library tools)",
        description="Serve the membrane (membrane_*), procedure runs (procedure_*) and the workspace's library "
        "(library_list, library_search, memory_list: read only) as Model Context Protocol tools over stdio, for "
        "an MCP client such as Claude Code.",
    )
    mcp.add_argument("--graph", default="cabal", help="the named graph to write to (default: cabal)")
    add_graph_options(mcp)
    mcp.add_argument("--actor", default=MCP_ACTOR, help=f"the actor the client speaks as (default: {MCP_ACTOR})")
    mcp.add_argument("--protocols", action="append", default=[], metavar="DIR", help="a folder of extra protocols")
    mcp.add_argument("--procedures", action="append", default=[], metavar="DIR", help="a folder of extra procedures")
    mcp.set_defaults(func=cmd_mcp)


def cmd_mcp(args: argparse.Namespace) -> int:
    import anyio

    from cabal.graph import ContextGraph
    from cabal.mcp_server import CabalTools, build_server, serve_stdio

    from cabal.rounds.workspace import Workspace

    with ContextGraph.open(args.url, name=args.graph, home=args.home) as graph:
        # The workspace whose library and facts the library_* and memory_* tools read: the one
        # --home names (the server's own), never another.
        workspace = Workspace.at(args.home, args.url)
        tools = CabalTools(graph, protocol_dirs=args.protocols, procedure_dirs=args.procedures, actor_id=args.actor,
                           workspace=workspace)
        anyio.run(serve_stdio, build_server(tools))
    return 0
