"""End-to-end: the Membrane against a real FalkorDB graph, checked node by node and link by link."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from cabal.errors import AnswerRejected, ProtocolRuntimeError, ResourceNotFound, TemplateError
from cabal.membrane import Created, Membrane, register_entity

HERE = Path(__file__).parent / "protocols"
MOMENT = {"description": "I looked at the space", "reasoning": "it had no behavior yet"}


@pytest.fixture
def membrane(graph):
    graph.create_cluster(
        [
            {"id": "space-1", "node_type": "space", "type": "module", "name": "billing"},
            {"id": "space-2", "node_type": "space", "type": "module", "name": "refunds"},
            {"id": "agent-1", "node_type": "actor", "type": "agent", "name": "operative one"},
            {"id": "beh-other", "node_type": "narrative", "type": "behavior", "name": "refund once"},
            {"id": "goal-1", "node_type": "narrative", "type": "goal", "name": "a goal"},
        ],
        [
            {"type": "contains", "from": "space-2", "to": "beh-other"},
            {"type": "contains", "from": "space-2", "to": "goal-1"},
        ],
    )
    return Membrane(graph, [HERE])


def answered(envelope_answer, **moment):
    return {"answer": envelope_answer, **MOMENT, **moment}


def links_of(graph, node_id):
    return sorted((l["type"], l["from"], l["to"]) for l in graph.links_from(node_id) + graph.links_to(node_id))


# ------------------------------------------------------------------------ the full flow


def test_query_branch_call_ask_and_create_with_for_each_links(membrane, graph):
    r = membrane.start("add_invariant", {"actor_id": "agent-1", "space_id": "space-1", "timestamp": "T"})
    sid = r.session_id
    # space-1 holds no behavior: the query found none, the branch called add_behavior
    assert (r.status, r.protocol, r.step.id) == ("active", "add_behavior", "add_one.name")
    assert r.step.question == "Name the behavior in space-1"
    assert r.step.expects == {"type": "string", "min_length": 3}
    assert r.step.moment == {"type": "answer", "agent_provides": ["description", "reasoning"]}
    assert graph.get(sid)["status"] == "active"

    r = membrane.continue_session(sid, answered("Charges are idempotent"))
    assert (r.status, r.protocol, r.step.id) == ("active", "add_invariant", "pick_behaviors")
    # the new behavior is not committed yet, but it is a valid answer: the session prepared it
    assert not graph.exists("behavior-charges-are-idempotent")
    r = membrane.continue_session(sid, answered(["behavior-charges-are-idempotent", "beh-other"], reasoning="both"))
    assert r.step.id == "title"
    r = membrane.continue_session(sid, "No double charge")
    assert r.step.id == "details" and [q["name"] for q in r.step.questions] == ["rule", "severity"]
    r = membrane.continue_session(sid, {"rule": "a charge id is captured once", "severity": "high"})
    assert r.to_wire() == {
        "status": "complete",
        "session_id": sid,
        "summary": 'Validation No double charge ensures ["behavior-charges-are-idempotent", "beh-other"]',
        "created": {"nodes": 4, "links": 9},
    }

    assert graph.get("behavior-charges-are-idempotent") == {
        "id": "behavior-charges-are-idempotent", "node_type": "narrative", "type": "behavior",
        "name": "Charges are idempotent",
    }  # fmt: skip
    assert graph.get("validation-no-double-charge") == {
        "id": "validation-no-double-charge", "node_type": "narrative", "type": "validation",
        "name": "No double charge", "content": "a charge id is captured once", "severity": "high",
    }  # fmt: skip
    first, second = f"moment-{sid}-add_one.name", f"moment-{sid}-pick_behaviors"
    assert graph.get(first) == {
        "id": first, "node_type": "moment", "type": "answer", "status": "spoken",
        "prose": "I looked at the space", "reasoning": "it had no behavior yet", "answer": "Charges are idempotent",
        "step": "add_one.name", "protocol": "add_behavior", "session": sid, "timestamp": "T",
    }  # fmt: skip
    assert graph.get(second)["type"] == "selection" and graph.get(second)["reasoning"] == "both"

    assert links_of(graph, "validation-no-double-charge") == [
        ("contains", "space-1", "validation-no-double-charge"),
        ("ensures", "validation-no-double-charge", "beh-other"),
        ("ensures", "validation-no-double-charge", "behavior-charges-are-idempotent"),
    ]
    assert links_of(graph, first) == [
        ("about", first, "behavior-charges-are-idempotent"),  # default: the protocol's first node
        ("expresses", "agent-1", first),
    ]
    assert links_of(graph, second) == [
        ("about", second, "beh-other"),  # an id_list answer: the moment is about the ids chosen
        ("about", second, "behavior-charges-are-idempotent"),
        ("expresses", "agent-1", second),
    ]
    assert graph.counts() == {"nodes": 10, "links": 11}
    session = graph.get(sid)
    assert session["status"] == "complete" and json.loads(session["state"])["summary"].startswith("Validation")


def test_the_other_branch_skips_the_call(membrane, graph):
    r = membrane.start("add_invariant", {"actor_id": "agent-1", "space_id": "space-2"})
    assert (r.protocol, r.step.id) == ("add_invariant", "pick_behaviors")


def test_a_rejected_answer_then_an_accepted_one(membrane, graph):
    sid = membrane.start("record_note", {"actor_id": "agent-1", "space_id": "space-1", "prefix": "r1"}).session_id
    r = membrane.continue_session(sid, "ab")
    assert (r.status, r.step.id) == ("active", "title")
    assert r.to_wire()["errors"] == [{"path": "title", "message": "expected at least 3 characters, got 2"}]
    assert "title: expected at least 3 characters, got 2" in r.to_wire()["error"]
    r = membrane.continue_session(sid, "Ledger")
    assert (r.status, r.step.id, r.problems) == ("active", "body", ())
    assert r.step.question == "What does the note say about Ledger?"
    r = membrane.continue_session(sid, {"answer": "short", "reasoning": ""})
    assert r.to_wire()["errors"] == [
        {"path": "body.answer", "message": "expected at least 10 characters, got 5"},
        {"path": "body.description", "message": "an answer is required (string (min_length=1))"},
        {"path": "body.reasoning", "message": "expected at least 1 characters, got 0"},
    ]
    r = membrane.continue_session(sid, answered("entries balance to zero"))
    assert r.status == "complete" and r.created.to_wire() == {"nodes": 2, "links": 3}
    assert graph.get("note-r1-ledger")["content"] == "entries balance to zero"


def test_a_rejected_last_answer_the_summary_reads_is_a_problem_not_a_crash(membrane, graph):
    membrane.load_string(textwrap.dedent("""\
        protocol: shelve_note
        steps:
          write:
            type: create
            nodes: [{id: shelved, node_type: narrative, type: note, name: Shelved}]
            links: [{type: contains, from: space-1, to: shelved}]
          shelf:
            type: ask
            question: Which shelf?
            expects: {type: string, min_length: 2}
        output:
          summary: "shelved on {shelf}"
        """))  # fmt: skip
    sid = membrane.start("shelve_note", {"actor_id": "agent-1"}).session_id
    r = membrane.continue_session(sid, "w")
    assert (r.status, r.step.id, [str(p) for p in r.problems]) == (
        "active", "shelf", ["shelf: expected at least 2 characters, got 1"])  # fmt: skip
    assert graph.get("shelved") is None
    r = membrane.continue_session(sid, "top")
    assert (r.status, r.summary) == ("complete", "shelved on top")


def test_a_second_membrane_continues_after_the_first_is_gone(membrane, graph):
    sid = membrane.start("record_note", {"actor_id": "agent-1", "space_id": "space-1", "prefix": "x"}).session_id
    membrane.continue_session(sid, "Handover")
    del membrane
    other = Membrane(graph, [HERE])
    r = other.continue_session(sid, answered("picked up by another instance"))
    assert r.status == "complete" and graph.get("note-x-handover")["content"] == "picked up by another instance"


def test_a_different_process_continues_the_session(membrane, graph, graph_server):
    sid = membrane.start("record_note", {"actor_id": "agent-1", "space_id": "space-1", "prefix": "p"}).session_id
    membrane.continue_session(sid, "Across processes")
    script = textwrap.dedent(
        f"""
        import json, sys
        from cabal.graph import ContextGraph
        from cabal.membrane import Membrane
        graph = ContextGraph.open(name={graph.name!r}, home={str(graph_server.home)!r})
        result = Membrane(graph, [{str(HERE)!r}]).continue_session(
            {sid!r}, {{"answer": "written by a second process", "description": "d", "reasoning": "r"}})
        print(json.dumps(result.to_wire()))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "CABAL_HOME": str(graph_server.home)})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "complete"
    assert graph.get("note-p-across-processes")["content"] == "written by a second process"


