"""The feedback loop and the last round, end to end on the launch mission (real graph, scripted
answers with deviations): Write answers collabs with feedbackResponses, a deferred collab leaves
the open feedback but stays listed, and the last round's versions, passed or not, are decided at
the Chair's closing decisions after Inspect.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from cabal.graph import ContextGraph
from cabal.report.read import read_report
from cabal.rounds.api import run_mission
from cabal.rounds.control import MissionResult
from cabal.rounds.snapshot import load_snapshot
from cabal.vocabulary import Step

from .players import LAUNCH_MISSION, ScriptPlayer, tool_feedback

# The launch mission's deterministic ids (see test_engine.py).
BRIEF, PRICING, CHECKLIST = (f"r0.bootstrap.chair-1.after1.add_product{n}" for n in range(3))
COMPARISON = "r1.peer_review.operative-1.add_collab0"  # operative-1's feedback on pricing v1: add a comparison


@pytest.fixture(scope="module")
def home(graph_server) -> Path:
    return graph_server.home


@dataclass
class Run:
    result: MissionResult
    player: ScriptPlayer
    home: Path

    def graph(self) -> ContextGraph:
        return ContextGraph.open(name=self.result.mission_id, home=self.home)


def _answer(round_number: int, step: str, agent: str, **changes) -> dict:
    return {"tool": "final_output", "args": {**ScriptPlayer().script_answer((round_number, step, agent)), **changes}}


def _reflect_without_answers(agent: str) -> dict:
    answer = _answer(2, "reflect", agent)
    for reflection in answer["args"]["reflections"]:
        reflection["feedbackResponses"] = []
    return answer


ACCEPT_COMPARISON = {"collabId": "c1", "action": "accept", "rationale": "The DoD asks for a comparison.",
                     "plannedChange": "Compare with the leading note app's student plan."}
DEFER_COMPARISON = {"collabId": "c1", "action": "defer", "rationale": "The competitor's prices change next month.",
                    "plannedChange": None}


@pytest.fixture(scope="module")
def answered(home: Path) -> Run:
    """Round 2: operative-2 leaves the comparison feedback for its Write, and answers it there
    (first twice, which is refused)."""
    player = ScriptPlayer(inject={
        (2, "reflect", "operative-2"): [_reflect_without_answers("operative-2")],
        (2, "write", "operative-2"): [
            _answer(2, "write", "operative-2", feedbackResponses=[ACCEPT_COMPARISON, dict(ACCEPT_COMPARISON)]),
            _answer(2, "write", "operative-2", feedbackResponses=[ACCEPT_COMPARISON])],
    })
    return Run(run_mission(LAUNCH_MISSION, model=player.model(), home=home), player, home)


def test_write_answers_the_open_feedback_on_what_it_writes(answered: Run) -> None:
    assert (answered.result.state, answered.result.stop_reason, answered.result.round) == ("done", "concluded", 2)
    first, second = answered.player.calls_of(2, "write", "operative-2")
    assert ("Open collabs on it:\n- c1 on p2 about p2.v1 [feedback, importance 6] by operative-1 (round 1): Add the "
            "comparison") in first.prompt
    assert tool_feedback(second.last).endswith(
        "\n- feedbackResponses.1: this collab is answered twice in this answer; answer it once")
    with answered.graph() as graph:
        response = graph.get("r2.write.operative-2.answer_feedback0")
        assert {k: response[k] for k in ("node_type", "collab_id", "product_id", "action", "rationale",
                                         "planned_change", "author", "round", "step")} == {
            "node_type": "response", "collab_id": COMPARISON, "product_id": PRICING, "action": "accept",
            "rationale": "The DoD asks for a comparison.",
            "planned_change": "Compare with the leading note app's student plan.",
            "author": "operative-2", "round": 2, "step": "write"}
        assert [(link["to"], link["properties"].get("action")) for link in graph.links_from(response["id"], "addresses")] == [
            (COMPARISON, "accept")]
        view = load_snapshot(graph, answered.result.mission_id, 3)
        assert COMPARISON in view.addressed and COMPARISON not in view.deferred
        assert [c["id"] for c in view.open_collabs(PRICING)] == []  # no new collab was needed to answer it
        report = read_report(graph, answered.result.mission_id)
    pricing = next(p for p in report.products if p.id == PRICING)
    (comparison,) = [c for c in pricing.collabs if c.id == COMPARISON]
    assert (comparison.addressed, [(r.by, r.round, r.action, r.planned_change) for r in comparison.responses]) == (
        True, [("operative-2", 2, "accept", "Compare with the leading note app's student plan.")])
    # Answered at Write, it no longer stands in the way at round 2's closing decisions.
    assert "Add the comparison" not in answered.player.prompts_of("chair-1", 2)["close"]


@pytest.fixture(scope="module")
def deferred(home: Path) -> Run:
    """Round 2: operative-2 defers the comparison feedback on its pricing at its Reflect."""
    reflect = _answer(2, "reflect", "operative-2")
    reflect["args"]["reflections"][0]["feedbackResponses"] = [DEFER_COMPARISON]
    player = ScriptPlayer(inject={(2, "reflect", "operative-2"): [reflect]})
    return Run(run_mission(LAUNCH_MISSION, model=player.model(), home=home), player, home)


def test_a_deferred_collab_leaves_the_open_feedback_and_stays_listed(deferred: Run) -> None:
    with deferred.graph() as graph:
        view = load_snapshot(graph, deferred.result.mission_id, 3)
        report = read_report(graph, deferred.result.mission_id)
    assert (COMPARISON in view.addressed, view.deferred, [c["id"] for c in view.deferred_collabs(PRICING)]) == (
        True, {COMPARISON}, [COMPARISON])
    assert view.open_collabs(PRICING) == []
    pricing = next(p for p in report.products if p.id == PRICING)
    assert [(c.id, c.addressed, [r.action for r in c.responses]) for c in pricing.collabs] == [
        (COMPARISON, True, ["defer"])]


# ------------------------------------------------------------------------ the last round


@pytest.fixture(scope="module")
def closed(home: Path) -> Run:
    """The launch mission in two rounds: round 2 is the last, so its versions are decided at the
    Chair's closing decisions. Pricing v2 needs revision here, and the Chair first tries to accept it."""
    inspect = _answer(2, "inspect", "watchdog-1")
    inspect["args"]["inspections"][0] = {"productId": "p2", "versionId": "p2.v2", "assessment": "needs_revision",
                                         "findings": [{"category": "completeness", "severity": 5,
                                                       "issue": "The competitor's price has no source.",
                                                       "recommendation": "Name where the 4 euros come from."}]}
    accept_both = _answer(2, "close", "chair-1", done=None)  # the pricing does not pass: the mission goes on
    reject_pricing = _answer(2, "close", "chair-1", done=None, acceptance=[
        {"productId": "p2", "accepted": False, "rejectionReason": "The competitor's price needs a source."},
        {"productId": "p3", "accepted": True, "versionId": "p3.v1"}])
    player = ScriptPlayer(inject={(2, "inspect", "watchdog-1"): [inspect],
                                  (2, "close", "chair-1"): [accept_both, reject_pricing]})
    return Run(run_mission(LAUNCH_MISSION, model=player.model(), home=home, rounds=2), player, home)


