"""Instantiating create specs, moments and the P4 rule. Pure: no graph."""

from __future__ import annotations

import textwrap

import pytest

from cabal.errors import ProtocolRuntimeError, TemplateError
from cabal.membrane import cluster
from cabal.membrane.results import Cluster
from cabal.membrane.loader import load_protocol
from cabal.membrane.protocol import MomentSpec
from cabal.membrane.templates import Scope

CREATE = """
protocol: c
steps:
  make:
    type: create
    nodes:
      - id: "val-{prefix}"
        node_type: narrative
        type: validation
        name: "{title}"
        tags: "{tags}"
        meta: "{meta}"
        note: "{note}"
        weight: "{weight}"
      - for_each: picks
        condition: "item != 'skip'"
        id: "dock-{prefix}-{index}"
        node_type: thing
        type: dock
        name: "{item}"
    links:
      - {type: contains, from: "{space}", to: "val-{prefix}"}
      - for_each: picks
        condition: "item != 'skip'"
        type: docks
        from: "dock-{prefix}-{index}"
        to: "val-{prefix}"
        properties: {order: "{index}"}
"""
CONTEXT = {
    "prefix": "m1", "title": "No double", "tags": ["a", "b"], "meta": {"k": 1}, "note": None,
    "weight": 3, "space": "space-1", "picks": ["x", "skip", "y"],
}  # fmt: skip


def instantiate(context=CONTEXT):
    step = load_protocol(textwrap.dedent(CREATE)).steps["make"]
    return cluster.instantiate(step, Scope(context))


def test_nodes_and_links_with_for_each_and_condition():
    nodes, links = instantiate()
    assert nodes[0] == {
        "id": "val-m1", "node_type": "narrative", "type": "validation", "name": "No double",
        "tags": ["a", "b"], "meta": '{"k": 1}', "weight": 3,
    }  # fmt: skip
    assert [n["id"] for n in nodes[1:]] == ["dock-m1-0", "dock-m1-2"]
    assert links == [
        {"type": "contains", "from": "space-1", "to": "val-m1"},
        {"type": "docks", "from": "dock-m1-0", "to": "val-m1", "properties": {"order": 0}},
        {"type": "docks", "from": "dock-m1-2", "to": "val-m1", "properties": {"order": 2}},
    ]


def test_a_missing_value_in_an_id_is_an_error():
    with pytest.raises(TemplateError, match="prefix"):
        instantiate({k: v for k, v in CONTEXT.items() if k != "prefix"})
    with pytest.raises(TemplateError, match="empty"):
        instantiate({**CONTEXT, "prefix": ""})


def test_isolated_nodes_are_refused():
    lonely = {"id": "lonely", "node_type": "thing", "type": "x", "name": "x"}
    with pytest.raises(ProtocolRuntimeError, match="'lonely' linked to nothing"):
        cluster.build([lonely], [], [], {})


def test_moments_link_actor_and_target():
    moment = cluster.moment_record(
        MomentSpec(), node_id=cluster.moment_id("s", "ask", 1, None), actor="agent-1",
        fields={"prose": "p", "reasoning": None, "step": "ask"}, about=None, locals={},
    )  # fmt: skip
    node = {"id": "n", "node_type": "thing", "type": "x", "name": "x"}
    nodes, links = cluster.build([node], [], [moment], {})
    assert nodes[1] == {"id": "moment-s-ask", "node_type": "moment", "type": "answer", "status": "spoken",
                        "prose": "p", "step": "ask"}  # fmt: skip
    assert links == [
        {"type": "expresses", "from": "agent-1", "to": "moment-s-ask"},
        {"type": "about", "from": "moment-s-ask", "to": "n"},
    ]


def test_moment_ids_are_derived_not_random():
    assert cluster.moment_id("s", "call.ask", 1, None) == "moment-s-call.ask"
    assert cluster.moment_id("s", "ask", 2, 3) == "moment-s-ask-v2-3"


def test_a_moment_needs_an_actor():
    with pytest.raises(ProtocolRuntimeError, match="no actor_id"):
        cluster.moment_record(MomentSpec(), node_id="m", actor=None, fields={"step": "a"}, about=None, locals={})


def test_merge_keeps_shared_nodes_once():
    a = Cluster(nodes=({"id": "n", "node_type": "thing", "type": "x", "t": 1},), links=({"type": "relates", "from": "n", "to": "m"},))
    b = Cluster(nodes=({"id": "n", "node_type": "thing", "type": "x", "t": 2},), links=({"type": "relates", "from": "n", "to": "m"},),
                updates=({"id": "s", "fields": {}},))  # fmt: skip
    merged = cluster.merge([a, b])
    assert merged == Cluster(nodes=a.nodes, links=a.links, updates=b.updates)


def test_a_node_type_from_an_answer_that_is_a_list_is_a_runtime_error():
    """Found by the type checker: the type read from an answer was looked up in a dict as it
    came, and a list there (an answer of several types) crashed with "unhashable type"."""
    step = load_protocol(textwrap.dedent("""
        protocol: c
        steps:
          make:
            type: create
            nodes:
              - {id: "n-{prefix}", node_type: "{kind}", type: note, name: "n"}
        """)).steps["make"]
    with pytest.raises(ProtocolRuntimeError) as caught:
        cluster.instantiate(step, Scope({"prefix": "m1", "kind": ["narrative", "thing"]}))
    assert str(caught.value).startswith("node 'n-m1': {kind} is ['narrative', 'thing'], which is not a node type")
