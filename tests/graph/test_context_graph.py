"""ContextGraph against the real embedded FalkorDB server: writes, reads, safety."""

from __future__ import annotations

import json
import random

import pytest
import redis
from falkordb.helpers import stringify_param_value

from cabal.errors import ClusterError, NodeNotFound, SchemaError
from cabal.graph import ContextGraph, reads
from cabal.graph.reads import writing_clause
from cabal.graph.schema import cypher_header
from cabal.vocabulary import Step


def fixture_graph(graph) -> None:
    """A small module: space s1 holds two behaviors and a validation that ensures one of them."""
    graph.create_cluster(
        [
            {"id": "s1", "node_type": "space", "type": "module", "name": "Auth module"},
            {"id": "s2", "node_type": "space", "type": "module", "name": "Billing"},
            {"id": "b1", "node_type": "narrative", "type": "behavior", "name": "Login", "content": "A user logs in with a password"},
            {"id": "b2", "node_type": "narrative", "type": "behavior", "name": "Logout", "content": "Session ends"},
            {"id": "v1", "node_type": "narrative", "type": "validation", "name": "Password checked", "content": "Wrong password refused"},
            {"id": "g1", "node_type": "narrative", "type": "goal", "name": "Ship auth"},
            {"id": "e1", "node_type": "narrative", "type": "escalation", "name": "Which hash?"},
        ],
        [
            {"type": "contains", "from": "s1", "to": "b1"},
            {"type": "contains", "from": "s1", "to": "b2"},
            {"type": "contains", "from": "s1", "to": "v1"},
            {"type": "contains", "from": "s2", "to": "g1"},
            {"type": "ensures", "from": "v1", "to": "b1", "properties": {"strength": 0.9}},
            {"type": "relates", "from": "e1", "to": "v1"},
        ],
    )


def ids(nodes: list[dict]) -> list[str]:
    return [node["id"] for node in nodes]


def test_create_cluster_counts_and_get(graph):
    created = graph.create_cluster(
        [{"id": "a", "node_type": "thing", "type": "file", "name": "a.py", "lines": 3, "tags": ["x", "y"]}],
        [],
    )
    assert created == {"nodes": 1, "links": 0}
    assert graph.get("a") == {"id": "a", "node_type": "thing", "type": "file", "name": "a.py", "lines": 3, "tags": ["x", "y"]}
    assert graph.exists("a") is True
    assert graph.exists("b") is False
    assert graph.get("b") is None


def test_recommit_is_idempotent(graph):
    nodes = [{"id": f"n{i}", "node_type": "thing", "type": "file", "name": f"f{i}"} for i in range(3)]
    links = [{"type": "relates", "from": "n0", "to": "n1"}, {"type": "relates", "from": "n1", "to": "n2"}]
    assert graph.create_cluster(nodes, links) == {"nodes": 3, "links": 2}
    assert graph.create_cluster(nodes, links) == {"nodes": 0, "links": 0}
    assert graph.counts() == {"nodes": 3, "links": 2}


def test_existing_node_is_not_rewritten_by_a_create(graph):
    graph.create_cluster([{"id": "v", "node_type": "thing", "type": "file", "name": "first"}])
    graph.create_cluster([{"id": "v", "node_type": "thing", "type": "file", "name": "second"}])
    assert graph.get("v")["name"] == "first"


def test_bad_link_leaves_graph_unchanged(graph):
    fixture_graph(graph)
    before = graph.counts()
    with pytest.raises(ClusterError) as caught:
        graph.create_cluster(
            [{"id": "new1", "node_type": "thing", "type": "file", "name": "x"}],
            [{"type": "relates", "from": "new1", "to": "s1"}, {"type": "relates", "from": "new1", "to": "ghost"}],
        )
    assert caught.value.missing_ids == ["ghost"]
    assert graph.counts() == before
    assert graph.exists("new1") is False


def test_update_of_missing_node_in_cluster_writes_nothing(graph):
    with pytest.raises(ClusterError):
        graph.create_cluster(
            [{"id": "n", "node_type": "thing", "type": "file", "name": "x"}], [], updates=[{"id": "ghost", "fields": {"a": 1}}]
        )
    assert graph.counts() == {"nodes": 0, "links": 0}


def test_same_id_under_another_type_is_refused_whole(graph):
    graph.create_cluster([{"id": "chair-1", "node_type": "agent", "type": "chair", "name": "Chair"}])
    with pytest.raises(ClusterError, match="reuses existing id.s. with another node type: .chair-1. is a agent, not a actor"):
        graph.create_cluster(
            [
                {"id": "x", "node_type": "thing", "type": "file", "name": "x"},
                {"id": "chair-1", "node_type": "actor", "type": "agent", "name": "Chair"},
            ]
        )
    assert graph.counts() == {"nodes": 1, "links": 0}


