"""Reading Cabal's YAML files: YAML 1.2 scalars, the line of every mapping and key, and a
collector of problems located by those lines.

PyYAML implements YAML 1.1, where ``on``/``off``/``yes``/``no`` are booleans, ``010`` is octal
and ``1:30`` is a base-60 number. Here only ``true``/``false`` are booleans and those other
forms stay text (YAML 1.2's core schema), so ``on:`` is the key "on", never ``True``.

Mappings come back as ``LineDict``: a dict that knows its own line, each key's line, and the
keys given twice (which YAML would otherwise resolve silently, the last one winning).
``Problems`` collects what a loader finds wrong in such a document, each problem located by
file, line, step and field, so a file's every problem is reported at once.

Every file Cabal reads (protocols, procedures, role cards, missions, scripts, skills, prompts)
is read by ``read_text_file``: at most ``MAX_FILE_BYTES``, UTF-8 text, or a located problem. No
YAML alias is expanded: an alias repeats a node wherever it is named, so ten lines of nested
aliases ("billion laughs") would expand to billions of values; Cabal's files write values out.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from cabal.errors import ConfigError, ProtocolLoadError, ProtocolProblem


class LineDict(dict):
    """A mapping that remembers the line of itself and of each key (1-based)."""

    line: int | None = None

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.key_lines: dict[Any, int] = {}
        self.duplicates: list[tuple[Any, int]] = []

    def line_of(self, key: str | None) -> int | None:
        return self.key_lines.get(key, self.line) if key is not None else self.line


MAX_FILE_BYTES = 1_000_000  # a protocol, a mission or a script is a few kB; a file beyond this is not one


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 scalars and line-aware mappings, and no aliases."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            alias = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, f"an alias (*{alias.anchor}) is not allowed here; write the value out", alias.start_mark)
        return super().compose_node(parent, index)


_BOOL = "tag:yaml.org,2002:bool"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_BOOL, _INT, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
_Loader.add_implicit_resolver(_INT, re.compile(r"^(?:[-+]?(?:0|[1-9][0-9_]*)|0x[0-9a-fA-F]+)$"), list("-+0123456789"))
_Loader.add_implicit_resolver(
    _FLOAT,
    re.compile(r"^(?:[-+]?(?:[0-9][0-9_]*)?\.[0-9_]+(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    list("-+0123456789."),
)


def _construct_map(loader: _Loader, node: yaml.MappingNode) -> Iterator[LineDict]:
    data = LineDict()
    data.line = node.start_mark.line + 1
    yield data
    loader.flatten_mapping(node)
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        try:
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, "a mapping key must be a plain value", key_node.start_mark
            ) from None
        if key in data:
            data.duplicates.append((key, line))
        data[key] = loader.construct_object(value_node, deep=True)
        data.key_lines[key] = line


_Loader.add_constructor("tag:yaml.org,2002:map", _construct_map)


if yaml.__with_libyaml__:
    from yaml._yaml import CParser

    class _FastLoader(CParser, yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
        """``_Loader``'s scalars and mappings over libyaml's parser (C), about 8x faster: the team's
        role cards and the first protocol are read before a mission's first model call. libyaml
        composes an alias as a second reference to its anchor's node; ``_parsed`` looks for one."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)

    _FastLoader.yaml_implicit_resolvers = _Loader.yaml_implicit_resolvers
    _FastLoader.yaml_constructors = _Loader.yaml_constructors
else:  # pragma: no cover - a PyYAML built without libyaml
    _FastLoader = None  # type: ignore[assignment,misc]


