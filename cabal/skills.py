"""Skills: Markdown files of domain knowledge that say which protocol fits which situation.

A skill is read by people and by agents as a whole (``Skill.text``); the engine reads one part
of it, the "When to Use Which Protocol" table. Each row pairs a situation with a protocol or a
chain of protocols (``protocol:a`` → ``protocol:b``). A row whose situation carries a gap tag
(inline ``gap:NAME``) is the one the doctor follows when it finds that gap in the graph.

This module is vocabulary and parsing only: it never touches the graph.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from cabal import resources
from cabal.errors import ProtocolLoadError, ProtocolProblem, ResourceNotFound
from cabal.yaml_reader import read_text_file

__all__ = [
    "GAP_DOMAINS",
    "SECTIONS",
    "TABLE_SECTION",
    "V1_PROTOCOLS",
    "Skill",
    "SkillRow",
    "list_skills",
    "load_skill",
    "load_skills",
    "parse_skill",
]

TABLE_SECTION = "When to Use Which Protocol"

# The level-2 sections of the skill format, in the order the format gives them.
SECTIONS = (
    "Domain",
    TABLE_SECTION,
    "Process",
    "Patterns",
    "Anti-Patterns",
    "Queries to Run",
    "Examples",
)

V1_PROTOCOLS = frozenset(
    {
        "explore_space",
        "add_objectives",
        "add_invariant",
        "add_health_coverage",
        "add_implementation",
        "record_work",
        "investigate",
        "resolve_blocker",
    }
)

# Gap kind -> the skill whose domain it is. The doctor loads that skill and follows the row
# tagged with the gap.
GAP_DOMAINS: Mapping[str, str] = MappingProxyType(
    {
        "module_without_objectives": "module_design",
        "behavior_without_validation": "feature_implementation",
        "module_without_implementation": "feature_implementation",
        "validation_without_health": "health_coverage",
        "escalation_without_resolution": "escalation_handling",
        "space_without_progress": "progress_tracking",
    }
)

_SUFFIXES = (".md",)


# ----------------------------------------------------------------------------------- values


@dataclass(frozen=True)
class SkillRow:
    """One row of a skill's protocol table."""

    situation: str
    protocols: tuple[str, ...]
    gaps: tuple[str, ...] = ()
    # Where the row sits in its file; not part of a row's identity.
    line: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Skill:
    """A parsed skill: its whole text for agents, its sections, and its protocol table."""

    name: str
    title: str
    text: str
    sections: dict[str, str] = field(hash=False)
    rows: tuple[SkillRow, ...]
    path: Path | None = field(default=None, compare=False)

    def row_for(self, gap_kind: str) -> SkillRow | None:
        """The first row tagged with ``gap_kind``, or None."""
        for row in self.rows:
            if gap_kind in row.gaps:
                return row
        return None

    def protocol_chain(self, gap_kind: str) -> tuple[str, ...]:
        """Every protocol of the row tagged with ``gap_kind``, in order; empty if no row is."""
        row = self.row_for(gap_kind)
        return row.protocols if row is not None else ()

    def select_protocol(self, gap_kind: str) -> str | None:
        """The protocol to start for ``gap_kind``: the first of its row's chain, or None."""
        chain = self.protocol_chain(gap_kind)
        return chain[0] if chain else None

    def protocols(self) -> tuple[str, ...]:
        """Every protocol the table names, each once, in order of first mention."""
        return tuple(dict.fromkeys(name for row in self.rows for name in row.protocols))

    def gaps(self) -> tuple[str, ...]:
        """Every gap kind the table is tagged with, in order."""
        return tuple(dict.fromkeys(gap for row in self.rows for gap in row.gaps))

    def section(self, heading: str) -> str | None:
        """A section's body by heading, ignoring case, spacing and a trailing colon."""
        wanted = _normalise_heading(heading)
        for key, body in self.sections.items():
            if _normalise_heading(key) == wanted:
                return body
        return None


# ---------------------------------------------------------------------------------- loading


def list_skills(dirs: Iterable[str | Path] = ()) -> list[str]:
    """Names of every skill: built-in ones plus those in ``dirs`` (a user's own skills/ folders)."""
    return sorted(resources.files_by_name("skills", _SUFFIXES, dirs))


def load_skill(
    name: str,
    dirs: Iterable[str | Path] = (),
    *,
    allowed: Collection[str] | None = None,
) -> Skill:
    """Load one skill by name.

    ``dirs`` are searched after the built-in folder, lowest priority first: a file in a later
    folder replaces one of the same name in an earlier folder (or the built-in one). With
    ``allowed``, every protocol the table names must be in it.
    """
    stem = name[: -len(".md")] if name.endswith(".md") else name
    files = resources.files_by_name("skills", _SUFFIXES, dirs)
    path = files.get(stem)
    if path is None:
        raise ResourceNotFound("skill", name, known=sorted(files))
    return _read(path, stem, allowed)


