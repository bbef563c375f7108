"""Read queries of the context graph: the query language of membrane-patterns.md.

Each function returns ``(cypher, params)``. Labels and relationship types come from the
schema, property names are checked identifiers, and every value is a parameter.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from cabal.errors import SchemaError
from cabal.graph import schema

MAX_DEPTH = 10
DIRECTIONS = ("from", "to", "both")
SEARCH_FIELDS = ("name", "title", "content", "prose", "comment", "description", "message", "objective")

# name -> (node_type, where): the presets of membrane-patterns.md.
PRESETS: dict[str, tuple[str, dict[str, object]]] = {
    "all_spaces": ("space", {}),
    "all_validations": ("narrative", {"type": "validation"}),
    "all_behaviors": ("narrative", {"type": "behavior"}),
    "all_goals": ("narrative", {"type": "goal"}),
    "all_escalations": ("narrative", {"type": "escalation"}),
}

Query = tuple[str, dict[str, object]]


def _depth(depth: int) -> int:
    if not isinstance(depth, int) or isinstance(depth, bool) or not 1 <= depth <= MAX_DEPTH:
        raise SchemaError(f"depth must be an integer from 1 to {MAX_DEPTH}, got {depth!r}", field="depth")
    return depth


def _relations(via: str | Iterable[str] | None) -> str:
    if via is None:
        return ""
    names = [via] if isinstance(via, str) else list(via)
    return ":" + "|".join(schema.link_type(name).relation for name in names)


def node_by_id(node_id: str) -> Query:
    return f"MATCH (n:{schema.BASE_LABEL} {{id: $id}}) RETURN n", {"id": node_id}


def nodes_by_ids(ids: list[str]) -> Query:
    return f"UNWIND $ids AS i MATCH (n:{schema.BASE_LABEL} {{id: i}}) RETURN n", {"ids": ids}


def find(
    node_type: str,
    where: dict[str, object] | None = None,
    in_space: str | None = None,
    limit: int | None = None,
    fields: Iterable[str] | None = None,
) -> Query:
    label = schema.node_type(node_type).label
    params: dict[str, object] = {}
    match = f"MATCH (n:{schema.BASE_LABEL}:{label})"
    conditions = []
    if in_space is not None:
        # Anchor on the space, then filter: WITH keeps the planner from scanning a property
        # index over the whole graph and checking containment afterwards (10x slower).
        match = f"MATCH (s:{schema.BASE_LABEL} {{id: $space}})-[:CONTAINS]->(n) WITH n"
        conditions.append(f"n:{label}")
        params["space"] = in_space
    for index, (key, value) in enumerate(sorted((where or {}).items())):
        name = schema.field_name(key)
        params[f"w{index}"] = value
        operator = "IN" if isinstance(value, (list, tuple)) else "="
        conditions.append(f"n.{name} {operator} $w{index}")
    # A projection returns a map instead of a node: only the fields asked for cross the wire.
    returned = "n"
    if fields is not None:
        returned = "n {" + ", ".join(f".{schema.field_name(f)}" for f in dict.fromkeys(["id", *fields])) + "}"
    text = match + (" WHERE " + " AND ".join(conditions) if conditions else "") + f" RETURN {returned} ORDER BY n.id"
    if limit is not None:
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
            raise SchemaError(f"limit must be a non-negative integer, got {limit!r}", field="limit")
        text += " LIMIT $limit"
        params["limit"] = limit
    return text, params


def links(node_id: str, type: str | None, *, outgoing: bool) -> Query:
    relation = _relations(type)
    pattern = f"(a:{schema.BASE_LABEL} {{id: $id}})-[e{relation}]->(b:{schema.BASE_LABEL})"
    if not outgoing:
        pattern = f"(b:{schema.BASE_LABEL})-[e{relation}]->(a:{schema.BASE_LABEL} {{id: $id}})"
    return (
        f"MATCH {pattern} RETURN type(e), startNode(e).id, endNode(e).id, properties(e) ORDER BY type(e), b.id",
        {"id": node_id},
    )


def related_to(node_id: str, via: str | Iterable[str] | None = None, direction: str = "both", depth: int = 1) -> Query:
    if direction not in DIRECTIONS:
        raise SchemaError(f"direction must be one of {DIRECTIONS}, got {direction!r}", field="direction")
    hops = f"[{_relations(via)}*1..{_depth(depth)}]"
    left, right = {"from": ("-", "->"), "to": ("<-", "-"), "both": ("-", "-")}[direction]
    return (
        f"MATCH (a:{schema.BASE_LABEL} {{id: $id}}){left}{hops}{right}(b:{schema.BASE_LABEL}) "
        "WHERE b.id <> $id RETURN DISTINCT b ORDER BY b.id",
        {"id": node_id},
    )


def contents_of(space_id: str, node_type: str | None = None, depth: int = 1) -> Query:
    label = f":{schema.node_type(node_type).label}" if node_type is not None else ""
    return (
        f"MATCH (s:{schema.BASE_LABEL} {{id: $id}})-[:CONTAINS*1..{_depth(depth)}]->(n:{schema.BASE_LABEL}{label}) "
        "RETURN DISTINCT n ORDER BY n.id",
        {"id": space_id},
    )


def search(text: str, limit: int = 50) -> Query:
    """Or-search: a node matches if any word of ``text`` occurs in any of its text fields."""
    terms = sorted({word.lower() for word in text.split() if word.strip()})
    # A field may hold a string or a list of strings; both are searched.
    haystack = " + ".join(
        f"reduce(s = ' ', x IN (CASE WHEN typeOf(n.{f}) = 'List' THEN n.{f} ELSE [n.{f}] END) "
        f"| s + ' ' + toLower(coalesce(toString(x), '')))"
        for f in SEARCH_FIELDS
    )
    return (
        f"MATCH (n:{schema.BASE_LABEL}) WITH n, {haystack} AS hay "
        "WITH n, size([t IN $terms WHERE hay CONTAINS t]) AS hits WHERE hits > 0 "
        "RETURN n ORDER BY hits DESC, n.id LIMIT $limit",
        {"terms": terms, "limit": limit},
    )


_WORD = re.compile(r"\w+")
SEARCH_WORDS = 16  # a query's words used at most


def create_full_text_index(type_name: str, field: str) -> Query:
    """The server's full-text index over a node type's field (FalkorDB's RediSearch-backed index)."""
    return ("CALL db.idx.fulltext.createNodeIndex($label, $field)",
            {"label": schema.node_type(type_name).label, "field": schema.field_name(field)})


def index_words(text: str) -> str:
    """A query for the full-text index: ``text``'s plain words (at most ``SEARCH_WORDS``), any of
    them; no other character of it reaches the index's query syntax."""
    return "|".join(list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))[:SEARCH_WORDS])


