"""Procedure runs on the real graph: B1-B5, E1, E2, A1, A2, and idempotent retries."""

from __future__ import annotations

import dataclasses
import logging
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from cabal.errors import ProcedureError, ResourceNotFound, SchemaError, TemplateWriteRefused
from cabal.procedures import load_procedure, template_id
from cabal.procedures.model import Recorded, RunStep
from cabal.procedures.template import read_template

from tests.procedures.conftest import ACTOR, TEST_PROCEDURES
from tests.procedures.helpers import ACTIVE, COMPLETED, active_steps, narrative, notes, step_links

CHECKLIST = load_procedure("checklist", [TEST_PROCEDURES])
TEMPLATE = template_id(CHECKLIST)


def step_node(step: str) -> str:
    return f"{TEMPLATE}/{step}"


def summary_work() -> tuple[list[dict], list[dict]]:
    return [narrative("s", "summary", content="All good")], [
        {"type": "about", "from": "s", "to": "n1"},
        {"type": "about", "from": "s", "to": "n2"},
    ]


def run_to_sign(procedures, actor) -> str:
    run_id = procedures.start_procedure("checklist", actor).run_id
    procedures.record(run_id, actor, notes("n1", "n2"))
    procedures.continue_procedure(run_id)
    procedures.record(run_id, actor, *summary_work())
    assert procedures.continue_procedure(run_id).step_id == "sign"
    return run_id


# ------------------------------------------------------------------------------ template


def test_install_writes_the_template_once(graph, procedures):
    assert TEMPLATE.startswith("procedure:checklist@")
    assert procedures.install(CHECKLIST) == TEMPLATE
    assert graph.counts() == {"nodes": 4, "links": 5}
    space = graph.get(TEMPLATE)
    assert {k: space[k] for k in ("node_type", "type", "name", "steps", "template")} == {
        "node_type": "space", "type": "procedure", "name": "checklist",
        "steps": ["gather", "summarize", "sign"], "template": True,
    }  # fmt: skip
    assert [(n["id"], n["type"], n["position"], n["name"]) for n in graph.contents_of(TEMPLATE)] == [
        (step_node("gather"), "step", 1, "Gather notes"),
        (step_node("sign"), "step", 3, "Sign off"),
        (step_node("summarize"), "step", 2, "Summarize the notes"),
    ]
    assert graph.links_from(step_node("gather"), "precedes")[0]["to"] == step_node("summarize")
    assert graph.links_from(step_node("summarize"), "precedes")[0]["to"] == step_node("sign")
    assert graph.links_from(step_node("sign"), "precedes") == []
    # Idempotent, and the graph alone gives the procedure back.
    procedures.install(CHECKLIST)
    assert graph.counts() == {"nodes": 4, "links": 5}
    assert read_template(graph, TEMPLATE).procedure == dataclasses.replace(CHECKLIST, source=None)


def test_b1_step_content_is_the_whole_guide_with_its_gate(graph, procedures, actor):
    started = procedures.start_procedure("checklist", actor)
    moved = procedures.continue_procedure(started.run_id)  # fails: shows step 1 again
    assert moved.step_content == started.step_content == graph.get(step_node("gather"))["content"]
    procedures.record(started.run_id, actor, notes("n1", "n2"))
    second = procedures.continue_procedure(started.run_id).step_content
    assert second == (
        "checklist — step 2 of 3: Summarize the notes\n\n"
        "What: Write one summary of the notes.\n\n"
        "Why: Readers want one page, not a pile.\n\n"
        "How: Record a narrative of type summary and link it to each note with about.\n\n"
        "Watch out: Do not add facts that are not in a note.\n\n"
        "Done when (checked when you call continue_procedure to move on):\n"
        "- at least 1 narrative of type 'summary'\n"
        "- at least 2 'about' link(s) from a narrative of type 'summary' to a narrative of type 'note'\n\n"
        "Record your work with record(run_id, actor_id, nodes, links): every node goes into the run space. "
        "The procedure's own nodes are read-only."
    )


# ------------------------------------------------------------------------------- start


def test_b3_start_creates_the_run_space_and_its_three_links(graph, procedures, actor):
    started = procedures.start_procedure("checklist", actor)
    run_id = started.run_id
    assert run_id.startswith("run:checklist:")
    assert (started.run_id, started.step_id, started.status, started.validation_error) == (
        run_id, "gather", "active", None)
    run = graph.get(run_id)
    assert {k: run[k] for k in ("node_type", "type", "status", "procedure", "started_by")} == {
        "node_type": "space", "type": "run", "status": "active", "procedure": "checklist", "started_by": actor,
    }  # fmt: skip
    assert graph.links_from(run_id) == [
        {"type": "acts_on", "from": run_id, "to": step_node("gather"), "properties": {"energy": 8, "polarity": [0.9, 0.1]}},
        {"type": "elaborates", "from": run_id, "to": TEMPLATE, "properties": {}},
    ]
    assert graph.links_to(run_id) == [{"type": "occupies", "from": actor, "to": run_id, "properties": {"energy": 8}}]
    assert procedures.start_procedure("checklist", actor).run_id != run_id  # unique per start


