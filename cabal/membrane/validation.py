"""Answer validation and its JSON Schema, from ONE definition per ``expects`` type.

Each ``ExpectsType`` in ``TYPES`` lists the constraints it accepts (checked when a protocol
loads), builds the JSON Schema a model answers against (``form()``, the step's
``answer_schema``) and checks an answer (``submit()``, ``continue_session()``). Both read the
same constraint values, so the schema a model sees and the checks its answer meets cannot drift.

A check never stops at the first problem: it records every ``AnswerProblem`` (with a path into
the answer, ``versions.0.productId``) and returns the normalised value (``"yes"`` -> ``True``,
an entity -> its JSON dict).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ValidationError

from cabal.errors import AnswerProblem

NodeLookup = Callable[[list[str]], dict[str, dict]]
"""ids -> {id: node} for the ids that exist (graph plus nodes the session has prepared)."""


@dataclass(frozen=True)
class Expects:
    """What an answer must be. ``fields`` for an object of named answers, ``item`` for a list."""

    type: str
    constraints: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    fields: tuple[ExpectsField, ...] = ()
    item: Expects | None = None
    description: str | None = None

    def get(self, key: str, default: Any = None) -> Any:
        return self.constraints.get(key, default)

    def public(self) -> dict[str, Any]:
        """The expects as a protocol author wrote it (what an agent reads next to the question)."""
        shown: dict[str, Any] = {"type": self.type, **self.constraints}
        if self.fields:
            shown["fields"] = {f.name: f.expects.public() for f in self.fields}
        if self.item is not None:
            shown["item"] = self.item.public()
        return shown


_NO_DEFAULT = object()


@dataclass(frozen=True)
class ExpectsField:
    name: str
    expects: Expects
    required: bool = True
    description: str | None = None
    default: Any = _NO_DEFAULT  # taken when the field is not answered (a field with one is optional)


class Check:
    """Collects the problems of one answer; ``lookup`` reads nodes for id checks."""

    def __init__(self, lookup: NodeLookup) -> None:
        self.lookup = lookup
        self.problems: list[AnswerProblem] = []

    def fail(self, path: str, message: str) -> None:
        self.problems.append(AnswerProblem(path, message))


def _join(path: str, key: str | int) -> str:
    return f"{path}.{key}" if path else str(key)


def _shown(value: Any) -> str:
    """``got ...`` text: the type and a short repr, so a model sees what it actually sent."""
    if value is None:
        return "nothing (null)"
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


# ------------------------------------------------------------------------------ entities

_ENTITIES: dict[str, type[BaseModel]] = {}
_ENTITY_SCHEMAS: dict[type[BaseModel], dict] = {}


def register_entity(name: str, model: type[BaseModel]) -> None:
    """Make a pydantic model answerable as ``expects: {type: entity, entity: name}``."""
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"entity {name!r} must be a pydantic model class, got {model!r}")
    _ENTITIES[name] = model


def entity_model(name: str) -> type[BaseModel] | None:
    """A registered model, else the model of that name in ``cabal.entities``, else None."""
    if name in _ENTITIES:
        return _ENTITIES[name]
    try:
        from cabal import entities
    except Exception:  # noqa: BLE001 - a broken entities module means "not known", reported by the loader
        return None
    model = getattr(entities, name, None)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _entity_schema(model: type[BaseModel]) -> dict:
    if model not in _ENTITY_SCHEMAS:
        _ENTITY_SCHEMAS[model] = model.model_json_schema(by_alias=True)
    return _ENTITY_SCHEMAS[model]


def _model_of(expects: Expects) -> type[BaseModel]:
    model = entity_model(expects.get("entity"))
    if model is None:  # the loader refuses unknown entities; this is a registry changed at runtime
        raise LookupError(f"entity {expects.get('entity')!r} is not registered")
    return model


# ----------------------------------------------------------------------------- the types


@dataclass(frozen=True)
class ExpectsType:
    name: str
    constraints: Mapping[str, tuple[type, ...]]  # allowed constraint -> accepted YAML value types
    schema: Callable[[Expects], dict]
    check: Callable[[Expects, Any, Check, str], Any]
    required: tuple[str, ...] = ()


def _count_bounds(expects: Expects, schema: dict) -> dict:
    if expects.get("min") is not None:
        schema["minItems"] = expects.get("min")
    if expects.get("max") is not None:
        schema["maxItems"] = expects.get("max")
    return schema


def _check_count(expects: Expects, items: list, check: Check, path: str, noun: str) -> None:
    low, high = expects.get("min"), expects.get("max")
    if low is not None and len(items) < low:
        check.fail(path, f"expected at least {low} {noun}, got {len(items)}")
    if high is not None and len(items) > high:
        check.fail(path, f"expected at most {high} {noun}, got {len(items)}")


# string ------------------------------------------------------------------------------


def _string_schema(expects: Expects) -> dict:
    schema: dict[str, Any] = {"type": "string"}
    for key, name in (("min_length", "minLength"), ("max_length", "maxLength"), ("pattern", "pattern")):
        if expects.get(key) is not None:
            schema[name] = expects.get(key)
    return schema


def _check_string(expects: Expects, value: Any, check: Check, path: str) -> Any:
    if not isinstance(value, str):
        check.fail(path, f"expected text, got {_shown(value)}")
        return value
    low, high, pattern = expects.get("min_length"), expects.get("max_length"), expects.get("pattern")
    if low is not None and len(value) < low:
        check.fail(path, f"expected at least {low} characters, got {len(value)}")
    if high is not None and len(value) > high:
        check.fail(path, f"expected at most {high} characters, got {len(value)}")
    if pattern is not None and not re.search(pattern, value):
        check.fail(path, f"expected text matching the pattern {pattern!r}, got {value[:60]!r}")
    return value


# ids ---------------------------------------------------------------------------------


def _id_schema(expects: Expects) -> dict:
    kind = expects.get("node_type")
    schema: dict[str, Any] = {"type": "string", "description": f"id of an existing {kind or 'graph'} node"}
    if expects.get("one_of") is not None:
        schema["enum"] = list(expects.get("one_of"))
    return schema


def _check_node(expects: Expects, node_id: str, node: dict | None, check: Check, path: str) -> None:
    if node is None:
        check.fail(path, f"no node with id {node_id!r} in the graph")
        return
    one_of = expects.get("one_of")
    if one_of is not None and node_id not in one_of:
        listed = ", ".join(map(repr, one_of[:20])) or "none: the list is empty"
        check.fail(path, f"{node_id!r} is not one of the nodes to pick from ({listed})")
    kind = expects.get("node_type")
    if kind is not None and node.get("node_type") != kind:
        check.fail(path, f"expected a {kind} node, but {node_id!r} is a {node.get('node_type')}")
    for key, wanted in (expects.get("filter") or {}).items():
        have = node.get(key)
        if (have not in wanted) if isinstance(wanted, list) else (have != wanted):
            check.fail(path, f"node {node_id!r} has {key}={have!r}, expected {key}={wanted!r}")


def _check_id(expects: Expects, value: Any, check: Check, path: str) -> Any:
    if not isinstance(value, str) or not value:
        check.fail(path, f"expected a node id (text), got {_shown(value)}")
        return value
    _check_node(expects, value, check.lookup([value]).get(value), check, path)
    return value


def _id_list_schema(expects: Expects) -> dict:
    return _count_bounds(expects, {"type": "array", "items": _id_schema(expects)})


def _check_id_list(expects: Expects, value: Any, check: Check, path: str) -> Any:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        check.fail(path, f"expected a list of node ids, got {_shown(value)}")
        return value
    nodes = check.lookup(list(dict.fromkeys(value)))
    for index, node_id in enumerate(value):
        _check_node(expects, node_id, nodes.get(node_id), check, _join(path, index))
    _check_count(expects, value, check, path, "ids")
    return value


# lists, choices, numbers, booleans ---------------------------------------------------


def _string_list_schema(expects: Expects) -> dict:
    item: dict[str, Any] = {"type": "string"}
    if expects.get("min_length") is not None:
        item["minLength"] = expects.get("min_length")
    return _count_bounds(expects, {"type": "array", "items": item})


def _check_string_list(expects: Expects, value: Any, check: Check, path: str) -> Any:
    if not isinstance(value, list):
        check.fail(path, f"expected a list of texts, got {_shown(value)}")
        return value
    low = expects.get("min_length")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            check.fail(_join(path, index), f"expected text, got {_shown(item)}")
        elif low is not None and len(item) < low:
            check.fail(_join(path, index), f"expected at least {low} characters, got {len(item)}")
    _check_count(expects, value, check, path, "items")
    return value


def _enum_schema(expects: Expects) -> dict:
    options = list(expects.get("options"))
    if all(isinstance(o, str) for o in options):
        return {"type": "string", "enum": options}
    return {"enum": options}


def _check_enum(expects: Expects, value: Any, check: Check, path: str) -> Any:
    options = list(expects.get("options"))
    # 1 == True in Python; an option matches only a value of the same kind.
    if not any(value == o and isinstance(value, bool) == isinstance(o, bool) for o in options):
        check.fail(path, f"expected one of {options}, got {_shown(value)}")
    return value


def _number_schema(expects: Expects, kind: str = "number") -> dict:
    schema: dict[str, Any] = {"type": kind}
    if expects.get("min") is not None:
        schema["minimum"] = expects.get("min")
    if expects.get("max") is not None:
        schema["maximum"] = expects.get("max")
    return schema


def _as_number(value: Any, integer: bool) -> int | float | None:
    """The number an answer means ("3" and 3.0 count), or None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, int) or (isinstance(value, float) and not integer):
        return value
    return None


