"""Cutting a source's text into chunks a prompt can quote and the full-text index can find.

Markdown (and a document read as Markdown) is cut at its headings (each chunk keeps the heading it sits under); CSV in groups of
rows, each chunk starting with the header row; JSON by items (a list's elements, an object's
keys); any other text at blank lines. A piece longer than ``CHUNK_MAX_CHARS`` is cut at line
ends, then hard. Pure: text in, chunks out.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable

from cabal.sources.documents import DOCUMENT_FORMATS
from cabal.sources.model import CHUNK_CHARS, CHUNK_MAX_CHARS, Chunk

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
CSV_ROWS = 40  # rows in one chunk at most, beside the size bound
HEADING_CHARS = 200


def chunk_text(text: str, format: str) -> tuple[Chunk, ...]:  # noqa: A002 - the format's name
    if format in ("markdown", *DOCUMENT_FORMATS):  # a document is read as Markdown, its headings as "# ..."
        pieces = _markdown(text)
    elif format == "csv":
        pieces = _csv(text)
    elif format == "json":
        pieces = _json(text)
    else:
        pieces = [("", part) for part in _paragraph_groups(text)]
    return tuple(Chunk(index, heading[:HEADING_CHARS], body)
                 for index, (heading, body) in enumerate(((h, b) for h, b in pieces if b.strip()), start=1))


def _markdown(text: str) -> list[tuple[str, str]]:
    sections: list[tuple[str, list[str]]] = [("", [])]
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        match = None if fenced else _HEADING.match(line)
        if match:
            sections.append((match[2], [line]))
        else:
            sections[-1][1].append(line)
    return [(heading, part) for heading, lines in sections for part in _paragraph_groups("\n".join(lines))]


def _paragraph_groups(text: str) -> list[str]:
    """Paragraphs gathered into pieces of about ``CHUNK_CHARS``."""
    paragraphs = (p.strip("\n") for p in re.split(r"\n\s*\n", text) if p.strip())
    return _packed((piece for paragraph in paragraphs for piece in _bounded(paragraph)), "\n\n", CHUNK_CHARS)


def _bounded(text: str) -> list[str]:
    """``text`` in pieces of at most ``CHUNK_MAX_CHARS``: at line ends where it can, else hard."""
    if len(text) <= CHUNK_MAX_CHARS:
        return [text]
    lines = (line[start:start + CHUNK_MAX_CHARS] for line in text.splitlines()
             for start in range(0, max(len(line), 1), CHUNK_MAX_CHARS))
    return _packed(lines, "\n", CHUNK_MAX_CHARS)


def _packed(pieces: Iterable[str], separator: str, limit: int) -> list[str]:
    """``pieces`` joined by ``separator`` into groups of at most ``limit`` characters, in order
    (a piece longer than ``limit`` stands alone)."""
    groups, current = [], ""
    for piece in pieces:
        if current and len(current) + len(separator) + len(piece) > limit:
            groups.append(current)
            current = ""
        current = f"{current}{separator}{piece}" if current else piece
    if current:
        groups.append(current)
    return groups


def _grouped(header: str, lines: list[str], heading: str, per_chunk: int) -> list[tuple[str, str]]:
    pieces: list[tuple[str, str]] = []
    current: list[str] = []
    size = len(header)
    for line in lines:
        if current and (len(current) >= per_chunk or size + len(line) + 1 > CHUNK_CHARS):
            pieces.append((heading, "\n".join(([header] if header else []) + current)))
            current, size = [], len(header)
        for piece in _bounded(line):
            current.append(piece)
            size += len(piece) + 1
    if current:
        pieces.append((heading, "\n".join(([header] if header else []) + current)))
    return pieces


def _csv(text: str) -> list[tuple[str, str]]:
    lines = text.splitlines()
    if not lines:
        return []
    try:
        columns = next(csv.reader(io.StringIO(lines[0])))
    except (csv.Error, StopIteration):
        columns = []
    heading = "columns: " + ", ".join(c.strip() for c in columns) if columns else ""
    return _grouped(lines[0], [line for line in lines[1:] if line.strip()], heading, CSV_ROWS)


def _json(text: str) -> list[tuple[str, str]]:
    try:
        data = json.loads(text)
    except ValueError:  # not JSON after all: cut as text
        return [("", part) for part in _paragraph_groups(text)]
    if isinstance(data, list):
        items = [json.dumps(item, ensure_ascii=False) for item in data]
        return _grouped("", items, f"{len(data)} items", CSV_ROWS)
    if isinstance(data, dict):
        items = [json.dumps({key: value}, ensure_ascii=False)[1:-1] for key, value in data.items()]
        return _grouped("", items, "keys: " + ", ".join(list(map(str, data))[:12]), CSV_ROWS)
    return [("", json.dumps(data, ensure_ascii=False))]
