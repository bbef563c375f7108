"""Query specs run against a real graph."""

from __future__ import annotations

import pytest

from cabal.errors import TemplateError
from cabal.membrane.queries import parse_query, run_enrichment, run_query
from cabal.membrane.templates import Scope


@pytest.fixture
def seeded(graph):
    graph.create_cluster(
        [
            {"id": "space-1", "node_type": "space", "type": "module", "name": "billing"},
            {"id": "beh-1", "node_type": "narrative", "type": "behavior", "name": "charge once"},
            {"id": "val-1", "node_type": "narrative", "type": "validation", "name": "no double charge"},
            {"id": "beh-2", "node_type": "narrative", "type": "behavior", "name": "refund fully"},
        ],
        [
            {"type": "contains", "from": "space-1", "to": "beh-1"},
            {"type": "contains", "from": "space-1", "to": "val-1"},
            {"type": "ensures", "from": "val-1", "to": "beh-1"},
        ],
    )
    return graph


def query(graph, raw, **context):
    spec, problems = parse_query(raw)
    assert problems == []
    return run_query(spec, Scope(context), graph)


def ids(rows):
    return [row["id"] for row in rows]


def test_find_where_in_space_limit(seeded):
    assert ids(query(seeded, {"find": "narrative", "where": {"type": "behavior"}})) == ["beh-1", "beh-2"]
    assert ids(query(seeded, {"find": "narrative", "in_space": "{space}"}, space="space-1")) == ["beh-1", "val-1"]
    assert ids(query(seeded, {"find": "narrative", "limit": 1})) == ["beh-1"]


def test_links_from_and_to(seeded):
    rows = query(seeded, {"links_from": "val-1", "type": "ensures"})
    assert [(r["type"], r["from"], r["to"]) for r in rows] == [("ensures", "val-1", "beh-1")]
    assert [r["from"] for r in query(seeded, {"links_to": "{b}"}, b="beh-1")] == ["space-1", "val-1"]


def test_related_to_with_via_direction_depth(seeded):
    assert ids(query(seeded, {"related_to": "val-1", "via": "ensures", "direction": "from"})) == ["beh-1"]
    assert ids(query(seeded, {"related_to": "beh-1", "direction": "to"})) == ["space-1", "val-1"]
    assert ids(query(seeded, {"related_to": "val-1", "depth": 2})) == ["beh-1", "space-1"]


def test_contents_of_and_or_search(seeded):
    assert ids(query(seeded, {"contents_of": "space-1", "node_type": "narrative"})) == ["beh-1", "val-1"]
    assert ids(query(seeded, {"or_search": "refund billing"})) == ["beh-2", "space-1"]


def test_presets(seeded):
    assert ids(query(seeded, {"preset": "all_validations"})) == ["val-1"]
    assert ids(query(seeded, {"preset": "all_behaviors"})) == ["beh-1", "beh-2"]


def test_cypher_string_with_parameters_from_the_context(seeded):
    rows = query(seeded, "MATCH (n:Node {id: $node}) RETURN n.name AS name", node="beh-2")
    assert rows == [{"name": "refund fully"}]
    with pytest.raises(TemplateError, match=r"\$node"):
        query(seeded, "MATCH (n:Node {id: $node}) RETURN n")


def test_enrichment_queries(seeded):
    assert ids(run_enrichment("exploration", "space-1", seeded)) == ["beh-1", "val-1"]
    assert ids(run_enrichment("relationship", "beh-1", seeded)) == ["space-1", "val-1"]
    assert ids(run_enrichment("verification", "space-1", seeded)) == ["val-1"]
    assert ids(run_enrichment("clarification", "beh-2", seeded)) == ["beh-2"]


def test_parse_refuses_two_verbs_and_unknown_names():
    assert parse_query({"find": "space", "links_from": "x"})[1][0][0] == "query"
    assert parse_query({"links_from": "x", "type": "likes"})[1][0][0] == "query.type"
    assert parse_query({"related_to": "x", "direction": "up"})[1][0][0] == "query.direction"
    assert parse_query({"preset": "all_planets"})[1][0][0] == "query.name"
    assert parse_query({"related_to": "x", "depth": 11})[1][0][0] == "query.depth"
    assert parse_query({"find": "{kind}"})[1] == []  # a template is checked when it runs
