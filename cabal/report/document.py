"""The accepted work as a reader gets it: a document of blocks (headings, paragraphs, lists,
tables, code, quotes) with the citations as numbered notes and the sources listed at the end.

What the Word and PDF exports lay out (``word``, ``pdf``): they differ in layout only. A
version's text is Markdown; it is parsed here once (markdown-it, raw HTML off) into frozen
blocks of styled runs, so no renderer reads Markdown or sees a reference.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import cache
from typing import TYPE_CHECKING

from cabal.errors import ConfigError
from cabal.limits import printable
from cabal.report.model import MissionReport, Product, Source
from cabal.report.notes import Note, cited_sources, noted_all

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

# A note marker inside a run's text while it is parsed: two private-use characters no text
# keeps (they are taken out of every text first), so a marker is never mistaken for words.
_OPEN, _CLOSE = "\ue000", "\ue001"
_MARKER = re.compile(f"{_OPEN}([0-9]+){_CLOSE}")
LOWEST_LEVEL = 6
EXTRA = "export"


def missing_extra(what: str) -> ConfigError:
    """The one line for an export whose library is not installed."""
    return ConfigError(f"writing {what} needs the {EXTRA} extra: pip install 'cabal[{EXTRA}]'")


@dataclass(frozen=True)
class Run:
    """A stretch of text in one style; ``note`` is a note's number (shown raised), ``link`` a URL."""

    text: str
    bold: bool = False
    italic: bool = False
    code: bool = False
    note: int | None = None
    link: str | None = None


@dataclass(frozen=True)
class Block:
    """One block: ``heading`` (``level`` 1-6), ``paragraph``, ``item`` (of a list: ``level`` from
    1, ``number`` in an ordered list, else None), ``table`` (``rows`` of cells, the first the
    header), ``code`` (``text``), ``quote`` (a paragraph quoted) or ``rule``."""

    kind: str
    runs: tuple[Run, ...] = ()
    level: int = 0
    number: int | None = None
    rows: tuple[tuple[tuple[Run, ...], ...], ...] = ()
    text: str = ""


@dataclass(frozen=True)
class ReaderDocument:
    """One file of the export: a title, a line under it, the blocks, the notes and their sources."""

    title: str
    subtitle: str
    blocks: tuple[Block, ...]
    notes: tuple[Note, ...] = ()
    sources: tuple[Source, ...] = field(default=())


def accepted_products(report: MissionReport) -> tuple[Product, ...]:
    """The products a reader gets, in tree order: each accepted one (a container among them
    stands as a heading over its children)."""
    return tuple(p for p in report.live_products if p.status == "accepted")


def reader_documents(report: MissionReport, *, per_product: bool = False) -> tuple[ReaderDocument, ...]:
    """The accepted work as one document, or one per accepted product that has a text."""
    products = accepted_products(report)
    subtitle = f"{report.mission.name} ({report.mission.id}), round {report.mission.round}"
    if per_product:
        return tuple(_document(report, product.name, subtitle, [(product, 1)])
                     for product in products if product.accepted_version is not None)
    top = min((p.depth for p in products), default=0)
    return (_document(report, report.mission.name, f"{report.mission.id}, round {report.mission.round}",
                      [(p, min(p.depth - top + 1, 3)) for p in products]),)


def _document(report: MissionReport, title: str, subtitle: str, parts: list[tuple[Product, int]]) -> ReaderDocument:
    texts = [_clean(p.accepted_version.content) if p.accepted_version is not None else "" for p, _ in parts]
    bodies, notes = noted_all(texts, report, marker=lambda number: f"{_OPEN}{number}{_CLOSE}")
    blocks: list[Block] = []
    single = len(parts) == 1
    for (product, level), body in zip(parts, bodies, strict=True):
        if not single:
            blocks.append(Block("heading", (Run(printable(product.name)),), level=level))
        blocks += _shifted(markdown_blocks(body), 0 if single else level)
    if not blocks:
        blocks.append(Block("paragraph", (Run("No product of this mission is accepted yet."),)))
    return ReaderDocument(printable(title), printable(subtitle), tuple(blocks), notes, cited_sources(notes, report))