LAST_ROUND_HEADER = ("# Round 2 of 2 (the last round: versions written now are accepted or rejected at the closing "
                     "decisions after Inspect)")


def test_the_last_round_says_so_and_decides_what_it_wrote_after_inspect(closed: Run) -> None:
    assert (closed.result.state, closed.result.stop_reason, closed.result.round) == ("done", "noMoreRounds", 2)
    # Operatives of one step call in parallel, in any order: the turns in step order, then agent.
    turns = [key for key in dict.fromkeys(c.key for c in closed.player.calls) if key[0] == 2]
    assert sorted(turns, key=lambda key: (Step(key[1]).position, key[2])) == [
        (2, "reflect", "operative-2"), (2, "plan", "chair-1"),
        (2, "write", "operative-1"), (2, "write", "operative-2"), (2, "peer_review", "operative-1"),
        (2, "peer_review", "operative-2"), (2, "inspect", "watchdog-1"), (2, "close", "chair-1"),
        (2, "presentation", "envoy-1")]
    assert all(f"{LAST_ROUND_HEADER}\n" in call.prompt for call in closed.player.calls_of(2))
    assert all("# Round 1 of 2\n" in call.prompt and "(the last round:" not in call.prompt
               for call in closed.player.calls_of(1))

    first, retry = closed.player.calls_of(2, "close", "chair-1")
    assert first.tools == ("final_output", "request_context", "halt")
    assert "Your step now: Closing decisions\nThese are your closing decisions, after Inspect" in first.prompt
    assert ("## Versions awaiting a decision (to accept one, give its version id)\n"
            "### p2 Pricing decision: latest version p2.v2 (by operative-2 in round 2)\n"
            "Verdict: needs_revision; owner's DoD report this round: none on it: it was written this round\n"
            "- [completeness, severity 5] The competitor's price has no source.\n"
            "  Recommendation: Name where the 4 euros come from.\n"
            "### p3 Launch-day checklist: latest version p3.v1 (by operative-1 in round 2)\n"
            "Verdict: approved; owner's DoD report this round: none on it: it was written this round\n") in first.prompt
    assert ("## Versions written this round\n"
            "### p2 Pricing decision [Decision]\n"
            "DoD: States the price of each plan, the student discount and the reasoning, with at least one comparison.\n"
            "p2.v2 (by operative-2 in round 2): Margin pricing, with comparison\n") in first.prompt
    assert ("~~~\nPeer reviews:\n- operative-1: approved: The comparison is there and supports the student price.\n"
            "### p3 Launch-day checklist [Content]") in first.prompt
    assert tool_feedback(retry.last).endswith(
        "\n- acceptance.0: version 2 of 'Pricing decision' did not pass inspection (needs_revision)")

    with closed.graph() as graph:
        products = {p["name"]: (p["status"], p.get("accepted_version"), p.get("accepted_round"))
                    for p in graph.find("product")}
        decisions = sorted((a["round"], a["product_id"], a["accepted"], a.get("rejection_reason"))
                           for a in graph.find("acceptance"))
        moment = graph.get("r2.close.chair-1")
    # The checklist, written in round 2, is accepted in round 2 on its inspection: no Reflect spoke for it.
    assert products == {"Launch brief": ("accepted", "r1.write.operative-1.write_version0", 1),
                        "Pricing decision": ("open", None, None),
                        "Launch-day checklist": ("accepted", "r2.write.operative-1.write_version0", 2)}
    assert (2, PRICING, False, "The competitor's price needs a source.") in decisions
    assert (moment["outcome"], moment["attempts"]) == ("final", 2)


def test_the_chair_may_end_the_mission_at_the_closing_decisions(home: Path) -> None:
    done = {"type": "done", "to": ["u:all"], "message": "Brief, pricing and checklist are ready for launch."}
    player = ScriptPlayer(inject={(2, "close", "chair-1"): [{"tool": "halt", "args": done}]})

    result = run_mission(LAUNCH_MISSION, model=player.model(), home=home, rounds=2)

    assert (result.state, result.stop_reason, result.round, result.detail) == (
        "done", "concluded", 2, "Brief, pricing and checklist are ready for launch.")
    assert [c.key for c in player.calls][-2:] == [(2, "close", "chair-1"), (2, "presentation", "envoy-1")]
    assert "- chair-1 closed the mission: Brief, pricing and checklist are ready for launch." in \
        player.calls_of(2, "presentation", "envoy-1")[0].prompt
