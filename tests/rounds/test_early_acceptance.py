"""A version that passed every inspection is decided in the round it passed: the Chair's closing
decisions follow Inspect in that round (not only in the mission's last), and may end the mission
there. A version that did not pass goes on to the next round's Reflect and Plan.

A one-product mission of three rounds, scripted, on the real graph server.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cabal.graph import ContextGraph
from cabal.rounds.api import resume_mission, run_mission
from cabal.rounds.context import LAST_ROUND
from cabal.rounds.control import stop_mission
from cabal.rounds.events import MissionEvent, TurnDone

from .players import LAUNCH_MISSION, ScriptPlayer, tool_feedback

ROOT = Path(__file__).resolve().parents[2]
NOTE = "r0.bootstrap.chair-1.add_product0"
NOTE_V1 = "r1.write.operative-1.write_version0"
DONE = "The welcome note is accepted; the mission is met."
MISSION = {"name": "welcome-note", "request": "Write a short welcome note for new Margin users.",
           "team": {"operatives": 1}, "rounds": 3}
TWO_WATCHDOGS = """\
role: watchdog
members:
  - {id: watchdog-security, name: Sol, focus: [security]}
  - {id: watchdog-quality, name: Quinn, focus: [completeness, coherence, integration, quality]}
"""


def entry(round_number: int, step: str, agent: str, args: dict, tool: str = "final_output") -> dict:
    return {"round": round_number, "step": step, "agent": agent, "tool": tool, "args": args}


def inspection(assessment: str, *findings: dict) -> dict:
    return {"reasoning": "Checked against its definition of done.", "inspections": [
        {"productId": "p1", "versionId": "p1.v1", "assessment": assessment, "findings": list(findings)}]}


NO_NAME = {"category": "completeness", "severity": 5, "issue": "The note does not name the app.",
           "recommendation": "Say Margin in the first sentence."}
APPROVED, NEEDS_REVISION = inspection("approved"), inspection("needs_revision", NO_NAME)


def round_1(*inspections: dict) -> list[dict]:
    """Bootstrap and round 1 up to the closing decisions: one note, written and inspected."""
    return [
        entry(0, "bootstrap", "chair-1", {
            "thinking": {"interpretation": "A welcome note for new users.", "scopeDecisions": "One note."},
            "mission": "Write the welcome note new Margin users read first.",
            "objectives": ["A welcome note that says what Margin does"], "constraints": [],
            "personas": {"operative-1": "A friendly copywriter"},
            "operativeDomains": {"operative-1": {"responsibility": "The welcome note", "area": "copy"}},
            "initialProducts": [{"name": "Welcome note", "type": "Content", "owner": "operative-1",
                                 "dod": "Says what Margin does and how to take a first note."}]}),
        entry(1, "plan", "chair-1", {
            "thinking": {"roundStrategy": "Write the note.", "acceptanceRationale": "Nothing to accept yet."},
            "treeOperations": [], "acceptance": [],
            "assignments": [{"productId": "p1", "assignee": "operative-1", "directive": {
                "objective": "Write the welcome note.", "dod": "What Margin does and the first step.",
                "why": "It is the first thing a user reads.", "importance": 7}}]}),
        entry(1, "write", "operative-1", {"reasoning": "What Margin does, then the first step.", "versions": [
            {"productId": "p1", "newVersion": {
                "contentTitle": "Welcome to Margin",
                "content": "Margin keeps your lecture notes in one place and turns them into a revision plan. "
                           "Tap the plus button to take your first note.",
                "changeSummary": "First version."}}]}),
        *inspections,
    ]


PRESENTATION = entry(1, "presentation", "envoy-1", {
    "reasoning": "What happened this round.",
    "messages": [{"asAgent": "operative-1", "content": "The welcome note is written and inspected."}]})
CLOSE_AND_END = entry(1, "close", "chair-1", {
    "reasoning": "The note passed inspection and says both things its DoD asks for.",
    "acceptance": [{"productId": "p1", "accepted": True, "versionId": "p1.v1"}], "done": DONE})


def turn_ids(home: Path, mission_id: str) -> list[str]:
    with ContextGraph.open(name=mission_id, home=home) as graph:
        return sorted(t["id"] for t in graph.find("moment", {"type": "turn"}))


def stop_after_round_1(home: Path):
    def listen(event: MissionEvent) -> None:
        if isinstance(event, TurnDone) and event.step == "presentation" and event.round == 1:
            stop_mission(event.mission, home=home)
    return listen


def test_a_version_approved_in_round_1_is_accepted_in_round_1_and_the_mission_ends_there(graph_server) -> None:
    home = graph_server.home
    player = ScriptPlayer(script=[*round_1(entry(1, "inspect", "watchdog-1", APPROVED)), CLOSE_AND_END, PRESENTATION])

    result = run_mission(MISSION, model=player.model(), home=home)

    assert (result.state, result.stop_reason, result.round, result.detail) == ("done", "concluded", 1, DONE)
    assert [c.key for c in player.calls][-2:] == [(1, "close", "chair-1"), (1, "presentation", "envoy-1")]
    (close,) = player.calls_of(1, "close", "chair-1")
    assert "# Round 1 of 3\n" in close.prompt and LAST_ROUND not in close.prompt
    assert ("## Versions awaiting a decision (to accept one, give its version id)\n"
            "### p1 Welcome note: latest version p1.v1 (by operative-1 in round 1)\n"
            "Verdict: approved; owner's DoD report this round: none on it: it was written this round") in close.prompt
    with ContextGraph.open(name=result.mission_id, home=home) as graph:
        decisions = [(a["round"], a["product_id"], a["version_id"], a["accepted"]) for a in graph.find("acceptance")]
        note = graph.get(NOTE)
        halts = [(h["id"], h["type"], h["status"], h["message"], h["round"], h["step"]) for h in graph.find("halt")]
    assert decisions == [(1, NOTE, NOTE_V1, True)]
    assert (note["status"], note["accepted_version"], note["accepted_round"]) == ("accepted", NOTE_V1, 1)
    assert halts == [("r1.close.halt", "done", "done", DONE, 1, "close")]
    assert turn_ids(home, result.mission_id) == ["r0.bootstrap.chair-1", "r1.close.chair-1", "r1.inspect.watchdog-1",
                                                 "r1.plan.chair-1", "r1.presentation.envoy-1", "r1.write.operative-1"]


def test_the_closing_decisions_end_the_mission_only_with_every_product_accepted(graph_server) -> None:
    home = graph_server.home
    too_early = entry(1, "close", "chair-1", {"reasoning": "Not yet.", "acceptance": [
        {"productId": "p1", "accepted": False, "rejectionReason": "Name the app."}], "done": DONE})
    player = ScriptPlayer(script=[*round_1(entry(1, "inspect", "watchdog-1", APPROVED)), too_early, CLOSE_AND_END,
                                  PRESENTATION])

    result = run_mission(MISSION, model=player.model(), home=home)

    assert (result.state, result.stop_reason, result.round) == ("done", "concluded", 1)
    first, retry = player.calls_of(1, "close", "chair-1")
    assert tool_feedback(retry.last).endswith(
        "\n- done: the mission ends only when every product is accepted; still open: Welcome note")


ROUND_2 = [  # the note revised after a needs_revision: reflected on, planned, written, inspected, closed
    entry(2, "reflect", "operative-1", {"reasoning": "The inspection asks for the app's name.", "reflections": [
        {"refersToProduct": "p1", "dodStatus": "partially_met", "feedbackResponses": [],
         "nextVersionDelta": "Name Margin in the first sentence."}]}),
    entry(2, "plan", "chair-1", {
        "thinking": {"roundStrategy": "Revise the note.", "acceptanceRationale": "It needs revision."},
        "treeOperations": [], "acceptance": [],
        "assignments": [{"productId": "p1", "assignee": "operative-1", "directive": {
            "objective": "Name the app.", "dod": "What Margin does and the first step.",
            "why": "The inspection asks for it.", "importance": 7}}]}),
    entry(2, "write", "operative-1", {"reasoning": "Named the app first.", "versions": [
        {"productId": "p1", "newVersion": {
            "contentTitle": "Welcome to Margin",
            "content": "Welcome to Margin: it keeps your lecture notes in one place and turns them into a "
                       "revision plan. Tap the plus button to take your first note.",
            "changeSummary": "Names the app in the first sentence."}}]}),
    entry(2, "inspect", "watchdog-1", {"reasoning": "It names the app now.", "inspections": [
        {"productId": "p1", "versionId": "p1.v2", "assessment": "approved", "findings": []}]}),
    entry(2, "close", "chair-1", {**CLOSE_AND_END["args"],
                                  "acceptance": [{"productId": "p1", "accepted": True, "versionId": "p1.v2"}]}),
    {**PRESENTATION, "round": 2},
]


def test_a_version_that_needs_revision_is_not_closed_in_its_round_but_goes_on(graph_server) -> None:
    home = graph_server.home
    player = ScriptPlayer(script=[*round_1(entry(1, "inspect", "watchdog-1", NEEDS_REVISION)), PRESENTATION,
                                  *ROUND_2])

    result = run_mission(MISSION, model=player.model(), home=home)

    # Round 1 has no closing decisions; the note goes on to round 2's Reflect and Plan, passes, and
    # is decided at round 2's.
    assert (result.state, result.stop_reason, result.round) == ("done", "concluded", 2)
    assert [c.key[1] for c in player.calls_of(1)] == ["plan", "write", "inspect", "presentation"]
    assert [c.key[1] for c in player.calls_of(2)] == ["reflect", "plan", "write", "inspect", "close", "presentation"]
    with ContextGraph.open(name=result.mission_id, home=home) as graph:
        assert [(a["round"], a["version_id"], a["accepted"]) for a in graph.find("acceptance")] == [
            (2, "r2.write.operative-1.write_version0", True)]


def test_a_rejection_at_plan_and_an_acceptance_at_close_in_one_round_are_told_in_that_order(graph_server) -> None:
    # The launch example's pricing: rejected at round 2's Plan, its v2 accepted at round 2's closing
    # decisions. The Envoy must not hear the rejection as the last word.
    player = ScriptPlayer()

    run_mission(LAUNCH_MISSION, model=player.model(), home=graph_server.home)

    (envoy,) = player.calls_of(2, "presentation", "envoy-1")
    assert ("- chair-1 rejected Pricing decision: Blocked by inspection until the comparison is added.\n"
            "- chair-1 accepted Pricing decision\n- chair-1 accepted Launch-day checklist\n") in envoy.prompt


def test_with_two_watchdogs_a_version_passes_only_when_both_approve(graph_server, tmp_path) -> None:
    home = graph_server.home
    (tmp_path / "watchdog.yaml").write_text(TWO_WATCHDOGS)
    mission = {**MISSION, "team": {"operatives": 1, "cards": str(tmp_path)}}
    for quality, closes in ((APPROVED, True), (NEEDS_REVISION, False)):
        player = ScriptPlayer(script=[*round_1(entry(1, "inspect", "watchdog-security", APPROVED),
                                               entry(1, "inspect", "watchdog-quality", quality)),
                                      CLOSE_AND_END, PRESENTATION])

        result = run_mission(mission, model=player.model(), home=home, on_event=stop_after_round_1(home))

        assert (result.state, result.stop_reason, result.round) == (("done", "concluded", 1) if closes
                                                                    else ("done", "userHalt", 1))
        assert sorted(c.key for c in player.calls_of(1, "inspect")) == [(1, "inspect", "watchdog-quality"),
                                                                        (1, "inspect", "watchdog-security")]
        assert [c.key for c in player.calls_of(1, "close")] == ([(1, "close", "chair-1")] if closes else [])
        with ContextGraph.open(name=result.mission_id, home=home) as graph:
            assert [(a["round"], a["accepted"]) for a in graph.find("acceptance")] == ([(1, True)] if closes else [])


DIE_AT = """\
import os, sys
from cabal import run_mission
from cabal.rounds.events import StepStarted, TurnDone
def listen(event):
    if getattr(event, "step", None) == "close" and type(event).__name__ == sys.argv[3]:
        print(event.mission, flush=True)
        os._exit(9)
