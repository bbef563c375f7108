"""``cabal export ID --format md|json|html [-o FILE]``: the whole mission as a report.

Markdown (the transcript), JSON (``cabal schema export`` publishes its schema) or one HTML page
that works offline. With ``-o`` and no ``--format``, the file's suffix picks the format.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from cabal import rounds
from cabal.cli.options import add_graph_options
from cabal.cli.output import write_report
from cabal.exports import DEFAULT_FORMAT, format_of, names, render_mission


def cmd_export(args: argparse.Namespace) -> int:
    target = Path(args.output) if args.output else None
    chosen = args.format or format_of(target, "mission")
    write_report(render_mission(rounds.mission_report(args.mission_id, home=args.home, url=args.url), chosen),
                 target, chosen)
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    export = add_graph_options(commands.add_parser(
        "export", help="the whole mission as a report: Markdown, JSON or a self-contained HTML page"))
    export.add_argument("mission_id")
    export.add_argument("--format", choices=names("mission"),
                        help=f"{', '.join(names('mission'))} (default: from -o's suffix, else {DEFAULT_FORMAT})")
    export.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    export.set_defaults(func=cmd_export)
