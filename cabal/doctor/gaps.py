"""Gap queries: what the doctor looks for in a context graph, each kind with one precise definition.

A gap is a node that lacks what its kind says every such node should have. Every kind names
its domain (the skill whose table row tagged ``gap:<kind>`` picks the protocol, see
``skills.GAP_DOMAINS``) and the context the chosen protocol starts with. The definitions:

- ``module_without_objectives``: a space of type module containing no narrative of type
  objective.
- ``behavior_without_validation``: a narrative of type behavior that no narrative of type
  validation ``ensures``.
- ``module_without_implementation``: a space of type module containing no narrative of type
  implementation.
- ``validation_without_health``: a narrative of type validation that no narrative of type
  health ``verifies``.
- ``escalation_without_resolution``: a narrative of type escalation with no ``resolves`` link
  coming in (from anything).
- ``space_without_progress``: a space of type module that no moment of type progress is
  ``about`` (record_work writes exactly that moment).

Reads go through ``ContextGraph`` methods only (find, contents_of, related_to, links_to): one
query for the candidates, one per candidate for its check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from cabal.errors import ResourceNotFound
from cabal.skills import GAP_DOMAINS

__all__ = ["GAP_KINDS", "Gap", "GapKind", "find_gaps", "gap_kind", "is_open"]


@dataclass(frozen=True)
class Gap:
    """One node missing something: the kind of gap, the node, and how to start fixing it."""

    kind: str
    node_id: str
    node_name: str
    domain: str
    description: str
    context: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "node_id": self.node_id,
            "node_name": self.node_name,
            "domain": self.domain,
            "description": self.description,
            "context": dict(self.context),
        }


@dataclass(frozen=True)
class GapKind:
    """A gap definition: which nodes may have it, whether one does, and what a fix starts from."""

    name: str
    definition: str
    candidates: Callable[[Any], list[dict]]
    missing: Callable[[Any, str], bool]
    context_key: str  # the protocol context entry naming the node (space_id, validation_id, ...)
    wording: str  # "{name}" and "{id}" are the node's

    @property
    def domain(self) -> str:
        return GAP_DOMAINS[self.name]

    def gap(self, graph: Any, node: Mapping[str, Any]) -> Gap:
        name = str(node.get("name") or node["id"])
        context: dict[str, Any] = {"target_id": node["id"], self.context_key: node["id"]}
        if self.context_key != "space_id":
            home = _home_module(graph, node["id"])
            if home is not None:
                context["space_id"] = home
        return Gap(
            kind=self.name,
            node_id=node["id"],
            node_name=name,
            domain=self.domain,
            description=self.wording.format(name=name, id=node["id"]),
            context=MappingProxyType(context),
        )


# ------------------------------------------------------------------------------ the checks


def _modules(graph: Any) -> list[dict]:
    return graph.find("space", {"type": "module"})


def _narratives(kind: str) -> Callable[[Any], list[dict]]:
    return lambda graph: graph.find("narrative", {"type": kind})


def _contains_no(narrative_type: str) -> Callable[[Any, str], bool]:
    def missing(graph: Any, space_id: str) -> bool:
        return not graph.find("narrative", {"type": narrative_type}, in_space=space_id, limit=1)

    return missing


def _no_incoming(link: str, node_type: str, subtype: str) -> Callable[[Any, str], bool]:
    """True when no node of ``node_type``/``subtype`` points at the node through ``link``."""

    def missing(graph: Any, node_id: str) -> bool:
        sources = graph.related_to(node_id, link, "to")
        return not any(n.get("node_type") == node_type and n.get("type") == subtype for n in sources)

    return missing


def _unresolved(graph: Any, escalation_id: str) -> bool:
    return not graph.links_to(escalation_id, "resolves")


def _home_module(graph: Any, node_id: str) -> str | None:
    """The module that contains the node (the first by id when several do), else None."""
    holders = graph.related_to(node_id, "contains", "to")
    modules = [h for h in holders if h.get("node_type") == "space" and h.get("type") == "module"]
    spaces = modules or [h for h in holders if h.get("node_type") == "space"]
    return spaces[0]["id"] if spaces else None


GAP_KINDS: Mapping[str, GapKind] = MappingProxyType(
    {
        kind.name: kind
        for kind in (
            GapKind(
                "module_without_objectives",
                "a space of type module containing no narrative of type objective",
                _modules,
                _contains_no("objective"),
                "space_id",
                "module {name} ({id}) has no objectives",
            ),
            GapKind(
                "behavior_without_validation",
                "a narrative of type behavior that no narrative of type validation ensures",
                _narratives("behavior"),
                _no_incoming("ensures", "narrative", "validation"),
                "behavior_id",
                "behavior {name} ({id}) has no validation that ensures it",
            ),
            GapKind(
                "module_without_implementation",
                "a space of type module containing no narrative of type implementation",
                _modules,
                _contains_no("implementation"),
                "space_id",
                "module {name} ({id}) has no implementation narrative",
            ),
            GapKind(
                "validation_without_health",
                "a narrative of type validation that no narrative of type health verifies",
                _narratives("validation"),
                _no_incoming("verifies", "narrative", "health"),
                "validation_id",
                "validation {name} ({id}) has no health check that verifies it",
            ),
            GapKind(
                "escalation_without_resolution",
                "a narrative of type escalation with no resolves link coming in",
                _narratives("escalation"),
                _unresolved,
                "escalation_id",
                "escalation {name} ({id}) has no resolution",
            ),
            GapKind(
                "space_without_progress",
                "a space of type module that no moment of type progress is about",
                _modules,
                _no_incoming("about", "moment", "progress"),
                "space_id",
                "module {name} ({id}) has no progress moment about it",
            ),
        )
    }
)


def gap_kind(name: str) -> GapKind:
    try:
        return GAP_KINDS[name]
    except KeyError:
        raise ResourceNotFound("gap kind", name, known=list(GAP_KINDS)) from None


def find_gaps(graph: Any, kinds: Iterable[str] | None = None) -> list[Gap]:
    """Every gap of the given kinds (default: all), in the order of ``GAP_KINDS``, then by node id."""
    wanted = [gap_kind(name) for name in kinds] if kinds is not None else list(GAP_KINDS.values())
    found: list[Gap] = []
    for kind in wanted:
        for node in sorted(kind.candidates(graph), key=lambda n: n["id"]):
            if kind.missing(graph, node["id"]):
                found.append(kind.gap(graph, node))
    return found


def is_open(graph: Any, gap: Gap) -> bool:
    """Whether the gap's node still lacks what its kind asks for (False once fixed, or if the node is gone)."""
    if not graph.exists(gap.node_id):
        return False
    return gap_kind(gap.kind).missing(graph, gap.node_id)
