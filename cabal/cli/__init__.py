"""The ``cabal`` command line.

Every subcommand is a function ``cmd_*(args) -> int`` in one of ``COMMAND_MODULES``; ``main``
turns any ``CabalError`` into a one-line message (plus its hint) on stderr and exit status 1,
never a traceback. Options several commands share live in ``cabal.cli.options``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from cabal.errors import CabalError

Command = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cabal", description="Run teams of AI agents in rounds over a FalkorDB context graph."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    for module in COMMAND_MODULES:
        importlib.import_module(module).register(commands)
    return parser


# One module per group of commands, each with register(subparsers). The engine behind a command
# is imported when it runs, not here, so `cabal --help` starts in a blink.
COMMAND_MODULES = (
    "cabal.cli.graph",       # graph status, graph stop
    "cabal.cli.missions",    # run, resume, chat, say, status, transcript, stop, missions, schema
    "cabal.cli.show",        # show
    "cabal.cli.export",      # export
    "cabal.cli.protocols",   # protocols list/show/check
    "cabal.cli.doctor",      # doctor
    "cabal.cli.mcp",         # mcp
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
