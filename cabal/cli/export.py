"""``cabal export ID --format md|json|html|docx|pdf [-o FILE]``: the whole mission as a report,
or its accepted work as a reader gets it.

Markdown (the transcript), JSON (``cabal schema export`` publishes its schema) or one HTML page
that works offline; Word or PDF: the accepted documents, one file, or with ``--per-product`` one
file per product in the folder ``-o`` names. With ``-o`` and no ``--format``, the file's suffix
picks the format.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from cabal import rounds
from cabal.cli.options import add_graph_options
from cabal.cli.output import write_report
from cabal.errors import ConfigError
from cabal.exports import DEFAULT_FORMAT, format_of, names, render_mission, render_products


def cmd_export(args: argparse.Namespace) -> int:
    target = Path(args.output) if args.output else None
    chosen = args.format or format_of(target, "mission")
    if args.per_product:
        if target is None:
            raise ConfigError("--per-product writes one file per product: name their folder with -o FOLDER")
        report = rounds.mission_report(args.mission_id, home=args.home, url=args.url)
        files = render_products(report, chosen)
        if not files:
            print(f"no product of {args.mission_id} is accepted yet: nothing written")
        target.mkdir(parents=True, exist_ok=True)
        for name, data in _named(files, chosen):
            write_report(data, target / name, chosen)
        return 0
    write_report(render_mission(rounds.mission_report(args.mission_id, home=args.home, url=args.url), chosen),
                 target, chosen)
    return 0


def _named(files: list[tuple[str, bytes]], suffix: str) -> list[tuple[str, bytes]]:
    """Each product's file named after it, made plain (``Pricing decision.docx``), each name once."""
    used: set[str] = set()
    named = []
    for title, data in files:
        stem = re.sub(r"[^A-Za-z0-9._ -]+", "-", title).strip(" .-")[:80] or "product"
        chosen, number = stem, 1
        while chosen.lower() in used:
            number += 1
            chosen = f"{stem}-{number}"
        used.add(chosen.lower())
        named.append((f"{chosen}.{suffix}", data))
    return named


def register(commands: argparse._SubParsersAction) -> None:
    export = add_graph_options(commands.add_parser(
        "export", help="the whole mission as a report (Markdown, JSON or a self-contained HTML page), or its "
                       "accepted documents as Word or PDF"))
    export.add_argument("mission_id")
    export.add_argument("--format", choices=names("mission"),
                        help=f"{', '.join(names('mission'))} (default: from -o's suffix, else {DEFAULT_FORMAT})")
    export.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout (with --per-product: "
                                                                "the folder to write the files in)")
    export.add_argument("--per-product", action="store_true",
                        help="docx, pdf: one file per accepted product, in the folder -o names, instead of one for all")
    export.set_defaults(func=cmd_export)
