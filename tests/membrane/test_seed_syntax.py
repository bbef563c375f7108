"""The seed's syntax (membrane-*.md), each construct the loader used to refuse: it loads and runs.

- ``condition: "{expression}"``: references and filters inside conditions
- ``set:`` on update steps (the earlier membrane format)
- ``truncate:N`` and the compact ``truncateN``
- a moment on a create step (P6: every step leaves prose)
- a dependency's ``spawn_membrane`` and ``prompt_message``
"""

from __future__ import annotations

import textwrap

import pytest

from cabal.errors import ProtocolLoadError
from cabal.membrane import Membrane
from cabal.membrane.loader import load_protocol
from cabal.membrane.protocol import BranchStep, UpdateStep
from cabal.membrane.templates import Scope, check, evaluate, interpolate

ACTOR = {"id": "agent-1", "node_type": "actor", "type": "agent", "name": "operative"}
SPACE = {"id": "space-1", "node_type": "space", "type": "module", "name": "billing"}


def load(text: str, **kwargs):
    return load_protocol(textwrap.dedent(text), "p.yaml", **kwargs)


@pytest.fixture
def membrane(graph):
    graph.create_cluster([ACTOR, SPACE])
    return Membrane(graph)


# ------------------------------------------------------------------------- conditions

TODOS = """
protocol: todos
steps:
  ask_todos:
    type: ask
    question: Anything left to do?
    expects: {type: string_list}
  route:
    type: branch
    condition: "{ask_todos}"
    then: write_todos
    else: $complete
  write_todos:
    type: create
    nodes:
      - {for_each: ask_todos, id: "todo-{index}", node_type: narrative, type: todo, name: "{item}"}
    links:
      - {for_each: ask_todos, type: contains, from: "{space_id}", to: "todo-{index}"}
"""


def test_a_braced_condition_loads_and_decides(membrane, graph):
    protocol = load(TODOS)
    assert isinstance(protocol.steps["route"], BranchStep)
    membrane.load_string(TODOS)
    context = {"actor_id": "agent-1", "space_id": "space-1"}
    nothing = membrane.run("todos", context, {"ask_todos": []})
    assert (nothing.status, nothing.created.to_wire()) == ("complete", {"nodes": 0, "links": 0})
    some = membrane.run("todos", context, {"ask_todos": ["write docs", "tag release"]})
    assert (some.status, some.created.to_wire()) == ("complete", {"nodes": 2, "links": 2})
    assert [n["name"] for n in graph.find("narrative", {"type": "todo"}, in_space="space-1")] == ["write docs", "tag release"]


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ("{ask_todos}", ["a"]),
        ("{validations | count} == 0", True),
        ("{ask_todos|count} == 1 and {outcome} == 'can_resolve'", True),
        ("len({validations}) == 0", True),
        ("{follow_up} is not empty", False),
        ("{follow_up} is empty", True),
        ("{ask_todos} is not empty", True),
        ("{outcome|upper} == 'CAN_RESOLVE'", True),
        ("'{outcome}' == '{outcome}'", True),  # inside quotes a brace is text, not a reference
        ("{missing_answer} is empty", True),  # a name the protocol provides, not reached: no answer
    ],
)
def test_conditions_read_references_and_filters(condition, expected):
    scope = Scope({"ask_todos": ["a"], "validations": [], "outcome": "can_resolve", "follow_up": ""},
                  absent=frozenset({"missing_answer"}))  # fmt: skip
    assert evaluate(condition, scope) == expected


def test_a_condition_with_an_unknown_filter_is_refused_where_it_is():
    with pytest.raises(ProtocolLoadError) as caught:
        load(TODOS.replace('"{ask_todos}"', '"{ask_todos | tally} > 0"'))
    problem = caught.value.problems[0]
    assert (problem.step, problem.field, problem.line) == ("route", "condition", 10)
    assert "unknown filter 'tally'" in problem.message


# ------------------------------------------------------------------------------ update

CLOSE = """
protocol: close
connectome: close
steps:
  - id: reason
    type: ask
    question: Why close {target}?
    expects: {type: string, min_length: 3}
  - id: mark
    type: update
    target: "{target}"
    set:
      status: closed
      reason: "{reason|truncate40}"
"""


def test_update_with_set_as_the_earlier_format_writes_it(membrane, graph):
    graph.create_cluster([{"id": "goal-1", "node_type": "narrative", "type": "goal", "name": "g", "status": "open"}])
    step = load(CLOSE).steps["mark"]
    assert isinstance(step, UpdateStep) and dict(step.fields) == {"status": "closed", "reason": "{reason|truncate40}"}
    membrane.load_string(CLOSE)
    reason = "superseded by the quarterly plan, which covers the same ground and more"
    result = membrane.run("close", {"actor_id": "agent-1", "target": "goal-1"}, {"reason": reason})
    assert result.status == "complete"
    node = graph.get("goal-1")
    assert (node["status"], node["reason"]) == ("closed", reason[:40])


