"""Options several commands share. Defined here, below every command module, so no subsystem
ever needs to import the command line."""

from __future__ import annotations

import argparse


def add_graph_options(parser: argparse.ArgumentParser, *, url: bool = True) -> argparse.ArgumentParser:
    """--home (and --url): where the graph is. Every command that touches a graph takes these."""
    if url:
        parser.add_argument("--url", help="FalkorDB URL (redis://, rediss://, unix://); default: FALKORDB_URL or embedded")
    parser.add_argument("--home", help="workspace directory (default: CABAL_HOME, else the nearest .cabal in this folder "
                        "or a parent, as git finds a repository; a new one is made here)")
    return parser
