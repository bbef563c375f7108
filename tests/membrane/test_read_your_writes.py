"""Read-your-writes: a session's later steps see what its earlier steps (called protocols
included) prepared, exactly as if it were committed; the graph itself sees nothing until the
session commits its one cluster."""

from __future__ import annotations

import pytest

from cabal.errors import ClusterError
from cabal.membrane import Membrane
from cabal.membrane.overlay import SessionView
from cabal.membrane.session import Session

ACTOR = {"id": "agent-1", "node_type": "actor", "type": "agent", "name": "operative"}
SPACE = {"id": "space-1", "node_type": "space", "type": "module", "name": "billing"}

ADD_GOAL = """
protocol: add_goal
steps:
  goal_name:
    type: ask
    question: Which goal should {space_id} have?
    expects: {type: string, min_length: 3}
  make:
    type: create
    nodes:
      - {id: "goal-{goal_name|slugify}", node_type: narrative, type: goal, name: "{goal_name}", status: open}
    links:
      - {type: contains, from: "{space_id}", to: "goal-{goal_name|slugify}"}
"""

# The prerequisite pattern: no goal yet -> call add_goal -> query again (on_complete: goals).
PLAN = """
protocol: plan
steps:
  goals:
    type: query
    query: {find: narrative, where: {type: goal}, in_space: "{space_id}"}
  route:
    type: branch
    condition: "len(goals) == 0"
    then: get_goal
    else: pick
  get_goal:
    type: call_protocol
    protocol: add_goal
    on_complete: goals
  pick:
    type: ask
    question: "Which goal does the plan serve? {goals|lines}"
    expects: {type: id, from: "{goals}"}
  write:
    type: create
    nodes:
      - {id: "plan-{pick}", node_type: narrative, type: plan, name: "plan for {pick}"}
    links:
      - {type: contains, from: "{space_id}", to: "plan-{pick}"}
      - {type: relates, from: "plan-{pick}", to: "{pick}"}
"""


@pytest.fixture
def membrane(graph):
    graph.create_cluster([ACTOR, SPACE])
    membrane = Membrane(graph)
    membrane.load_string(ADD_GOAL)
    membrane.load_string(PLAN)
    return membrane


def test_querying_again_after_the_prerequisite_sees_what_it_prepared(membrane, graph):
    started = membrane.start("plan", {"actor_id": "agent-1", "space_id": "space-1"})
    assert (started.protocol, started.step.id) == ("add_goal", "get_goal.goal_name")
    picked = membrane.continue_session(started.session_id, "Refunds in a day")
    # The caller's second query found the goal the callee prepared: no second call, no loop.
    assert (picked.protocol, picked.step.id) == ("plan", "pick")
    assert picked.step.answer_schema["enum"] == ["goal-refunds-in-a-day"]
    assert picked.step.question.endswith("- goal-refunds-in-a-day: Refunds in a day")
    assert graph.find("narrative", {"type": "goal"}) == []  # still nothing committed
    done = membrane.continue_session(picked.session_id, "goal-refunds-in-a-day")
    assert (done.status, done.created.to_wire()) == ("complete", {"nodes": 2, "links": 3})
    assert [n["id"] for n in graph.find("narrative", in_space="space-1")] == ["goal-refunds-in-a-day", "plan-goal-refunds-in-a-day"]


def test_a_one_shot_run_takes_the_same_path(membrane, graph):
    result = membrane.run("plan", {"actor_id": "agent-1", "space_id": "space-1"},
                          {"get_goal.goal_name": "Refunds in a day", "pick": "goal-refunds-in-a-day"})  # fmt: skip
    assert (result.status, result.created.to_wire()) == ("complete", {"nodes": 2, "links": 3})


def test_an_id_answer_may_name_a_node_the_session_prepared(membrane, graph):
    membrane.load_string("""
protocol: link_back
steps:
  first:
    type: create
    nodes: [{id: draft-1, node_type: narrative, type: draft, name: a draft}]
    links: [{type: contains, from: "{space_id}", to: draft-1}]
  about:
    type: ask
    question: Which node is this about?
    expects: {type: id, node_type: narrative}
  second:
    type: create
    nodes: [{id: "note-{about}", node_type: narrative, type: note, name: note}]
    links: [{type: relates, from: "note-{about}", to: "{about}"}]
""")
    result = membrane.run("link_back", {"space_id": "space-1"}, {"about": "draft-1"})
    assert (result.status, result.created.to_wire()) == ("complete", {"nodes": 2, "links": 2})


def test_the_commit_stays_atomic(membrane, graph):
    membrane.load_string(ADD_GOAL.replace("protocol: add_goal", "protocol: broken_goal").replace(
        '{type: contains, from: "{space_id}", to: "goal-{goal_name|slugify}"}',
        '{type: contains, from: "{space_id}", to: "goal-{goal_name|slugify}"}\n      - {type: relates, from: "goal-{goal_name|slugify}", to: ghost}'))  # fmt: skip
    with pytest.raises(ClusterError, match="ghost"):
        membrane.run("broken_goal", {"space_id": "space-1"}, {"goal_name": "Never written"})
    assert graph.find("narrative") == []


# ------------------------------------------------------------------------ the view itself


