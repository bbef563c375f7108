"""Short ids: shown to a model, mapped back, every unknown reference reported."""

from __future__ import annotations

from cabal.errors import AnswerProblem
from cabal.rounds.ids import TempIds, halt_id, item_id, turn_id

MISSION = {"r0.bootstrap.chair-1.add_product0": "p1", "r1.plan.chair-1.product0": "p2",
           "r1.write.operative-1.write_version0": "p2.v1", "r9.new": "p3"}


def ids() -> TempIds:
    temp = TempIds(agents=frozenset({"chair-1", "operative-1"}), mission=MISSION)
    assert temp.short("p", "r0.bootstrap.chair-1.add_product0") == "p1"
    assert temp.short("p", "r1.plan.chair-1.product0") == "p2"
    assert temp.short("v", "r1.write.operative-1.write_version0") == "p2.v1"
    return temp


def test_deterministic_graph_ids():
    assert turn_id(2, "write", "operative-1") == "r2.write.operative-1"
    assert item_id("r2.write.operative-1", "write_version", 0) == "r2.write.operative-1.write_version0"
    assert (halt_id(0, "bootstrap"), halt_id(0, "bootstrap", 1)) == ("r0.bootstrap.halt", "r0.bootstrap.halt.after1")


def test_an_answer_is_mapped_back_ids_and_text():
    mapped, problems = ids().answer_to_graph({
        "versions": [{"productId": "p2", "newVersion": {"content": "Builds on [[p:p1]] and [[v:p2.v1]], per [[a:chair-1]]."}}],
        "assignments": [{"productId": "new-1"}],
    })
    assert problems == []
    assert mapped == {
        "versions": [{"productId": "r1.plan.chair-1.product0", "newVersion": {
            "content": "Builds on [[p:r0.bootstrap.chair-1.add_product0]] and "
                       "[[v:r1.write.operative-1.write_version0]], per [[a:chair-1]]."}}],
        "assignments": [{"productId": "new-1"}],
    }


def test_every_unknown_reference_is_a_problem():
    _, problems = ids().answer_to_graph({
        "collabs": [{"refersToProduct": "p7", "refersToVersion": "p1",
                     "comment": "See [[p:p9]], ask [[a:operative-4]] and [[u:boss]]; [[x:1]] is not a reference."}],
    })
    assert problems == [
        AnswerProblem("collabs.0.refersToProduct", "unknown id 'p7'; known p-ids: p1, p2"),
        AnswerProblem("collabs.0.refersToVersion", "unknown id 'p1'; known v-ids: p2.v1"),
        AnswerProblem("collabs.0.comment", "[[x:1]] is not a reference; write [[p:id]], [[v:id]], [[c:id]], [[a:agent-id]], [[u:user]] "
                                                 "or [[s:source-id]]"),
        AnswerProblem("collabs.0.comment", "reference [[p:p9]] names no product in your context"),
        AnswerProblem("collabs.0.comment", "reference [[a:operative-4]] names no agent of this team (chair-1, operative-1)"),
        AnswerProblem("collabs.0.comment", "reference [[u:boss]] names no user; use [[u:user]] or [[u:all]]"),
    ]


def test_stored_text_is_shown_with_short_ids():
    temp = ids()
    assert temp.text_to_model("after [[p:r1.plan.chair-1.product0]] and [[p:r9.new]]") == "after [[p:p2]] and [[p:p3]]"
    assert temp.real("p3") == "r9.new"


def test_an_id_of_the_mission_this_call_did_not_show_is_still_valid() -> None:
    """Ids mean the same for the whole mission: a Chair that named p2.v1, shown to it one step
    before, was refused ("no version in your context") and spent a round trip."""
    ids = TempIds(mission={"prod-a": "p1", "prod-b": "p2", "ver-b1": "p2.v1", "collab-x": "c1"})
    assert ids.short("p", "prod-a") == "p1"
    answer, problems = ids.answer_to_graph({"versionId": "p2.v1", "productId": "p2",
                                            "comment": "As [[v:p2.v1]] says, and c1 too."})
    assert problems == []
    assert answer == {"versionId": "ver-b1", "productId": "prod-b",
                      "comment": "As [[v:ver-b1]] says, and c1 too."}  # a bare word: only an id shown is taken
    # A form of the wrong kind is still refused, with the ids known.
    _, problems = ids.answer_to_graph({"versionId": "p2"})
    assert [p.message for p in problems] == ["unknown id 'p2'; known v-ids: p2.v1"]
