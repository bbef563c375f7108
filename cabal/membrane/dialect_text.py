"""The upstream dialect's templates and conditions, read as Cabal's (``templates``, ``filters``).

The dialect writes filters as calls (``truncate(30)``, ``strip_prefix('x')``, ``map(id)``), glues
numbers to names (``pad2``, ``hash6``), gives display formats names of their own (``list``,
``format_with_...``) and puts whole predicates in filters (``{list | contains name: 'x'}``).
``TextReader`` rewrites each reference and condition into the canonical syntax; a filter that
means nothing here is a located problem where a value is computed, and is shown as written in
text only an agent reads. See ``dialect`` for the whole list of constructs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from cabal.graph import schema

# {docs | has_all_doc_types}: the types of the seven documents the upstream doc chain creates.
DOC_CHAIN_TYPES = ("patterns", "behaviors", "algorithm", "validation_doc", "implementation_doc", "health_doc", "sync")
# Dialect filter -> canonical filter.
SIMPLE_FILTERS = {
    "slugify": "slugify", "count": "count", "upper": "upper", "lower": "lower", "first": "first",
    "last": "last", "to_json": "json", "is_present": "is_present", "is_empty": "is_empty", "id": "field:id",
    "clean_module_name": "slugify", "extract_title": "title", "basename": "basename", "count_words": "words",
    "format_numbered": "numbered", "format_names": "names", "format_ids": "ids",
}  # fmt: skip
CALL_FILTERS = {"truncate": "truncate", "strip_prefix": "strip_prefix", "default": "default", "join": "join",
                "map": "map", "filter": "where"}  # fmt: skip
COMPACT_FILTERS = {"pad": "pad", "hash": "hash", "truncate": "truncate"}
DISPLAY_FILTERS = ("list", "format_list", "summarize", "content_summary", "format", "list_with_ids",
                   "format_options", "format_markers")  # and every format_with_*  # fmt: skip
_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*$")


class TextReader:
    """Reads dialect texts as canonical templates. ``knowledge`` is the file's
    ``contextual_knowledge``; ``got`` the names that hold a ``get`` query's node (their link
    types read as ``.links.<type>``); ``fail(message, step=, field=, at=)`` reports a problem."""

    def __init__(self, knowledge: Mapping[str, Any], got: set[str], fail: Callable[..., None]) -> None:
        self.knowledge = knowledge
        self.got = got
        self.fail = fail

    def text(self, text: Any, step_id: str | None, field: str, at: Any, *, display: bool = False) -> Any:
        """A dialect template as a canonical one. ``display``: text only an agent reads."""
        if not isinstance(text, str):
            return text
        pieces, index = [], 0
        for start, end, inner in _tokens(text):
            pieces.append(text[index:start])
            pieces.append(self.reference(inner, text[start:end], step_id, field, at, display=display))
            index = end
        pieces.append(text[index:])
        return "".join(pieces)

    def reference(self, inner: str, token: str, step_id: str | None, field: str, at: Any, *, display: bool) -> str:
        parts = _split(inner)
        if " + " in inner and all(" + " not in p for p in parts[:1]):  # ``a | count_words + b | count_words``
            sums = _sums(inner)
            if sums is not None:
                return " + ".join(self.reference(s, "{" + s + "}", step_id, field, at, display=display) for s in sums)
        path = parts[0].strip()
        if not _PATH.match(path):
            return _escape(token)  # not a reference: literal text, as in the canonical format
        head, _, rest = path.partition(".")
        if head == "contextual_knowledge" and rest in self.knowledge and len(parts) == 1:
            return _escape(str(self.knowledge[rest]).strip())
        filters: list[str] = []
        if head == "timestamp_short":
            path = "timestamp" + (f".{rest}" if rest else "")
            filters += ["truncate:19", "compact"]  # the date and time digits of the ISO timestamp
        elif head == "loop_index":
            path = "position" + (f".{rest}" if rest else "")
        elif head in self.got and rest.split(".")[0] in schema.LINK_TYPES:
            path = f"{head}.links.{rest}"
        for chunk in parts[1:]:
            canonical = _filter(chunk.strip())
            if canonical is None:
                if display:
                    return _escape(token)  # shown as written: the agent reads what the author wrote
                self.fail(f"unknown filter {chunk.strip()!r} in {token}", step=step_id, field=field, at=at)
                return _escape(token)
            filters.append(canonical)
        return "{" + "|".join([path, *filters]) + "}"

    def condition(self, condition: str, step_id: str | None, field: str, at: Any) -> str:
        stripped = condition.strip()
        if stripped in ("ready", "true", "always"):
            return "true"
        whole = re.fullmatch(r"\{\s*([^{}|]+?)\s*\|\s*contains\s+(\w+)\s*:\s*(.+?)\s*\}", stripped)
        if whole:  # {list | contains name: 'x'}: some item's field equals x
            listed, field_name, wanted = whole.groups()
            unquoted = wanted[1:-1] if len(wanted) >= 2 and wanted[0] == wanted[-1] and wanted[0] in "'\"" else wanted
            needle = self.text(unquoted, step_id, field, at) if "{" in unquoted else repr(unquoted)
            return f"{needle} in {{{listed.strip()}|map:{field_name}}}"
        whole = re.fullmatch(r"\{\s*([^{}|]+?)\s*\|\s*has_all_doc_types\s*\}", stripped)
        if whole:
            types = f"{{{whole.group(1).strip()}|map:type}}"
            return " and ".join(f"'{kind}' in {types}" for kind in DOC_CHAIN_TYPES)
        return self.text(condition, step_id, field, at)


def braced(value: str) -> str:
    value = value.strip()
    return value if value.startswith("{") else "{" + value + "}"


def unbraced(value: str) -> str:
    value = value.strip()
    return value[1:-1].strip() if value.startswith("{") and value.endswith("}") else value


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _tokens(text: str) -> list[tuple[int, int, str]]:
    """(start, end, inner) of each ``{...}`` of a dialect text; quotes may hold braces."""
    found, index = [], 0
    while index < len(text):
        char = text[index]
        if char in "{}" and text.startswith(char * 2, index):
            index += 2
            continue
        if char != "{":
            index += 1
            continue
        depth, quote, end = 0, None, -1
        for cursor in range(index + 1, len(text)):
            c = text[cursor]
            if quote:
                if c == quote:
                    quote = None
            elif c in "\"'" and "|" in text[index:cursor]:
                quote = c
            elif c == "{":
                depth += 1
            elif c == "}":
                if depth == 0:
                    end = cursor
                    break
                depth -= 1
            elif c == "\n":
                break
        if end < 0:
            index += 1
            continue
        found.append((index, end + 1, text[index + 1 : end]))
        index = end + 1
    return found


def _split(inner: str) -> list[str]:
    """``a | f("x|y") | g`` -> ["a ", ' f("x|y") ', " g"]."""
    chunks, current, quote, depth = [], [], None, 0
    for char in inner:
        if quote:
            current.append(char)
            if char == quote:
                quote = None
        elif char in "\"'":
            quote = char
            current.append(char)
        elif char in "({":
            depth += 1
            current.append(char)
        elif char in ")}":
            depth -= 1
            current.append(char)
        elif char == "|" and depth == 0:
            chunks.append("".join(current))
            current = []
        else:
            current.append(char)
    chunks.append("".join(current))
    return chunks


def _sums(inner: str) -> list[str] | None:
    """``a | words + b | words`` -> ["a | words", "b | words"] (a sum written across filters)."""
    pieces = [piece.strip() for piece in inner.split(" + ")]
    return pieces if len(pieces) > 1 and all(_PATH.match(_split(p)[0].strip()) for p in pieces) else None


def _filter(chunk: str) -> str | None:
    """One dialect filter as a canonical one, or None."""
    if chunk in SIMPLE_FILTERS:
        return SIMPLE_FILTERS[chunk]
    if chunk in DISPLAY_FILTERS or chunk.startswith("format_with_") or re.fullmatch(r"list(\s+\w+)+", chunk):
        return "names" if chunk == "list names" else "lines"
    compact = re.fullmatch(r"([a-z_]+?)(\d+)", chunk)
    if compact and compact.group(1) in COMPACT_FILTERS:
        return f"{COMPACT_FILTERS[compact.group(1)]}:{compact.group(2)}"
    call = re.fullmatch(r"([a-z_]+)\s*\((.*)\)", chunk, re.S)
    if call and call.group(1) in CALL_FILTERS:
        name, argument = CALL_FILTERS[call.group(1)], call.group(2).strip()
        return f"{name}:{argument}" if argument else name
    colon = re.fullmatch(r"([a-z_]+)\s*:\s*(.+)", chunk, re.S)
    if colon and colon.group(1) in ("truncate", "default", "join", "strip_prefix", "map", "pad", "hash"):
        return f"{colon.group(1)}:{colon.group(2).strip()}"
    return None
