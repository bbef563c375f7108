"""A plan to sign off, as the page draws it: the question's text (``rounds.gates.plan_question``:
``Title: value`` lines, then ``- item`` lines indented two spaces a level) read back as headed
blocks of nested items, so the product tree shows as a tree. A line it does not know stays a
line of text: the page never loses a word of what the user signs off."""

from __future__ import annotations

import re
from dataclasses import dataclass

_ITEM = re.compile(r"^(?P<indent>\s*)- (?P<text>.*)$")
_TITLED = re.compile(r"^(?P<title>[A-Z][A-Za-z ]{0,30}):(?:\s+(?P<text>.*))?$")
_PRODUCT = re.compile(r"^(?P<name>.+?) \[(?P<type>[A-Za-z]+)\], owner (?P<owner>.+?): done when (?P<dod>.*)$", re.DOTALL)


@dataclass(frozen=True)
class PlannedProduct:
    """A product line of the plan: its name, type, owner and definition of done."""

    name: str
    type: str
    owner: str
    dod: str


@dataclass(frozen=True)
class OutlineItem:
    text: str
    product: PlannedProduct | None = None
    children: tuple[OutlineItem, ...] = ()


@dataclass(frozen=True)
class OutlineBlock:
    """A titled part of the plan ("Products:") with its items, or a line of text (no title)."""

    title: str | None
    text: str = ""
    items: tuple[OutlineItem, ...] = ()


def outline(text: str) -> tuple[OutlineBlock, ...]:
    """The plan's text as blocks; each ``- item`` nests under the item two spaces less indented."""
    blocks: list[tuple[str | None, str, list]] = []  # (title, text, items as [text, children] lists)
    for line in text.splitlines():
        if not line.strip():
            continue
        item = _ITEM.match(line)
        if item is not None and blocks:
            level, siblings = len(item["indent"]) // 2, blocks[-1][2]
            for _ in range(max(0, level - 1)):  # down the last item of each level above it
                if not siblings:
                    break
                siblings = siblings[-1][1]
            siblings.append([item["text"], []])
            continue
        titled = _TITLED.match(line)
        blocks.append((titled["title"], titled["text"] or "", []) if titled else (None, line.strip(), []))
    return tuple(OutlineBlock(title, text, _items(items)) for title, text, items in blocks)


def _items(items: list) -> tuple[OutlineItem, ...]:
    built = []
    for text, children in items:
        product = _PRODUCT.match(text)
        built.append(OutlineItem(text, PlannedProduct(product["name"], product["type"], product["owner"], product["dod"])
                                 if product else None, _items(children)))
    return tuple(built)
