"""Query steps: the query language of membrane-patterns.md, parsed once, run through ContextGraph.

A query is a mapping with exactly one verb (``find``, ``links_from``, ``links_to``,
``related_to``, ``contents_of``, ``or_search``, ``preset``, ``get``, ``schema``) and that verb's
modifiers. ``find`` also takes ``about`` (nodes with an ``about`` link to that id, such as the
moments about a space) and ``order_by`` (a field; ``-field`` for newest or largest first).
``get`` reads one node (a mapping, or None), with ``links: true`` its outgoing links by type
(``{node.links.about}``); ``schema`` reads the graph's schema (``node_types``, ``link_types``
or one node type), so a protocol can show an agent what it may create. The
earlier membrane format is accepted too: ``preset: all_spaces`` on the step itself, and a
Cypher string as ``query:`` (read-only: ``ContextGraph.read_cypher`` runs it on a read-only
path, and ``$name`` parameters come from the context).

Static parts (node types, link types, presets, directions) are checked when the protocol loads;
templated parts are filled from the context when the step runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from cabal.errors import TemplateError
from cabal.graph import schema
from cabal.graph.reads import DIRECTIONS, MAX_DEPTH, PRESETS, writing_clause
from cabal.membrane.templates import Scope, interpolate, references

# verb -> modifiers it takes. The verb's own value lands under the first modifier's name.
VERBS: dict[str, tuple[str, ...]] = {
    "find": ("node_type", "where", "in_space", "limit", "about", "order_by"),
    "links_from": ("id", "type"),
    "links_to": ("id", "type"),
    "related_to": ("id", "via", "direction", "depth"),
    "contents_of": ("id", "node_type", "depth"),
    "or_search": ("text", "limit"),
    "preset": ("name",),
    "get": ("id", "links"),
    "schema": ("name",),
    "cypher": ("text", "params"),
}
SCHEMA_NAMES = ("node_types", "link_types")  # and any node type's name

_PARAMETER = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True)
class QuerySpec:
    verb: str
    args: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


def parse_query(raw: Any) -> tuple[QuerySpec | None, list[tuple[str, str]]]:
    """A query from YAML; problems come back as (field, message) pairs."""
    if isinstance(raw, str):
        return QuerySpec("cypher", MappingProxyType({"text": raw})), _static_problems("cypher", {"text": raw})
    if not isinstance(raw, Mapping):
        return None, [("query", f"must be a mapping (find, links_from, ...) or a Cypher string, got {raw!r}")]
    verbs = [key for key in raw if key in VERBS]
    if len(verbs) != 1:
        found = ", ".join(verbs) or "none"
        return None, [("query", f"needs exactly one of {', '.join(VERBS)} (found: {found})")]
    verb = verbs[0]
    names = VERBS[verb]
    args = {names[0]: raw[verb]}
    problems = []
    for key, value in raw.items():
        if key == verb:
            continue
        if key not in names[1:]:
            problems.append((f"query.{key}", f"{verb} does not take {key!r} (it takes: {', '.join(names[1:]) or 'nothing'})"))
        else:
            args[key] = value
    problems += _static_problems(verb, args)
    return QuerySpec(verb, MappingProxyType(args)), problems


def _static_problems(verb: str, args: dict[str, Any]) -> list[tuple[str, str]]:
    """What can be checked before any context exists: names the schema must know."""
    problems = []

    def known(key: str, table: Mapping[str, Any], what: str) -> None:
        values = args.get(key)
        for value in values if isinstance(values, list) else [values]:
            if value is None or references(value):
                continue
            if not isinstance(value, str) or value not in table:
                problems.append((f"query.{key}", f"unknown {what} {value!r}; known: {', '.join(sorted(table))}"))

    if verb in ("find", "contents_of"):
        known("node_type", schema.NODE_TYPES, "node type")
    if verb in ("links_from", "links_to"):
        known("type", schema.LINK_TYPES, "link type")
    if verb == "related_to":
        known("via", schema.LINK_TYPES, "link type")
        if args.get("direction") is not None and not references(args["direction"]):
            if args["direction"] not in DIRECTIONS:
                problems.append(("query.direction", f"must be one of {', '.join(DIRECTIONS)}, got {args['direction']!r}"))
    if verb == "preset":
        known("name", PRESETS, "preset")
    if verb == "schema":
        known("name", {**dict.fromkeys(SCHEMA_NAMES), **schema.NODE_TYPES}, "schema entry")
    if verb == "get" and not isinstance(args.get("links", False), bool):
        problems.append(("query.links", f"must be true or false, got {args['links']!r}"))
    order = args.get("order_by")
    if order is not None and not (isinstance(order, str) and schema.FIELD_NAME.match(order.lstrip("-"))):
        problems.append(("query.order_by", f"must be a field name (-field for descending), got {order!r}"))
    for key, low, high in (("depth", 1, MAX_DEPTH), ("limit", 0, None)):
        value = args.get(key)
        if value is None or references(value):
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < low or (high and value > high):
            span = f"from {low} to {high}" if high else f"of at least {low}"
            problems.append((f"query.{key}", f"must be an integer {span}, got {value!r}"))
    if verb == "find" and not isinstance(args.get("where"), (Mapping, type(None))):
        problems.append(("query.where", "must be a mapping of field: value"))
    if verb == "cypher" and not isinstance(args.get("params", {}), Mapping):
        problems.append(("query.params", "must be a mapping of name: value"))
    writing = writing_clause(args["text"]) if verb == "cypher" and isinstance(args.get("text"), str) else None
    if writing:  # the rule read_cypher applies when the query runs
        problems.append(("query", f"a query may only read, and this one could write ({writing}); "
                                  "a protocol writes with create and update steps"))
    return problems


def matches(node: Mapping[str, Any], where: Mapping[str, Any] | None) -> bool:
    """Equal fields, a list value meaning "one of" (what ``find``'s Cypher does)."""
    for key, wanted in (where or {}).items():
        have = node.get(key)
        if (have not in wanted) if isinstance(wanted, (list, tuple)) else (have != wanted):
            return False
    return True


def ordered(nodes: list[dict], order_by: str | None, limit: int | None) -> list[dict]:
    """Nodes by id, or by ``order_by`` (ties and nodes without the field by id), then the limit."""
    nodes = sorted(nodes, key=lambda node: str(node.get("id")))
    if order_by:
        field, descending = order_by.lstrip("-"), order_by.startswith("-")
        present = [n for n in nodes if n.get(field) is not None]
        missing = [n for n in nodes if n.get(field) is None]
        present.sort(key=lambda node: node[field] if isinstance(node[field], (int, float)) else str(node[field]),
                     reverse=descending)  # fmt: skip
        nodes = present + missing
    return nodes if limit is None else nodes[:limit]


def run_query(spec: QuerySpec, scope: Scope, graph: Any) -> Any:
    """Fill the spec from the scope and run it; rows are plain dicts (nodes or links).

    ``get`` returns one node (or None) rather than a list.
    """
    if spec.verb == "cypher":
        return graph.read_cypher(spec.args["text"], _cypher_params(spec, scope))
    args = {key: interpolate(value, scope) for key, value in spec.args.items()}
    if spec.verb == "find":
        if args.get("about") is None and args.get("order_by") is None:
            return graph.find(args["node_type"], args.get("where"), args.get("in_space"), args.get("limit"))
        return _find_more(args, graph)
    if spec.verb == "get":
        return _get(args, graph)
    if spec.verb == "schema":
        return schema_entries(args["name"])
    if spec.verb == "links_from":
        return graph.links_from(args["id"], args.get("type"))
    if spec.verb == "links_to":
        return graph.links_to(args["id"], args.get("type"))
    if spec.verb == "related_to":
        return graph.related_to(args["id"], args.get("via"), args.get("direction") or "both", args.get("depth") or 1)
    if spec.verb == "contents_of":
        return graph.contents_of(args["id"], args.get("node_type"), args.get("depth") or 1)
    if spec.verb == "or_search":
        text = args["text"]
        text = " ".join(map(str, text)) if isinstance(text, list) else str(text)
        return graph.search(text, args.get("limit") or 50)
    return graph.preset(args["name"])


def _find_more(args: dict[str, Any], graph: Any) -> list[dict]:
    """``find`` with ``about`` or ``order_by``: composed from the graph's reads, then ordered."""
    node_type, where, in_space = args["node_type"], args.get("where"), args.get("in_space")
    if args.get("about") is None:
        nodes = graph.find(node_type, where, in_space)
    else:
        nodes = [n for n in graph.related_to(args["about"], "about", "to", 1)
                 if n.get("node_type") == node_type and matches(n, where)]  # fmt: skip
        if in_space is not None:
            inside = {n["id"] for n in graph.find(node_type, where, in_space)}
            nodes = [n for n in nodes if n["id"] in inside]
    return ordered(nodes, args.get("order_by"), args.get("limit"))


def _get(args: dict[str, Any], graph: Any) -> dict | None:
    node = graph.get(args["id"]) if isinstance(args["id"], str) and args["id"] else None
    if node is None or not args.get("links"):
        return node
    links: dict[str, list[str]] = {}
    for link in graph.links_from(node["id"]):
        links.setdefault(link["type"], []).append(link["to"])
    return {**node, "links": links}


def schema_entries(name: str) -> list[dict]:
    """The schema as data: every node type, every link type, or one node type."""
    if name == "link_types":
        return [{"name": t.name, "description": t.description} for t in schema.LINK_TYPES.values()]
    types = schema.NODE_TYPES.values() if name == "node_types" else [schema.node_type(name)]
    return [{"name": t.name, "description": t.description, "required": ["id", "type", *t.required]} for t in types]


def _cypher_params(spec: QuerySpec, scope: Scope) -> dict[str, Any]:
    params = {key: interpolate(value, scope) for key, value in (spec.args.get("params") or {}).items()}
    text = spec.args["text"]
    for name in _PARAMETER.findall(text):
        if name not in params:
            try:
                params[name] = scope.lookup(name, text)
            except TemplateError:
                raise TemplateError(text, f"${name}", "Cypher parameter not in params or the context") from None
    return params


# Context enrichment (P5): the queries an agent may ask for while it answers an ask step.
ENRICHMENT_KINDS = ("exploration", "relationship", "verification", "clarification")
ENRICHMENTS: dict[str, QuerySpec] = {
    "exploration": QuerySpec("contents_of", MappingProxyType({"id": "{target}", "depth": 2})),
    "relationship": QuerySpec("related_to", MappingProxyType({"id": "{target}", "direction": "both"})),
    "verification": QuerySpec(
        "find", MappingProxyType({"node_type": "narrative", "where": {"type": "validation"}, "in_space": "{target}"})
    ),
}


def run_enrichment(kind: str, target: str, graph: Any) -> list[dict]:
    """``clarification`` reads the node itself; the others run their query around it."""
    if kind == "clarification":
        node = graph.get(target)
        return [node] if node else []
    return run_query(ENRICHMENTS[kind], Scope({"target": target}), graph)

