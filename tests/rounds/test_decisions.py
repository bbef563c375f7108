"""One record of the mission's decisions (a Chair pasted the same agreed periods into three
directives, and a blind judge found roles named differently across the team's documents): the
Chair keeps it through record_decision, every step that writes or judges sees it whole under
"## Decisions", a change keeps the decision's id and supersedes its earlier revision, and the
report shows the record with its history."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from cabal.entities import Decision
from cabal.graph import ContextGraph
from cabal.llm import FunctionChatModel, ModelRequest
from cabal.report.html import render_html
from cabal.report.markdown import render_markdown
from cabal.rounds.api import run_mission
from cabal.rounds.rules import RuleContext, known_decision
from cabal.rounds.simulated import SimulatedTeam
from cabal.rounds.snapshot import Snapshot
from cabal.rounds.team import Team, load_role_cards
from cabal.rounds.workspace import mission_report
from cabal.vocabulary import Step

MISSION = {"request": "We need a pilot plan for our library's study rooms and a one-page notice for students.",
           "rounds": 3, "budget": "none"}
PILOT = {"topic": "Pilot period", "decision": "1 March to 30 April 2026", "why": "The board meets in May."}
LONGER = {"replaces": "d2", "topic": "Pilot period", "decision": "1 March to 31 May 2026",
          "why": "The board moved its meeting to June."}
UNKNOWN = {"replaces": "d9", "topic": "Room names", "decision": "Rooms A to D"}


@dataclass
class Played:
    """The simulated team, with a Chair that decides the pilot period at Bootstrap (d2: the
    simulated Chair's own d1 names the deliverables), first tries to change a decision that does
    not exist in round 1's Plan, and lengthens the pilot in round 2's Plan."""

    team: SimulatedTeam = field(default_factory=lambda: SimulatedTeam(products_per_round=1))
    prompts: dict[tuple[int, Step], list[str]] = field(default_factory=dict)
    told: list[str] = field(default_factory=list)  # what the engine answered the Chair's rejected plan

    def __call__(self, request: ModelRequest) -> object:
        prompt = next(m for m in request.messages if m.type == "human")  # later calls of a turn add tool results
        text = "\n\n".join(block["text"] for block in prompt.content) if isinstance(prompt.content, list) \
            else str(prompt.content)
        key = (request.key.round, request.key.step)
        self.prompts.setdefault(key, []).append(text)
        answer = self.team(request)
        if request.key.step == Step.BOOTSTRAP and answer["tool"] == "final_output":
            answer["args"]["decisions"] = [*answer["args"]["decisions"], PILOT]
        if key == (1, Step.PLAN):
            retried = [str(m.content) for m in request.messages if m.type == "tool"]
            self.told += retried
            if not retried:
                answer["args"]["decisions"] = [*answer["args"]["decisions"], UNKNOWN]
        if key == (2, Step.PLAN) and answer["tool"] == "final_output":
            answer["args"]["decisions"] = [*answer["args"]["decisions"], LONGER]
        return answer


@pytest.fixture(scope="module")
def played(graph_server) -> tuple[Played, str]:
    play = Played()
    result = run_mission(MISSION, model=FunctionChatModel(play), home=graph_server.home)
    assert result.state == "done", result.detail
    return play, result.mission_id


def test_the_chairs_decision_is_written_through_the_protocol_with_a_moment_that_says_who_and_why(
        played, graph_server) -> None:
    _, mission_id = played
    with ContextGraph.open(name=mission_id, home=graph_server.home) as graph:
        first = graph.find("chair_decision", {"key": "d2", "revision": 1},
                           fields=["topic", "decision", "why", "author", "round", "step", "retired"])
        moments = [m for m in graph.find("moment", {"type": "decision"}, fields=["prose"])
                   if "d2" in str(m.get("prose"))]
        speakers = {link["from"] for m in moments for link in graph.links_to(m["id"], "expresses")}
    assert [{k: v for k, v in d.items() if k != "id"} for d in first] == [
        {"topic": "Pilot period", "decision": "1 March to 30 April 2026", "why": "The board meets in May.",
         "author": "chair-1", "round": 0, "step": "bootstrap", "retired": False}]
    assert sorted(m["prose"] for m in moments) == [
        "changed d2 (Pilot period) in round 2: 1 March to 31 May 2026; why: The board moved its meeting to June.",
        "decided d2 (Pilot period) in round 0: 1 March to 30 April 2026; why: The board meets in May."]
    assert speakers == {"chair-1"}


def test_a_writer_and_the_watchdog_see_the_record_whole_early_in_their_prompt(played) -> None:
    play, _ = played
    shown = "## Decisions (the Chair's record: every product keeps to them)\n- d1 Deliverables: "
    pilot = "\n- d2 Pilot period: 1 March to 30 April 2026\n- d3 Owners: "
    for step in (Step.WRITE, Step.INSPECT):
        prompts = play.prompts[(1, step)]
        assert prompts and all(shown in p and pilot in p for p in prompts), step
        assert all(p.index(shown) < p.index("# Round 1") for p in prompts), step  # with the charter, before the round


def test_a_change_supersedes_the_old_decision_which_the_record_keeps(played, graph_server) -> None:
    play, mission_id = played
    for step in (Step.WRITE, Step.INSPECT):
        prompts = play.prompts[(2, step)]
        assert prompts and all("\n- d2 Pilot period: 1 March to 31 May 2026\n" in p for p in prompts), step
        assert all("30 April" not in p for p in prompts), step
    report = mission_report(mission_id, home=graph_server.home)
    assert [(d.revision, d.decision, d.status, d.round) for d in report.decision_record if d.id == "d2"] == [
        (1, "1 March to 30 April 2026", "superseded", 0), (2, "1 March to 31 May 2026", "current", 2)]
    with ContextGraph.open(name=mission_id, home=graph_server.home) as graph:
        [second] = graph.find("chair_decision", {"key": "d2", "revision": 2})
        [first] = graph.find("chair_decision", {"key": "d2", "revision": 1})
        assert [link["to"] for link in graph.links_from(second["id"], "supersedes")] == [first["id"]]


def test_a_change_naming_an_unknown_decision_is_a_listed_problem(played) -> None:
    play, _ = played
    assert play.told == ["Your answer was rejected (1 problem(s)); fix each:\n"
                         "- decisions.1: replaces names no current decision 'd9' (current decisions: d1, d2)"]


def test_the_rule_lists_the_current_decisions_and_allows_one_change_of_each() -> None:
    record = [{"id": "x1", "key": "d1", "revision": 1, "topic": "Pilot period", "decision": "March"},
              {"id": "x2", "key": "d1", "revision": 2, "topic": "Pilot period", "decision": "April"},
              {"id": "x3", "key": "d2", "revision": 1, "topic": "Rooms", "decision": "A to D"},
              {"id": "x4", "key": "d2", "revision": 2, "topic": "Rooms", "retired": True}]
    snapshot = Snapshot(round=2, mission={"id": "m"}, agents={}, products={}, versions=[], collabs=[],
                        assignments=[], reflections=[], reviews=[], inspections=[], findings=[], acceptances=[],
                        remarks=[], halts=[], messages=[], turns=[], decisions=record)
    context = RuleContext(snapshot, Team.build(2, load_role_cards()), "chair-1")
    assert known_decision(Decision(replaces="d2", topic="Rooms", decision="A to F"), context) == [
        "replaces names no current decision 'd2' (current decisions: d1)"]
    assert known_decision(Decision(replaces="d1", topic="Pilot period"), context) == []
    assert known_decision(Decision(replaces="d1", topic="Pilot period", decision="May"), context) == [
        "one change of d1 per answer"]
    assert known_decision(Decision(topic="pilot  Period", decision="June"), context) == [
        "d1 already settles 'pilot  Period': to change it, name it in replaces"]
    assert known_decision(Decision(topic="Rooms", decision="A to F"), context) == []  # d2 retired: a new one
    assert context.decided == ["Rooms"] and snapshot.next_decision_number() == 3


def test_the_report_shows_the_current_decisions_and_their_history(played, graph_server) -> None:
    _, mission_id = played
    report = mission_report(mission_id, home=graph_server.home)
    text = render_markdown(report)
    assert ("- d2 Pilot period: 1 March to 31 May 2026 (chair-1, round 2). Why: The board moved its meeting to June."
            in text)
    assert ("### Earlier decisions\n\n- d2 Pilot period: 1 March to 30 April 2026 (chair-1, round 0). "
            "Why: The board meets in May. (superseded)") in text
    assert text.index("## Decisions") < text.index("## Products")
    page = render_html(report)
    assert ('<tr class="muted"><td class="mono">d2</td><td>Pilot period</td>\n      <td>1 March to 30 April 2026 '
            '<span class="badge">superseded</span></td>') in page