def test_link_properties_update_in_place_on_recommit(graph):
    fixture_graph(graph)
    graph.create_cluster([], [{"type": "ensures", "from": "v1", "to": "b1", "properties": {"strength": 0.5}}])
    assert graph.links_from("v1", "ensures") == [{"type": "ensures", "from": "v1", "to": "b1", "properties": {"strength": 0.5}}]


def test_unlink_and_link_in_one_cluster(graph):
    fixture_graph(graph)
    graph.create_cluster([{"id": "actor", "node_type": "actor", "type": "agent", "name": "A"}],
                         [{"type": "occupies", "from": "actor", "to": "s1"}])
    result = graph.create_cluster([], [{"type": "inhabits", "from": "actor", "to": "s1"}],
                                  unlinks=[{"type": "occupies", "from": "actor", "to": "s1"}])
    assert result == {"nodes": 0, "links": 1, "unlinked": 1}
    assert graph.links_from("actor") == [{"type": "inhabits", "from": "actor", "to": "s1", "properties": {}}]
    # Unlinks combine with nodes and updates in the same cluster.
    result = graph.create_cluster([{"id": "note", "node_type": "thing", "type": "file", "name": "n"}],
                                  [{"type": "relates", "from": "note", "to": "actor"}],
                                  updates=[{"id": "actor", "fields": {"left": True}}],
                                  unlinks=[{"type": "inhabits", "from": "actor", "to": "s1"}])
    assert result == {"nodes": 1, "links": 1, "unlinked": 1}
    assert graph.get("actor")["left"] is True and graph.links_from("actor") == []
    graph.create_cluster([], [{"type": "inhabits", "from": "actor", "to": "s1"}])
    # Removing a link that is not there is not an error, and a bad cluster removes nothing.
    assert graph.create_cluster([], [], unlinks=[{"type": "occupies", "from": "actor", "to": "s1"}])["unlinked"] == 0
    with pytest.raises(ClusterError):
        graph.create_cluster([], [{"type": "relates", "from": "actor", "to": "ghost"}],
                             unlinks=[{"type": "inhabits", "from": "actor", "to": "s1"}])
    assert graph.links_from("actor") == [{"type": "inhabits", "from": "actor", "to": "s1", "properties": {}}]


def test_find_where_in_space_limit(graph):
    fixture_graph(graph)
    assert ids(graph.find("narrative")) == ["b1", "b2", "e1", "g1", "v1"]
    assert ids(graph.find("narrative", {"type": "behavior"})) == ["b1", "b2"]
    assert ids(graph.find("narrative", {"type": ["goal", "escalation"]})) == ["e1", "g1"]
    assert ids(graph.find("narrative", in_space="s1")) == ["b1", "b2", "v1"]
    assert ids(graph.find("narrative", {"type": "behavior"}, in_space="s1", limit=1)) == ["b1"]
    assert graph.find("space", {"name": "Nope"}) == []
    assert graph.find("narrative", {"type": "behavior"}, fields=["name", "missing"]) == [
        {"id": "b1", "name": "Login", "missing": None},
        {"id": "b2", "name": "Logout", "missing": None},
    ]


def test_links_from_and_to(graph):
    fixture_graph(graph)
    assert graph.links_from("s1") == [
        {"type": "contains", "from": "s1", "to": "b1", "properties": {}},
        {"type": "contains", "from": "s1", "to": "b2", "properties": {}},
        {"type": "contains", "from": "s1", "to": "v1", "properties": {}},
    ]
    assert graph.links_to("v1") == [
        {"type": "contains", "from": "s1", "to": "v1", "properties": {}},
        {"type": "relates", "from": "e1", "to": "v1", "properties": {}},
    ]
    assert graph.links_to("v1", "relates") == [{"type": "relates", "from": "e1", "to": "v1", "properties": {}}]
    assert graph.links_from("b1") == [] and graph.links_to("b1", "ensures")[0]["properties"] == {"strength": 0.9}