def test_abort_leaves_no_moments_and_ends_the_session(membrane, graph):
    sid = membrane.start("record_note", {"actor_id": "agent-1", "space_id": "space-1", "prefix": "a"}).session_id
    membrane.continue_session(sid, "Abandoned")
    before = graph.counts()
    assert membrane.abort(sid).to_wire() == {"status": "aborted", "session_id": sid}
    assert graph.get(sid)["status"] == "aborted"
    assert graph.find("moment") == [] and graph.counts() == before
    with pytest.raises(ProtocolRuntimeError, match="aborted"):
        membrane.continue_session(sid, answered("too late for this"))
    assert membrane.start("record_note", {}, session_id=sid).to_wire() == {"status": "aborted", "session_id": sid}


def test_unknown_protocol_and_session_say_not_found(membrane):
    for call in (
        lambda: membrane.start("no_such_protocol", {}),
        lambda: membrane.continue_session("session-nope", "x"),
        lambda: membrane.abort("session-nope"),
        lambda: membrane.form("session-nope"),
        lambda: membrane.submit("session-nope", {}),
        lambda: membrane.run("no_such_protocol", {}, {}),
    ):
        with pytest.raises(ResourceNotFound, match="not found"):
            call()


def test_list_and_load_string(membrane):
    names = [p["name"] for p in membrane.list_protocols()]
    assert {"add_behavior", "add_invariant", "record_note"} <= set(names)
    protocol = membrane.load_string("protocol: tiny\nsteps:\n  a: {type: ask, question: x, expects: string}\n")
    assert protocol.name == "tiny" and "tiny" in [p["name"] for p in membrane.list_protocols()]


