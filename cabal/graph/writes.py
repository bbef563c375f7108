"""Turn a cluster (nodes, links, updates) into ONE parameterised Cypher query.

The query's shape, and why:

1. A guard row: every id the cluster refers to but does not create must already exist, and
   no id it creates may already exist as another node type (ids are unique across types).
   The guard counts both; if either fails, the WHERE drops the only row and nothing after it
   runs, so a bad cluster writes nothing at all. (A unique constraint would do the second
   check, but FalkorDB 4.16.3 segfaulted in EnforceUniqueEntity under our test suite.)
Nodes MERGE on ``id`` (writing the same cluster twice creates nothing the second time) with
ON CREATE SET (an existing node, such as an immutable version, is never rewritten by a
create); ``updates`` set fields on existing nodes (``SET n += fields``).
2. ``unlinks``: links to remove, one ``CALL {}`` subquery per link type right after the
   guard (a subquery that aggregates keeps the row alive when nothing matches). They run
   before anything is created, so one cluster can move a link from one type to another.
3. One ``FOREACH ... MERGE`` per label for the nodes, then ``updates``, then
4. one ``FOREACH`` per link type. Endpoints are matched with MERGE on ``id``, which can only
   match here because step 1 proved they exist. A link is identified by (from, type, to);
   its properties are set on every commit, so re-committing a link updates it in place.

FalkorDB runs a query atomically and rolls it back on a runtime error, so the cluster commits
whole or not at all. Labels and relationship types come from the schema; every value is a
parameter.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cabal.errors import SchemaError
from cabal.graph import schema


@dataclass(frozen=True)
class ClusterQuery:
    text: str
    params: dict[str, object] = field(hash=False)
    external_ids: tuple[str, ...]
    created_types: dict[str, str] = field(hash=False)


def build_cluster_query(
    nodes: list[dict], links: list[dict], updates: list[dict] | None = None, unlinks: list[dict] | None = None
) -> ClusterQuery:
    checked = [schema.check_node(node) for node in nodes]
    created_ids = {node.id for node in checked}
    if len(created_ids) != len(checked):
        seen: set[str] = set()
        duplicate = next(n.id for n in checked if n.id in seen or seen.add(n.id))
        raise SchemaError(f"node id {duplicate!r} appears twice in one cluster", item=duplicate, field="id")

    by_label: dict[str, list[dict]] = {}
    for node in checked:
        by_label.setdefault(node.node_type.label, []).append({"id": node.id, "props": node.properties})

    update_rows = [_check_update(update) for update in updates or []]

    by_relation: dict[str, list[dict]] = {}
    external: list[str] = []
    for index, link in enumerate(links):
        kind, ends = _check_link_ends(link, index)
        external += [node_id for node_id in ends if node_id not in created_ids]
        properties = link.get("properties") or {}
        for key, value in properties.items():
            schema.field_name(key)
            schema.check_value(value, item=f"link {kind.name}", field_=key)
        by_relation.setdefault(kind.relation, []).append({"from": ends[0], "to": ends[1], "props": properties})
    removed_by_relation: dict[str, list[dict]] = {}
    for index, link in enumerate(unlinks or []):
        kind, ends = _check_link_ends(link, index)
        removed_by_relation.setdefault(kind.relation, []).append({"from": ends[0], "to": ends[1]})
    external += [row["id"] for row in update_rows if row["id"] not in created_ids]
    external_ids = tuple(dict.fromkeys(external))

    created_types = {node.id: node.node_type.name for node in checked}
    params: dict[str, object] = {
        "external": list(external_ids),
        "external_count": len(external_ids),
        # One [id, node_type] pair per created node; [null] keeps the row alive when empty.
        "typed": [[node_id, kind] for node_id, kind in created_types.items()] or [None],
    }
    clauses = [
        "UNWIND $external AS ext_id OPTIONAL MATCH (ext:Node {id: ext_id})",
        "WITH count(ext) AS found",
        "UNWIND $typed AS typed OPTIONAL MATCH (old:Node {id: typed[0]}) WHERE old.node_type <> typed[1]",
        "WITH found, count(old) AS clashes WHERE found = $external_count AND clashes = 0",
    ]
    # Unlinks come first: FalkorDB needs a WITH between an updating clause and a subquery.
    for index, (relation, rows) in enumerate(sorted(removed_by_relation.items())):
        params[f"u{index}"] = rows
        clauses.append(
            # Names inside the subquery are its own: FalkorDB 4.16 lets a subquery's a/b/e
            # shadow the FOREACH variables below (which then silently create nothing).
            f"CALL {{ WITH found UNWIND $u{index} AS gone MATCH (ga:{schema.BASE_LABEL} {{id: gone.from}})"
            f"-[ge:{relation}]->(gb:{schema.BASE_LABEL} {{id: gone.to}}) DELETE ge RETURN count(*) AS removed{index} }}"
        )
    for index, (label, rows) in enumerate(sorted(by_label.items())):
        params[f"n{index}"] = rows
        clauses.append(
            f"FOREACH (row IN $n{index} | MERGE (x:{schema.BASE_LABEL}:{label} {{id: row.id}}) "
            "ON CREATE SET x += row.props)"
        )
    if update_rows:
        params["updates"] = update_rows
        clauses.append(
            f"FOREACH (row IN $updates | MERGE (x:{schema.BASE_LABEL} {{id: row.id}}) SET x += row.fields)"
        )
    for index, (relation, rows) in enumerate(sorted(by_relation.items())):
        params[f"l{index}"] = rows
        clauses.append(
            f"FOREACH (row IN $l{index} | MERGE (a:{schema.BASE_LABEL} {{id: row.from}}) "
            f"MERGE (b:{schema.BASE_LABEL} {{id: row.to}}) MERGE (a)-[e:{relation}]->(b) SET e += row.props)"
        )
    clauses.append("RETURN found")
    return ClusterQuery("\n".join(clauses), params, external_ids, created_types)


def _check_link_ends(link: dict, index: int) -> tuple[schema.LinkType, tuple[str, str]]:
    if not isinstance(link, dict):
        raise SchemaError(f"link {index} must be a dict, got {type(link).__name__}")
    kind = schema.link_type(link.get("type"))
    ends = []
    for end in ("from", "to"):
        node_id = link.get(end)
        if not isinstance(node_id, str) or not node_id:
            raise SchemaError(f"link {index} ({kind.name}): {end!r} must be a node id", item=kind.name, field=end)
        ends.append(node_id)
    return kind, (ends[0], ends[1])


def _check_update(update: dict) -> dict:
    if not isinstance(update, dict) or not isinstance(update.get("id"), str):
        raise SchemaError(f"an update must be {{'id': str, 'fields': dict}}, got {update!r}")
    fields = update.get("fields") or {}
    for key, value in fields.items():
        schema.field_name(key)
        if key in schema.IMMUTABLE_KEYS:
            raise SchemaError(f"update of {update['id']!r} may not change {key!r}", item=update["id"], field=key)
        if value is not None:
            schema.check_value(value, item=update["id"], field_=key)
    # A None value removes the property (Cypher SET semantics), which is what a caller means.
    return {"id": update["id"], "fields": dict(fields)}