def search_full_text(type_name: str, text: str, limit: int) -> Query:
    """Full-text search over one node type's indexed field: any of the words (their stems), best
    score first (then by id, so equal scores keep one order)."""
    return ("CALL db.idx.fulltext.queryNodes($label, $query) YIELD node, score "
            "RETURN node, score ORDER BY score DESC, node.id LIMIT $limit",
            {"label": schema.node_type(type_name).label, "query": index_words(text), "limit": int(limit)})


def search_chunks(text: str, limit: int) -> Query:
    """Full-text search over chunks: any of the words (their stems), best score first, only chunks
    of a source's current version (one no other version supersedes). The query is reduced to
    plain words, so no character of it reaches the index's query syntax."""
    chunk, source = schema.node_type("chunk"), schema.node_type("source")
    return (
        f"CALL db.idx.fulltext.queryNodes($label, $query) YIELD node, score "
        f"MATCH (s:{source.label})-[:{schema.link_type('contains').relation}]->(node) "
        f"WHERE NOT (s)<-[:{schema.link_type('supersedes').relation}]-() "
        "RETURN node AS chunk, score ORDER BY score DESC, node.id LIMIT $limit",
        {"label": chunk.label, "query": index_words(text), "limit": int(limit)},
    )


def preset(name: str) -> Query:
    if name not in PRESETS:
        raise SchemaError(f"unknown preset {name!r}; known: {', '.join(sorted(PRESETS))}", field="preset")
    node_type, where = PRESETS[name]
    return find(node_type, where)


def nodes_in_order() -> Query:
    """Every node with its internal id, in the order the nodes were created: the graph deletes
    no node (a mission's graph is append-only), so the server's ids grow with each creation."""
    return f"MATCH (n:{schema.BASE_LABEL}) RETURN ID(n), n ORDER BY ID(n)", {}


def links_in_order() -> Query:
    """Every link with its internal id, its type and its ends' ids, in the order of creation."""
    return (f"MATCH (a:{schema.BASE_LABEL})-[e]->(b:{schema.BASE_LABEL}) "
            "RETURN ID(e), type(e), a.id, b.id, properties(e) ORDER BY ID(e)", {})


def counts() -> Query:
    return (
        "MATCH (n) WITH count(n) AS nodes OPTIONAL MATCH ()-[e]->() RETURN nodes, count(e)",
        {},
    )


# ------------------------------------------------------------------- Cypher from protocols

# A protocol's Cypher query may only read. The server's read-only mode (GRAPH.RO_QUERY) refuses
# a query that writes when it runs; this rule says so before: when a protocol loads (so
# `cabal protocols check` reports it) and again before ``read_cypher`` sends one. It is the
# server's rule, kept on the strict side: the clauses that write, and every procedure not known
# to only read.
_WRITING_CLAUSES = ("CREATE", "MERGE", "SET", "DELETE", "REMOVE", "DROP")
READ_PROCEDURES = frozenset({
    "db.labels", "db.relationshiptypes", "db.propertykeys", "db.indexes", "db.constraints", "db.meta.stats",
    "db.idx.fulltext.querynodes", "db.idx.fulltext.queryrelationships", "db.idx.vector.querynodes",
    "db.idx.vector.queryrelationships", "dbms.procedures",
})
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`[^`]*`|//[^\n]*|/\*.*?\*/", re.DOTALL)
_WORD = re.compile(r"(?<![.$:\w])([A-Za-z_]\w*)(?!\s*:[^:])")
_CALLED = re.compile(r"\s*([A-Za-z_][\w.]*)")  # after CALL: the procedure's name (a subquery's "{" is none)


def writing_clause(text: str) -> str | None:
    """The first clause of a Cypher query that could write (``DELETE``, ``CALL db.idx...``), or
    None when it only reads. Texts, quoted names and comments are not read as clauses; a
    property (``n.set``), a parameter (``$create``), a label or a map key is not a clause."""
    plain = _QUOTED.sub(" ", text)
    for word in _WORD.finditer(plain):
        keyword = word.group(1).upper()
        if keyword in _WRITING_CLAUSES:
            return keyword
        called = _CALLED.match(plain, word.end()) if keyword == "CALL" else None
        if called:
            procedure = called.group(1).lower()
            if procedure not in READ_PROCEDURES and not procedure.startswith("algo."):
                return f"CALL {called.group(1)}"
    return None