def test_start_refuses_unknown_procedure_and_actor_without_writing(graph, procedures, actor):
    with pytest.raises(ResourceNotFound, match="procedure not found: 'nope'"):
        procedures.start_procedure("nope", actor)
    with pytest.raises(ResourceNotFound, match="actor not found: 'actor:ghost'"):
        procedures.start_procedure("checklist", "actor:ghost")
    assert graph.find("space", {"type": "run"}) == []
    with pytest.raises(ResourceNotFound, match="procedure run not found"):
        procedures.continue_procedure("run:none")


def test_start_by_template_id_and_retried_start_with_run_id(graph, procedures, actor):
    procedures.install(CHECKLIST)
    first = procedures.start_procedure(TEMPLATE, actor, run_id="run:mine")
    procedures.record("run:mine", actor, notes("n1", "n2"))
    procedures.continue_procedure("run:mine")
    again = procedures.start_procedure(TEMPLATE, actor, run_id="run:mine")
    assert first.step_id == "gather" and again.step_id == "summarize"
    assert active_steps(graph, "run:mine") == ["summarize"]


# ------------------------------------------------------------------------- continue


def test_e2_failed_validation_changes_nothing_and_says_why(graph, procedures, actor):
    started = procedures.start_procedure("checklist", actor)
    run_id = started.run_id
    procedures.record(run_id, actor, notes("n1"))
    before_links, before_counts = graph.links_from(run_id), graph.counts()
    result = procedures.continue_procedure(run_id)
    assert result == RunStep(
        run_id=run_id,
        step_id="gather",
        step_content=started.step_content,
        status="validation_failed",
        validation_error="the run space needs at least 2 narrative of type 'note' with content filled; found 1",
    )
    assert graph.links_from(run_id) == before_links
    assert graph.counts() == before_counts
    assert step_links(graph, run_id) == {"gather": ("acts_on", ACTIVE)}


def test_b5_validation_passes_after_record_and_flips_in_one_step(graph, procedures, actor):
    run_id = procedures.start_procedure("checklist", actor).run_id
    assert procedures.continue_procedure(run_id).status == "validation_failed"
    procedures.record(run_id, actor, notes("n1", "n2"))
    moved = procedures.continue_procedure(run_id)
    assert (moved.status, moved.step_id, moved.validation_error) == ("active", "summarize", None)
    assert step_links(graph, run_id) == {"gather": ("receives_from", COMPLETED), "summarize": ("acts_on", ACTIVE)}
    assert procedures.state(run_id).completed == (step_node("gather"),)


def test_a2_exactly_one_active_step_after_every_call(graph, procedures, actor):
    run_id = procedures.start_procedure("checklist", actor).run_id
    seen = [active_steps(graph, run_id)]
    work = [(notes("n1", "n2"), []), summary_work()]
    for nodes, links in work:
        procedures.continue_procedure(run_id)  # fails first
        seen.append(active_steps(graph, run_id))
        procedures.record(run_id, actor, nodes, links)
        procedures.continue_procedure(run_id)
        seen.append(active_steps(graph, run_id))
    assert seen == [["gather"], ["gather"], ["summarize"], ["summarize"], ["sign"]]
    assert step_links(graph, run_id) == {
        "gather": ("receives_from", COMPLETED),
        "summarize": ("receives_from", COMPLETED),
        "sign": ("acts_on", ACTIVE),
    }


def test_e1_continue_at_the_last_step_completes_the_run(graph, procedures, actor):
    run_id = run_to_sign(procedures, actor)
    refused = procedures.continue_procedure(run_id)
    assert (refused.status, refused.step_id, refused.validation_error) == (
        "validation_failed", "sign", "the run space needs at least 1 narrative of type 'signoff'; found 0",
    )  # fmt: skip
    procedures.record(run_id, actor, [narrative("ok", "signoff")])
    done = procedures.continue_procedure(run_id)
    assert done == RunStep(run_id=run_id, status="completed")
    assert done.to_wire() == {"run_id": run_id, "step_id": None, "step_content": None, "status": "completed",
                              "validation_error": None}
    run = graph.get(run_id)
    assert (run["status"], run["finished"], run["ended_at_step"]) == ("completed", True, "sign")
    assert active_steps(graph, run_id) == []
    assert step_links(graph, run_id) == {step: ("receives_from", COMPLETED) for step in ("gather", "summarize", "sign")}
    assert graph.links_to(run_id) == [{"type": "inhabits", "from": actor, "to": run_id, "properties": {"energy": 1}}]
    counts = graph.counts()
    assert procedures.continue_procedure(run_id).status == "completed"  # asking again changes nothing
    assert graph.counts() == counts


