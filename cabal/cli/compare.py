"""``cabal diff A B``: two missions side by side (a mission and its replay, two team sizes, before
and after a change): products, accepted texts word by word, verdicts, decisions, halts, figures."""

from __future__ import annotations

import argparse
from pathlib import Path

from cabal import rounds
from cabal.cli.options import add_graph_options
from cabal.cli.output import chosen_format, write_report


def cmd_diff(args: argparse.Namespace) -> int:
    from cabal.report.diff import diff_missions
    from cabal.report.diff_render import render_diff

    target = Path(args.output) if args.output else None
    chosen = chosen_format(args.format, target)
    diff = diff_missions(rounds.mission_report(args.a, home=args.home, url=args.url),
                         rounds.mission_report(args.b, home=args.home, url=args.url))
    write_report(render_diff(diff, chosen), target, chosen)
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    diff = add_graph_options(commands.add_parser(
        "diff", help="compare two missions: products, accepted texts (word diff), verdicts, decisions, halts, cost"))
    diff.add_argument("a", metavar="A", help="a mission id")
    diff.add_argument("b", metavar="B", help="another mission id (a replay of A, another team size...)")
    diff.add_argument("--format", choices=("md", "html", "json"), help="md, html or json (default: from -o, else md)")
    diff.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    diff.set_defaults(func=cmd_diff)