def _clean(text: str) -> str:
    return printable(text.replace(_OPEN, "").replace(_CLOSE, ""))


def _shifted(blocks: list[Block], levels: int) -> list[Block]:
    """The headings of a product's text moved below the product's own heading."""
    return [replace(b, level=min(b.level + levels, LOWEST_LEVEL)) if b.kind == "heading" else b for b in blocks]


@cache
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False}).enable("table").disable("image")


def markdown_blocks(text: str) -> list[Block]:
    """Markdown as blocks; a note marker in it as a run with ``note`` set."""
    tokens = _parser().parse(text)
    blocks: list[Block] = []
    lists: list[list[int | None]] = []  # per open list: [next number] (None: a bullet list)
    quoted = 0
    table: list[list[tuple[Run, ...]]] | None = None
    heading = 0
    item_starts = False  # the next text opens a list item: it carries the bullet
    for token in tokens:
        kind = token.type
        if kind in ("bullet_list_open", "ordered_list_open"):
            start = int(token.attrGet("start") or 1) if kind == "ordered_list_open" else None
            lists.append([start])
        elif kind in ("bullet_list_close", "ordered_list_close"):
            lists.pop()
        elif kind == "list_item_open":
            item_starts = True
        elif kind == "blockquote_open":
            quoted += 1
        elif kind == "blockquote_close":
            quoted -= 1
        elif kind == "heading_open":
            heading = int(token.tag[1])
        elif kind == "heading_close":
            heading = 0
        elif kind == "table_open":
            table = []
        elif kind == "table_close" and table is not None:
            blocks.append(Block("table", rows=tuple(tuple(row) for row in table)))
            table = None
        elif kind == "tr_open" and table is not None:
            table.append([])
        elif kind in ("fence", "code_block"):
            item_starts = False
            blocks.append(Block("code", text=token.content.rstrip("\n")))
        elif kind == "hr":
            blocks.append(Block("rule"))
        elif kind == "inline":
            runs = _runs(token.children or [])
            if table is not None:
                table[-1].append(runs)
            elif heading:
                blocks.append(Block("heading", runs, level=heading))
            elif lists and item_starts:
                item_starts = False
                number = lists[-1][0]
                if number is not None:
                    lists[-1][0] = number + 1
                blocks.append(Block("item", runs, level=len(lists), number=number))
            else:
                blocks.append(Block("quote" if quoted else "paragraph", runs))
    return blocks


def _runs(children: list[Token]) -> tuple[Run, ...]:
    runs: list[Run] = []
    bold = italic = 0
    link: str | None = None
    for child in children:
        kind = child.type
        if kind == "strong_open":
            bold += 1
        elif kind == "strong_close":
            bold -= 1
        elif kind == "em_open":
            italic += 1
        elif kind == "em_close":
            italic -= 1
        elif kind == "link_open":
            link = str(child.attrGet("href") or "") or None
        elif kind == "link_close":
            link = None
        elif kind == "code_inline":
            runs.append(Run(child.content, code=True))
        elif kind in ("softbreak", "hardbreak"):
            runs.append(Run(" " if kind == "softbreak" else "\n", bool(bold), bool(italic)))
        elif kind == "text":
            for index, part in enumerate(_MARKER.split(child.content)):
                if index % 2:
                    if runs and runs[-1].note is None and runs[-1].text.endswith(" "):  # "month¹", not "month ¹"
                        runs[-1] = replace(runs[-1], text=runs[-1].text.rstrip(" "))
                    runs.append(Run(part, note=int(part)))
                elif part:
                    runs.append(Run(part, bool(bold), bool(italic), link=link))
    return tuple(runs)


def plain(runs: tuple[Run, ...]) -> str:
    """Runs as plain text, a note as ``[n]`` (where a layout cannot raise it: a table's cell)."""
    return "".join(f"[{run.note}]" if run.note is not None else run.text for run in runs)