def _check_number(expects: Expects, value: Any, check: Check, path: str, *, integer: bool = False) -> Any:
    number = _as_number(value, integer)
    noun = "an integer" if integer else "a number"
    if number is None:
        check.fail(path, f"expected {noun}, got {_shown(value)}")
        return value
    low, high = expects.get("min"), expects.get("max")
    if low is not None and number < low:
        check.fail(path, f"expected {noun} of at least {low}, got {number}")
    if high is not None and number > high:
        check.fail(path, f"expected {noun} of at most {high}, got {number}")
    return number


_YES = {"yes": True, "true": True, "no": False, "false": False}


def _check_boolean(expects: Expects, value: Any, check: Check, path: str) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _YES:
        return _YES[value.strip().lower()]
    check.fail(path, f"expected yes/no or true/false, got {_shown(value)}")
    return value


# entities ----------------------------------------------------------------------------


def _check_entity(expects: Expects, value: Any, check: Check, path: str) -> Any:
    model = _model_of(expects)
    if isinstance(value, model):  # a caller that validated the answer already (the round engine)
        return value.model_dump(mode="json", by_alias=True)
    try:
        return model.model_validate(value).model_dump(mode="json", by_alias=True)
    except ValidationError as exc:
        check.problems += pydantic_problems(exc, path)
        return value


