"""Building the cluster a protocol commits: its nodes and links, and the moments of its answers.

Everything a session prepares is committed in ONE ``create_cluster`` call at completion (P4):
the create steps' nodes and links, the update steps' field updates, and each moment with its
``expresses`` link from the actor and ``about`` links to what it concerns (P6).

Ids come from templates and the session id only (never a clock or a random number), so
replaying a protocol with the same context and answers prepares the same cluster, and the
graph's MERGE on ids writes nothing new.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeVar

from cabal.errors import ProtocolRuntimeError, TemplateError
from cabal.graph import schema
from cabal.membrane.protocol import CreateStep, LinkSpec, MomentSpec, NodeSpec
from cabal.membrane.results import Cluster
from cabal.membrane.templates import Scope, Unresolved, evaluate, interpolate, references, to_text

Record = TypeVar("Record", bound=Mapping[str, Any])  # a node or link: a dict, or a cluster's read-only one


def storable(value: Any) -> Any:
    """A value the graph can hold: primitives and flat lists as they are, structures as JSON."""
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, (str, int, float, bool)) for v in value):
            return list(value)
        return json.dumps(list(value), sort_keys=True, ensure_ascii=False)
    return value


def items_of(template: str, scope: Scope) -> list:
    """The list a ``for_each`` names (no answer is the empty list)."""
    items = interpolate(template, scope)
    if items is None:
        return []
    if not isinstance(items, list):
        raise TemplateError(template, template, f"for_each needs a list, got {type(items).__name__}")
    return items


def each(for_each: str | None, condition: str | None, scope: Scope, inner: str | None = None) -> Iterator[Scope]:
    """The scopes a spec is instantiated in: one per ``for_each`` item (and, with ``inner``, per
    item of the list ``inner`` names in that item's scope) that passes ``condition``.

    Inside, ``item`` is the item, ``index`` its place from 0 and ``position`` from 1;
    ``inner_item`` and ``inner_index`` the inner loop's.
    """
    if for_each is None:
        scopes: list[Scope] = [scope]
    else:
        scopes = [scope.with_locals(item=item, index=index, position=index + 1)
                  for index, item in enumerate(items_of(for_each, scope))]  # fmt: skip
    if inner is not None:
        scopes = [outer.with_locals(inner_item=item, inner_index=index)
                  for outer in scopes for index, item in enumerate(items_of(inner, outer))]  # fmt: skip
    for candidate in scopes:
        if condition is None or evaluate(condition, candidate):
            yield candidate


def node_of(spec: NodeSpec, scope: Scope) -> dict[str, Any]:
    node: dict[str, Any] = {}
    for key, template in spec.fields.items():
        value = interpolate(template, scope, nonempty=key in ("id", "node_type", "type"))
        if key == "id" and not isinstance(value, str):
            value = to_text(value)
        value = storable(value)
        if value is not None:  # an optional answer left empty: the field is simply absent
            node[key] = value
    kind = spec.fields.get("node_type")
    if isinstance(kind, str) and references(kind):  # a type from an answer: checked now it is known
        named = node.get("node_type")
        known = schema.NODE_TYPES.get(named) if isinstance(named, str) else None
        if known is None:
            raise ProtocolRuntimeError(
                f"node {node.get('id')!r}: {kind} is {node.get('node_type')!r}, which is not a node type "
                f"(known: {', '.join(sorted(schema.NODE_TYPES))})"
            )
        missing = [f for f in known.required if node.get(f) in (None, "")]
        if missing:
            raise ProtocolRuntimeError(f"node {node['id']!r}: a {known.name} node needs {', '.join(missing)}")
    return node


def link_of(spec: LinkSpec, scope: Scope) -> dict[str, Any]:
    ends = []
    for template in (spec.source, spec.target):
        value = interpolate(template, scope, nonempty=True)
        if isinstance(value, (list, dict)):
            raise TemplateError(template, template, "a link end must be one id; use for_each for a list")
        ends.append(to_text(value))
    kind = spec.type
    if references(kind):  # a type from an answer: it must still be one the schema knows
        kind = to_text(interpolate(kind, scope, nonempty=True))
        if kind not in schema.LINK_TYPES:
            raise ProtocolRuntimeError(
                f"link {ends[0]!r} -> {ends[1]!r}: {spec.type} is {kind!r}, which is not a link type "
                f"(known: {', '.join(sorted(schema.LINK_TYPES))})"
            )
    link: dict[str, Any] = {"type": kind, "from": ends[0], "to": ends[1]}
    properties = {k: storable(interpolate(v, scope)) for k, v in spec.properties.items()}
    properties = {k: v for k, v in properties.items() if v is not None}
    if properties:
        link["properties"] = properties
    return link


def instantiate(step: CreateStep, scope: Scope) -> tuple[list[dict], list[dict]]:
    nodes = [node_of(spec, s) for spec in step.nodes for s in each(spec.for_each, spec.condition, scope, spec.for_each_inner)]
    links = [link_of(spec, s) for spec in step.links for s in each(spec.for_each, spec.condition, scope, spec.for_each_inner)]
    return nodes, links


# ------------------------------------------------------------------------------ moments


# The field of an update's moment that keeps the values the update replaced, as JSON text
# ``{node_id: {field: value before}}`` (None: the field was not there).
BEFORE_FIELD = "before"


def moment_id(session_id: str, key: str, visit: int, index: int | None) -> str:
    """Derived from the session and the step (a loop's revisit and a for_each item get a suffix)."""
    moment = f"moment-{session_id}-{key}"
    if visit > 1:
        moment += f"-v{visit}"
    if index is not None:
        moment += f"-{index}"
    return moment


def moment_record(
    spec: MomentSpec,
    *,
    node_id: str,
    actor: Any,
    fields: dict[str, Any],
    about: list[str] | None,
    locals: dict[str, Any],
) -> dict[str, Any]:
    """A moment waiting for the commit. ``about`` may wait too: it can name nodes created later."""
    if not isinstance(actor, str) or not actor:
        raise ProtocolRuntimeError(
            f"step {fields.get('step')!r} records a moment, but the context has no actor_id to say who spoke",
            step=fields.get("step"),
        )
    node = {"id": node_id, "node_type": "moment", "type": spec.type, "status": "spoken", **fields}
    return {
        "node": {k: storable(v) for k, v in node.items() if v is not None},
        "actor": actor,
        "about": about,
        "about_template": spec.about,
        "locals": locals,
    }


def _about(moment: dict, context: dict, default: list[str]) -> list[str]:
    if moment["about_template"] is not None:
        value = interpolate(moment["about_template"], Scope(context, moment["locals"]), nonempty=True)
        return [to_text(v) for v in value] if isinstance(value, list) else [to_text(value)]
    return moment["about"] or default


# ------------------------------------------------------------------------------ cluster


def build(nodes: list[dict], links: list[dict], moments: list[dict], context: dict) -> tuple[list[dict], list[dict]]:
    """The final nodes and links; refuses a created node that nothing links (P4)."""
    all_nodes, all_links = _assemble(nodes, links, moments, context, strict=True)
    linked = {end for link in all_links for end in (link["from"], link["to"])}
    isolated = [node["id"] for node in all_nodes if node["id"] not in linked]
    if isolated:
        raise ProtocolRuntimeError(
            f"the protocol would create {', '.join(map(repr, isolated))} linked to nothing; "
            "a protocol creates clusters, never isolated nodes (pattern P4): add a link"
        )
    return all_nodes, unique_links(all_links)


def _assemble(nodes: list[dict], links: list[dict], moments: list[dict], context: dict, *,
              strict: bool) -> tuple[list[dict], list[dict]]:  # fmt: skip
    # A moment with no explicit target is about the protocol's first created node: its output.
    default_about = [nodes[0]["id"]] if nodes else []
    all_nodes = unique_nodes(nodes, strict=strict)
    all_links = list(links)
    for moment in moments:
        node = moment["node"]
        all_nodes.append(node)
        all_links.append({"type": "expresses", "from": moment["actor"], "to": node["id"]})
        try:
            about = _about(moment, context, default_about)
        except (TemplateError, Unresolved):
            if strict:
                raise
            about = []  # not known yet: it may name a node a later step creates
        all_links += [{"type": "about", "from": node["id"], "to": target} for target in about]
    return all_nodes, all_links


def pending(nodes: list[dict], links: list[dict], moments: list[dict], context: dict) -> tuple[list[dict], list[dict]]:
    """What a session has prepared so far, as the nodes and links its commit would write now
    (read-your-writes); lenient where the final build is strict, since the session goes on."""
    return _assemble(nodes, links, moments, context, strict=False)


def unique_nodes(nodes: Iterable[Record], *, strict: bool = True) -> list[Record]:
    """One node per id. Within a protocol two different nodes with one id is a bug in its
    templates (strict); across runs it is a shared node, kept as the first run wrote it, as
    the graph keeps an existing node, unless the kinds disagree."""
    seen: dict[str, Record] = {}
    for node in nodes:
        first = seen.get(node["id"])
        if first is not None and first != node and (strict or first["node_type"] != node["node_type"]):
            raise ProtocolRuntimeError(f"two different nodes would get the id {node['id']!r}")
        seen.setdefault(node["id"], node)
    return list(seen.values())


def unique_links(links: Iterable[Record]) -> list[Record]:
    seen: dict[tuple[str, str, str], Record] = {}
    for link in links:
        seen.setdefault((link["type"], link["from"], link["to"]), link)
    return list(seen.values())


def merge(clusters: Iterable[Cluster]) -> Cluster:
    """Several prepared clusters as one write (the round engine commits a turn's runs together),
    their file moves one plan, in the order of the clusters."""
    clusters = list(clusters)
    return Cluster(
        nodes=tuple(unique_nodes([n for c in clusters for n in c.nodes], strict=False)),
        links=tuple(unique_links([link for c in clusters for link in c.links])),
        updates=tuple(u for c in clusters for u in c.updates),
        moves=tuple(m for c in clusters for m in c.moves),
    )
