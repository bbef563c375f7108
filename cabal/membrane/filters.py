"""Template filters: what ``{value|name:arg}`` does to a value, and the argument each one takes.

A filter receives the value itself (a list stays a list), its parsed argument and a resolver
for names, and returns a value: ``{items|count}`` is an integer, ``{items|first}`` an item,
``{title|slugify}`` text. Filters that work on text read the value as text (``to_text``).

Arguments follow a colon: ``truncate:40``, ``join:", "``, ``default:"none"``, ``map:id``,
``where:type=goal``. The seed's compact form ``truncate50`` (a filter name followed by its
number) means ``truncate:50``. Quoted arguments keep their spaces; a bare word is, depending on
the filter, a number, a field name or a name to look up (``default:other_answer``).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

Resolve = Callable[[str], Any]  # a name -> its value in the template's scope


def to_text(value: Any) -> str:
    """How a value reads inside a larger string: JSON for structures, true/false for booleans."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return str(value)


def is_empty(value: Any) -> bool:
    """No answer: None, empty text (blank counts), an empty list or mapping."""
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, (list, tuple, dict)):
        return not value
    return False


def slugify(text: str) -> str:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")


# ----------------------------------------------------------------------------- arguments

NUMBER, TEXT, OPTIONAL_TEXT, FIELD, PAIR, VALUE, NONE = "number", "text", "optional text", "field", "pair", "value", "none"
_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NAME_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*$")


@dataclass(frozen=True)
class Argument:
    """A filter's argument after parsing: a literal, or a name to look up when the filter runs."""

    literal: Any = None
    name: str | None = None
    field: str | None = None  # for pairs: the field compared


def _unquote(raw: str) -> str | None:
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        return raw[1:-1]
    return None


@lru_cache(maxsize=1024)
def parse_argument(kind: str, raw: str | None) -> Argument:
    """The argument of a filter of this kind; ``ValueError`` with a message when it does not fit."""
    if kind == NONE:
        if raw is not None:
            raise ValueError("takes no argument")
        return Argument()
    if raw is None or raw == "":
        if kind == OPTIONAL_TEXT:
            return Argument(literal=None)
        raise ValueError(f"needs {_ARG_HELP[kind]}")
    quoted = _unquote(raw)
    if kind == NUMBER:
        if not re.fullmatch(r"\d+", raw):
            raise ValueError(f"needs {_ARG_HELP[kind]}, got {raw!r}")
        return Argument(literal=int(raw))
    if kind in (TEXT, OPTIONAL_TEXT):
        return Argument(literal=quoted if quoted is not None else raw)
    if kind == FIELD:
        if not _FIELD.match(raw):
            raise ValueError(f"needs {_ARG_HELP[kind]}, got {raw!r}")
        return Argument(literal=raw)
    if kind == PAIR:
        field, sep, value = raw.partition("=")
        if not sep or not _FIELD.match(field.strip()):
            raise ValueError(f"needs {_ARG_HELP[kind]}, got {raw!r}")
        value = value.strip()
        return Argument(literal=_unquote(value) if _unquote(value) is not None else value, field=field.strip())
    # VALUE: a quoted text or a number is itself; a bare name is looked up when the filter runs.
    if quoted is not None:
        return Argument(literal=quoted)
    if re.fullmatch(r"-?\d+(?:\.\d+)?", raw):
        return Argument(literal=float(raw) if "." in raw else int(raw))
    if not _NAME_PATH.match(raw):
        raise ValueError(f"needs {_ARG_HELP[kind]}, got {raw!r}")
    return Argument(name=raw)


_ARG_HELP = {
    NUMBER: "a number, as in truncate:40",
    TEXT: 'a text, as in strip_prefix:"space_"',
    OPTIONAL_TEXT: 'a text, as in join:", "',
    FIELD: "a field name, as in map:id",
    PAIR: "field=value, as in where:type=goal",
    VALUE: 'a quoted text or a name, as in default:"none" or default:other_answer',
}


# ------------------------------------------------------------------------------ the filters


def _items(value: Any) -> list:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, Mapping):
        return [value]
    return [value]