def test_related_to_directions_and_depth(graph):
    fixture_graph(graph)
    assert ids(graph.related_to("v1")) == ["b1", "e1", "s1"]
    assert ids(graph.related_to("v1", direction="from")) == ["b1"]
    assert ids(graph.related_to("v1", direction="to")) == ["e1", "s1"]
    assert ids(graph.related_to("v1", via="ensures")) == ["b1"]
    assert ids(graph.related_to("e1", depth=2)) == ["b1", "s1", "v1"]
    assert ids(graph.related_to("e1", via=["relates", "ensures"], direction="from", depth=2)) == ["b1", "v1"]


def test_contents_of(graph):
    fixture_graph(graph)
    graph.create_cluster([{"id": "inner", "node_type": "space", "type": "module", "name": "Inner"},
                          {"id": "deep", "node_type": "thing", "type": "file", "name": "deep.py"}],
                         [{"type": "contains", "from": "s1", "to": "inner"}, {"type": "contains", "from": "inner", "to": "deep"}])
    assert ids(graph.contents_of("s1")) == ["b1", "b2", "inner", "v1"]
    assert ids(graph.contents_of("s1", node_type="narrative")) == ["b1", "b2", "v1"]
    assert ids(graph.contents_of("s1", depth=2)) == ["b1", "b2", "deep", "inner", "v1"]
    assert ids(graph.contents_of("s1", node_type="thing", depth=2)) == ["deep"]


def test_search_is_an_or_search_ranked_by_hits(graph):
    fixture_graph(graph)
    assert ids(graph.search("password")) == ["b1", "v1"]
    assert ids(graph.search("session billing")) == ["b2", "s2"]
    assert ids(graph.search("wrong password")) == ["v1", "b1"]
    assert graph.search("   ") == []


def test_presets(graph):
    fixture_graph(graph)
    assert ids(graph.all_spaces()) == ["s1", "s2"]
    assert ids(graph.all_validations()) == ["v1"]
    assert ids(graph.all_behaviors()) == ["b1", "b2"]
    assert ids(graph.all_goals()) == ["g1"]
    assert ids(graph.all_escalations()) == ["e1"]
    with pytest.raises(SchemaError, match="unknown preset"):
        graph.preset("all_everything")


def test_update(graph):
    fixture_graph(graph)
    assert graph.update("g1", {"status": "done", "name": "Shipped"})["status"] == "done"
    assert graph.get("g1")["name"] == "Shipped"
    assert "status" not in graph.update("g1", {"status": None})
    with pytest.raises(NodeNotFound):
        graph.update("ghost", {"a": 1})
    with pytest.raises(SchemaError, match="may not change 'node_type'"):
        graph.update("g1", {"node_type": "space"})


HOSTILE = "x'}) DETACH DELETE n // \" ` $param {{ }} MATCH (m)\nDELETE m; \\'"


HOSTILE_ID = HOSTILE.replace("\n", " ")  # ids may not hold control characters; values may


def test_values_full_of_cypher_are_stored_literally(graph):
    fixture_graph(graph)
    graph.create_cluster(
        [{"id": HOSTILE_ID, "node_type": "thing", "type": "file", "name": HOSTILE, "content": [HOSTILE, "ok"]}],
        [{"type": "relates", "from": HOSTILE_ID, "to": "s1", "properties": {"why": HOSTILE}}],
    )
    expected = {"id": HOSTILE_ID, "node_type": "thing", "type": "file", "name": HOSTILE, "content": [HOSTILE, "ok"]}
    assert graph.get(HOSTILE_ID) == expected
    assert graph.links_from(HOSTILE_ID) == [{"type": "relates", "from": HOSTILE_ID, "to": "s1", "properties": {"why": HOSTILE}}]
    assert ids(graph.find("thing", {"name": HOSTILE})) == [HOSTILE_ID]
    assert graph.update(HOSTILE_ID, {"note": HOSTILE})["note"] == HOSTILE
    assert ids(graph.search("DETACH")) == [HOSTILE_ID]
    assert graph.counts() == {"nodes": 8, "links": 7}


def queries_served(graph) -> int:
    """Graph queries the server has received (its own command statistics), of any graph."""
    stats = graph._db.connection.info("commandstats")
    return sum(stats.get(f"cmdstat_graph.{command}", {}).get("calls", 0) for command in ("QUERY", "RO_QUERY"))