def pydantic_problems(error: ValidationError, path: str = "") -> list[AnswerProblem]:
    """A pydantic validation error as answer problems, each with its path into the answer and
    what was sent where it helps (a scalar; a whole object or list would only repeat the answer).

    The one formatter of model-validation problems: the membrane's entity checks and the round
    engine's step answers use it, so a model reads one style whichever refused its answer."""
    problems = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"])
        got = item.get("input")
        shown = "" if isinstance(got, (dict, list)) or got is None else f" (got {_shown(got)})"
        problems.append(AnswerProblem(_join(path, where) if where else path, item["msg"] + shown))
    return problems


def _entity_list_schema(expects: Expects) -> dict:
    return _count_bounds(expects, {"type": "array", "items": _entity_schema(_model_of(expects))})


def _check_entity_list(expects: Expects, value: Any, check: Check, path: str) -> Any:
    if not isinstance(value, list):
        check.fail(path, f"expected a list of {expects.get('entity')} objects, got {_shown(value)}")
        return value
    checked = [_check_entity(expects, item, check, _join(path, i)) for i, item in enumerate(value)]
    _check_count(expects, value, check, path, "items")
    return checked


# composites: objects of named answers, and a list of one answer per item -------------


def _object_schema(expects: Expects) -> dict:
    properties = {}
    for f in expects.fields:
        properties[f.name] = schema_of(f.expects, f.description)
        if f.default is not _NO_DEFAULT:
            properties[f.name]["default"] = f.default
    required = [f.name for f in expects.fields if f.required]
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def _check_object(expects: Expects, value: Any, check: Check, path: str) -> Any:
    names = [f.name for f in expects.fields]
    if not isinstance(value, Mapping):
        check.fail(path, f"expected an object with the fields {names}, got {_shown(value)}")
        return value
    result: dict[str, Any] = {}
    for f in expects.fields:
        if value.get(f.name) is None:
            if f.required:
                check.fail(_join(path, f.name), f"an answer is required ({describe(f.expects)})")
            result[f.name] = None if f.default is _NO_DEFAULT else f.default
            continue
        result[f.name] = validate_into(f.expects, value[f.name], check, _join(path, f.name))
    for extra in sorted(set(value) - set(names)):
        check.fail(_join(path, extra), f"unexpected field; expected only {names}")
    return result