# ------------------------------------------------------------------------- dependencies

DEPENDENT = """
protocol: note_in_space
dependencies:
  - id: space
    exists: "{space_id}"
    on_missing: {ON_MISSING}
steps:
  body:
    type: ask
    question: The note?
    expects: {type: string, min_length: 3}
  write:
    type: create
    nodes:
      - {id: "note-{space_id}", node_type: narrative, type: note, name: "{body}"}
    links:
      - {type: contains, from: "{space_id}", to: "note-{space_id}"}
"""
CREATE_SPACE = """
protocol: create_space
steps:
  name: {type: ask, question: "Name the space {space_id}", expects: string}
  make:
    type: create
    nodes:
      - {id: "{space_id}", node_type: space, type: module, name: "{name}"}
    links:
      - {type: relates, from: "{actor_id}", to: "{space_id}"}
"""


def test_missing_dependency_fail(membrane):
    membrane.load_string(DEPENDENT.replace("ON_MISSING", 'action: fail, message: "make {space_id} first"'))
    with pytest.raises(ProtocolRuntimeError) as refused:
        membrane.start("note_in_space", {"space_id": "space-9"})
    assert str(refused.value) == "missing dependency 'space': make space-9 first"
    assert membrane.start("note_in_space", {"space_id": "space-1"}).status == "active"


def test_missing_dependency_prompt(membrane):
    membrane.load_string(DEPENDENT.replace("ON_MISSING", 'action: prompt, message: "space {space_id} is missing"'))
    r = membrane.start("note_in_space", {"space_id": "space-9"})
    assert (r.status, r.step.id, r.prompt) == ("active", "body", "space space-9 is missing")


