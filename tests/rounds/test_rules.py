"""The engine's rules, as pure functions of a snapshot: exact problems, no graph needed."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cabal.entities import (
    Acceptance, AddProduct, Assignment, BootstrapOutput, FeedbackResponse, Inspection, InspectOutput, Message, MoveProduct,
    PeerReviewOutput, PlanOutput, PresentationOutput, Reflection, ReflectOutput, RemoveProduct, UpdateProduct,
    VersionWrite, WriteOutput,
)
from cabal.rounds.rules import ABOUT_RULES, RuleContext, step_problems
from cabal.rounds.snapshot import Snapshot
from cabal.rounds.team import Team, load_role_cards
from cabal.vocabulary import Step

TEAM = Team.build(2, load_role_cards())


def product(pid, name, type_="Content", parent=None, owner="operative-1", status="open"):
    return {"id": pid, "name": name, "type": type_, "parent_id": parent, "owner": owner, "status": status}


def snapshot(**tables) -> Snapshot:
    base = dict(round=2, mission={"id": "m"}, agents={}, products={}, versions=[], collabs=[], assignments=[],
                reflections=[], reviews=[], inspections=[], findings=[], acceptances=[], remarks=[], halts=[],
                messages=[], turns=[])
    base.update(tables)
    return Snapshot(**base)


TREE = {p["id"]: p for p in [
    product("root", "Plan", "Orchestration", owner="chair-1"),
    product("lib", "Library", "Collection", "root"),
    product("doc", "Brief", "Content", "root"),
    product("deep", "Deep", "Decision", "root"),
    product("inner", "Inner", "Decision", "deep"),
]}


def check(rule, item, agent="chair-1", **tables):
    return ABOUT_RULES[rule](item, RuleContext(snapshot(**tables), TEAM, agent))


def add(new_id, parent, name, type_="Content"):
    return AddProduct(action="ADD", newId=new_id, parentId=parent, product={"name": name, "type": type_, "dod": "done"})


@pytest.mark.parametrize(("item", "problems"), [
    (add("new-1", "lib", "Chapter"), []),
    (add("new-1", "doc", "Child"), ["a Content product cannot contain a Content product (Content is a leaf)"]),
    (add("new-1", "lib", "Choice", "Decision"), ["a Collection product cannot contain a Decision product (a Collection holds Content only)"]),
    (add("new-1", "root", "brief"), ["a product named 'brief' already exists under that parent"]),
    (add("new-1", "ghost", "X"), ["parent 'ghost' does not exist (use an existing id or an earlier new-N)"]),
    (MoveProduct(action="MOVE", productId="deep", parentId="inner"), ["a product cannot move under itself or one of its descendants"]),
    (MoveProduct(action="MOVE", productId="doc", parentId="lib"), []),
    (RemoveProduct(action="REMOVE", productId="deep", reason="r"), ["remove or move its children first: Inner"]),
    (UpdateProduct(action="UPDATE", productId="lib", product={"type": "Content"}), []),
    (UpdateProduct(action="UPDATE", productId="deep", product={"type": "Content"}), ["a Content product cannot contain a Decision product (Content is a leaf)"]),
])
def test_product_tree(item, problems):
    assert check("product_tree", item, products=dict(TREE)) == problems


def test_new_ids_chain_within_one_answer():
    ctx = RuleContext(snapshot(products=dict(TREE)), TEAM, "chair-1")
    assert ABOUT_RULES["product_tree"](add("new-1", "root", "Notes", "Collection"), ctx) == []
    assert ABOUT_RULES["product_tree"](add("new-2", "new-1", "Note A"), ctx) == []
    assert ABOUT_RULES["product_tree"](add("new-3", "new-1", "note a"), ctx) == ["a product named 'note a' already exists under that parent"]
    directive = {"objective": "o", "dod": "d", "why": "w", "importance": 5}
    assert ABOUT_RULES["assignable_product"](Assignment(productId="new-2", assignee="operative-2", directive=directive), ctx) == []
    assert ABOUT_RULES["assignable_product"](Assignment(productId="new-2", assignee="watchdog-1", directive=directive), ctx) == [
        "'watchdog-1' is not an operative of this team (operative-1, operative-2)",
        "a product gets one assignee per round; it is assigned twice in this answer",
    ]


VERSION = {"id": "v2", "product_id": "doc", "number": 2, "round": 1, "author": "operative-1"}
PASSED = {"id": "i1", "version_id": "v2", "product_id": "doc", "assessment": "approved", "round": 1}
MET = {"id": "r1", "product_id": "doc", "dod_status": "met", "round": 2}
ACCEPT = Acceptance(productId="doc", accepted=True, versionId="v2")


def test_acceptance_when_every_condition_holds():
    assert check("acceptable_version", ACCEPT, products=dict(TREE), versions=[VERSION], inspections=[PASSED],
                 reflections=[MET]) == []


@pytest.mark.parametrize(("tables", "problem"), [
    ({"inspections": []}, "version 2 of 'Brief' has not been inspected yet"),
    ({"inspections": [dict(PASSED, assessment="blocked")]}, "version 2 of 'Brief' did not pass inspection (blocked)"),
    ({"reflections": []}, "its owner (operative-1) has not reflected on it this round, so its definition of done is not reported met"),
    ({"reflections": [dict(MET, dod_status="partially_met")]}, "its owner reports the definition of done as partially_met"),
    ({"collabs": [{"id": "c1", "product_id": "doc", "importance": 8, "summary": "security hole"}]},
     "1 open collab(s) of importance >= 8 block acceptance: security hole"),
])
def test_acceptance_refused(tables, problem):
    given = {"products": dict(TREE), "versions": [VERSION], "inspections": [PASSED], "reflections": [MET], **tables}
    assert check("acceptable_version", ACCEPT, **given) == [problem]


def test_an_addressed_blocking_collab_no_longer_blocks():
    blocking = {"id": "c1", "product_id": "doc", "importance": 9, "summary": "s"}
    assert check("acceptable_version", ACCEPT, products=dict(TREE), versions=[VERSION], inspections=[PASSED],
                 reflections=[MET], collabs=[blocking], addressed={"c1"}) == []


# The last round's closing decisions: v3 was written this round (2), after its owner's Reflect.
WRITTEN_NOW = {"id": "v3", "product_id": "doc", "number": 3, "round": 2, "author": "operative-1"}
PASSED_NOW = dict(PASSED, id="i2", version_id="v3", round=2)
NOT_MET = dict(MET, dod_status="not_met")  # the owner's word on v2, before it wrote v3
ACCEPT_NOW = Acceptance(productId="doc", accepted=True, versionId="v3")


def test_a_version_written_this_round_is_accepted_on_its_inspection_without_a_reflection():
    given = {"products": dict(TREE), "versions": [VERSION, WRITTEN_NOW], "inspections": [PASSED, PASSED_NOW]}
    assert check("acceptable_version", ACCEPT_NOW, **given, reflections=[NOT_MET]) == []
    assert check("acceptable_version", ACCEPT_NOW, **given, reflections=[]) == []
    # The other conditions hold as at Plan: a passed inspection, no blocking collab.
    assert check("acceptable_version", ACCEPT_NOW, **dict(given, inspections=[PASSED])) == [
        "version 3 of 'Brief' has not been inspected yet"]
    assert check("acceptable_version", ACCEPT_NOW, **given, collabs=[
        {"id": "c1", "product_id": "doc", "importance": 8, "summary": "data loss"}]) == [
        "1 open collab(s) of importance >= 8 block acceptance: data loss"]


COLLABS = [{"id": "c1", "product_id": "doc", "importance": 6, "summary": "s"},
           {"id": "c2", "product_id": "lib", "importance": 4, "summary": "s"},
           {"id": "c3", "product_id": "doc", "importance": 3, "summary": "s"}]


def test_write_answers_only_open_feedback_on_what_the_operative_owns_or_was_assigned():
    ctx = RuleContext(snapshot(products=dict(TREE), collabs=COLLABS, addressed={"c3"},
                               assignments=[{"id": "a", "product_id": "lib", "assignee": "operative-2", "round": 2}]),
                      TEAM, "operative-2")
    answers = [FeedbackResponse(collabId=c, action="defer", rationale="r") for c in ("c2", "c2", "c1", "c3", "c9")]
    assert [ABOUT_RULES["answerable_collab"](answer, ctx) for answer in answers] == [
        [],  # on the Library, assigned to operative-2 this round
        ["this collab is answered twice in this answer; answer it once"],
        ["this collab is on 'Brief', which you neither own nor were assigned this round; answer only feedback on "
         "your own work"],
        ["this collab is already answered; it is no longer open feedback"],
        ["this collab does not exist"],
    ]
    owner = RuleContext(snapshot(products=dict(TREE), collabs=COLLABS), TEAM, "operative-1")  # owns the Brief
    assert ABOUT_RULES["answerable_collab"](answers[2], owner) == []


def test_only_assigned_products_get_versions():
    write = VersionWrite(productId="doc", newVersion={"contentTitle": "t", "content": "x" * 60, "changeSummary": "c"})
    assignment = {"id": "a", "product_id": "doc", "assignee": "operative-2", "round": 2}
    assert check("assigned_product", write, "operative-1", products=dict(TREE), assignments=[assignment]) == [
        "you may write versions only of products assigned to you this round (none); 'Brief' is not one of them"]
    assert check("assigned_product", write, "operative-2", products=dict(TREE), assignments=[assignment]) == []


def test_reflection_only_on_own_products_and_open_feedback():
    reflection = Reflection(refersToProduct="doc", dodStatus="met", nextVersionDelta="none",
                            feedbackResponses=[{"collabId": "c9", "action": "accept", "rationale": "r"}])
    assert check("owned_product", reflection, "operative-2", products=dict(TREE)) == [
        "you reflect only on products you own; 'Brief' is owned by operative-1",
        "collab 'c9' is not open feedback on this product"]


def test_verdict_follows_findings_and_speakers():
    finding = {"category": "security", "severity": 8, "issue": "i", "recommendation": "r"}
    inspection = Inspection(productId="doc", versionId="v2", assessment="approved", findings=[finding])
    version = dict(VERSION, round=2)
    assert check("new_version", inspection, "watchdog-1", products=dict(TREE), versions=[version]) == [
        "assessment 'approved' is too lenient: a finding has severity 8 (>= 8), which requires 'blocked'"]
    assert check("team_speaker", Message(content="Done.", asAgent="operative-3"), "envoy-1") == [
        "asAgent 'operative-3' may not speak; speakers are chair-1, operative-1, operative-2"]
    assert check("team_speaker", Message(content="Done.", asAgent="operative-2"), "envoy-1") == []


# ------------------------------------------------------- answers valid item by item but empty

WORK = {p["id"]: p for p in [product("root", "Plan", "Orchestration", owner="chair-1"),
                              product("doc", "Brief", owner="operative-1")]}
DOC_V1 = {"id": "v-doc-1", "product_id": "doc", "number": 1, "round": 2, "author": "operative-1"}


def test_a_plan_that_changes_nothing_while_work_is_open_is_refused():
    idle = PlanOutput(thinking={"round_strategy": "wait", "acceptance_rationale": "none"}, tree_operations=[],
                      assignments=[], acceptance=[])

    assert step_problems(Step.PLAN, idle, RuleContext(snapshot(products=WORK), TEAM, "chair-1")) == [(
        "", "this plan changes nothing while 1 product(s) are open: assign work, accept or reject versions, or "
            "change the tree; or halt (done when the mission is met, a question when the team cannot go on "
            "without the user)")]


def test_a_write_that_skips_an_assignment_is_refused():
    assigned = [{"id": "a1", "product_id": "doc", "assignee": "operative-1", "round": 2}]

    problems = step_problems(Step.WRITE, WriteOutput(reasoning="nothing to add", versions=[]),
                             RuleContext(snapshot(products=WORK, assignments=assigned), TEAM, "operative-1"))

    assert problems == [("versions", "write a new version of every product assigned to you this round; "
                                     "missing: Brief")]


def test_a_reflect_that_skips_a_versioned_product_is_refused():
    problems = step_problems(Step.REFLECT, ReflectOutput(reasoning="fine", reflections=[]),
                             RuleContext(snapshot(products=WORK, versions=[DOC_V1]), TEAM, "operative-1"))

    assert problems == [("reflections", "reflect on every open product of yours that has a version (the Chair "
                                        "accepts one only on your word); missing: Brief")]


def test_an_inspection_that_skips_a_new_version_is_refused():
    problems = step_problems(Step.INSPECT, InspectOutput(reasoning="all good", inspections=[]),
                             RuleContext(snapshot(products=WORK, versions=[DOC_V1]), TEAM, "watchdog-1"))

    assert problems == [("inspections", "every new version must be inspected; missing: Brief version 1")]


@pytest.mark.parametrize(("model", "empty_field"), [
    (BootstrapOutput, "initial_products"), (PeerReviewOutput, "reviews"), (PresentationOutput, "messages")])
def test_empty_lists_that_would_stall_a_mission_fail_the_schema(model, empty_field):
    with pytest.raises(ValidationError) as refused:
        model.model_validate({empty_field: []})

    assert any(error["loc"] == (empty_field,) and error["type"] == "too_short" for error in refused.value.errors())
