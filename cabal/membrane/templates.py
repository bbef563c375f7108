"""Templates and conditions: ``{a.b.0|slugify}`` interpolation and a safe ``condition:`` evaluator.

Both read the same scope: the step's locals (``item``, ``index`` inside ``for_each``), then the
session context, then built-ins (``timestamp``). A reference to something that is not there is a
``TemplateError``, never an empty string: an id built from a missing value must not be written.
One exception keeps that rule honest rather than brittle: a name the protocol itself provides
(an ask step's answer, a query's results) on a path this session did not take reads as "no
answer" (None), exactly like an optional question left unanswered (``Scope.absent``).

A value the session does not know yet (an answer still to come in a form, or one that was
rejected) is the ``PENDING`` marker; touching it raises ``Unresolved``, which tells the walker
"the path depends on an answer you do not have": it stops there instead of guessing.

Filters (``filters``) receive the value itself, so ``{items|count}`` is a number and a template
that is one reference, filtered or not, keeps its value's type.

Conditions are parsed with ``ast`` and evaluated by walking the tree; only comparisons,
and/or/not, ``in``, literals, names, attribute and index access and ``len()`` are allowed, and
``{...}`` references (with filters) may stand wherever a value may, as the seed writes them:
``"{ask_todos}"``, ``"{validations|count} == 0"``, ``"{notes} is not empty"``.
Nothing is ever passed to ``eval``.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from cabal.errors import TemplateError
from cabal.membrane import filters
from cabal.membrane.filters import is_empty, slugify, to_text

__all__ = [
    "PENDING", "ConditionSyntaxError", "Ref", "Scope", "Template", "Unresolved", "check", "compile_condition",
    "evaluate", "interpolate", "parse", "references", "slugify", "to_text",
]  # fmt: skip


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


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Instant:
    """One moment in time, read on first use and the same ever after (formatting it costs)."""

    __slots__ = ("_value",)

    def __init__(self) -> None:
        self._value: str | None = None

    def __call__(self) -> str:
        if self._value is None:
            self._value = _now()
        return self._value


class Scope:
    """Where names resolve: locals (for_each item), then the context, then built-ins.

    ``absent``: names the protocol provides somewhere, which read as None where this session's
    path did not provide them. ``now``: the time ``{timestamp}`` reads, pinned by the walker so
    every template of one call sees the same instant (an id and the link to it cannot straddle
    a second).
    """

    __slots__ = ("absent", "context", "locals", "now")

    def __init__(
        self,
        context: Mapping[str, Any],
        locals: Mapping[str, Any] | None = None,
        *,
        absent: frozenset[str] = frozenset(),
        now: Callable[[], str] | None = None,
    ) -> None:
        self.context = context
        self.locals = locals or {}
        self.absent = absent
        self.now = now

    def with_locals(self, **values: Any) -> Scope:
        return Scope(self.context, {**self.locals, **values}, absent=self.absent, now=self.now)

    def lookup(self, name: str, template: str) -> Any:
        if name in self.locals:
            return self.locals[name]
        if name in self.context:
            return self.context[name]
        if name == "timestamp":  # a context value of that name wins: a caller can pin the time
            return self.now() if self.now is not None else _now()
        if name in self.absent:
            return None
        raise TemplateError(template, name, "nothing by that name in the context")

    def knows(self, name: str) -> bool:
        return name in self.locals or name in self.context


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


# ---------------------------------------------------------------------------- templates

_PATH = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*)\s*$")
_FILTER = re.compile(r"\s*([A-Za-z_]\w*)\s*(?::\s*(.*?))?\s*$", re.S)


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
        if len(self.parts) == 1 and isinstance(self.parts[0], Ref):
            return self.parts[0]
        return None

    @property
    def refs(self) -> tuple[Ref, ...]:
        return tuple(part for part in self.parts if isinstance(part, Ref))


def _split_filters(text: str) -> list[str] | None:
    """``a | f:"x|y" | g`` -> ["a ", ' f:"x|y" ', " g"]; None if a quote is left open."""
    chunks: list[str] = []
    current: list[str] = []
    quote: str | None = None
    for char in text:
        if quote:
            current.append(char)
            if char == quote:
                quote = None
        elif char in "\"'" and chunks:  # quotes count inside filters (after the first |)
            quote = char
            current.append(char)
        elif char == "|":
            chunks.append("".join(current))
            current = []
        else:
            current.append(char)
    if quote:
        return None
    chunks.append("".join(current))
    return chunks


def _reference(inner: str, text: str) -> Ref | None:
    """The reference ``{inner}`` means, or None when it is not one (then it is literal text)."""
    chunks = _split_filters(inner)
    if chunks is None:
        return None
    path_match = _PATH.match(chunks[0])
    if path_match is None:
        return None
    found = []
    for chunk in chunks[1:]:
        match = _FILTER.match(chunk)
        if match is None:
            return None
        found.append((match.group(1), match.group(2) if match.group(2) is not None else None))
    path = tuple(int(s) if s.lstrip("-").isdigit() else s for s in path_match.group(1).split("."))
    return Ref(text, path, tuple(found))


def _closing(source: str, start: int) -> int:
    """The index of the ``}`` closing the reference opened just before ``start`` (-1 if none).

    Quotes count only inside filter arguments (after a ``|``), so an apostrophe in prose never
    hides a closing brace; a ``{`` before the close means this is not a reference.
    """
    quote = None
    filtered = False
    for index in range(start, len(source)):
        char = source[index]
        if quote:
            if char == quote:
                quote = None
        elif filtered and char in "\"'":
            quote = char
        elif char == "|":
            filtered = True
        elif char == "{":
            return -1
        elif char == "}":
            return index
    return -1


@lru_cache(maxsize=4096)
def parse(source: str) -> Template:
    parts: list[str | Ref] = []
    literal: list[str] = []
    index, length = 0, len(source)
    while index < length:
        char = source[index]
        if char in "{}" and source.startswith(char * 2, index):  # {{ and }} are literal braces
            literal.append(char)
            index += 2
            continue
        if char == "{":
            end = _closing(source, index + 1)
            ref = _reference(source[index + 1 : end], source[index : end + 1]) if end >= 0 else None
            if ref is not None:
                if literal:
                    parts.append("".join(literal))
                    literal = []
                parts.append(ref)
                index = end + 1
                continue
        literal.append(char)
        index += 1
    if literal:
        parts.append("".join(literal))
    return Template(source, tuple(parts))


def check(source: str) -> list[str]:
    """Problems a template has before it ever runs: unknown filters, bad filter arguments."""
    problems = []
    for ref in parse(source).refs:
        for name, arg in ref.filters:
            problem = filters.problem(name, arg)
            if problem is not None:
                problems.append(f"{problem}, in {ref.text}")
    return problems


def _value(ref: Ref, scope: Scope, source: str) -> Any:
    """A reference's value with its filters applied."""
    value = resolve(ref.path, scope, source)
    if not ref.filters:
        return value

    def by_name(name: str) -> Any:
        path = tuple(int(s) if s.lstrip("-").isdigit() else s for s in name.split("."))
        return resolve(path, scope, source)

    for name, arg in ref.filters:
        try:
            value = filters.apply(name, arg, value, by_name)
        except LookupError as exc:
            raise TemplateError(source, ref.text, str(exc).strip("'\"")) from None
        except (TypeError, ValueError) as exc:
            raise TemplateError(source, ref.text, f"filter {name!r}: {exc}") from None
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
        value = _value(single, scope, source)
        if nonempty and value in (None, ""):
            raise TemplateError(source, single.text, "is empty, and an id may not be")
        return value
    pieces = []
    for part in template.parts:
        if isinstance(part, str):
            pieces.append(part)
            continue
        text = to_text(_value(part, scope, source))
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


def reference_names(source: Any) -> list[tuple[str, Ref]]:
    """Every (first name, reference) a value's templates read, filter arguments that name
    another value (``default:other``) included."""
    found: list[tuple[str, Ref]] = []
    if isinstance(source, str):
        for ref in parse(source).refs:
            found.append((str(ref.path[0]), ref))
            for name, arg in ref.filters:
                named = filters.argument_name(name, arg)
                if named is not None:
                    found.append((named.split(".")[0], ref))
    elif isinstance(source, Mapping):
        for value in source.values():
            found += reference_names(value)
    elif isinstance(source, (list, tuple)):
        for value in source:
            found += reference_names(value)
    return found


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
_SLOT = "__ref"  # {...} references become names __ref0, __ref1, ... before parsing


class ConditionSyntaxError(ValueError):
    """A condition uses syntax the evaluator does not allow."""


@dataclass(frozen=True)
class Condition:
    source: str
    tree: ast.Expression
    refs: tuple[Ref, ...]  # the {...} references, by slot number


def _slots(source: str) -> tuple[str, tuple[Ref, ...]]:
    """Replace each ``{...}`` reference outside string literals by a slot name."""
    pieces: list[str] = []
    refs: list[Ref] = []
    for index, chunk in enumerate(re.split(r"""("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')""", source)):
        if index % 2:  # a quoted literal: kept as written
            pieces.append(chunk)
            continue
        for part in parse(chunk).parts:
            if isinstance(part, Ref):
                pieces.append(f" {_SLOT}{len(refs)} ")
                refs.append(part)
            else:
                pieces.append(part)
    return "".join(pieces), tuple(refs)


@lru_cache(maxsize=1024)
def compile_condition(source: str) -> Condition:
    text, refs = _slots(source) if "{" in source else (source, ())
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ConditionSyntaxError(f"condition {source!r} is not a valid expression: {exc.msg}") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise ConditionSyntaxError(
                f"condition {source!r} uses {type(node).__name__}; allowed: comparisons, and/or/not, in, "
                "is [not] empty, literals, names, {references|filters}, a.b and a[0] access, len()"
            )
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id == "len" and len(node.args) == 1 and not node.keywords
        ):
            raise ConditionSyntaxError(f"condition {source!r}: the only call allowed is len(x)")
    for ref in refs:
        for name, arg in ref.filters:
            problem = filters.problem(name, arg)
            if problem is not None:
                raise ConditionSyntaxError(f"condition {source!r}: {problem}")
    return Condition(source, tree, refs)