def test_missing_dependency_spawn_runs_the_sub_protocol_first(membrane, graph):
    membrane.load_string(CREATE_SPACE)
    membrane.load_string(DEPENDENT.replace("ON_MISSING", "action: spawn, protocol: create_space"))
    r = membrane.start("note_in_space", {"space_id": "space-9", "actor_id": "agent-1"})
    assert (r.protocol, r.step.id, r.step.question) == ("create_space", "space.name", "Name the space space-9")
    r = membrane.continue_session(r.session_id, "Ledger")
    assert (r.protocol, r.step.id) == ("note_in_space", "body")
    r = membrane.continue_session(r.session_id, "lives in the new space")
    assert r.created.to_wire() == {"nodes": 2, "links": 2}
    assert links_of(graph, "space-9") == [("contains", "space-9", "note-space-9"), ("relates", "agent-1", "space-9")]


# ----------------------------------------------------------------------- protocol as form


def test_form_answers_a_multi_step_protocol_in_one_submit(membrane, graph):
    sid = membrane.start("add_invariant", {"actor_id": "agent-1", "space_id": "space-2"}).session_id
    form = membrane.form(sid)
    assert list(form.steps) == ["pick_behaviors", "title", "details"] and form.completes is True
    schema = form.schema
    assert schema["required"] == ["pick_behaviors", "title", "details"]
    assert schema["properties"]["title"] == {"type": "string", "minLength": 5, "maxLength": 80, "description": "Name the rule"}
    assert schema["properties"]["details"]["properties"]["severity"]["enum"] == ["low", "high"]

    wrong = {
        "pick_behaviors": answered(["beh-other", "goal-1"]),
        "title": "No",
        "details": {"rule": "refunds are paid once", "severity": "medium"},
    }
    r = membrane.submit(sid, wrong)
    assert (r.status, r.step.id) == ("active", "pick_behaviors")
    assert r.to_wire()["errors"] == [
        {"path": "pick_behaviors.answer.1", "message": "node 'goal-1' has type='goal', expected type='behavior'"},
        {"path": "title", "message": "expected at least 5 characters, got 2"},
        {"path": "details.severity", "message": "expected one of ['low', 'high'], got str 'medium'"},
    ]
    assert graph.find("narrative", {"type": "validation"}) == []
    right = {**wrong, "pick_behaviors": answered(["beh-other"]), "title": "Refund once", "details": {**wrong["details"], "severity": "low"}}
    r = membrane.submit(sid, right)
    assert r.status == "complete" and r.created.to_wire() == {"nodes": 2, "links": 4}
    assert links_of(graph, "validation-refund-once") == [
        ("contains", "space-2", "validation-refund-once"),
        ("ensures", "validation-refund-once", "beh-other"),
    ]


BRANCHY = """
protocol: branchy
steps:
  kind: {type: ask, question: "What kind?", expects: {type: enum, options: [bug, idea]}}
  route: {type: branch, condition: "kind == 'bug'", then: severity, else: pitch}
  severity: {type: ask, question: "How bad?", expects: {type: integer, min: 1, max: 5}, next: write}
  pitch: {type: ask, question: Pitch it, expects: string}
  write:
    type: create
    nodes:
      - {id: "issue-{prefix}", node_type: narrative, type: "{kind}", name: "{prefix}"}
    links:
      - {type: contains, from: space-1, to: "issue-{prefix}"}
"""


def test_form_stops_where_the_path_depends_on_an_answer(membrane):
    membrane.load_string(BRANCHY)
    sid = membrane.start("branchy", {"prefix": "i1"}).session_id
    form = membrane.form(sid)
    assert (list(form.steps), form.completes) == (["kind"], False)
    r = membrane.submit(sid, {"kind": "bug", "severity": 9})  # the branch is decided by the first answer
    assert r.to_wire()["errors"] == [{"path": "severity", "message": "expected an integer of at most 5, got 9"}]
    r = membrane.submit(sid, {"kind": "bug"})
    assert (r.status, r.step.id) == ("active", "severity")
    assert list(membrane.form(sid).steps) == ["severity"] and membrane.form(sid).completes is True
    assert membrane.submit(sid, {"severity": "3"}).created.to_wire() == {"nodes": 1, "links": 1}