run_mission(sys.argv[1], home=sys.argv[2], on_event=listen)
"""


@pytest.mark.parametrize("moment", ["StepStarted", "TurnDone"])  # before the Close turn; its write sent
def test_a_kill_during_the_closing_decisions_resumes_without_writing_anything_twice(graph_server, tmp_path,
                                                                                     moment: str) -> None:
    home = graph_server.home
    script = [*round_1(entry(1, "inspect", "watchdog-1", APPROVED)), CLOSE_AND_END, PRESENTATION]
    (tmp_path / "note.script.yaml").write_text(yaml.safe_dump(script))
    mission = tmp_path / "note.mission.yaml"
    mission.write_text(yaml.safe_dump({**MISSION, "model": "scripted:note.script.yaml"}))

    killed = subprocess.run([sys.executable, "-c", DIE_AT, str(mission), str(home), moment],
                            capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert killed.returncode == 9, killed.stderr
    mission_id = killed.stdout.strip()

    resumed = resume_mission(mission_id, home=home)

    assert (resumed.state, resumed.stop_reason, resumed.round, resumed.detail) == ("done", "concluded", 1, DONE)
    with ContextGraph.open(name=mission_id, home=home) as graph:
        assert [(a["id"], a["round"], a["accepted"]) for a in graph.find("acceptance")] == [
            ("r1.close.chair-1.decide_acceptance0", 1, True)]
        assert [h["id"] for h in graph.find("halt")] == ["r1.close.halt"]
        assert [m["round"] for m in graph.find("message")] == [1]
        assert graph.get(NOTE)["accepted_round"] == 1
    assert turn_ids(home, mission_id) == ["r0.bootstrap.chair-1", "r1.close.chair-1", "r1.inspect.watchdog-1",
                                          "r1.plan.chair-1", "r1.presentation.envoy-1", "r1.write.operative-1"]


def test_a_closing_message_that_names_a_product_reaches_the_user_as_its_name(graph_server) -> None:
    """A Chair's `done` wrote "p1 is ready"; the bare id became a reference, and the terminal, the
    status and the report printed [[p:r0.bootstrap.chair-1.add_product0]] where the name belongs."""
    home = graph_server.home
    close = entry(1, "close", "chair-1", {**CLOSE_AND_END["args"], "done": "Delivered: p1, as p1.v1 reads."})
    player = ScriptPlayer(script=[*round_1(entry(1, "inspect", "watchdog-1", APPROVED)), close, PRESENTATION])

    result = run_mission(MISSION, model=player.model(), home=home)

    assert result.detail == "Delivered: Welcome note, as Welcome note (version 1) reads."
    with ContextGraph.open(name=result.mission_id, home=home) as graph:
        assert graph.get("r1.close.halt")["message"] == f"Delivered: [[p:{NOTE}]], as [[v:{NOTE_V1}]] reads."
