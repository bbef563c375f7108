"""Templates and conditions: ``{a.b.0|slugify}`` interpolation and a safe ``condition:`` evaluator.

Both read the same scope: the step's locals (``item``, ``index`` inside ``for_each``), then the
session context, then built-ins (``timestamp``). A reference to something that is not there is a
``TemplateError``, never an empty string: an id built from a missing value must not be written.

A value the session does not know yet (an answer still to come in a form, or one that was
rejected) is the ``PENDING`` marker; touching it raises ``Unresolved``, which tells the walker
"the path depends on an answer you do not have": it stops there instead of guessing.

Conditions are parsed with ``ast`` and evaluated by walking the tree; only comparisons,
and/or/not, ``in``, literals, names, attribute and index access and ``len()`` are allowed.
Nothing is ever passed to ``eval``.
"""

from __future__ import annotations

import ast
import json
import operator
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from cabal.errors import TemplateError


class _Pending:
    """The value of an answer the session does not have yet."""

    _instance: _Pending | None = None

    def __new__(cls) -> _Pending:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "PENDING"


PENDING = _Pending()


class Unresolved(Exception):
    """Control flow, not an error: a template or condition needs an answer not given yet."""

    def __init__(self, reference: str) -> None:
        super().__init__(reference)
        self.reference = reference


# ------------------------------------------------------------------------------- scope


class Scope:
    """Where names resolve: locals (for_each item), then the context, then built-ins."""

    __slots__ = ("context", "locals")

    def __init__(self, context: Mapping[str, Any], locals: Mapping[str, Any] | None = None) -> None:
        self.context = context
        self.locals = locals or {}

    def with_locals(self, **values: Any) -> Scope:
        return Scope(self.context, {**self.locals, **values})

    def lookup(self, name: str, template: str) -> Any:
        if name in self.locals:
            return self.locals[name]
        if name in self.context:
            return self.context[name]
        if name in BUILTINS:
            return BUILTINS[name]()
        raise TemplateError(template, name, "nothing by that name in the context")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# A context value of the same name wins, so a caller can pin the time for replays.
BUILTINS: dict[str, Callable[[], Any]] = {"timestamp": _now}


def resolve(path: tuple[str | int, ...], scope: Scope, template: str) -> Any:
    """Follow ``a.b.0.c`` through dicts and lists; a missing step is a TemplateError."""
    value = scope.lookup(str(path[0]), template)
    key = str(path[0])
    for segment in path[1:]:
        if value is PENDING:
            raise Unresolved(key)
        key = f"{key}.{segment}"
        if isinstance(value, Mapping):
            if str(segment) not in value:
                raise TemplateError(template, key, "no such field")
            value = value[str(segment)]
        elif isinstance(value, (list, tuple)) and isinstance(segment, int):
            if not -len(value) <= segment < len(value):
                raise TemplateError(template, key, f"index out of range (the list has {len(value)} items)")
            value = value[segment]
        else:
            raise TemplateError(template, key, f"cannot look inside a {type(value).__name__}")
    if value is PENDING:
        raise Unresolved(key)
    return value


# ------------------------------------------------------------------------------ filters


def slugify(text: str) -> str:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")


def _truncate(text: str, arg: str | None) -> str:
    return text[: int(arg or 0)]


FILTERS: dict[str, Callable[[str, str | None], str]] = {
    "slugify": lambda text, _: slugify(text),
    "lower": lambda text, _: text.lower(),
    "upper": lambda text, _: text.upper(),
    "truncate": _truncate,
}
FILTER_ARGS = {"truncate": re.compile(r"^\d+$")}  # filters that need an argument, and its form


