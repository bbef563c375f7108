"""The ``cabal`` command line.

Every subcommand is a function ``cmd_*(args) -> int`` in one of ``COMMAND_MODULES``; ``main``
turns any ``CabalError`` into a one-line message (plus its hint) on stderr and an exit status
from ``cabal.cli.exits``, never a traceback. Options several commands share live in ``cabal.cli.options``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence

from cabal.cli import exits
from cabal.cli.pipes import silence_stdout
from cabal.errors import CabalError, ConfigError
from cabal.limits import printable
from cabal.vocabulary import CABAL_VERSION

Command = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cabal", description="Run teams of AI agents in rounds over a FalkorDB context graph."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {CABAL_VERSION}",
                        help="print the installed version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    for module in COMMAND_MODULES:
        importlib.import_module(module).register(commands)
    return parser


# One module per group of commands, each with register(subparsers). The engine behind a command
# is imported when it runs, not here, so `cabal --help` starts in a blink.
COMMAND_MODULES = (
    "cabal.cli.graph",       # graph status, graph stop
    "cabal.cli.missions",    # run, resume, chat, say, status, transcript, stop, missions, schema
    "cabal.cli.fork",        # fork
    "cabal.cli.show",        # show
    "cabal.cli.export",      # export
    "cabal.cli.batch",       # batch PLAN | resume | status | report, batches
    "cabal.cli.protocols",   # protocols list/show/check
    "cabal.cli.doctor",      # doctor
    "cabal.cli.mcp",         # mcp
    "cabal.cli.serve",       # serve
    "cabal.cli.a2a",         # a2a
    "cabal.cli.models",      # models [SPEC]
    "cabal.cli.replay",      # replay, script
    "cabal.cli.compare",     # diff
    "cabal.cli.eval",        # eval
    "cabal.cli.worth",       # baseline, judge, cost
    "cabal.cli.library",     # library [search WORDS], memory [list|add|keep|edit|forget]
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # as typed: a hint may give the command back changed
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return args.func(args)
    except CabalError as error:  # its message may quote what it refused: printed without control characters
        print(printable(f"cabal: {error}"), file=sys.stderr)
        if error.hint:
            print(printable(f"hint: {error.hint}"), file=sys.stderr)
        return exits.USAGE if isinstance(error, ConfigError) else exits.FAILED
    except KeyboardInterrupt:
        print("\ncabal: interrupted", file=sys.stderr)
        return exits.CTRL_C
    except BrokenPipeError:  # the reader went away (`cabal missions | head`): stop quietly
        silence_stdout()
        return exits.CLOSED_PIPE


def entry() -> None:
    """The ``cabal`` console script. After Ctrl-C it leaves at once: a model call still in flight
    in a worker thread would otherwise hold the process until it returns (the mission is paused
    and each turn commits whole or not at all, so nothing is lost by not waiting)."""
    code = main()
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # what was left to print had no reader any more
        silence_stdout()
        code = code or exits.CLOSED_PIPE
    sys.stderr.flush()
    if code == exits.CTRL_C:
        os._exit(code)
    sys.exit(code)