def _label(item: Any) -> str:
    """One item as a line of text: a node reads as ``id: name``, anything else as text."""
    if isinstance(item, Mapping):
        node_id, name = item.get("id"), item.get("name") or item.get("title")
        if node_id is not None and name is not None:
            return f"{node_id}: {name}"
        if node_id is not None:
            return str(node_id)
        return ", ".join(f"{k}: {to_text(v)}" for k, v in item.items())
    return to_text(item)


def _count(value: Any, _: Argument, __: Resolve) -> int:
    if value is None:
        return 0
    if isinstance(value, (list, tuple, dict, str)):
        return len(value)
    return 1


def _first(value: Any, _: Argument, __: Resolve) -> Any:
    items = _items(value) if not isinstance(value, str) else [value]
    return items[0] if items else None


def _last(value: Any, _: Argument, __: Resolve) -> Any:
    items = _items(value) if not isinstance(value, str) else [value]
    return items[-1] if items else None


def _field(value: Any, arg: Argument, _: Resolve) -> Any:
    if value is None:
        return None
    if isinstance(value, Mapping):
        return value.get(arg.literal)
    raise TypeError(f"field:{arg.literal} needs a mapping (a node), got {type(value).__name__}")


def _map(value: Any, arg: Argument, _: Resolve) -> list:
    return [item.get(arg.literal) if isinstance(item, Mapping) else None for item in _items(value)]


def _where(value: Any, arg: Argument, _: Resolve) -> list:
    return [item for item in _items(value) if isinstance(item, Mapping) and to_text(item.get(arg.field)) == arg.literal]


def _default(value: Any, arg: Argument, resolve: Resolve) -> Any:
    if not is_empty(value):
        return value
    return resolve(arg.name) if arg.name is not None else arg.literal


def _join(value: Any, arg: Argument, _: Resolve) -> str:
    separator = ", " if arg.literal is None else arg.literal
    return separator.join(to_text(item) for item in _items(value))


def _lines(value: Any, _: Argument, __: Resolve) -> str:
    items = _items(value)
    return "\n".join(f"- {_label(item)}" for item in items) if items else "(none)"


def _numbered(value: Any, _: Argument, __: Resolve) -> str:
    items = _items(value)
    return "\n".join(f"{i}. {_label(item)}" for i, item in enumerate(items, 1)) if items else "(none)"


def _names(value: Any, _: Argument, __: Resolve) -> str:
    names = []
    for item in _items(value):
        if isinstance(item, Mapping):
            names.append(to_text(item.get("name") or item.get("id")))
        else:
            names.append(to_text(item))
    return ", ".join(names)


def _ids(value: Any, _: Argument, __: Resolve) -> str:
    return ", ".join(to_text(item.get("id") if isinstance(item, Mapping) else item) for item in _items(value))