def test_retried_continue_with_from_step_never_advances_twice(graph, procedures, actor):
    run_id = procedures.start_procedure("checklist", actor).run_id
    procedures.record(run_id, actor, notes("n1", "n2"))
    procedures.record(run_id, actor, *summary_work())  # work of the next step too: a blind retry would advance
    assert procedures.continue_procedure(run_id, from_step="gather").step_id == "summarize"
    retried = procedures.continue_procedure(run_id, from_step="gather")
    assert (retried.status, retried.step_id) == ("active", "summarize")
    assert active_steps(graph, run_id) == ["summarize"]
    with pytest.raises(ProcedureError, match="is at step 'summarize', not 'sign'"):
        procedures.continue_procedure(run_id, from_step="sign")
    with pytest.raises(ProcedureError, match="has no step 'nope'"):
        procedures.continue_procedure(run_id, from_step="nope")


# ------------------------------------------------------------------------------ end


def test_end_procedure_marks_complete_and_flips_occupies_to_inhabits(graph, procedures, actor):
    run_id = procedures.start_procedure("checklist", actor).run_id
    assert procedures.end_procedure(run_id).status == "completed"
    run = graph.get(run_id)
    assert (run["status"], run["finished"], run["ended_at_step"]) == ("completed", False, "gather")
    assert graph.links_to(run_id) == [{"type": "inhabits", "from": actor, "to": run_id, "properties": {"energy": 1}}]
    assert graph.links_from(actor) == [{"type": "inhabits", "from": actor, "to": run_id, "properties": {"energy": 1}}]
    assert step_links(graph, run_id) == {"gather": ("receives_from", COMPLETED)}
    counts = graph.counts()
    procedures.end_procedure(run_id)
    assert graph.counts() == counts
    with pytest.raises(ProcedureError, match="is completed"):
        procedures.record(run_id, actor, notes("late"))


def test_an_interrupted_end_is_finished_by_the_next_call(graph, procedures, actor):
    run_id = procedures.start_procedure("checklist", actor).run_id
    graph.update(run_id, {"status": "completed"})  # as if the process died after the end's first cluster
    assert procedures.end_procedure(run_id).status == "completed"
    assert graph.links_to(run_id) == [{"type": "inhabits", "from": actor, "to": run_id, "properties": {"energy": 1}}]
    assert active_steps(graph, run_id) == []


# ---------------------------------------------------------------------------- record


def test_b2_record_puts_work_in_the_run_space_with_a_moment(graph, procedures, actor):
    run_id = procedures.start_procedure("checklist", actor).run_id
    graph.create_cluster([{"id": "p1", "node_type": "product", "type": "doc", "name": "Spec", "status": "draft"}])
    template_before = (graph.contents_of(TEMPLATE), graph.links_to(step_node("gather")))
    recorded = procedures.record(run_id, actor, notes("n1", "n2"), [{"type": "about", "from": "n1", "to": "p1"}])
    moment_id = recorded.moment_id
    assert recorded == Recorded(run_id=run_id, step_id="gather", moment_id=moment_id, created={"nodes": 3, "links": 7})
    assert [n["id"] for n in graph.contents_of(run_id)] == ["n1", "n2", moment_id]
    moment = graph.get(moment_id)
    assert {k: moment[k] for k in ("node_type", "type", "status", "run_id", "step", "created", "content")} == {
        "node_type": "moment", "type": "procedure_work", "status": "recorded", "run_id": run_id, "step": "gather",
        "created": ["n1", "n2"], "content": "actor:ada recorded 2 node(s) and 1 link(s) at step 'gather'",
    }  # fmt: skip
    assert graph.links_to(moment_id, "expresses") == [{"type": "expresses", "from": actor, "to": moment_id, "properties": {}}]
    assert [link["to"] for link in graph.links_from(moment_id, "about")] == ["n1", "n2"]
    assert graph.links_from("n1", "about") == [{"type": "about", "from": "n1", "to": "p1", "properties": {}}]
    assert (graph.contents_of(TEMPLATE), graph.links_to(step_node("gather"))) == template_before
    # A retried record writes nothing twice.
    counts = graph.counts()
    again = procedures.record(run_id, actor, notes("n1", "n2"), [{"type": "about", "from": "n1", "to": "p1"}])
    assert again == replace(recorded, created={"nodes": 0, "links": 0})
    assert graph.counts() == counts