def _list_schema(expects: Expects) -> dict:
    count = expects.get("count")
    schema = {"type": "array", "items": schema_of(_item(expects)), "minItems": count, "maxItems": count}
    return schema


def _check_list(expects: Expects, value: Any, check: Check, path: str) -> Any:
    count = expects.get("count")
    if not isinstance(value, list) or len(value) != count:
        shown = f"{len(value)} answers" if isinstance(value, list) else _shown(value)
        check.fail(path, f"expected a list of {count} answers, one per item, got {shown}")
        return value
    return [validate_into(_item(expects), item, check, _join(path, i)) for i, item in enumerate(value)]


def _item(expects: Expects) -> Expects:
    """What each answer of a list is (``list_of`` always says)."""
    assert expects.item is not None, f"a {expects.type} expects without its item"
    return expects.item


_COUNT = (int,)
_TEXT = (str,)

TYPES: dict[str, ExpectsType] = {
    t.name: t
    for t in (
        ExpectsType("string", {"min_length": _COUNT, "max_length": _COUNT, "pattern": _TEXT}, _string_schema, _check_string),
        ExpectsType("id", {"node_type": _TEXT, "filter": (dict,), "from": _TEXT}, _id_schema, _check_id),
        ExpectsType(
            "id_list",
            {"node_type": _TEXT, "filter": (dict,), "min": _COUNT, "max": _COUNT, "from": _TEXT},
            _id_list_schema,
            _check_id_list,
        ),
        ExpectsType(
            "string_list", {"min": _COUNT, "max": _COUNT, "min_length": _COUNT}, _string_list_schema, _check_string_list
        ),
        ExpectsType("enum", {"options": (list,)}, _enum_schema, _check_enum, required=("options",)),
        ExpectsType("number", {"min": (int, float), "max": (int, float)}, _number_schema, _check_number),
        ExpectsType(
            "integer",
            {"min": _COUNT, "max": _COUNT},
            lambda e: _number_schema(e, "integer"),
            lambda e, v, c, p: _check_number(e, v, c, p, integer=True),
        ),
        ExpectsType("boolean", {}, lambda e: {"type": "boolean"}, _check_boolean),
        ExpectsType("entity", {"entity": _TEXT}, lambda e: _entity_schema(_model_of(e)), _check_entity, required=("entity",)),
        ExpectsType(
            "entity_list",
            {"entity": _TEXT, "min": _COUNT, "max": _COUNT},
            _entity_list_schema,
            _check_entity_list,
            required=("entity",),
        ),
    )
}
# Built by the loader and the walker, never written in YAML: the answers of a ``questions:``
# step, the moment envelope, and one answer per ``for_each`` item.
COMPOSITES: dict[str, ExpectsType] = {
    "object": ExpectsType("object", {}, _object_schema, _check_object),
    "list": ExpectsType("list", {"count": _COUNT}, _list_schema, _check_list),
}


def _type(expects: Expects) -> ExpectsType:
    return TYPES.get(expects.type) or COMPOSITES[expects.type]


# ---------------------------------------------------------------------------- public


def schema_of(expects: Expects, description: str | None = None) -> dict:
    """The JSON Schema of an answer (nested entity ``$defs`` stay put; see ``hoist_defs``)."""
    schema = dict(_type(expects).schema(expects))
    text = " ".join(t for t in (description, expects.description, schema.get("description")) if t)
    if text:
        schema["description"] = text
    return schema