def load_skills(
    dirs: Iterable[str | Path] = (),
    *,
    allowed: Collection[str] | None = None,
) -> dict[str, Skill]:
    """Load every skill (built-in and from ``dirs``); reports the problems of all files at once."""
    skills: dict[str, Skill] = {}
    problems: list[ProtocolProblem] = []
    for stem, path in sorted(resources.files_by_name("skills", _SUFFIXES, dirs).items()):
        try:
            skills[stem] = _read(path, stem, allowed)
        except ProtocolLoadError as error:
            problems.extend(error.problems)
    if problems:
        raise ProtocolLoadError(problems)
    return skills


def _read(path: Path, name: str, allowed: Collection[str] | None) -> Skill:
    return parse_skill(read_text_file(path), name, source=path, allowed=allowed)


# ---------------------------------------------------------------------------------- parsing


def parse_skill(
    text: str,
    name: str,
    *,
    source: str | Path | None = None,
    allowed: Collection[str] | None = None,
) -> Skill:
    """Parse a skill's Markdown.

    Raises ``ProtocolLoadError`` listing every problem found: no protocol table, a row that
    names no protocol, a gap tagged on two rows, or (with ``allowed``) an unknown protocol.
    Problems are located by file, section and 1-based line.
    """
    file = str(source) if source is not None else f"{name}.md"
    lines = text.splitlines()
    outline = _outline(lines)

    title = next((heading for level, heading, _ in outline.headings if level == 1), None)
    if title is None:
        title = name.replace("_", " ").title()
    else:
        title = re.sub(r"\s+skill\s*$", "", title, flags=re.IGNORECASE).strip() or title

    sections: dict[str, str] = {}
    for heading, body in outline.sections:
        body_text = "\n".join(text_line for _, text_line in body).strip()
        sections[heading] = f"{sections[heading]}\n\n{body_text}" if heading in sections else body_text

    rows, problems = _protocol_rows(outline, file, allowed)
    if problems:
        raise ProtocolLoadError(problems)
    path = Path(source) if source is not None else None
    return Skill(name=name, title=title, text=text, sections=sections, rows=rows, path=path)


@dataclass
class _Outline:
    # (level, heading text, 1-based line) of every ATX heading outside code fences.
    headings: list[tuple[int, str, int]]
    # (heading, body lines as (1-based line, text)) of every level-2 section.
    sections: list[tuple[str, list[tuple[int, str]]]]
    # 1-based line of each level-2 heading, parallel to ``sections``.
    section_lines: list[int]
    # 1-based lines that sit inside code fences (a table there is an example, not a table).
    fenced: set[int]


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")


def _outline(lines: list[str]) -> _Outline:
    headings: list[tuple[int, str, int]] = []
    sections: list[tuple[str, list[tuple[int, str]]]] = []
    section_lines: list[int] = []
    fenced: set[int] = set()
    fence: str | None = None
    current: list[tuple[int, str]] | None = None
    for number, line in enumerate(lines, start=1):
        marker = _FENCE.match(line)
        if fence is not None:
            fenced.add(number)
            if marker and marker.group(1)[0] == fence[0] and len(marker.group(1)) >= len(fence):
                if not line.strip()[len(marker.group(1)) :].strip():
                    fence = None
        elif marker:
            fence = marker.group(1)
            fenced.add(number)
        else:
            heading = _HEADING.match(line)
            if heading:
                level = len(heading.group(1))
                headings.append((level, heading.group(2).strip(), number))
                if level <= 2:
                    current = None
                if level == 2:
                    current = []
                    sections.append((heading.group(2).strip(), current))
                    section_lines.append(number)
                    continue
        if current is not None:
            current.append((number, line))
    return _Outline(headings, sections, section_lines, fenced)


def _normalise_heading(heading: str) -> str:
    return " ".join(heading.replace("`", "").replace("*", "").rstrip(":").lower().split())