def condition_names(source: str) -> list[str]:
    """The names a condition reads: bare names and the first name of each reference."""
    condition = compile_condition(source)
    names = [str(ref.path[0]) for ref in condition.refs]
    for ref in condition.refs:
        for name, arg in ref.filters:
            named = filters.argument_name(name, arg)
            if named is not None:
                names.append(named.split(".")[0])
    for node in ast.walk(condition.tree):
        if isinstance(node, ast.Name) and not node.id.startswith(_SLOT) and node.id not in _CONSTANT_NAMES:
            if node.id == "len" or (node.id == "empty"):
                continue
            names.append(node.id)
    return names


def evaluate(source: str, scope: Scope) -> Any:
    """The value of a condition in a scope (truthiness is the caller's business)."""
    condition = compile_condition(source)
    return _eval(condition.tree.body, scope, condition)


def _eval(node: ast.AST, scope: Scope, condition: Condition) -> Any:
    value = _eval_inner(node, scope, condition)
    if value is PENDING:
        raise Unresolved(ast.unparse(node))
    return value


def _eval_inner(node: ast.AST, scope: Scope, condition: Condition) -> Any:
    source = condition.source
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id.startswith(_SLOT):
            return _value(condition.refs[int(node.id[len(_SLOT):])], scope, source)
        if node.id in _CONSTANT_NAMES and not scope.knows(node.id):
            return _CONSTANT_NAMES[node.id]
        return scope.lookup(node.id, source)
    if isinstance(node, ast.BoolOp):
        is_and = isinstance(node.op, ast.And)
        result: Any = None
        for operand in node.values:
            result = _eval(operand, scope, condition)
            if bool(result) != is_and:
                return result
        return result
    if isinstance(node, ast.UnaryOp):
        operand = _eval(node.operand, scope, condition)
        return (not operand) if isinstance(node.op, ast.Not) else -operand
    if isinstance(node, ast.Compare):
        left = _eval(node.left, scope, condition)
        for op, right_node in zip(node.ops, node.comparators):
            if _is_emptiness(op, right_node, scope):  # ``x is empty`` / ``x is not empty``
                if is_empty(left) != isinstance(op, ast.Is):
                    return False
                continue
            right = _eval(right_node, scope, condition)
            try:
                if not _COMPARE[type(op)](left, right):
                    return False
            except TypeError as exc:
                raise TemplateError(source, ast.unparse(node), f"cannot compare: {exc}") from None
            left = right
        return True
    if isinstance(node, ast.Attribute):
        return _index(_eval(node.value, scope, condition), node.attr, node, source)
    if isinstance(node, ast.Subscript):
        return _index(_eval(node.value, scope, condition), _eval(node.slice, scope, condition), node, source)
    if isinstance(node, ast.Call):
        argument = _eval(node.args[0], scope, condition)
        if argument is None:  # len() of "no answer" is 0, as the seed's {list | count} is
            return 0
        try:
            return len(argument)
        except TypeError:
            raise TemplateError(source, ast.unparse(node), f"len() of a {type(argument).__name__}") from None
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_eval(element, scope, condition) for element in node.elts]
    raise ConditionSyntaxError(f"condition {source!r}: {type(node).__name__} is not allowed")  # pragma: no cover


def _is_emptiness(op: ast.cmpop, right: ast.AST, scope: Scope) -> bool:
    return isinstance(op, (ast.Is, ast.IsNot)) and isinstance(right, ast.Name) and right.id == "empty" and not scope.knows("empty")


def _index(container: Any, key: Any, node: ast.AST, source: str) -> Any:
    if isinstance(container, Mapping) and key in container:
        return container[key]
    if isinstance(container, (list, tuple)) and isinstance(key, int) and -len(container) <= key < len(container):
        return container[key]
    raise TemplateError(source, ast.unparse(node), "no such field or index")