def validate_into(expects: Expects, value: Any, check: Check, path: str = "") -> Any:
    """Check ``value`` against ``expects``, recording problems in ``check``; the normalised value."""
    return _type(expects).check(expects, value, check, path)


def validate(expects: Expects, value: Any, lookup: NodeLookup, path: str = "") -> tuple[Any, list[AnswerProblem]]:
    check = Check(lookup)
    normalised = validate_into(expects, value, check, path)
    return normalised, check.problems


def describe(expects: Expects) -> str:
    """A few words on what is expected, for messages about missing answers."""
    constraints = ", ".join(f"{k}={v!r}" for k, v in expects.constraints.items() if k not in ("count", "one_of"))
    return expects.type + (f" ({constraints})" if constraints else "")


def hoist_defs(schema: dict) -> dict:
    """Move every nested ``$defs`` to the top, where ``#/$defs/...`` references resolve."""
    defs: dict[str, Any] = {}

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            defs.update({k: walk(v) for k, v in node.get("$defs", {}).items()})
            return {k: walk(v) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    result = walk(schema)
    if defs:
        result["$defs"] = defs
    return result


def parse_expects(raw: Any) -> tuple[Expects | None, list[tuple[str, str]]]:
    """Build an ``Expects`` from YAML; problems come back as (field, message) pairs."""
    if isinstance(raw, str):  # shorthand: ``expects: string``
        raw = {"type": raw}
    if not isinstance(raw, Mapping):
        return None, [("expects", f"must be a mapping with a 'type', got {_shown(raw)}")]
    kind = raw.get("type")
    if kind not in TYPES:
        return None, [("expects.type", f"unknown expects type {kind!r}; known: {', '.join(TYPES)}")]
    spec = TYPES[kind]
    problems = []
    constraints: dict[str, Any] = {}
    for key, value in raw.items():
        if key in ("type", "description"):
            continue
        if key not in spec.constraints:
            allowed = ", ".join(spec.constraints) or "none"
            problems.append((f"expects.{key}", f"{kind} does not take {key!r} (it takes: {allowed})"))
        elif isinstance(value, bool) or not isinstance(value, spec.constraints[key]):
            wanted = " or ".join(t.__name__ for t in spec.constraints[key])
            problems.append((f"expects.{key}", f"must be {wanted}, got {_shown(value)}"))
        else:
            constraints[key] = value
    for key in spec.required:
        if key not in raw:
            problems.append((f"expects.{key}", f"{kind} needs {key!r}"))
    if "pattern" in constraints:
        try:
            re.compile(constraints["pattern"])
        except re.error as exc:
            problems.append(("expects.pattern", f"not a valid regular expression: {exc}"))
    if "entity" in constraints and entity_model(constraints["entity"]) is None:
        problems.append(("expects.entity", f"no entity model named {constraints['entity']!r}"))
    description = raw.get("description") if isinstance(raw.get("description"), str) else None
    return Expects(kind, MappingProxyType(constraints), description=description), problems


def has_from(expects: Expects) -> bool:
    """Whether an answer picks from a list in the context (``from:``), anywhere inside."""
    return (
        expects.get("from") is not None
        or any(has_from(f.expects) for f in expects.fields)
        or (expects.item is not None and has_from(expects.item))
    )


def with_choices(expects: Expects, ids_of: Callable[[str], list[str] | None]) -> Expects:
    """The expects with each ``from:`` template read into the ids to pick from (``one_of``).

    ``ids_of`` turns the template into ids, or None when the list is not known yet (the
    constraint then stays as written and nothing is enforced until it is).
    """
    if not has_from(expects):
        return expects
    constraints = dict(expects.constraints)
    if expects.get("from") is not None:
        ids = ids_of(expects.get("from"))
        if ids is not None:
            constraints["one_of"] = ids
    fields = tuple(
        ExpectsField(f.name, with_choices(f.expects, ids_of), f.required, f.description, f.default) for f in expects.fields
    )
    item = with_choices(expects.item, ids_of) if expects.item is not None else None
    return Expects(expects.type, MappingProxyType(constraints), fields, item, expects.description)


def object_of(fields: list[ExpectsField]) -> Expects:
    return Expects("object", fields=tuple(fields))


def list_of(item: Expects, count: int) -> Expects:
    return Expects("list", MappingProxyType({"count": count}), item=item)