def test_fields_and_set_together_is_a_located_problem():
    with pytest.raises(ProtocolLoadError) as caught:
        load("""
        protocol: p
        steps:
          a: {type: update, node: "{x}", fields: {a: 1}, set: {b: 2}}
        """)
    assert [(p.step, p.field, p.line) for p in caught.value.problems] == [("a", "set", 4)]


# --------------------------------------------------------------------------- templates


def test_truncate_in_both_forms():
    scope = Scope({"title": "Charges are idempotent"})
    assert interpolate("{title|truncate:7}", scope) == "Charges"
    assert interpolate("{title | truncate7}", scope) == "Charges"
    assert interpolate("{title|slugify|truncate50}", scope) == "charges-are-idempotent"
    assert check("{title|truncate50}") == []
    assert "needs a number" in check("{title|truncate}")[0]


# -------------------------------------------------------------------- create moments

NOTE = """
protocol: note
steps:
  text:
    type: ask
    question: What is worth noting?
    expects: {type: string, min_length: 3}
  write:
    type: create
    nodes:
      - {id: "note-{text|slugify}", node_type: narrative, type: note, name: "{text}"}
    links:
      - {type: contains, from: "{space_id}", to: "note-{text|slugify}"}
    moment:
      type: filing
      agent_provides: [description]
"""


def test_a_create_step_records_its_moment_about_what_it_created(membrane, graph):
    membrane.load_string(NOTE)
    result = membrane.run("note", {"actor_id": "agent-1", "space_id": "space-1"}, {"text": "Ledger balances"},
                          session_id="s-note")  # fmt: skip
    assert (result.status, result.created.to_wire()) == ("complete", {"nodes": 2, "links": 3})
    moment = graph.get("moment-s-note-write")
    assert (moment["type"], moment["status"], moment["prose"]) == ("filing", "spoken", "write created note-ledger-balances")
    assert sorted((l["type"], l["from"], l["to"]) for l in graph.links_to("moment-s-note-write")) == [
        ("expresses", "agent-1", "moment-s-note-write")
    ]
    assert [(l["type"], l["to"]) for l in graph.links_from("moment-s-note-write")] == [("about", "note-ledger-balances")]


def test_a_create_moment_can_say_its_own_prose():
    protocol = load(NOTE.replace("agent_provides: [description]", 'prose: "filed {text}"'))
    assert protocol.steps["write"].moment.prose == "filed {text}"


def test_a_branch_still_records_no_moment():
    with pytest.raises(ProtocolLoadError, match="a branch step records no moment"):
        load("""
        protocol: p
        steps:
          a: {type: branch, condition: "x", then: $complete, moment: true}
        """)


# ------------------------------------------------------------------------ dependencies

SPAWNING = """
protocol: needs_note
dependencies:
  - id: first_note
    query: {find: narrative, where: {type: note}, in_space: "{space_id}"}
    on_missing: {action: spawn, spawn_membrane: note}
  - id: reviewer
    exists: "{reviewer}"
    on_missing: {action: prompt, prompt_message: "nobody called {reviewer} yet"}
steps:
  ok:
    type: ask
    question: Go on?
    expects: {type: enum, options: [yes]}
"""


def test_the_seeds_dependency_keys(membrane):
    membrane.load_string(NOTE)
    protocol = membrane.load_string(SPAWNING)
    assert [(d.action, d.protocol, d.message) for d in protocol.dependencies] == [
        ("spawn", "note", None),
        ("prompt", None, "nobody called {reviewer} yet"),
    ]
    result = membrane.start("needs_note", {"actor_id": "agent-1", "space_id": "space-1", "reviewer": "rev-9"})
    assert (result.protocol, result.step.id, result.prompt) == ("note", "first_note.text", "nobody called rev-9 yet")


def test_an_unknown_dependency_key_is_located():
    with pytest.raises(ProtocolLoadError) as caught:
        load(SPAWNING.replace("spawn_membrane: note", "spawn_membrane: note, retry: 3"), protocol_exists=lambda n: True)
    assert [(p.field, p.line) for p in caught.value.problems] == [("dependencies.0.on_missing.retry", 6)]


def test_a_canonical_file_may_keep_documentation():
    protocol = load("""
    protocol: p
    docs: {triggers: [{event: a release}], owner: platform}
    steps:
      a: {type: ask, question: x, expects: string}
    """)
    assert dict(protocol.docs) == {"triggers": [{"event": "a release"}], "owner": "platform"}