def _protocol_rows(
    outline: _Outline, file: str, allowed: Collection[str] | None
) -> tuple[tuple[SkillRow, ...], list[ProtocolProblem]]:
    def problem(message: str, line: int | None) -> ProtocolProblem:
        return ProtocolProblem(file=file, message=message, field=TABLE_SECTION, line=line)

    wanted = _normalise_heading(TABLE_SECTION)
    found = [
        (line, body)
        for (heading, body), line in zip(outline.sections, outline.section_lines)
        if _normalise_heading(heading) == wanted
    ]
    if not found:
        return (), [problem(f"no '## {TABLE_SECTION}' section: a skill needs its Situation | Protocol table", None)]

    rows: list[SkillRow] = []
    problems: list[ProtocolProblem] = []
    tagged: dict[str, int] = {}
    for heading_line, body in found:
        tables = _tables([(n, text) for n, text in body if n not in outline.fenced])
        if not tables:
            problems.append(problem("section has no Situation | Protocol table", heading_line))
            continue
        for table in tables:
            headers = [_normalise_heading(cell) for cell in table.header]
            situation_col = next((i for i, h in enumerate(headers) if h.startswith("situation")), 0)
            protocol_col = next((i for i, h in enumerate(headers) if h.startswith("protocol")), len(headers) - 1)
            if situation_col == protocol_col:
                problems.append(problem("table needs a Situation column and a Protocol column", table.line))
                continue
            if not table.rows:
                problems.append(problem("table has no rows", table.line))
                continue
            for line, cells in table.rows:
                cells = cells + [""] * (len(headers) - len(cells))
                situation, protocol_cell = cells[situation_col], cells[protocol_col]
                names, reason = _protocol_names(protocol_cell)
                if reason is not None:
                    problems.append(problem(reason, line))
                    continue
                for unknown in [n for n in names if allowed is not None and n not in allowed]:
                    known = ", ".join(sorted(allowed or ()))
                    problems.append(problem(f"unknown protocol {unknown!r} (known: {known})", line))
                gaps = tuple(dict.fromkeys(_GAP_TAG.findall(situation)))
                for gap in gaps:
                    if gap in tagged:
                        problems.append(problem(f"gap {gap!r} is already tagged on line {tagged[gap]}", line))
                    else:
                        tagged[gap] = line
                rows.append(SkillRow(situation=situation, protocols=names, gaps=gaps, line=line))
    return tuple(rows), problems


_GAP_TAG = re.compile(r"\bgap:\s*([A-Za-z_][\w-]*)")
_PROTOCOL_TAG = re.compile(r"\bprotocol:\s*([A-Za-z_][\w-]*)")
_PROTOCOL_NAME = re.compile(r"[A-Za-z_][\w-]*")
_CHAIN_SEPARATOR = re.compile(r"→|->|⟶|=>|,")


def _protocol_names(cell: str) -> tuple[tuple[str, ...], str | None]:
    """The chain a Protocol cell names, or a reason it names none.

    ``protocol:NAME`` tags win; without any, the cell may list bare names joined by arrows.
    """
    tagged = _PROTOCOL_TAG.findall(cell)
    if tagged:
        return tuple(tagged), None
    parts = [part.strip() for part in _CHAIN_SEPARATOR.split(cell.replace("`", ""))]
    parts = [part for part in parts if part]
    if not parts:
        return (), "row names no protocol"
    unreadable = [part for part in parts if not _PROTOCOL_NAME.fullmatch(part)]
    if unreadable:
        return (), f"cannot read a protocol name in {cell!r}; write `protocol:NAME`"
    return tuple(parts), None


@dataclass
class _Table:
    line: int
    header: list[str]
    rows: list[tuple[int, list[str]]]


_DELIMITER_CELL = re.compile(r":?-+:?")


def _tables(lines: list[tuple[int, str]]) -> list[_Table]:
    """Pipe tables in ``lines``: a header row, a delimiter row, then rows until a non-row line."""
    tables: list[_Table] = []
    index = 0
    while index + 1 < len(lines):
        number, header = lines[index]
        _, delimiter = lines[index + 1]
        if _is_row(header) and _is_delimiter(delimiter):
            table = _Table(line=number, header=_cells(header), rows=[])
            index += 2
            while index < len(lines) and _is_row(lines[index][1]) and not _is_delimiter(lines[index][1]):
                row_number, row = lines[index]
                cells = _cells(row)
                if any(cells):
                    table.rows.append((row_number, cells))
                index += 1
            tables.append(table)
        else:
            index += 1
    return tables


def _is_row(line: str) -> bool:
    return bool(line.strip()) and len(_split(line.strip())) > 1


def _is_delimiter(line: str) -> bool:
    cells = _cells(line)
    return bool(cells) and "|" in line and all(_DELIMITER_CELL.fullmatch(cell) for cell in cells)


def _cells(line: str) -> list[str]:
    # The line is stripped, so an empty first or last part means a leading or trailing pipe.
    parts = _split(line.strip())
    if len(parts) > 1 and parts[0] == "":
        parts = parts[1:]
    if len(parts) > 1 and parts[-1] == "":
        parts = parts[:-1]
    return [part.strip().replace("\\|", "|") for part in parts]


def _split(line: str) -> list[str]:
    """Split on pipes that are neither escaped nor inside a code span."""
    parts: list[str] = []
    start = 0
    index = 0
    while index < len(line):
        char = line[index]
        if char == "\\":
            index += 2
            continue
        if char == "`":
            run = len(line[index:]) - len(line[index:].lstrip("`"))
            closing = line.find("`" * run, index + run)
            if closing != -1:
                index = closing + run
                continue
            index += run
            continue
        if char == "|":
            parts.append(line[start:index])
            start = index + 1
        index += 1
    parts.append(line[start:])
    return parts