def _range(value: Any, _: Argument, __: Resolve) -> list[int]:
    """1..n: the items of a loop that runs n times (n from an answer such as "how many?")."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(f"range needs a number, got {type(value).__name__}")
    number = float(value)
    if not number.is_integer() or number < 0:
        raise ValueError(f"range needs a whole number of at least 0, got {value!r}")
    return list(range(1, int(number) + 1))


def _sort(value: Any, arg: Argument, _: Resolve) -> list:
    items = _items(value)
    # Items without the field go last; the sort is stable, so equal keys keep their order.
    return sorted(items, key=lambda item: _sort_key(item.get(arg.literal) if isinstance(item, Mapping) else None))


def _sort_key(value: Any) -> tuple:
    if value is None:
        return (2, "")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value)
    return (1, to_text(value))


def _group(value: Any, arg: Argument, _: Resolve) -> list:
    """Items with the same field value brought together, groups in order of first appearance."""
    groups: dict[str, list] = {}
    for item in _items(value):
        key = to_text(item.get(arg.literal)) if isinstance(item, Mapping) else ""
        groups.setdefault(key, []).append(item)
    return [item for group in groups.values() for item in group]


def _pad(value: Any, arg: Argument, _: Resolve) -> str:
    text = to_text(value)
    return text.zfill(arg.literal)


def _hash(value: Any, arg: Argument, _: Resolve) -> str:
    return hashlib.sha1(to_text(value).encode()).hexdigest()[: arg.literal]


def _strip_prefix(value: Any, arg: Argument, _: Resolve) -> str:
    text = to_text(value)
    return text[len(arg.literal):] if text.startswith(arg.literal) else text


def _title(value: Any, _: Argument, __: Resolve) -> str:
    """The first Markdown heading of a text, else its first non-empty line."""
    lines = [line.strip() for line in to_text(value).splitlines() if line.strip()]
    for line in lines:
        if line.startswith("#"):
            return line.lstrip("#").strip()
    return lines[0] if lines else ""


def _text(function: Callable[[str, Argument], Any]) -> Callable[[Any, Argument, Resolve], Any]:
    return lambda value, arg, _: function(to_text(value), arg)


@dataclass(frozen=True)
class Filter:
    name: str
    apply: Callable[[Any, Argument, Resolve], Any]
    argument: str = NONE


FILTERS: dict[str, Filter] = {
    f.name: f
    for f in (
        Filter("slugify", _text(lambda t, _: slugify(t))),
        Filter("lower", _text(lambda t, _: t.lower())),
        Filter("upper", _text(lambda t, _: t.upper())),
        Filter("truncate", _text(lambda t, a: t[: a.literal]), NUMBER),
        Filter("pad", _pad, NUMBER),
        Filter("hash", _hash, NUMBER),
        Filter("strip_prefix", _strip_prefix, TEXT),
        Filter("compact", _text(lambda t, _: re.sub(r"[^0-9A-Za-z]", "", t))),
        Filter("title", _title),
        Filter("basename", _text(lambda t, _: posixpath.basename(t.rstrip("/")))),
        Filter("words", lambda v, _, __: len(to_text(v).split())),
        Filter("json", lambda v, _, __: json.dumps(v, sort_keys=True, ensure_ascii=False)),
        Filter("count", _count),
        Filter("first", _first),
        Filter("last", _last),
        Filter("field", _field, FIELD),
        Filter("map", _map, FIELD),
        Filter("where", _where, PAIR),
        Filter("sort", _sort, FIELD),
        Filter("group", _group, FIELD),
        Filter("range", _range),
        Filter("default", _default, VALUE),
        Filter("is_empty", lambda v, _, __: is_empty(v)),
        Filter("is_present", lambda v, _, __: not is_empty(v)),
        Filter("join", _join, OPTIONAL_TEXT),
        Filter("lines", _lines),
        Filter("numbered", _numbered),
        Filter("names", _names),
        Filter("ids", _ids),
    )
}
_COMPACT = re.compile(r"^([a-z_]+?)(\d+)$")


def resolve_name(name: str, arg: str | None) -> tuple[str, str | None]:
    """The seed's ``truncate50`` is ``truncate:50``: a numeric filter's name with its number glued on."""
    if name not in FILTERS and arg is None:
        match = _COMPACT.match(name)
        if match and match.group(1) in FILTERS and FILTERS[match.group(1)].argument == NUMBER:
            return match.group(1), match.group(2)
    return name, arg


def problem(name: str, arg: str | None) -> str | None:
    """What is wrong with ``name:arg`` before it ever runs, or None."""
    name, arg = resolve_name(name, arg)
    spec = FILTERS.get(name)
    if spec is None:
        return f"unknown filter {name!r} (known: {', '.join(sorted(FILTERS))})"
    try:
        parse_argument(spec.argument, arg)
    except ValueError as exc:
        return f"filter {name!r} {exc}"
    return None


def argument_name(name: str, arg: str | None) -> str | None:
    """The name a filter argument refers to (``default:other_answer``), or None."""
    name, arg = resolve_name(name, arg)
    spec = FILTERS.get(name)
    if spec is None or spec.argument != VALUE:
        return None
    try:
        return parse_argument(VALUE, arg).name
    except ValueError:
        return None


def apply(name: str, arg: str | None, value: Any, resolve: Resolve) -> Any:
    """Run one filter; ``LookupError`` for an unknown one, ``ValueError``/``TypeError`` for a bad value."""
    name, arg = resolve_name(name, arg)
    spec = FILTERS.get(name)
    if spec is None:
        raise LookupError(f"unknown filter {name!r}")
    return spec.apply(value, parse_argument(spec.argument, arg), resolve)