def test_form_for_a_protocol_not_started(membrane):
    form = membrane.form_for("record_note", {"space_id": "space-1"})
    assert list(form.steps) == ["title", "body"] and form.completes is True
    assert form.schema["properties"]["body"]["required"] == ["answer", "description", "reasoning"]


# ------------------------------------------------------------------ one-shot run + commit


NOTE_ANSWERS = {"title": "One shot", "body": answered("written in a single call")}
NOTE_CONTEXT = {"actor_id": "agent-1", "space_id": "space-1", "prefix": "o"}


def test_run_completes_in_one_call_without_a_session_node(membrane, graph):
    r = membrane.run("record_note", NOTE_CONTEXT, NOTE_ANSWERS, session_id="round-1-agent-1")
    assert r.to_wire() == {"status": "complete", "session_id": "round-1-agent-1", "summary": "note One shot recorded",
                           "created": {"nodes": 2, "links": 3}}  # fmt: skip
    assert graph.find("session") == []
    assert graph.exists("moment-round-1-agent-1-body")
    # replaying the same run (a crash after the commit) writes nothing new
    again = membrane.run("record_note", NOTE_CONTEXT, NOTE_ANSWERS, session_id="round-1-agent-1")
    assert again.created.to_wire() == {"nodes": 0, "links": 0}


def test_run_reports_every_problem_at_once_and_keeps_the_session(membrane, graph):
    r = membrane.run("record_note", NOTE_CONTEXT, {"title": "x", "body": {"answer": "tiny"}}, session_id="s-run")
    assert r.status == "active" and r.step.id == "title"
    assert r.to_wire()["errors"] == [
        {"path": "title", "message": "expected at least 3 characters, got 1"},
        {"path": "body.answer", "message": "expected at least 10 characters, got 4"},
        {"path": "body.description", "message": "an answer is required (string (min_length=1))"},
        {"path": "body.reasoning", "message": "an answer is required (string (min_length=1))"},
    ]
    missing = membrane.run("record_note", NOTE_CONTEXT, {"title": "Only a title"}, session_id="s-run")
    assert missing.to_wire()["errors"] == [{"path": "body", "message": missing.to_wire()["errors"][0]["message"]}]
    assert missing.to_wire()["errors"][0]["message"].startswith("no answer given")
    assert graph.get("s-run")["status"] == "active" and graph.find("narrative") == [graph.get("beh-other"), graph.get("goal-1")]
    assert membrane.run("record_note", NOTE_CONTEXT, NOTE_ANSWERS, session_id="s-run").status == "complete"
    assert graph.get("s-run")["status"] == "complete"


def test_a_one_shot_run_that_persists_nothing_reports_the_same_problems_and_writes_nothing(membrane, graph):
    before = graph.counts()
    r = membrane.run("record_note", NOTE_CONTEXT, {"title": "x", "body": {"answer": "tiny"}}, session_id="s-pure",
                     commit=False, persist=False)
    assert r.status == "active" and r.session_id == "s-pure" and r.step.id == "title"
    assert [e["path"] for e in r.to_wire()["errors"]] == ["title", "body.answer", "body.description", "body.reasoning"]
    assert graph.counts() == before and graph.get("s-pure") is None
    done = membrane.run("record_note", NOTE_CONTEXT, NOTE_ANSWERS, session_id="s-pure", commit=False, persist=False)
    assert done.status == "complete" and done.cluster.nodes
    assert graph.counts() == before and graph.get("s-pure") is None


class CountingGraph:
    """The real graph, with its write calls counted."""

    def __init__(self, graph):
        self._graph = graph
        self.writes = 0

    def create_cluster(self, *args, **kwargs):
        self.writes += 1
        return self._graph.create_cluster(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._graph, name)


