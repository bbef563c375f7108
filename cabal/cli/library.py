"""``cabal library`` and ``cabal memory``: the workspace's memory across missions.

``cabal library`` lists every accepted product of the workspace, newest first; ``cabal library
search WORDS`` finds products and standing facts by the graph's full-text index. ``cabal
memory`` lists the standing facts; ``add``, ``keep MISSION``, ``edit`` and ``forget`` change
them (docs/how-to/memory.md). Text from missions and models leaves printable, one line each.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import TYPE_CHECKING

from cabal.cli.options import add_graph_options
from cabal.limits import printable

if TYPE_CHECKING:
    from cabal.rounds.library import Fact, LibraryItem
    from cabal.rounds.workspace import Workspace

EXCERPT_CHARS = 100


def _one_line(text: str, limit: int) -> str:
    flat = printable(" ".join(text.split()))
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _workspace(args: argparse.Namespace, *, reading: bool) -> Workspace:
    from cabal.rounds.workspace import Workspace

    return Workspace.at(args.home, args.url, reading=reading)


def _item_line(item: LibraryItem) -> str:
    return (f"{item.mission_id}  {_one_line(item.name, 60)} (version {item.version}, {item.kind}, round {item.round})"
            f"\n  {_one_line(item.content, EXCERPT_CHARS)}")


def _fact_line(fact: Fact) -> str:
    return f"{fact.id}  {_one_line(fact.text, 200)}\n  ({fact.origin})"


def cmd_library(args: argparse.Namespace) -> int:
    from cabal.rounds.library import library_items, search_library

    workspace = _workspace(args, reading=True)
    if args.action == "search":
        words = " ".join(args.words)
        if not words.strip():
            from cabal.errors import ConfigError

            raise ConfigError("search what? cabal library search WORDS")
        found = search_library(workspace, words)
        if args.json:
            print(json.dumps({"products": [_as_json(i) for i in found.items],
                              "facts": [_as_json(f) for f in found.facts]}, indent=2, ensure_ascii=False))
            return 0
        if not found.items and not found.facts:
            print(f"nothing in the library matches {printable(words)!r}")
            return 0
        for item in found.items:
            print(_item_line(item))
        if found.facts:
            print("standing facts:")
            for fact in found.facts:
                print(_fact_line(fact))
        return 0
    items = library_items(workspace)
    if args.json:
        print(json.dumps([_as_json(i) for i in items], indent=2, ensure_ascii=False))
        return 0
    if not items:
        print("the library is empty: no mission of this workspace has an accepted product yet")
        return 0
    print(f"{len(items)} accepted product(s), newest first:")
    for item in items:
        print(_item_line(item))
    return 0


def _as_json(found: LibraryItem | Fact) -> dict:
    data = asdict(found)
    if data.get("score") is None:  # a listing's; a search's has its score
        data.pop("score")
    return data


def cmd_memory(args: argparse.Namespace) -> int:
    from cabal.rounds import library

    action = args.action or "list"  # `cabal memory` alone lists
    if action == "list":
        workspace = _workspace(args, reading=True)
        kept = library.facts(workspace)
        if args.json:
            print(json.dumps([_as_json(f) for f in kept], indent=2, ensure_ascii=False))
        elif not kept:
            print("no standing facts: `cabal memory add TEXT`, or `cabal memory keep MISSION_ID` for what you "
                  "told a mission")
        for fact in [] if args.json else kept:
            print(_fact_line(fact))
        return 0
    workspace = _workspace(args, reading=False)
    if action == "add":
        made = library.keep_facts(workspace, [(" ".join(args.text), "typed", "")])
    elif action == "keep":
        told = library.told_in(workspace, args.mission_id)
        if not told:
            print(f"you told mission {args.mission_id} nothing to keep (no answers, notes or directions)")
            return 0
        made = library.keep_facts(workspace, told)
    elif action == "edit":
        fact = library.edit_fact(workspace, args.fact_id, " ".join(args.text))
        print(f"edited {_fact_line(fact)}")
        return 0
    else:
        fact = library.forget_fact(workspace, args.fact_id)
        print(f"forgot {fact.id}: {_one_line(fact.text, 200)}")
        return 0
    for fact in made:
        print(f"kept {_fact_line(fact)}")
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    shelf = add_graph_options(commands.add_parser(
        "library", help="every accepted product of the workspace, newest first; `library search WORDS` finds them"))
    shelf.add_argument("--json", action="store_true", help="print JSON")
    shelf.set_defaults(func=cmd_library, action=None)
    search = _action(shelf.add_subparsers(dest="action", metavar="ACTION"), "search",
                     "find accepted products and standing facts by words (any of them, by stem)")
    search.add_argument("words", nargs="+", help="the words to look for")
    search.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")

    memory = add_graph_options(commands.add_parser(
        "memory", help="the standing facts the next missions are offered (memory: {facts: true}): list, add, keep, "
                       "edit, forget"))
    memory.add_argument("--json", action="store_true", help="print the facts as JSON")
    memory.set_defaults(func=cmd_memory, action=None)
    actions = memory.add_subparsers(dest="action", metavar="ACTION")
    _action(actions, "list", "the standing facts, oldest first")
    _action(actions, "add", "keep a fact you type").add_argument("text", nargs="+")
    _action(actions, "keep", "keep what you told a mission (answers, sign-off changes, cabal say notes) as facts"
            ).add_argument("mission_id")
    edit = _action(actions, "edit", "say a fact another way")
    edit.add_argument("fact_id")
    edit.add_argument("text", nargs="+")
    _action(actions, "forget", "remove a fact: it leaves the library's search and is offered to no mission again"
            ).add_argument("fact_id")


def _action(actions: argparse._SubParsersAction, name: str, text: str) -> argparse.ArgumentParser:
    """An action of ``cabal memory``, taking --home and --url after it too (given before it, they hold:
    an option it is not given leaves the command's value alone)."""
    parser = add_graph_options(actions.add_parser(name, help=text))
    for option in parser._actions:
        if option.dest in ("home", "url"):
            option.default = argparse.SUPPRESS
    return parser
