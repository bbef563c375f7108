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

from cabal.refs import located_refs
from cabal.report.model import MissionReport, Source

PRODUCT_NOTE = "p:"  # a note's ``cited`` for a reference to another document: ``p:`` and its id


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

    products = {p.id: p for p in report.products}
    versions = {v.id: p for p in report.products for v in p.versions}
    parts, last = [], 0
    for start, end, ref in located_refs(text):
        parts.append(text[last:start])
        last = end
        document = products.get(ref.id) if ref.kind == "p" else versions.get(ref.id) if ref.kind == "v" else None
        if document is not None and not _named_in_sentence(text[:start]):
            # Put where a citation goes ("... at the card box [[p:p1]]."), a reference to another
            # document is a note that says "see" it, not its whole title mid-sentence (a plan
            # pasted the decision's title 27 times); as a noun ("see [[p:p1]]") it is its name.
            parts.append(cite(f"{PRODUCT_NOTE}{document.id}", f"see “{document.name}”"))
        else:
            parts.append(report.readable(text[start:end], cite=cite))
    parts.append(text[last:])
    return NotedText("".join(parts), tuple(notes))


# Words after which a reference is a noun of the sentence ("and [[p:p1]]", "see [[p:p1]]"), not a citation.
_NOUN_AFTER = frozenset({"a", "an", "and", "as", "at", "by", "from", "in", "into", "of", "on", "or", "per", "see",
                         "than", "the", "to", "under", "use", "with", "follow", "follows", "read", "is", "are"})


def _named_in_sentence(before: str) -> bool:
    """Whether a reference after ``before`` is a noun of the sentence (after "and", "see", ...)."""
    words = before.rstrip().rsplit(None, 1)
    return bool(words) and words[-1].strip("(\"'“‘").casefold() in _NOUN_AFTER


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
    """A source as the list at the end shows it: ``interview-notes.md (version 2): its note``."""
    version = f" (version {source.version})" if source.version > 1 else ""
    return f"{source.name}{version}" + (f": {source.note}" if source.note else "")