def test_prepared_runs_commit_as_one_write(membrane, graph):
    counting = CountingGraph(graph)
    m = Membrane(counting, [HERE])
    first = m.run("record_note", {**NOTE_CONTEXT, "prefix": "a"}, NOTE_ANSWERS, session_id="s-a", commit=False)
    second = m.run("record_note", {**NOTE_CONTEXT, "prefix": "b"}, NOTE_ANSWERS, session_id="s-b", commit=False)
    assert counting.writes == 0 and not graph.exists("note-a-one-shot")
    assert [n["id"] for n in first.cluster.nodes] == ["note-a-one-shot", "moment-s-a-body"]
    assert first.cluster.links[0] == {"type": "contains", "from": "space-1", "to": "note-a-one-shot"}
    assert m.commit([first.cluster, second.cluster]) == Created(nodes=4, links=6)
    assert counting.writes == 1
    assert m.commit([]) == Created() and counting.writes == 1  # nothing to write: no round trip


def test_prepare_returns_the_cluster_or_raises_every_problem(membrane, graph):
    prepared = membrane.prepare("record_note", NOTE_CONTEXT, NOTE_ANSWERS, session_id="s-prep")
    assert [n["id"] for n in prepared.nodes] == ["note-o-one-shot", "moment-s-prep-body"]
    with pytest.raises(AnswerRejected) as rejected:
        membrane.prepare("record_note", NOTE_CONTEXT, {"title": "x"}, session_id="s-prep")
    assert [p.path for p in rejected.value.problems] == ["title", "body"]
    assert graph.get("s-prep") is None and not graph.exists("note-o-one-shot")


def nested(levels: int):
    value = "bottom"
    for _ in range(levels):
        value = {"deeper": value}
    return value


def test_answers_beyond_the_limits_are_rejected_before_anything_reads_them(membrane, graph):
    # What an outside agent may send, through every entry point: too deep, a NUL, a lone surrogate.
    before = graph.counts()
    rejected = membrane.run("record_note", NOTE_CONTEXT, {"title": "a\x00b", "body": nested(900)}, session_id="s-lim")
    assert rejected.status == "active" and rejected.step.id == "title"
    assert rejected.to_wire()["errors"] == [
        {"path": "title", "message": "contains a NUL character at position 1; write plain text"},
        {"path": "body." + ".".join(["deeper"] * 31), "message": "nested more than 32 levels deep"},
    ]
    with pytest.raises(AnswerRejected) as caught:
        membrane.prepare("record_note", NOTE_CONTEXT, {**NOTE_ANSWERS, "title": "a\ud800b"}, session_id="s-lim2")
    assert [str(p) for p in caught.value.problems] == [
        "title: contains a lone surrogate (U+D800) at position 1; write plain text"]
    started = membrane.start("record_note", NOTE_CONTEXT)
    stepped = membrane.continue_session(started.session_id, "Esc\x1b[2J")
    assert stepped.step.id == "title" and stepped.to_wire()["errors"] == [
        {"path": "title", "message": "contains an escape character (ESC) at position 3; write plain text"}]
    assert not graph.exists("note-o-one-shot") and graph.counts()["nodes"] == before["nodes"] + 2  # two sessions


# ------------------------------------------------------------------- more step features