@pytest.mark.parametrize(
    "call",
    [
        lambda g: g.create_cluster([{"id": "a", "node_type": "Robot", "type": "x", "name": "a"}]),
        lambda g: g.create_cluster([{"id": "a", "node_type": "thing", "type": "x", "name": "a"}],
                                   [{"type": "pwned) DELETE (n", "from": "a", "to": "a"}]),
        lambda g: g.create_cluster([{"id": "a", "node_type": "thing", "type": "x", "name": "a", "bad key": 1}]),
        lambda g: g.create_cluster([{"id": "a", "node_type": "thing", "type": "x", "name": "a", "m": {"nested": 1}}]),
        lambda g: g.create_cluster([{"id": "a", "node_type": "thing", "type": "x"}]),
        lambda g: g.create_cluster([{"id": "a", "node_type": "thing", "name": "a"}]),
        lambda g: g.create_cluster([{"id": "trailing\n", "node_type": "thing", "type": "x", "name": "a"}]),
        lambda g: g.find("Robot"),
        lambda g: g.find("thing", {"name) RETURN 1 //": "x"}),
        lambda g: g.links_from("a", "owns|contains"),
        lambda g: g.related_to("a", depth=99),
        lambda g: g.related_to("a", direction="sideways"),
        lambda g: g.contents_of("a", node_type="Robot"),
    ],
    ids=["label", "link-type", "field-name", "nested-value", "required-field", "missing-type", "id-whitespace",
         "find-label", "where-key", "link-type-union", "depth", "direction", "contents-label"],
)
def test_unknown_names_refused_before_any_query(graph, call):
    graph.counts()  # the graph and its indexes exist: what follows could only send the call's own query
    served = queries_served(graph)
    with pytest.raises(SchemaError):
        call(graph)
    assert queries_served(graph) == served


THING = {"id": "t1", "node_type": "thing", "type": "x", "name": "ok"}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda g: g.create_cluster([{**THING, "name": "a\ud800b"}]),
         "t1: field 'name' holds a lone surrogate (U+D800) at position 1, which the graph cannot store"),
        (lambda g: g.create_cluster([{**THING, "content": "a\x00b"}]),
         "t1: field 'content' holds a NUL character at position 1, which the graph cannot store"),
        (lambda g: g.create_cluster([{**THING, "score": float("nan")}]),
         "t1: field 'score' holds the number nan, which the graph cannot store"),
        (lambda g: g.create_cluster([{**THING, "tags": ["fine", float("inf")]}]),
         "t1: field 'tags' holds the number inf, which the graph cannot store"),
        (lambda g: g.create_cluster([{**THING, "count": 2**70}]),
         "t1: field 'count' holds an integer beyond 64 bits, which the graph cannot store"),
        (lambda g: g.create_cluster([{**THING, "id": "t\ud800"}]),
         "node id 't\\ud800' has edge whitespace, control characters or lone surrogates"),
        (lambda g: g.create_cluster([THING], [{"type": "relates", "from": "t1", "to": "t1",
                                               "properties": {"why": "\udfff"}}]),
         "link relates: field 'why' holds a lone surrogate (U+DFFF) at position 0, which the graph cannot store"),
        (lambda g: g.update("s1", {"name": "a\x00"}),
         "s1: field 'name' holds a NUL character at position 1, which the graph cannot store"),
        (lambda g: g.get("a\x00b"), "query parameter 'id' holds a NUL character at position 1; nothing was sent"),
        (lambda g: g.find("thing", {"name": "a\ud800"}),
         "query parameter 'w0' holds a lone surrogate (U+D800) at position 1; nothing was sent"),
        (lambda g: g.read_many({"one": reads.node_by_id("a\x00b")}),
         "query parameter 'id' holds a NUL character at position 1; nothing was sent"),
        (lambda g: g.read_cypher("RETURN $x AS x", {"x": {"deep": object()}}),
         "query parameter 'x.deep' holds object; only texts, numbers, booleans, lists and maps can be sent; "
         "nothing was sent"),
        (lambda g: g.read_cypher("RETURN $x AS x", {"x": {"a`b": 1}}),
         "query parameter 'x' has the key 'a`b'; keys are non-empty strings without backticks; nothing was sent"),
        (lambda g: g.select(""), "invalid graph name '': a graph is named by a non-empty text without edge "
                                 "whitespace or control characters"),
    ],
    ids=["surrogate", "nul", "nan", "inf-in-list", "int-beyond-64-bits", "id-surrogate", "link-property", "update",
         "get", "find", "read-many", "unknown-type", "backtick-key", "graph-name"],
)
def test_values_the_graph_cannot_take_are_refused_with_where_they_are(graph, call, message):
    fixture_graph(graph)
    before = graph.counts()
    served = queries_served(graph)

    with pytest.raises(SchemaError) as refused:
        call(graph)

    assert str(refused.value) == message
    assert queries_served(graph) == served
    assert graph.counts() == before


