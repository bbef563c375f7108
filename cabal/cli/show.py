"""``cabal show ID [PRODUCT]``: what the team made, to read in a terminal.

The product tree, then each product's accepted version (else its latest), its content rendered
from Markdown; ``--version N`` picks another version of one product, ``--history`` adds every
version with its reviews, the Watchdog's findings and verdicts, the Chair's decisions and the
collabs. Rendered with ``rich`` on a terminal; elsewhere the Markdown itself, ready to save.
"""

from __future__ import annotations

import argparse
import sys

from cabal import rounds
from cabal.cli.options import add_graph_options
from cabal.errors import ConfigError


def cmd_show(args: argparse.Namespace) -> int:
    from cabal.report.markdown import render_products

    report = rounds.mission_report(args.mission_id, home=args.home, url=args.url)
    version = None
    if args.product is None:
        if args.version is not None:
            raise ConfigError("--version needs a PRODUCT: cabal show ID PRODUCT --version N")
        text = render_products(report, report.live_products, history=args.history)
    else:
        product = report.product(args.product)
        if args.version is not None:
            version = product.version(args.version)
        chosen = (product,) if version is not None else report.subtree(product)
        text = render_products(report, chosen, history=args.history, version=version, overview=False)
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.markdown import Markdown

        Console(highlight=False).print(Markdown(text))
    else:
        sys.stdout.write(text)
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    show = add_graph_options(commands.add_parser(
        "show", help="the products a mission made: the tree, each product's accepted (else latest) content"))
    show.add_argument("mission_id")
    show.add_argument("product", nargs="?", help="one product (and those under it), by name, start of name, or id")
    show.add_argument("--version", type=int, metavar="N", help="show version N of PRODUCT instead")
    show.add_argument("--history", action="store_true",
                      help="add every version, peer reviews, the Watchdog's findings and verdicts, the Chair's "
                           "decisions and the collabs")
    show.set_defaults(func=cmd_show)
