"""The reference syntax: ``[[p:id]]`` and friends, found, checked and rewritten in text.

A reference is two brackets, a one-letter kind, a colon, an id, two brackets. Something that
looks like a reference but is not one (``[[x:1]]``, ``[[p: 1]]``) is not a reference: it is
left alone by every function here, and ``find_malformed`` reports it so the engine can tell
the model.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

KINDS: dict[str, str] = {
    "p": "product",
    "v": "version",
    "c": "collab",
    "a": "agent",
    "u": "user",
    "s": "source",
}
"""Reference prefix -> the kind of thing it names."""

_ID = r"[A-Za-z0-9_.:#\-]+"  # '#' names a section of a source: [[s:s2#3]]
_ID_RE = re.compile(rf"^{_ID}$")
_REF_RE = re.compile(rf"\[\[([{''.join(KINDS)}]):({_ID})\]\]")
# Anything shaped like "[[word: something]]", valid or not; the valid ones are refs.
_ATTEMPT_RE = re.compile(r"\[\[\s*[A-Za-z]+\s*:[^\[\]]*\]\]")


@dataclass(frozen=True, slots=True)
class Ref:
    """A reference to one product, version, collab, agent, user or source (or a source's section)."""

    kind: str
    id: str

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown reference kind {self.kind!r} (known: {', '.join(KINDS)})")
        if not _ID_RE.match(self.id):
            raise ValueError(
                f"invalid reference id {self.id!r}: use letters, digits and _ - . : # only"
            )

    @property
    def kind_name(self) -> str:
        """What the reference names: ``product``, ``version``, ``collab``, ``agent``, ``user``, ``source``."""
        return KINDS[self.kind]

    def render(self) -> str:
        """The reference as written in text, e.g. ``[[p:42]]``."""
        return f"[[{self.kind}:{self.id}]]"


def render_ref(kind: str, id: str) -> str:
    """Write a reference, e.g. ``render_ref("p", "42") == "[[p:42]]"``."""
    return Ref(kind, id).render()


def parse_refs(text: str) -> list[Ref]:
    """Every reference in ``text``, in order of appearance, repeats included."""
    return [Ref(match[1], match[2]) for match in _REF_RE.finditer(text)]


def located_refs(text: str) -> list[tuple[int, int, Ref]]:
    """Every reference in ``text`` with where it stands: (start, end, ref), in order."""
    return [(match.start(), match.end(), Ref(match[1], match[2])) for match in _REF_RE.finditer(text)]


def find_malformed(text: str) -> list[str]:
    """Spans shaped like a reference that are not one (unknown kind, bad id), in order."""
    return [
        match[0] for match in _ATTEMPT_RE.finditer(text) if not _REF_RE.fullmatch(match[0])
    ]


def replace_refs(text: str, fn: Callable[[Ref], str]) -> str:
    """``text`` with each reference's id replaced by ``fn(ref)``; the kind is kept.

    Used to map the short ids a model reads (``p1``, ``p1.v2``) to graph ids and back. An exception from ``fn``
    (say ``KeyError`` for an unknown id) propagates: check with ``unknown_refs`` first.
    """
    return _REF_RE.sub(lambda match: render_ref(match[1], fn(Ref(match[1], match[2]))), text)


def unknown_refs(text: str, known: Callable[[Ref], bool]) -> list[Ref]:
    """The references in ``text`` that ``known`` rejects, each once, in order of appearance."""
    seen: set[Ref] = set()
    unknown: list[Ref] = []
    for ref in parse_refs(text):
        if ref in seen:
            continue
        seen.add(ref)
        if not known(ref):
            unknown.append(ref)
    return unknown


def substitute_refs(text: str, fn: Callable[[Ref], str | None]) -> str:
    """``text`` with each whole reference replaced by ``fn(ref)``, for showing text to people
    (``[[p:id]]`` becomes the product's name); a reference ``fn`` returns None for stays as written."""

    def one(match: re.Match[str]) -> str:
        replaced = fn(Ref(match[1], match[2]))
        return match[0] if replaced is None else replaced

    return _REF_RE.sub(one, text)