def _holds_a_node_twice(root: yaml.Node) -> bool:
    """Whether a node is reached twice: what an alias (or a recursive one) makes of libyaml's tree."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            return True
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            stack.extend(part for pair in node.value for part in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return False


def _parsed(text: str) -> Any:
    """The document's data, read by libyaml when it reads it cleanly; a document libyaml refuses
    or one holding an alias is read again by the pure-Python ``_Loader``, whose error (and its
    message and line) is the one a problem quotes, as before the fast path existed."""
    if _FastLoader is not None:
        try:
            loader = _FastLoader(text)
            try:
                node = loader.get_single_node()
                if node is None:
                    return None
                if not _holds_a_node_twice(node):
                    return loader.construct_document(node)
            finally:
                loader.dispose()
        except (yaml.YAMLError, ValueError):  # ValueError: text libyaml cannot take (a lone surrogate)
            pass
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader


def read_yaml(text: str, source: str) -> Any:
    """One YAML document (``source`` names it in problems); a ``ProtocolLoadError`` if it is no
    valid YAML, holds an alias, or is longer than ``MAX_FILE_BYTES`` (in characters)."""
    if len(text) > MAX_FILE_BYTES:
        raise ProtocolLoadError([ProtocolProblem(source, f"too large: more than {MAX_FILE_BYTES:,} characters")])
    try:
        return _parsed(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        line = mark.line + 1 if mark is not None else None
        raise ProtocolLoadError([ProtocolProblem(source, f"invalid YAML: {problem}", line=line)]) from None


def line_at(data: Any, path: tuple[Any, ...]) -> int | None:
    """The line of the deepest mapping key along ``path`` (a pydantic error's ``loc``: keys and
    list indexes) that ``data`` knows, or None when it knows none."""
    line = data.line if isinstance(data, LineDict) else None
    for part in path:
        if isinstance(data, LineDict) and part in data:
            line = data.key_lines.get(part, line)
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
            line = data.line if isinstance(data, LineDict) and data.line else line
        else:
            break
    return line


def read_text_file(path: str | Path) -> str:
    """The text of one of Cabal's files, or a ``ProtocolLoadError`` located at the file: it cannot
    be read, it is larger than ``MAX_FILE_BYTES``, or it is not UTF-8 text (a binary file)."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)  # never more, however large the file
    except OSError as exc:
        raise ProtocolLoadError([ProtocolProblem(str(path), f"cannot read: {exc.strerror or exc}")]) from None
    if len(data) > MAX_FILE_BYTES:
        raise ProtocolLoadError([ProtocolProblem(str(path), f"too large: more than {MAX_FILE_BYTES:,} bytes")])
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolLoadError([ProtocolProblem(
            str(path), f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}): is it a binary file?")]) from None


def read_settings_file(path: Path, kind: str, needs: str) -> dict:
    """A file of settings that must be one YAML mapping (a mission file, a batch file): its data,
    or one located ``ConfigError`` line (``KIND FILE:LINE: ...``) for whoever started a run."""
    try:
        data = read_yaml(read_text_file(path), str(path))
    except ProtocolLoadError as exc:  # unreadable, too large, binary, not YAML
        raise ConfigError(f"{kind} {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a {kind} is a mapping with at least `{needs}:`")
    return data


class Problems:
    """The located problems of one file, gathered while a loader reads all of it."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.found: list[ProtocolProblem] = []

    def add(self, message: str, *, at: Any = None, key: str | None = None, step: str | None = None,
            field: str | None = None, line: int | None = None) -> None:
        """``at`` is the mapping the problem sits in: the line of ``key`` in it (default: the first
        part of ``field``), else its own line, locates the problem."""
        if line is None and isinstance(at, LineDict):
            line = at.line_of(key if key is not None else field.split(".")[0] if field else None)
        self.found.append(ProtocolProblem(self.source, message, step=step, field=field, line=line))

    def unknown_keys(self, mapping: LineDict, allowed: tuple[str, ...], *, step: str | None, prefix: str = "") -> None:
        """A problem for each key ``mapping`` may not have, and for each key given twice."""
        for key in mapping:
            if key not in allowed:
                self.add(f"unknown field {key!r}; allowed: {', '.join(allowed)}", at=mapping, key=key, step=step,
                         field=f"{prefix}{key}")
        for key, line in mapping.duplicates:
            self.add(f"{key!r} is given twice", step=step, field=f"{prefix}{key}", line=line)

    def raise_if_any(self) -> None:
        if self.found:
            raise ProtocolLoadError(self.found)