def test_an_empty_graph_name_is_refused_before_any_server_is_asked(tmp_path):
    home = tmp_path / "never-made"
    with pytest.raises(SchemaError, match="invalid graph name ''"):
        ContextGraph.open(name="", home=home)
    assert not home.exists()  # no server started, no workspace made


# Queries the server's read-only mode runs, and queries it refuses as writes.
READ_QUERIES = [
    "MATCH (n) WHERE n.name = 'CREATE' RETURN n", "MATCH (n) RETURN n.set AS x, $create AS y",
    "MATCH (n:Node) RETURN {set: 1, delete: n.id}", "MATCH (a)-[:RELATES]->(b) RETURN a // then DELETE",
    "CALL db.labels()", "CALL db.indexes()", "MATCH (n) CALL { WITH n RETURN n.id AS i } RETURN i",
    "CALL algo.BFS(null, 1, null) YIELD nodes RETURN nodes", "UNWIND [1] AS x RETURN x",
]
WRITING_QUERIES = [
    "MATCH (n) DETACH DELETE n", "CREATE (n:Thing)", "MERGE (n:Thing {id: 1})", "MATCH (n) SET n.x = 1",
    "MATCH (n) REMOVE n.x", "CALL db.idx.fulltext.createNodeIndex('Thing', 'name')", "CALL db.idx.fulltext.drop('Thing')",
    "CREATE INDEX FOR (n:Thing) ON (n.y)", "DROP INDEX ON :Thing(y)", "MATCH (n) FOREACH (x IN [1] | SET n.y = x)",
    "match (n) delete n",
]


@pytest.mark.parametrize("query", READ_QUERIES + WRITING_QUERIES)
def test_the_rule_for_writing_queries_is_the_servers_read_only_mode(graph, query):
    fixture_graph(graph)
    try:
        graph._graph.ro_query(query)
        server_refuses = False
    except redis.ResponseError as error:
        server_refuses = "read-only" in str(error)

    assert (writing_clause(query) is not None) == server_refuses == (query in WRITING_QUERIES)
    if server_refuses:
        with pytest.raises(SchemaError, match=r"^a read-only query may not write \("):
            graph.read_cypher(query)
    assert graph.counts() == {"nodes": 7, "links": 6}


def test_read_cypher_is_read_only(graph):
    fixture_graph(graph)
    rows = graph.read_cypher("MATCH (n:Space) WHERE n.id = $id RETURN n.name AS name", {"id": "s1"})
    assert rows == [{"name": "Auth module"}]
    with pytest.raises(Exception, match="read-only"):
        graph.read_cypher("MATCH (n) DETACH DELETE n")
    assert graph.counts()["nodes"] == 7


def tricky_values(seed: int, count: int) -> list[object]:
    """Nested parameter values with the characters a Cypher literal must escape."""
    rng = random.Random(seed)
    texts = ["", "plain", 'say "hi"', "back\\slash", "\\\"", "new\nline\ttab", "émoji 🎉", "'single'", "`tick`",
             "}{][,:", "CYPHER x=1 ", "$param", "\\u0041"]

    def value(depth: int) -> object:
        kind = rng.randrange(9 if depth < 3 else 6)
        if kind == 0:
            return rng.choice(texts)
        if kind == 1:
            return rng.randrange(-(2**63), 2**63)
        if kind == 2:
            return rng.choice([0.1, -2.5e-7, 1e21, 3.0])
        if kind == 3:
            return rng.choice([True, False, None])
        if kind == 4:
            return Step.WRITE  # a str subclass, as the engine's vocabulary is
        if kind == 5:
            return rng.choice(texts) + rng.choice(texts)
        if kind in (6, 7):
            return [value(depth + 1) for _ in range(rng.randrange(4))]
        return {rng.choice(["a", "b_1", "Name", "with space", "ü"]): value(depth + 1) for _ in range(rng.randrange(4))}

    return [value(0) for _ in range(count)]


def test_the_parameter_header_is_the_clients_and_the_server_reads_back_every_value(graph):
    values = tricky_values(seed=14, count=300)
    for item in values:
        assert cypher_header({"p": item}) == f"CYPHER p={stringify_param_value(item)} "
    assert cypher_header({}) == cypher_header(None) == ""
    # Through the server: each value comes back as it was sent (tuples as lists, enums as texts).
    fixture_graph(graph)  # a graph that exists: reading one that does not reads as empty
    for item in values[:60]:
        (row,) = graph.read_cypher("RETURN $p AS p", {"p": item})
        assert row["p"] == json.loads(json.dumps(item))