def to_text(value: Any) -> str:
    """How a value reads inside a larger string: JSON for structures, true/false for booleans."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return str(value)


# ---------------------------------------------------------------------------- templates

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_TOKEN = re.compile(
    r"\{\{|\}\}|\{\s*(" + _NAME + r"(?:\.[A-Za-z0-9_-]+)*)\s*((?:\|\s*[A-Za-z_]\w*\s*(?::\s*[^|{}]*?)?\s*)*)\}"
)


@dataclass(frozen=True)
class Ref:
    text: str
    path: tuple[str | int, ...]
    filters: tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class Template:
    source: str
    parts: tuple[str | Ref, ...]

    @property
    def single(self) -> Ref | None:
        """The one reference, when the template is nothing else (it keeps the value's type)."""
        if len(self.parts) == 1 and isinstance(self.parts[0], Ref) and not self.parts[0].filters:
            return self.parts[0]
        return None

    @property
    def refs(self) -> tuple[Ref, ...]:
        return tuple(part for part in self.parts if isinstance(part, Ref))


def _parse_filters(text: str) -> tuple[tuple[str, str | None], ...]:
    filters = []
    for chunk in text.split("|")[1:]:
        name, _, arg = chunk.partition(":")
        filters.append((name.strip(), arg.strip() if _ else None))
    return tuple(filters)


@lru_cache(maxsize=4096)
def parse(source: str) -> Template:
    parts: list[str | Ref] = []
    literal = []
    position = 0
    for match in _TOKEN.finditer(source):
        literal.append(source[position : match.start()])
        position = match.end()
        token = match.group(0)
        if token in ("{{", "}}"):
            literal.append(token[0])
            continue
        if "".join(literal):
            parts.append("".join(literal))
        literal = []
        path = tuple(int(s) if s.lstrip("-").isdigit() else s for s in match.group(1).split("."))
        parts.append(Ref(token, path, _parse_filters(match.group(2) or "")))
    literal.append(source[position:])
    if "".join(literal):
        parts.append("".join(literal))
    return Template(source, tuple(parts))


def check(source: str) -> list[str]:
    """Problems a template has before it ever runs: unknown filters, bad filter arguments."""
    problems = []
    for ref in parse(source).refs:
        for name, arg in ref.filters:
            if name not in FILTERS:
                problems.append(f"unknown filter {name!r} in {ref.text} (known: {', '.join(sorted(FILTERS))})")
            elif name in FILTER_ARGS and (arg is None or not FILTER_ARGS[name].match(arg)):
                problems.append(f"filter {name!r} in {ref.text} needs a number, as in {name}:40")
    return problems


def _apply(ref: Ref, value: Any, source: str) -> Any:
    for name, arg in ref.filters:
        if name not in FILTERS:
            raise TemplateError(source, name, "unknown filter")
        value = FILTERS[name](to_text(value), arg)
    return value


def interpolate(source: Any, scope: Scope, *, nonempty: bool = False) -> Any:
    """Fill a template. ``{ref}`` alone keeps the value's own type; anything else is text.

    ``nonempty`` (for ids) also refuses a reference that resolves to None or "".
    Non-string values pass through unchanged; lists and dicts are filled item by item.
    """
    if isinstance(source, dict):
        return {key: interpolate(value, scope, nonempty=nonempty) for key, value in source.items()}
    if isinstance(source, (list, tuple)):
        return [interpolate(value, scope, nonempty=nonempty) for value in source]
    if not isinstance(source, str):
        return source
    template = parse(source)
    single = template.single
    if single is not None:
        value = resolve(single.path, scope, source)
        if nonempty and value in (None, ""):
            raise TemplateError(source, single.text, "is empty, and an id may not be")
        return value
    pieces = []
    for part in template.parts:
        if isinstance(part, str):
            pieces.append(part)
            continue
        text = to_text(_apply(part, resolve(part.path, scope, source), source))
        if nonempty and not text:
            raise TemplateError(source, part.text, "is empty, and an id may not be")
        pieces.append(text)
    return "".join(pieces)


def references(source: Any) -> bool:
    """Whether a value holds any template reference at all (static strings need no scope)."""
    if isinstance(source, str):
        return bool(parse(source).refs)
    if isinstance(source, dict):
        return any(references(v) for v in source.values())
    if isinstance(source, (list, tuple)):
        return any(references(v) for v in source)
    return False


# --------------------------------------------------------------------------- conditions

_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
_CONSTANT_NAMES = {"true": True, "false": False, "null": None, "none": None}
_ALLOWED = (
    ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.Compare,
    ast.Constant, ast.Name, ast.Load, ast.Attribute, ast.Subscript, ast.Call, ast.List, ast.Tuple,
    *_COMPARE,
)  # fmt: skip


class ConditionSyntaxError(ValueError):
    """A condition uses syntax the evaluator does not allow."""


@lru_cache(maxsize=1024)
def compile_condition(source: str) -> ast.Expression:
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        raise ConditionSyntaxError(f"condition {source!r} is not a valid expression: {exc.msg}") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise ConditionSyntaxError(
                f"condition {source!r} uses {type(node).__name__}; allowed: comparisons, and/or/not, in, "
                "literals, names, a.b and a[0] access, len()"
            )
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id == "len" and len(node.args) == 1 and not node.keywords
        ):
            raise ConditionSyntaxError(f"condition {source!r}: the only call allowed is len(x)")
    return tree


def evaluate(source: str, scope: Scope) -> Any:
    """The value of a condition in a scope (truthiness is the caller's business)."""
    return _eval(compile_condition(source).body, scope, source)


def _eval(node: ast.AST, scope: Scope, source: str) -> Any:
    value = _eval_inner(node, scope, source)
    if value is PENDING:
        raise Unresolved(ast.unparse(node))
    return value


def _eval_inner(node: ast.AST, scope: Scope, source: str) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in _CONSTANT_NAMES and node.id not in scope.context and node.id not in scope.locals:
            return _CONSTANT_NAMES[node.id]
        return scope.lookup(node.id, source)
    if isinstance(node, ast.BoolOp):
        is_and = isinstance(node.op, ast.And)
        result: Any = None
        for operand in node.values:
            result = _eval(operand, scope, source)
            if bool(result) != is_and:
                return result
        return result
    if isinstance(node, ast.UnaryOp):
        operand = _eval(node.operand, scope, source)
        return (not operand) if isinstance(node.op, ast.Not) else -operand
    if isinstance(node, ast.Compare):
        left = _eval(node.left, scope, source)
        for op, right_node in zip(node.ops, node.comparators):
            right = _eval(right_node, scope, source)
            try:
                if not _COMPARE[type(op)](left, right):
                    return False
            except TypeError as exc:
                raise TemplateError(source, ast.unparse(node), f"cannot compare: {exc}") from None
            left = right
        return True
    if isinstance(node, ast.Attribute):
        return _index(_eval(node.value, scope, source), node.attr, node, source)
    if isinstance(node, ast.Subscript):
        return _index(_eval(node.value, scope, source), _eval(node.slice, scope, source), node, source)
    if isinstance(node, ast.Call):
        argument = _eval(node.args[0], scope, source)
        try:
            return len(argument)
        except TypeError:
            raise TemplateError(source, ast.unparse(node), f"len() of a {type(argument).__name__}") from None
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_eval(element, scope, source) for element in node.elts]
    raise ConditionSyntaxError(f"condition {source!r}: {type(node).__name__} is not allowed")  # pragma: no cover


def _index(container: Any, key: Any, node: ast.AST, source: str) -> Any:
    if isinstance(container, Mapping) and key in container:
        return container[key]
    if isinstance(container, (list, tuple)) and isinstance(key, int) and -len(container) <= key < len(container):
        return container[key]
    raise TemplateError(source, ast.unparse(node), "no such field or index")
