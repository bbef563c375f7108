"""Turn a cluster (nodes, links, updates) into parameterised Cypher: one query per commit.

Two forms of the same write, both one query, both atomic (FalkorDB runs a query atomically and
rolls it back on a runtime error, so a cluster commits whole or not at all):

- ``fresh``: the usual case, a cluster none of whose nodes exist yet. Nodes are CREATEd, and
  so are the links that touch one of them (they cannot exist yet); links between two nodes
  that already existed are MERGEd. FalkorDB runs this form about 2.3x faster than the
  idempotent one (MERGE of a relationship is its costly part: bench/README.md, issue 14).
- ``idempotent``: everything MERGEd on ``id`` (nodes) or (from, type, to) (links), with ON
  CREATE SET, so committing the same cluster again creates nothing and an existing node (an
  immutable version) is never rewritten. ``ContextGraph.create_cluster`` sends it only when
  the fresh form refused because a node exists already (a replayed commit).

Both start with a guard row: every id the cluster refers to but does not create must already
exist, and (idempotent form) no id it creates may already exist as another node type (ids
are unique across types); the fresh form asks that none of its ids exist at all. If the
guard fails, the WHERE drops the only row and nothing after it runs. (A unique constraint
would do the type check, but FalkorDB 4.16.3 segfaulted in EnforceUniqueEntity under our
test suite.) After the guard: ``unlinks`` (one ``CALL {}`` subquery per link type, before
anything is created, so one cluster can move a link from one type to another), the nodes per
label, ``updates`` (``SET n += fields`` on existing nodes), then the links per type. A link's
properties are set on every commit, so re-committing a link updates it in place. Labels and
relationship types come from the schema; every value is a parameter.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cabal.errors import SchemaError
from cabal.graph import schema


@dataclass(frozen=True)
class ClusterQuery:
    text: str  # the idempotent form
    fresh_text: str  # the form for a cluster none of whose nodes exist yet
    params: dict[str, object] = field(hash=False)
    external_ids: tuple[str, ...]
    created_types: dict[str, str] = field(hash=False)


def build_cluster_query(
    nodes: list[dict], links: list[dict], updates: list[dict] | None = None, unlinks: list[dict] | None = None
) -> ClusterQuery:
    checked = _checked_nodes(nodes)
    created_ids = {node.id for node in checked}
    update_rows = [_check_update(update) for update in updates or []]
    by_relation, external = _link_rows(links, created_ids)
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
    merged, fresh = _guards()
    # Unlinks come first: FalkorDB needs a WITH between an updating clause and a subquery.
    for index, (relation, rows) in enumerate(sorted(removed_by_relation.items())):
        params[f"u{index}"] = rows
        unlink = (
            # Names inside a subquery are its own: FalkorDB 4.16 lets a subquery's variables
            # shadow same-named FOREACH variables below (which then silently create nothing).
            f"CALL {{ WITH found UNWIND $u{index} AS gone MATCH (ga:{schema.BASE_LABEL} {{id: gone.from}})"
            f"-[ge:{relation}]->(gb:{schema.BASE_LABEL} {{id: gone.to}}) DELETE ge RETURN count(*) AS removed{index} }}"
        )
        merged.append(unlink)
        fresh.append(unlink)
    by_label: dict[str, list[dict]] = {}
    for node in checked:
        by_label.setdefault(node.node_type.label, []).append({"id": node.id, "props": node.properties})
    for index, (label, rows) in enumerate(sorted(by_label.items())):
        params[f"n{index}"] = rows
        merged.append(f"FOREACH (row IN $n{index} | MERGE (x:{schema.BASE_LABEL}:{label} {{id: row.id}}) "
                      "ON CREATE SET x += row.props)")
        fresh.append(f"FOREACH (row IN $n{index} | CREATE (x:{schema.BASE_LABEL}:{label} {{id: row.id}}) "
                     "SET x += row.props)")
    if update_rows:
        params["updates"] = update_rows
        update = f"FOREACH (row IN $updates | MERGE (x:{schema.BASE_LABEL} {{id: row.id}}) SET x += row.fields)"
        merged.append(update)
        fresh.append(update)
    _add_links(by_relation, created_ids, params, merged, fresh)
    merged.append("RETURN found")
    fresh.append("RETURN found")
    return ClusterQuery("\n".join(merged), "\n".join(fresh), params, external_ids, created_types)


def _checked_nodes(nodes: list[dict]) -> list[schema.CheckedNode]:
    checked = [schema.check_node(node) for node in nodes]
    seen: set[str] = set()
    for node in checked:
        if node.id in seen:
            raise SchemaError(f"node id {node.id!r} appears twice in one cluster", item=node.id, field="id")
        seen.add(node.id)
    return checked


def _link_rows(links: list[dict], created_ids: set[str]) -> tuple[dict[str, dict[tuple[str, str], dict]], list[str]]:
    """The links by relation, one row per (from, to): a link named twice is one link, its
    properties set in order; and the ids they touch that the cluster does not create."""
    by_relation: dict[str, dict[tuple[str, str], dict]] = {}
    external: list[str] = []
    for index, link in enumerate(links):
        kind, ends = _check_link_ends(link, index)
        external += [node_id for node_id in ends if node_id not in created_ids]
        properties = link.get("properties") or {}
        for key, value in properties.items():
            schema.field_name(key)
            schema.check_value(value, item=f"link {kind.name}", field_=key)
        row = by_relation.setdefault(kind.relation, {}).setdefault(ends, {"from": ends[0], "to": ends[1], "props": {}})
        row["props"].update(properties)
    return by_relation, external


def _guards() -> tuple[list[str], list[str]]:
    """The guard rows of the idempotent form and of the fresh one (see the module docstring)."""
    guard = [
        f"UNWIND $external AS ext_id OPTIONAL MATCH (ext:{schema.BASE_LABEL} {{id: ext_id}})",
        "WITH count(ext) AS found",
    ]
    merged, fresh = list(guard), list(guard)
    merged += [f"UNWIND $typed AS typed OPTIONAL MATCH (old:{schema.BASE_LABEL} {{id: typed[0]}}) "
               "WHERE old.node_type <> typed[1]",
               "WITH found, count(old) AS clashes WHERE found = $external_count AND clashes = 0"]
    fresh += [f"UNWIND $typed AS typed OPTIONAL MATCH (old:{schema.BASE_LABEL} {{id: typed[0]}})",
              "WITH found, count(old) AS present WHERE found = $external_count AND present = 0"]
    return merged, fresh


def _add_links(by_relation: dict[str, dict[tuple[str, str], dict]], created_ids: set[str], params: dict[str, object],
               merged: list[str], fresh: list[str]) -> None:
    """The links, per type: MERGEd in the idempotent form; in the fresh one CREATEd when they
    touch a created node (they cannot exist yet), MERGEd between two nodes that existed."""
    created_links: list[str] = []
    merged_links: list[str] = []
    for index, (relation, by_ends) in enumerate(sorted(by_relation.items())):
        rows = list(by_ends.values())
        params[f"l{index}"] = rows
        merged.append(_merge_links(f"$l{index}", relation))
        touching = [row for row in rows if row["from"] in created_ids or row["to"] in created_ids]
        between_old = [row for row in rows if row["from"] not in created_ids and row["to"] not in created_ids]
        if touching:
            params[f"c{index}"] = touching
            created_links.append(
                f"CALL {{ WITH found UNWIND $c{index} AS row MATCH (la{index}:{schema.BASE_LABEL} {{id: row.from}}) "
                f"MATCH (lb{index}:{schema.BASE_LABEL} {{id: row.to}}) "
                f"CREATE (la{index})-[le{index}:{relation}]->(lb{index}) SET le{index} += row.props "
                f"RETURN count(*) AS linked{index} }}")
        if between_old:
            params[f"m{index}"] = between_old
            merged_links.append(_merge_links(f"$m{index}", relation))
    if created_links:  # subqueries after an updating clause need a WITH between
        fresh += ["WITH found", *created_links]
    fresh += merged_links


def _merge_links(rows: str, relation: str) -> str:
    return (f"FOREACH (row IN {rows} | MERGE (a:{schema.BASE_LABEL} {{id: row.from}}) "
            f"MERGE (b:{schema.BASE_LABEL} {{id: row.to}}) MERGE (a)-[e:{relation}]->(b) SET e += row.props)")


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


def build_copy_queries(nodes: list[dict], links: list[dict]) -> list[tuple[str, dict[str, object]]]:
    """The queries that write ``nodes`` then ``links`` into an empty graph in their order: one
    query per run of nodes of one label (links of one type), so the copy's internal ids keep
    the original's order of creation (``reads.nodes_in_order``). ``links`` are
    ``{"type", "from", "to", "properties"}`` between the given nodes."""
    queries: list[tuple[str, dict[str, object]]] = []
    checked = _checked_nodes(nodes)
    for label, rows in _runs([(node.node_type.label, {"id": node.id, "props": node.properties}) for node in checked]):
        queries.append((f"UNWIND $rows AS row CREATE (x:{schema.BASE_LABEL}:{label} {{id: row.id}}) SET x += row.props",
                        {"rows": rows}))
    keyed = []
    for index, link in enumerate(links):
        kind, ends = _check_link_ends(link, index)
        properties = dict(link.get("properties") or {})
        for key, value in properties.items():
            schema.field_name(key)
            schema.check_value(value, item=f"link {kind.name}", field_=key)
        keyed.append((kind.relation, {"from": ends[0], "to": ends[1], "props": properties}))
    for relation, rows in _runs(keyed):
        queries.append((f"UNWIND $rows AS row MATCH (a:{schema.BASE_LABEL} {{id: row.from}}) "
                        f"MATCH (b:{schema.BASE_LABEL} {{id: row.to}}) CREATE (a)-[e:{relation}]->(b) SET e += row.props",
                        {"rows": rows}))
    return queries


def _runs(keyed: list[tuple[str, dict]]) -> list[tuple[str, list[dict]]]:
    """Consecutive rows of one key, grouped, in order."""
    runs: list[tuple[str, list[dict]]] = []
    for key, row in keyed:
        if runs and runs[-1][0] == key:
            runs[-1][1].append(row)
        else:
            runs.append((key, [row]))
    return runs


def delete_nodes(ids: list[str]) -> tuple[str, dict[str, object]]:
    """Remove nodes (and their links) by id: the server's full-text index forgets them with them."""
    return (f"UNWIND $ids AS gone MATCH (n:{schema.BASE_LABEL} {{id: gone}}) DETACH DELETE n",
            {"ids": [schema.check_id(str(node_id)) for node_id in ids]})