class Grade(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")
    product_id: str
    score: int = Field(ge=1, le=10)


def test_entity_answers_validate_with_the_pydantic_model(membrane, graph):
    register_entity("Grade", Grade)
    membrane.load_string(
        """
protocol: grade
steps:
  grade: {type: ask, question: Grade it, expects: {type: entity, entity: Grade}}
  write:
    type: create
    nodes:
      - {id: "grade-{grade.productId}", node_type: thing, type: grade, name: "{grade.productId}", score: "{grade.score}", raw: "{grade}"}
    links:
      - {type: about, from: "grade-{grade.productId}", to: space-1}
"""
    )
    schema = membrane.form_for("grade", {}).schema
    assert schema["properties"]["grade"]["properties"]["productId"]["type"] == "string"
    r = membrane.run("grade", {}, {"grade": {"productId": "p1", "score": 11}})
    assert [e["path"] for e in r.to_wire()["errors"]] == ["grade.score"]
    r = membrane.run("grade", {}, {"grade": {"product_id": "p1", "score": 7}})
    assert r.status == "complete"
    assert graph.get("grade-p1") == {"id": "grade-p1", "node_type": "thing", "type": "grade", "name": "p1", "score": 7,
                                     "raw": '{"productId": "p1", "score": 7}'}  # fmt: skip


class CountedGrade(Grade):
    """A Grade that counts how often pydantic validates one."""

    validations: ClassVar[int] = 0

    @model_validator(mode="after")
    def _count(self) -> CountedGrade:
        type(self).validations += 1
        return self


def test_an_entity_the_caller_validated_is_taken_as_valid_not_validated_again(membrane, graph):
    register_entity("CountedGrade", CountedGrade)
    membrane.load_string(
        """
protocol: counted
steps:
  grade: {type: ask, question: Grade it, expects: {type: entity, entity: CountedGrade}}
  write:
    type: create
    nodes:
      - {id: "counted-{grade.productId}", node_type: thing, type: grade, name: "{grade.productId}", raw: "{grade}"}
    links:
      - {type: about, from: "counted-{grade.productId}", to: space-1}
"""
    )
    checked = CountedGrade(product_id="p2", score=4)
    assert CountedGrade.validations == 1
    cluster = membrane.prepare("counted", {}, {"grade": checked}, session_id="s-counted")
    assert CountedGrade.validations == 1  # the round engine's answer is validated once, by the engine
    assert cluster.nodes[0]["raw"] == '{"productId": "p2", "score": 4}'
    membrane.prepare("counted", {}, {"grade": {"productId": "p3", "score": 5}}, session_id="s-counted-2")
    assert CountedGrade.validations == 2  # a plain answer (an outside agent's) is validated here


def test_for_each_ask_takes_one_answer_per_item_and_one_moment_each(membrane, graph):
    membrane.load_string(
        """
protocol: justify
steps:
  why:
    type: ask
    question: "Why does {item} matter?"
    for_each: picks
    expects: {type: string, min_length: 3}
    moment: {type: justification, agent_provides: [reasoning], about: "{item}"}
  write:
    type: create
    nodes:
      - {id: "j-{prefix}", node_type: narrative, type: note, name: "{why.0}"}
    links:
      - {for_each: picks, type: relates, from: "j-{prefix}", to: "{item}"}
"""
    )
    r = membrane.start("justify", {"actor_id": "agent-1", "picks": ["space-1", "space-2"], "prefix": "q"})
    assert [i["question"] for i in r.step.items] == ["Why does space-1 matter?", "Why does space-2 matter?"]
    r2 = membrane.continue_session(r.session_id, [{"answer": "abc", "reasoning": "r"}])
    assert r2.to_wire()["errors"][0]["message"] == "expected a list of 2 answers, one per item, got 1 answers"
    r2 = membrane.continue_session(
        r.session_id, [{"answer": "first one", "reasoning": "r1"}, {"answer": "second", "reasoning": "r2"}]
    )
    assert r2.status == "complete"
    sid = r.session_id
    assert graph.get(f"moment-{sid}-why-1")["reasoning"] == "r2"
    assert links_of(graph, f"moment-{sid}-why-0") == [("about", f"moment-{sid}-why-0", "space-1"),
                                                     ("expresses", "agent-1", f"moment-{sid}-why-0")]  # fmt: skip
    assert graph.get("j-q")["name"] == "first one"


def test_update_steps_commit_with_the_cluster(membrane, graph):
    membrane.load_string(
        """
protocol: retitle
steps:
  name: {type: ask, question: "New name?", expects: string}
  rename: {type: update, node: "{target}", fields: {name: "{name}", reviewed: true}, moment: {prose: "renamed to {name}"}}
"""
    )
    r = membrane.run("retitle", {"target": "space-2", "actor_id": "agent-1"}, {"name": "Refunds v2"}, session_id="u1")
    assert r.status == "complete"
    assert graph.get("space-2")["name"] == "Refunds v2" and graph.get("space-2")["reviewed"] is True
    assert graph.get("moment-u1-rename")["prose"] == "renamed to Refunds v2"
    assert ("about", "moment-u1-rename", "space-2") in links_of(graph, "moment-u1-rename")


def test_earlier_format_runs_cypher_and_preset_queries(membrane, graph):
    membrane.load_string(
        """
connectome: legacy
start: spaces
steps:
  - id: spaces
    type: query
    preset: all_spaces
    next: named
  - id: named
    type: query
    query: "MATCH (n:Node {id: $target}) RETURN n.name AS name"
    next: pick
  - id: pick
    type: ask
    question: "Pick one of {spaces.0.id} / {spaces.1.id} ({named.0.name})"
    expects: {type: id, node_type: space}
    next: $complete
"""
    )
    r = membrane.start("legacy", {"target": "space-1"})
    assert r.step.question == "Pick one of space-1 / space-2 (billing)"
    assert membrane.continue_session(r.session_id, "space-2").status == "complete"


def test_enrichment_during_an_ask_step(membrane):
    membrane.load_string(
        """
protocol: look
steps:
  pick:
    type: ask
    question: Which node?
    expects: {type: id}
    context_enrichment: {prompt: look first, allows: [exploration, clarification]}
"""
    )
    sid = membrane.start("look", {}).session_id
    r = membrane.enrich(sid, "exploration", "space-2")
    assert r.status == "active" and [n["id"] for n in r.enrichment["results"]] == ["beh-other", "goal-1"]
    assert r.step.context_enrichment == {"prompt": "look first", "allows": ["exploration", "clarification"]}
    with pytest.raises(ProtocolRuntimeError, match="not 'verification'"):
        membrane.enrich(sid, "verification", "space-2")


def test_call_depth_is_limited(membrane):
    membrane.load_string("protocol: again\nsteps:\n  deeper: {type: call_protocol, protocol: again}\n")
    with pytest.raises(ProtocolRuntimeError, match="the limit is 8"):
        membrane.start("again", {})


def test_start_with_a_known_session_id_reports_where_it_is(membrane, graph):
    first = membrane.start("record_note", NOTE_CONTEXT, session_id="fixed-1")
    again = membrane.start("record_note", NOTE_CONTEXT, session_id="fixed-1")
    assert again == first and len(graph.find("session")) == 1


def test_a_node_linked_to_nothing_is_refused(membrane, graph):
    membrane.load_string(
        """
protocol: lonely
steps:
  write:
    type: create
    nodes:
      - {id: lonely, node_type: thing, type: x, name: x}
"""
    )
    with pytest.raises(ProtocolRuntimeError, match="linked to nothing"):
        membrane.start("lonely", {})
    assert not graph.exists("lonely")


def test_a_missing_context_value_in_an_id_is_an_error_not_an_empty_id(membrane, graph):
    with pytest.raises(TemplateError, match="'prefix'"):
        membrane.run("record_note", {"actor_id": "agent-1", "space_id": "space-1"}, NOTE_ANSWERS)
    assert graph.find("narrative", {"type": "note"}) == []


def test_a_for_each_ask_over_nothing_needs_no_answer(membrane, graph):
    membrane.load_string(
        """
protocol: maybe_many
steps:
  why: {type: ask, question: "Why {item}?", for_each: picks, expects: string}
  name: {type: ask, question: "Name?", expects: string}
  write:
    type: create
    nodes:
      - {id: "m-{name}", node_type: thing, type: x, name: "{name}", reasons: "{why}"}
    links:
      - {type: contains, from: space-1, to: "m-{name}"}
"""
    )
    r = membrane.start("maybe_many", {"picks": []})
    assert r.step.id == "name"
    assert membrane.continue_session(r.session_id, "none").status == "complete"
    assert graph.get("m-none")["reasons"] == []


def test_a_stored_session_whose_protocol_lost_its_step_reports_an_error(membrane, graph):
    membrane.load_string("protocol: shifting\nsteps:\n  a: {type: ask, question: x, expects: string}\n")
    sid = membrane.start("shifting", {}).session_id
    membrane.load_string("protocol: shifting\nsteps:\n  b: {type: ask, question: x, expects: string}\n")
    with pytest.raises(ProtocolRuntimeError, match="no step 'a'"):
        membrane.continue_session(sid, "x")
