"""The user's words bind (issue 37): what the user said reaches every step that writes, judges or
decides, the mission file's answers included when the Chair asks no question (a recorded team
never saw the user's answer, left the ages the user gave blank, and both blind judges held it
against it), and the steps that plan, write or check work see the sources' text."""

from __future__ import annotations

from dataclasses import replace

from cabal.llm import FunctionChatModel, ModelRequest
from cabal.rounds.api import run_mission
from cabal.rounds.facts import TurnFacts
from cabal.rounds.simulated import SimulatedTeam
from cabal.vocabulary import Step

SAID = "Ages 8 to 14 only; no lead climbing this year."
MISSION = {"request": "We need a safety policy for our youth club and a one-page sheet for parents.",
           "rounds": 2, "budget": "none", "answers": [SAID]}


def prompts_of(home, folder, *, ask: bool, rounds: int = 2) -> dict[str, list[str]]:
    """Each step's prompts (the user message), the simulated team playing; ``ask``: its Chair asks
    its question first (and takes the mission file's answer), else it asks none."""
    team, seen = SimulatedTeam(), {}

    def play(request: ModelRequest) -> object:
        prompt = next(m for m in request.messages if m.type == "human")  # later calls of a turn add tool results
        seen.setdefault(request.key.step, []).append(str(prompt.content))
        facts = request.facts
        if not ask and isinstance(facts, TurnFacts) and facts.answers_waiting:
            request = replace(request, facts=replace(facts, answers_waiting=0))
        answer = team(request)
        if (request.key.round, request.key.step) == (1, Step.INSPECT):  # round 1's work goes on to a Reflect
            for inspection in answer["args"]["inspections"]:
                inspection["assessment"] = "needs_revision"
                inspection["findings"][0]["severity"] = 5
        return answer

    (folder / "incidents.md").write_text("# Incidents\n\nA child fell from the top of the wall.\n")
    mission = {**MISSION, "sources": [str(folder / "incidents.md")], "rounds": rounds}
    result = run_mission(mission, model=FunctionChatModel(play), home=home)
    assert result.state == "done", result.detail
    return seen


def test_the_mission_files_answer_reaches_every_step_when_the_chair_asks_no_question(graph_server, tmp_path) -> None:
    seen = prompts_of(graph_server.home, tmp_path, ask=False)
    said = f"The user said, before the work started: {SAID}"
    for step in (Step.BOOTSTRAP, Step.PLAN, Step.REFLECT, Step.WRITE, Step.PEER_REVIEW, Step.INSPECT):
        assert seen[step], step
        assert all(said in prompt for prompt in seen[step]), step
    closing = prompts_of(graph_server.home, tmp_path, ask=False, rounds=1)[Step.CLOSE]  # the last round's decisions
    assert closing and all(said in prompt for prompt in closing)
    assert all(said not in prompt for prompt in seen[Step.PRESENTATION])  # the Envoy only reports


def test_an_answer_the_chair_asked_for_is_shown_as_its_answer_not_twice(graph_server, tmp_path) -> None:
    seen = prompts_of(graph_server.home, tmp_path, ask=True)
    for step in (Step.WRITE, Step.INSPECT):
        assert all(f"The user answered: {SAID}" in prompt for prompt in seen[step]), step
        assert all("before the work started" not in prompt for prompt in seen[step]), step


def test_the_steps_that_plan_or_check_work_read_the_sources_text(graph_server, tmp_path) -> None:
    seen = prompts_of(graph_server.home, tmp_path, ask=True)
    for step in (Step.PLAN, Step.REFLECT, Step.PEER_REVIEW, Step.WRITE, Step.INSPECT):
        assert all("> A child fell from the top of the wall." in prompt for prompt in seen[step]), step
