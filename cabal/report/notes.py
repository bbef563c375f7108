"""Citations as numbered notes: a text's ``[[s:s2#3]]`` references become note markers, and the
notes (then the sources they cite) are listed once, at the end, as a reader expects of a document.

Every renderer that gives a reader the accepted work uses this one numbering: the Word and PDF
exports today, the Markdown and HTML ones in time. A renderer chooses how a marker looks (a
Markdown footnote ``[^1]``, a superscript); the numbering, the reuse of a number for a source
cited twice, and the labels are here. Pure: a report and texts in, values out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from cabal.report.model import MissionReport, Source


@dataclass(frozen=True)
class Note:
    """One numbered note: what a citation names (its graph id, ``s2#3`` or ``s2.v2#3``) and how it reads."""

    number: int
    cited: str
    label: str  # "s2 interview-notes.md §3 (What hurts)"


@dataclass(frozen=True)
class NotedText:
    """A text with its citations as markers, and every note so far, in number order (the notes of
    the texts noted before it included, so a document numbers its notes once, from 1)."""

    body: str
    notes: tuple[Note, ...]


def footnote_marker(number: int) -> str:
    """A Markdown footnote reference, the default marker."""
    return f"[^{number}]"


def noted(text: str, report: MissionReport, *, marker: Callable[[int], str] = footnote_marker,
          earlier: tuple[Note, ...] = ()) -> NotedText:
    """``text`` with each citation of a source replaced by ``marker(n)``, where ``n`` is its note's
    number: the number it already has in ``earlier`` or the next one. Every other reference reads
    as ``MissionReport.readable`` writes it (a product's name, "you"); a citation of a source the
    report does not hold stays as written."""
    notes = list(earlier)
    numbers = {note.cited: note.number for note in notes}

    def cite(cited: str, label: str) -> str:
        if cited not in numbers:
            numbers[cited] = len(notes) + 1
            notes.append(Note(numbers[cited], cited, label))
        return marker(numbers[cited])

    return NotedText(report.readable(text, cite=cite), tuple(notes))


def noted_all(texts: Iterable[str], report: MissionReport, *,
              marker: Callable[[int], str] = footnote_marker) -> tuple[tuple[str, ...], tuple[Note, ...]]:
    """Several texts of one document, noted in order with one numbering: their bodies and the notes."""
    bodies: list[str] = []
    notes: tuple[Note, ...] = ()
    for text in texts:
        result = noted(text, report, marker=marker, earlier=notes)
        bodies.append(result.body)
        notes = result.notes
    return tuple(bodies), notes


def cited_sources(notes: Iterable[Note], report: MissionReport) -> tuple[Source, ...]:
    """The sources (each file version) the notes cite, each once, in the order first cited."""
    by_id = {source.id: source for source in report.sources}
    chosen: dict[str, Source] = {}
    for note in notes:
        source = by_id.get(note.cited.partition("#")[0])
        if source is not None:
            chosen.setdefault(source.id, source)
    return tuple(chosen.values())


def source_entry(source: Source) -> str:
    """A source as the list at the end shows it: ``s2 interview-notes.md (version 2): its note``."""
    version = f" (version {source.version})" if source.version > 1 else ""
    return f"{source.source_id} {source.name}{version}" + (f": {source.note}" if source.note else "")
