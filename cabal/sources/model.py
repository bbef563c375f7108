"""The vocabulary of sources: what a mission file names, the limits, and what ingest reads.

A source is one of the user's files, read as text into the mission's graph: a ``source`` node
(stable short id ``s1``, ``s2``, ... in ingest order) and its chunks (``s2#1``, ``s2#2``, ...).
A file that changed by the time a mission resumes becomes a new version of its source: node
``s2.v2`` with chunks ``s2.v2#1`` ...; the old version stays, and what cited it still does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cabal.limits import unprintable

MB = 1_000_000
DEFAULT_MAX_FILES = 1000
DEFAULT_FILE_MB = 2.0
DEFAULT_TOTAL_MB = 50.0
CHUNK_CHARS = 1500  # a chunk's target size; one chunk never holds more than CHUNK_MAX_CHARS
CHUNK_MAX_CHARS = 2000
NOTE_MAX_CHARS = 500

SOURCE_ID = re.compile(r"^s[1-9][0-9]*$")
# What a citation may name: a source (s2) or one of its sections (s2#3), as the team sees them.
CITED_ID = re.compile(r"^(s[1-9][0-9]*)(?:#([1-9][0-9]*))?$")


class SourceEntry(BaseModel):
    """One entry of a mission file's ``sources:``: a file, a folder or a glob, with a note; or an
    earlier mission of the workspace, whose accepted work and the user's words become sources."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str | None = Field(None, min_length=1, max_length=1000,
                             description="a file, a folder or a glob, relative to the mission file")
    mission: str | None = Field(None, min_length=1, max_length=120,
                                description="an earlier mission's id: its accepted products, the Chair's decisions "
                                            "and the user's answers, as sources (docs/how-to/memory.md)")
    note: str | None = Field(None, max_length=NOTE_MAX_CHARS, description="what the team should know about it")

    @field_validator("path", "mission", "note")
    @classmethod
    def _plain_text(cls, value: str | None) -> str | None:
        wrong = unprintable(value) if value else None
        if wrong:
            raise ValueError(f"contains {wrong}; write plain text")
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> SourceEntry:
        if (self.path is None) == (self.mission is None):
            raise ValueError("name either a path (a file, a folder or a glob) or a mission (an earlier mission's id)")
        return self


class SourceLimits(BaseModel):
    """How much a mission may ingest: past any limit, the mission refuses to start."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    files: int = Field(DEFAULT_MAX_FILES, ge=1, le=100_000, description="files in all (skipped ones included)")
    file_mb: float = Field(DEFAULT_FILE_MB, gt=0, le=100, description="one file's size, in MB (10^6 bytes)")
    total_mb: float = Field(DEFAULT_TOTAL_MB, gt=0, le=1000, description="all files together, in MB")

    @property
    def file_bytes(self) -> int:
        return int(self.file_mb * MB)

    @property
    def total_bytes(self) -> int:
        return int(self.total_mb * MB)


@dataclass(frozen=True)
class Wanted:
    """An entry to collect: where its paths start (``base``), and where it was named
    (``where``: ``FILE:LINE: sources[0]`` or ``--source``) for every error about it."""

    path: str
    note: str | None
    base: str
    where: str
    confined: bool = True  # a mission file's entry must stay inside ``base``; a typed path is its own root


@dataclass(frozen=True)
class Chunk:
    position: int  # 1-based: the section number a citation names (s2#3)
    heading: str  # the nearest heading above it, or "" when the text has none
    text: str


@dataclass(frozen=True)
class SourceText:
    """One file read: its text in chunks, or why it was skipped."""

    path: str  # absolute
    name: str  # as the user named it: relative to the entry's base
    note: str | None
    size: int
    sha256: str
    format: str  # markdown, text, csv, json, yaml, code; docx, pdf, pptx, xlsx, html (read as Markdown)
    chunks: tuple[Chunk, ...] = ()
    skipped: str | None = None  # why it was not read (binary, undecodable, empty)
    # Where text that is not a file came from (an earlier mission's product, version; the standing
    # facts): shown beside the source, and a resume has no file to read again.
    origin: str | None = None

    @property
    def first_heading(self) -> str:
        return next((c.heading for c in self.chunks if c.heading), "")


@dataclass(frozen=True)
class Collected:
    """What ingest reads: the files in order (read or skipped)."""

    files: tuple[SourceText, ...]

    @property
    def read(self) -> tuple[SourceText, ...]:
        return tuple(f for f in self.files if f.skipped is None)

    @property
    def skipped(self) -> tuple[SourceText, ...]:
        return tuple(f for f in self.files if f.skipped is not None)


def source_node_id(source_id: str, version: int) -> str:
    """``s2`` for a source's first version, ``s2.v2`` for its second."""
    return source_id if version == 1 else f"{source_id}.v{version}"


def chunk_node_id(node_id: str, position: int) -> str:
    return f"{node_id}#{position}"


def latest_versions(sources: list[dict]) -> list[dict]:
    """Each source's latest version among ``sources`` (source nodes), in ingest order (s1, s2, ...)."""
    latest: dict[str, dict] = {}
    for source in sources:
        known = latest.get(source["source_id"])
        if known is None or int(source["version"]) > int(known["version"]):
            latest[source["source_id"]] = source
    return sorted(latest.values(), key=lambda s: int(str(s["source_id"])[1:]))