TEMPLATE_WRITES = {
    "link to a step": (notes("n1"), [{"type": "about", "from": "n1", "to": step_node("gather")}]),
    "contained in the template": (notes("n1"), [{"type": "contains", "from": TEMPLATE, "to": "n1"}]),
    "template node re-created": ([narrative(step_node("gather"), "step", content="mine now")], []),
    "new template space": ([{"id": "procedure:fake", "node_type": "space", "type": "procedure", "name": "fake"}], []),
    "link from a step": ([], [{"type": "relates", "from": step_node("sign"), "to": ACTOR}]),
}


@pytest.mark.parametrize("case", sorted(TEMPLATE_WRITES))
def test_a1_writes_into_the_template_are_refused_logged_and_not_written(graph, procedures, actor, caplog, case):
    run_id = procedures.start_procedure("checklist", actor).run_id
    nodes, links = TEMPLATE_WRITES[case]
    before = (graph.counts(), graph.links_from(run_id), graph.contents_of(TEMPLATE))
    with caplog.at_level(logging.WARNING, logger="cabal.procedures"):
        with pytest.raises(TemplateWriteRefused) as caught:
            procedures.record(run_id, actor, nodes, links)
    assert caught.value.run_id == run_id and caught.value.actor_id == actor
    assert "nothing was written" in str(caught.value)
    assert [r.getMessage() for r in caplog.records] == [
        f"refused a write into a procedure template: run {run_id}, actor {actor}, nodes {', '.join(caught.value.targets)}"
    ]
    assert (graph.counts(), graph.links_from(run_id), graph.contents_of(TEMPLATE)) == before
    assert "mine now" not in graph.get(step_node("gather"))["content"]


def test_record_refuses_other_writes_outside_the_run(graph, procedures, actor):
    run_id = procedures.start_procedure("checklist", actor).run_id
    graph.create_cluster([
        {"id": "actor:bob", "node_type": "actor", "type": "agent", "name": "Bob"},
        {"id": "elsewhere", "node_type": "narrative", "type": "note", "name": "Not in the run"},
    ])  # fmt: skip
    counts = graph.counts()
    refusals = [
        ((run_id, actor, []), "nothing to record"),
        ((run_id, "actor:bob", notes("n1")), "does not occupy run"),
        ((run_id, actor, notes("n1"), [{"type": "relates", "from": "n1", "to": run_id}]), "own links are kept by the runtime"),
        ((run_id, actor, notes("n1"), [{"type": "acts_on", "from": "n1", "to": "elsewhere"}]), "acts_on are kept by the runtime"),
        ((run_id, actor, [narrative("elsewhere", "note")]), "already exist outside this run"),
    ]
    for arguments, message in refusals:
        with pytest.raises(ProcedureError, match=message):
            procedures.record(*arguments)
    assert graph.counts() == counts


def test_record_refuses_a_link_type_that_is_no_name(graph, procedures, actor):
    """Near what the type checker found: the reserved-type check hashed each link's type, and a
    list there crashed with "unhashable type" instead of the schema's located refusal."""
    run_id = procedures.start_procedure("checklist", actor).run_id
    counts = graph.counts()
    with pytest.raises(SchemaError, match=r"unknown link type \['acts_on'\]; known: "):
        procedures.record(run_id, actor, notes("n1"), [{"type": ["acts_on"], "from": "n1", "to": run_id + "x"}])
    assert graph.counts() == counts


def test_an_edited_procedure_is_a_new_template_and_old_runs_keep_their_guide(graph, actor, tmp_path):
    from cabal.procedures import Procedures

    shutil.copy(TEST_PROCEDURES / "checklist.yaml", tmp_path / "checklist.yaml")
    procedures = Procedures(graph, [tmp_path])
    old = procedures.start_procedure("checklist", actor)
    path = Path(tmp_path / "checklist.yaml")
    path.write_text(path.read_text().replace("Write down what you observed.", "Write down everything."))
    new = procedures.start_procedure("checklist", actor)
    old_template, new_template = (procedures.state(r.run_id).template_id for r in (old, new))
    assert old_template == TEMPLATE and new_template != TEMPLATE
    assert "What: Write down everything." in new.step_content
    assert "What: Write down what you observed." in old.step_content
    assert graph.get(step_node("gather"))["what"] == "Write down what you observed."
    assert procedures.continue_procedure(old.run_id).step_content == old.step_content
