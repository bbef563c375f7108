"""Read-your-writes: the graph as a session's commit would leave it, while the session still runs.

A session prepares nodes, links, field updates and moments and commits them in one cluster
when the protocol completes. Until then the graph does not hold them, yet a later step (a
query after a called protocol created what the caller needs, an id answer naming a node the
session created) must see them. ``SessionView`` answers the graph's read API (``find``,
``get_many``, ``links_from``, ``related_to``, ``contents_of``, ``search``, ``preset``,
``read_cypher``) with the committed graph and the session's pending writes merged exactly as
the commit merges them (``graph.writes``):

- a prepared node whose id already exists does not replace it (MERGE ... ON CREATE);
- updates set fields on existing and prepared nodes alike, in order (None removes a field);
- a link is (from, type, to); a prepared one adds to the graph's or sets its properties.

With nothing pending every read goes straight to the graph, so a session that has prepared
nothing pays nothing. A Cypher query cannot be merged in Python: it runs on a scratch copy of
the graph with the pending cluster committed into it, then the copy is dropped.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cabal.graph.reads import PRESETS, SEARCH_FIELDS
from cabal.membrane import cluster
from cabal.membrane.queries import matches


@dataclass
class Pending:
    """One snapshot of what a session would commit now."""

    nodes: dict[str, dict] = field(default_factory=dict)
    links: dict[tuple[str, str, str], dict] = field(default_factory=dict)  # (type, from, to) -> properties
    updates: dict[str, list[dict]] = field(default_factory=dict)  # id -> field updates, in order

    def touches(self, node_id: str) -> bool:
        return node_id in self.nodes or node_id in self.updates


class SessionView:
    def __init__(self, graph: Any, session: Any) -> None:
        self.graph = graph
        self.session = session

    # ------------------------------------------------------------------------- state

    def pending(self) -> Pending | None:
        """What the session would commit now, or None when it has prepared nothing."""
        session = self.session
        if not (session.nodes or session.links or session.updates or session.moments):
            return None
        nodes, links = cluster.pending(session.nodes, session.links, session.moments, session.context)
        state = Pending(nodes={node["id"]: node for node in nodes})
        for link in links:
            state.links[(link["type"], link["from"], link["to"])] = dict(link.get("properties") or {})
        for update in session.updates:
            state.updates.setdefault(update["id"], []).append(update["fields"])
        return state

    def _effective(self, node_id: str, real: dict | None, state: Pending) -> dict | None:
        node = real if real is not None else state.nodes.get(node_id)
        if node is None:
            return None
        changes = state.updates.get(node_id)
        if not changes:
            return node
        node = dict(node)
        for fields in changes:
            for key, value in fields.items():
                if value is None:
                    node.pop(key, None)
                else:
                    node[key] = value
        return node

    # ------------------------------------------------------------------------- nodes

    def get(self, node_id: str) -> dict | None:
        found = self.get_many([node_id])
        return found[0] if found else None

    def exists(self, node_id: str) -> bool:
        return self.get(node_id) is not None

    def get_many(self, ids: list[str]) -> list[dict]:
        state = self.pending()
        if state is None:
            return self.graph.get_many(ids)
        real = {node["id"]: node for node in self.graph.get_many(list(ids))} if ids else {}
        found = [self._effective(node_id, real.get(node_id), state) for node_id in dict.fromkeys(ids)]
        return [node for node in found if node is not None]

    def find(self, node_type: str, where: dict | None = None, in_space: str | None = None, limit: int | None = None,
             fields: list[str] | None = None) -> list[dict]:  # fmt: skip
        state = self.pending()
        if state is None:
            return self.graph.find(node_type, where, in_space, limit, fields)
        real = {node["id"]: node for node in self.graph.find(node_type, where, in_space)}
        inside = set(real) if in_space is not None else None
        # Nodes the graph's answer cannot know about: updated ones (an update may make them match)
        # and ones a pending link puts into the space.
        others = set(state.updates) - set(real)
        if inside is not None:
            others |= {to for (kind, source, to) in state.links if kind == "contains" and source == in_space}
            inside |= {to for (kind, source, to) in state.links if kind == "contains" and source == in_space}
        fetched = {node["id"]: node for node in self.graph.get_many(sorted(others - set(real)))} if others - set(real) else {}
        real.update(fetched)
        if inside is not None:
            for node_id in set(fetched) - inside:
                if any(link["from"] == in_space for link in self.graph.links_to(node_id, "contains")):
                    inside.add(node_id)
        found = []
        for node_id in set(real) | set(state.nodes):
            node = self._effective(node_id, real.get(node_id), state)
            if node is None or node.get("node_type") != node_type or not matches(node, where):
                continue
            if inside is not None and node_id not in inside:
                continue
            found.append(node)
        found.sort(key=lambda node: node["id"])
        if limit is not None:
            found = found[:limit]
        if fields is not None:
            found = [{key: node.get(key) for key in dict.fromkeys(["id", *fields])} for node in found]
        return found

    def preset(self, name: str) -> list[dict]:
        node_type, where = PRESETS[name]
        return self.find(node_type, where)

    def search(self, text: str, limit: int = 50) -> list[dict]:
        state = self.pending()
        if state is None:
            return self.graph.search(text, limit)
        terms = {word.lower() for word in text.split() if word.strip()}
        real = {node["id"]: node for node in self.graph.search(text, limit)}
        others = sorted(set(state.updates) - set(real))
        real.update({node["id"]: node for node in self.graph.get_many(others)} if others else {})
        scored: list[tuple[int, str, dict]] = []
        for node_id in set(real) | set(state.nodes):
            node = self._effective(node_id, real.get(node_id), state)
            if node is None:
                continue
            hits = _hits(node, terms)
            if hits:
                scored.append((-hits, node_id, node))
        return [node for _, _, node in sorted(scored, key=lambda entry: entry[:2])[:limit]]

    # ------------------------------------------------------------------------- links

    def links_from(self, node_id: str, type: str | None = None) -> list[dict]:
        return self._links(node_id, type, outgoing=True)

    def links_to(self, node_id: str, type: str | None = None) -> list[dict]:
        return self._links(node_id, type, outgoing=False)

    def _links(self, node_id: str, type: str | None, *, outgoing: bool) -> list[dict]:
        read = self.graph.links_from if outgoing else self.graph.links_to
        state = self.pending()
        if state is None:
            return read(node_id, type)
        merged = {(link["type"], link["from"], link["to"]): link for link in read(node_id, type)}
        for (kind, source, target), properties in state.links.items():
            if (source if outgoing else target) != node_id or (type is not None and kind != type):
                continue
            old = merged.get((kind, source, target))
            merged[(kind, source, target)] = {"type": kind, "from": source, "to": target,
                                              "properties": {**(old or {}).get("properties", {}), **properties}}  # fmt: skip
        other = 2 if outgoing else 1
        return sorted(merged.values(), key=lambda link: (link["type"], (link["type"], link["from"], link["to"])[other]))

    def related_to(self, node_id: str, via: str | list[str] | None = None, direction: str = "both", depth: int = 1) -> list[dict]:
        state = self.pending()
        if state is None:
            return self.graph.related_to(node_id, via, direction, depth)
        kinds = None if via is None else ({via} if isinstance(via, str) else set(via))
        reached = self._walk(node_id, kinds, direction, depth, state)
        return self._nodes_sorted(reached - {node_id}, state)

    def contents_of(self, space_id: str, node_type: str | None = None, depth: int = 1) -> list[dict]:
        state = self.pending()
        if state is None:
            return self.graph.contents_of(space_id, node_type, depth)
        reached = self._walk(space_id, {"contains"}, "from", depth, state)
        nodes = self._nodes_sorted(reached - {space_id}, state)
        return [node for node in nodes if node_type is None or node.get("node_type") == node_type]

    def _walk(self, start: str, kinds: set[str] | None, direction: str, depth: int, state: Pending) -> set[str]:
        """Ids within ``depth`` hops of ``start`` over committed and pending links."""
        reached, frontier = {start}, {start}
        for _ in range(depth):
            following: set[str] = set()
            for node_id in frontier:
                following |= {n["id"] for n in self.graph.related_to(node_id, sorted(kinds) if kinds else None, direction, 1)}
                for (kind, source, target) in state.links:
                    if kinds is not None and kind not in kinds:
                        continue
                    if source == node_id and direction in ("from", "both"):
                        following.add(target)
                    if target == node_id and direction in ("to", "both"):
                        following.add(source)
            frontier = following - reached
            reached |= following
            if not frontier:
                break
        return reached

    def _nodes_sorted(self, ids: Iterable[str], state: Pending) -> list[dict]:
        ids = sorted(ids)
        real = {node["id"]: node for node in self.graph.get_many(ids)} if ids else {}
        found = [self._effective(node_id, real.get(node_id), state) for node_id in ids]
        return [node for node in found if node is not None]

    # ------------------------------------------------------------------------- Cypher

    def read_cypher(self, text: str, params: dict | None = None) -> list[dict]:
        state = self.pending()
        if state is None:
            return self.graph.read_cypher(text, params)
        scratch = self.graph.copy(f"{self.graph.name}.view-{uuid.uuid4().hex[:12]}")
        try:
            links = [{"type": k, "from": s, "to": t, "properties": p} for (k, s, t), p in state.links.items()]
            updates = [{"id": node_id, "fields": f} for node_id, changes in state.updates.items() for f in changes]
            scratch.create_cluster(list(state.nodes.values()), links, updates=updates or None)
            return scratch.read_cypher(text, params)
        finally:
            scratch.delete_graph()


def _hits(node: dict, terms: set[str]) -> int:
    """How many search terms a node's text fields hold (what ``graph.search`` counts)."""
    hay = " ".join(
        " ".join(str(v) for v in value) if isinstance(value, list) else str(value)
        for key in SEARCH_FIELDS
        if (value := node.get(key)) is not None
    ).lower()
    return sum(1 for term in terms if term in hay)
