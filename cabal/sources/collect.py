"""Finding and reading the files a mission names as its sources.

Every entry is confined: a mission file's entry to the mission file's folder, a ``--source``
or an upload to the folder or file it names; a ``..`` or a symlink that leaves it is refused
with the entry's location. Limits (count, one file's size, the total) are checked before a
byte is read beyond them. Documents (Word, PDF, PowerPoint, Excel, HTML) are read by
``documents``; any other binary or undecodable file is skipped with its reason, never read.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
from pathlib import Path

from cabal.errors import ConfigError
from cabal.sources.chunks import chunk_text
from cabal.sources.documents import DOCUMENT_FORMATS, document_text, sniffed_format
from cabal.sources.model import MB, Collected, SourceEntry, SourceLimits, SourceText, Wanted
from cabal.vocabulary import install_command

FORMATS: dict[str, str] = {
    ".md": "markdown", ".markdown": "markdown", ".txt": "text", ".text": "text", ".rst": "text", ".log": "text",
    ".csv": "csv", ".tsv": "csv", ".json": "json", ".yaml": "yaml", ".yml": "yaml",
    ".html": "html", ".htm": "html", ".xhtml": "html", ".pdf": "pdf", ".docx": "docx", ".pptx": "pptx", ".xlsx": "xlsx",
    **{ext: "code" for ext in (".py", ".js", ".ts", ".tsx", ".jsx", ".go", ".rs", ".java", ".kt", ".c", ".h",
                               ".cc", ".cpp", ".hpp", ".cs", ".rb", ".php", ".swift", ".sh", ".sql", ".css",
                               ".toml", ".ini", ".cfg", ".xml", ".r", ".scala", ".lua", ".pl")},
}
"""A file's format by its extension (a document's content, when it shows one, comes first: see
``read_source``); any other file is read as text if it decodes as UTF-8."""


def collect(wanted: list[Wanted], limits: SourceLimits) -> Collected:
    """Every file the entries name, in order (a folder's files sorted), each once, read."""
    paths: list[tuple[Path, Wanted, str]] = []
    seen: set[Path] = set()
    for entry in wanted:
        for path, name in _expand(entry):
            if path not in seen:
                seen.add(path)
                paths.append((path, entry, name))
            if len(paths) > limits.files:
                raise ConfigError(f"{entry.where}: more than {limits.files} files at {name}, beyond the limit "
                                  f"(source_limits.files)")
    total = 0
    for path, entry, name in paths:
        size = path.stat().st_size
        if size > limits.file_bytes:
            raise ConfigError(f"{entry.where}: {name} is {size / MB:.2f} MB, beyond the limit of "
                              f"{limits.file_mb:g} MB per file (source_limits.file_mb)")
        total += size
        if total > limits.total_bytes:
            raise ConfigError(f"{entry.where}: the sources reach {total / MB:.2f} MB at {name}, beyond the limit "
                              f"of {limits.total_mb:g} MB in all (source_limits.total_mb)")
    return Collected(tuple(_read(path, name, entry) for path, entry, name in paths))


def _read(path: Path, name: str, entry: Wanted) -> SourceText:
    try:
        return read_source(path, name, entry.note)
    except ConfigError as error:  # a document that cannot be read: say which entry named it
        raise ConfigError(f"{entry.where}: {error.message}", hint=error.hint) from None


def _expand(entry: Wanted) -> list[tuple[Path, str]]:
    """The files of one entry, with the names they are shown by, confined to where it points."""
    base = Path(entry.base).resolve()
    if entry.confined and ".." in Path(entry.path).parts:
        raise ConfigError(f"{entry.where}: {entry.path!r} leaves its folder ('..' is not allowed in a source path)")
    pattern = Path(entry.path).expanduser()
    full = pattern if pattern.is_absolute() else base / pattern
    if glob.has_magic(entry.path):
        root = base if not pattern.is_absolute() else Path(_fixed_part(str(pattern)))
        matches = sorted(Path(p) for p in glob.glob(str(full), recursive=True))
        if not matches:
            raise ConfigError(f"{entry.where}: no file matches {entry.path!r}")
        return [(_confined(p, root, entry), _shown(p, base)) for p in matches if p.is_file()]
    if not full.exists() and not full.is_symlink():
        raise ConfigError(f"{entry.where}: {entry.path!r} does not exist")
    # A mission file's entries stay in the mission's folder; a path the user typed (--source)
    # is its own root.
    root = base if entry.confined and not pattern.is_absolute() else full.parent
    target = _confined(full, root, entry)
    if target.is_file():
        return [(target, _shown(full, base))]
    folder_root = target
    files = sorted(p for p in target.rglob("*") if not _hidden(p.relative_to(target)))
    return [(_confined(p, folder_root, entry), _shown(full / p.relative_to(target), base))
            for p in files if p.is_file() or p.is_symlink()]


def _confined(path: Path, root: Path, entry: Wanted) -> Path:
    """``path`` with its symlinks resolved, refused when that leaves ``root``."""
    real = path.resolve()
    if real != root.resolve() and not real.is_relative_to(root.resolve()):
        raise ConfigError(f"{entry.where}: {path} leads outside {root} (a symlink or '..' that leaves the "
                          "folder named is refused)")
    if not real.exists():
        raise ConfigError(f"{entry.where}: {path} is a broken link")
    return real


def _fixed_part(pattern: str) -> str:
    parts = []
    for part in Path(pattern).parts:
        if glob.has_magic(part):
            break
        parts.append(part)
    return str(Path(*parts)) if parts else "."


def _hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _shown(path: Path, base: Path) -> str:
    """The name a source is shown by: relative to ``base`` where it can, on one line (a file name
    may hold a newline, which would otherwise pose as a line of the prompt's own)."""
    try:
        name = str(path.relative_to(base))
    except ValueError:
        name = str(path)
    return _CONTROL.sub("?", name)


def read_source(path: Path, name: str, note: str | None) -> SourceText:
    """One file as text in chunks, or skipped with the reason (binary, undecodable, empty). A
    document (Word, PDF, PowerPoint, Excel, HTML) that cannot be read is a ``ConfigError``.

    The format is the content's where it shows one (a PDF is a PDF whatever its name), else the
    name's the user gave: ``path`` is the file a symlink leads to, whose name may say nothing."""
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    format = sniffed_format(data) or FORMATS.get(Path(name).suffix.lower(), "text")  # noqa: A001 - the format's name
    text, skipped = _decode(data, format, name)
    base = SourceText(str(path), name, note, len(data), digest, format)
    if skipped is None and not text.strip():
        skipped = "empty: no text in it"
    if skipped is not None:
        return SourceText(**{**vars(base), "skipped": skipped})
    return SourceText(**{**vars(base), "chunks": chunk_text(text, format)})


def _decode(data: bytes, format: str, name: str) -> tuple[str, str | None]:  # noqa: A002
    if format in DOCUMENT_FORMATS:
        return document_text(data, format, name), None
    if b"\x00" in data:
        return "", "binary: it holds NUL bytes"
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        return "", f"not UTF-8 text (byte {error.start})"
    return text.replace("\r\n", "\n").replace("\r", "\n"), None


def mission_wanted(entries: list[SourceEntry], base: Path, origin: str, lines: dict[int, int]) -> list[Wanted]:
    """A mission file's ``sources:`` as entries to collect, each located ``FILE:LINE: sources[i]``."""
    wanted = []
    for index, entry in enumerate(entries):
        if entry.path is None:  # an earlier mission: read from its graph (rounds/library.py), not from disk
            continue
        line = lines.get(index)
        wanted.append(Wanted(entry.path, entry.note, str(base), f"{origin}:{line}: sources[{index}]" if line
                             else f"{origin}: sources[{index}]"))
    return wanted


def typed_wanted(paths: list[str | Wanted]) -> list[Wanted]:
    """``--source PATH`` entries: relative to the current folder (an entry already made, such as
    an upload folder, passes as it is)."""
    return [path if isinstance(path, Wanted) else Wanted(path, None, os.getcwd(), "--source", confined=False)
            for path in paths]


def folder_wanted(folder: Path, where: str, note: str | None = None) -> Wanted:
    """Every file of ``folder``, named relative to it and confined to it (files uploaded to a page)."""
    return Wanted(".", note, str(folder), where)
