"""An update keeps what it replaced in its moment, so the graph still holds every state it went
through (a mission forked from an earlier round undoes later updates from it: rounds/fork.py)."""

from __future__ import annotations

import json

from cabal.membrane import Membrane
from cabal.membrane.cluster import BEFORE_FIELD


def test_an_updates_moment_keeps_the_values_it_replaced(graph) -> None:
    graph.create_cluster([{"id": "agent-1", "node_type": "agent", "type": "operative", "name": "a"},
                          {"id": "space-2", "node_type": "space", "type": "module", "name": "refunds"}],
                         [{"type": "member_of", "from": "agent-1", "to": "space-2"}])
    membrane = Membrane(graph)
    membrane.load_string("""
protocol: retitle
steps:
  name: {type: ask, question: "New name?", expects: string}
  rename: {type: update, node: "{target}", fields: {name: "{name}", reviewed: true}, moment: {prose: "renamed"}}
""")

    membrane.run("retitle", {"target": "space-2", "actor_id": "agent-1"}, {"name": "Refunds v2"}, session_id="u1")
    membrane.run("retitle", {"target": "space-2", "actor_id": "agent-1"}, {"name": "Refunds v3"}, session_id="u2")

    assert json.loads(graph.get("moment-u1-rename")[BEFORE_FIELD]) == {"space-2": {"name": "refunds", "reviewed": None}}
    assert json.loads(graph.get("moment-u2-rename")[BEFORE_FIELD]) == {"space-2": {"name": "Refunds v2",
                                                                                   "reviewed": True}}


def test_the_graph_gives_back_its_nodes_and_links_in_the_order_they_were_made(graph) -> None:
    nodes = [{"id": "s1", "node_type": "space", "type": "module", "name": "one"},
             {"id": "a1", "node_type": "agent", "type": "operative", "name": "a"},
             {"id": "s0", "node_type": "space", "type": "module", "name": "zero"},
             {"id": "a0", "node_type": "agent", "type": "operative", "name": "b"}]
    links = [{"type": "member_of", "from": "a1", "to": "s1", "properties": {}},
             {"type": "contains", "from": "s1", "to": "s0", "properties": {"why": "nested"}},
             {"type": "member_of", "from": "a0", "to": "s0", "properties": {}}]

    graph.write_in_order(nodes, links)
    made_nodes, made_links = graph.history()

    assert [node for _, node in made_nodes] == nodes  # not grouped by label: in the order given
    assert [link for _, link in made_links] == links
    copy = graph.select(graph.name + "_copy")
    try:
        copy.write_in_order([node for _, node in made_nodes], [link for _, link in made_links])
        assert [(n, l) for n, l in zip(*copy.history())] == [(n, l) for n, l in zip(made_nodes, made_links)]
    finally:
        copy.delete_graph()