def view_of(graph, **prepared) -> SessionView:
    session = Session.new("p", {"actor_id": "agent-1"}, "s-1")
    session.nodes = prepared.get("nodes", [])
    session.links = prepared.get("links", [])
    session.updates = prepared.get("updates", [])
    session.moments = prepared.get("moments", [])
    return SessionView(graph, session)


@pytest.fixture
def seeded(graph):
    graph.create_cluster(
        [ACTOR, SPACE,
         {"id": "space-2", "node_type": "space", "type": "module", "name": "refunds"},
         {"id": "goal-old", "node_type": "narrative", "type": "goal", "name": "ship", "status": "open"},
         {"id": "beh-1", "node_type": "narrative", "type": "behavior", "name": "refund once"}],
        [{"type": "contains", "from": "space-1", "to": "goal-old"}, {"type": "relates", "from": "goal-old", "to": "beh-1"}],
    )  # fmt: skip
    return graph


def test_nothing_prepared_reads_the_graph_itself(seeded):
    view = view_of(seeded)
    assert view.pending() is None
    assert view.find("narrative", in_space="space-1") == seeded.find("narrative", in_space="space-1")


def test_find_sees_prepared_nodes_updates_and_containment(seeded):
    view = view_of(
        seeded,
        nodes=[{"id": "goal-new", "node_type": "narrative", "type": "goal", "name": "new", "status": "open"},
               {"id": "goal-old", "node_type": "narrative", "type": "goal", "name": "a second goal-old: ignored"}],
        links=[{"type": "contains", "from": "space-1", "to": "goal-new"}, {"type": "contains", "from": "space-2", "to": "beh-1"}],
        updates=[{"id": "goal-old", "fields": {"status": "done"}}],
    )  # fmt: skip
    assert [(n["id"], n["status"], n["name"]) for n in view.find("narrative", {"type": "goal"}, in_space="space-1")] == [
        ("goal-new", "open", "new"),
        ("goal-old", "done", "ship"),  # the graph keeps its node (MERGE ON CREATE); the update applies
    ]
    assert [n["id"] for n in view.find("narrative", {"status": "open"})] == ["goal-new"]
    assert [n["id"] for n in view.find("narrative", in_space="space-2")] == ["beh-1"]
    assert [n["id"] for n in view.find("narrative", {"type": "goal"}, limit=1)] == ["goal-new"]
    assert [n["id"] for n in view.preset("all_goals")] == ["goal-new", "goal-old"]
    assert view.find("narrative", {"type": "goal"}, fields=["status"]) == [
        {"id": "goal-new", "status": "open"}, {"id": "goal-old", "status": "done"}]  # fmt: skip


def test_links_neighbours_and_contents_follow_prepared_links(seeded):
    view = view_of(
        seeded,
        nodes=[{"id": "val-1", "node_type": "narrative", "type": "validation", "name": "once only"}],
        links=[{"type": "ensures", "from": "val-1", "to": "beh-1"}, {"type": "contains", "from": "space-2", "to": "val-1"},
               {"type": "relates", "from": "goal-old", "to": "beh-1", "properties": {"nature": "needs"}}],
    )  # fmt: skip
    assert [(l["type"], l["from"], l["to"], l["properties"]) for l in view.links_to("beh-1")] == [
        ("ensures", "val-1", "beh-1", {}),
        ("relates", "goal-old", "beh-1", {"nature": "needs"}),
    ]
    assert [n["id"] for n in view.related_to("goal-old", depth=2)] == ["beh-1", "space-1", "val-1"]
    assert [n["id"] for n in view.related_to("beh-1", via="ensures", direction="to")] == ["val-1"]
    assert [n["id"] for n in view.contents_of("space-2")] == ["val-1"]
    assert [n["id"] for n in view.search("once")] == ["beh-1", "val-1"]


def test_prepared_moments_are_there_with_their_links(seeded):
    moment = {"node": {"id": "m-1", "node_type": "moment", "type": "answer", "status": "spoken", "prose": "looked"},
              "actor": "agent-1", "about": ["space-1"], "about_template": None, "locals": {}}  # fmt: skip
    view = view_of(seeded, moments=[moment])
    assert [n["id"] for n in view.related_to("space-1", via="about", direction="to")] == ["m-1"]
    assert [l["to"] for l in view.links_from("agent-1", "expresses")] == ["m-1"]


def test_cypher_reads_a_scratch_copy_with_the_prepared_cluster(seeded):
    view = view_of(seeded, nodes=[{"id": "val-1", "node_type": "narrative", "type": "validation", "name": "once"}],
                   links=[{"type": "contains", "from": "space-1", "to": "val-1"}])  # fmt: skip
    rows = view.read_cypher("MATCH (s:Space {id: $s})-[:CONTAINS]->(n) RETURN n.id AS id ORDER BY id", {"s": "space-1"})
    assert rows == [{"id": "goal-old"}, {"id": "val-1"}]
    assert seeded.get("val-1") is None
    assert [name for name in seeded.list_graphs() if name.startswith(f"{seeded.name}.view-")] == []


def test_a_prepared_link_to_nothing_fails_the_cypher_read_as_the_commit_would(seeded):
    view = view_of(seeded, links=[{"type": "relates", "from": "space-1", "to": "ghost"}])
    with pytest.raises(ClusterError, match="ghost"):
        view.read_cypher("MATCH (n) RETURN count(n) AS n")
    assert [name for name in seeded.list_graphs() if name.startswith(f"{seeded.name}.view-")] == []
