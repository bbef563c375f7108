"""The round engine end to end: whole missions against the real graph server, fake models only.

Every mission runs on the session's embedded FalkorDB (its own named graph, a fresh mission
id) and every expectation is an exact value read back from the graph or from the prompts a
fake model received.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from cabal.errors import MissionError, ResourceNotFound
from cabal.graph import ContextGraph
from cabal.membrane import Membrane
from cabal.rounds.api import resume_mission, run_mission
from cabal.rounds.control import MissionResult, mission_status, say, stop_mission, transcript
from cabal.rounds.events import MissionEvent, TurnDone
from cabal.rounds.mission import load_mission
from cabal.rounds.workspace import mission_report
from tests.llm.fake_anthropic import FakeAnthropic, fake_api

from .players import LAUNCH_MISSION, LAUNCH_SCRIPT, ScriptPlayer, tool_feedback

# Deterministic ids of the launch mission: where each write happened.
BRIEF, PRICING, CHECKLIST = (f"r0.bootstrap.chair-1.after1.add_product{n}" for n in range(3))
BRIEF_V1 = "r1.write.operative-1.write_version0"
PRICING_V1 = "r1.write.operative-2.write_version0"
CHECKLIST_V1 = "r2.write.operative-1.write_version0"
PRICING_V2 = "r2.write.operative-2.write_version0"

ROUND_STEPS = {  # (step, agents) of each round of the launch mission, in order
    0: [("bootstrap", ["chair-1", "chair-1"])],  # asked the user, then answered
    # No product has a version in round 1: no Reflect then. A version that passed inspection is
    # decided at the Close of its round; the brief is accepted in round 1, so in round 2 only
    # operative-2 reflects, and round 2's Close accepts the rest and ends the mission.
    1: [("plan", ["chair-1"]), ("write", ["operative-1", "operative-2"]),
        ("peer_review", ["operative-1", "operative-2"]), ("inspect", ["watchdog-1"]), ("close", ["chair-1"]),
        ("presentation", ["envoy-1"])],
    2: [("reflect", ["operative-2"]), ("plan", ["chair-1"]), ("write", ["operative-1", "operative-2"]),
        ("peer_review", ["operative-1", "operative-2"]), ("inspect", ["watchdog-1"]), ("close", ["chair-1"]),
        ("presentation", ["envoy-1"])],
}
LAUNCH_TURNS = sorted(
    {f"r{r}.{step}.{agent}" for r, steps in ROUND_STEPS.items() for step, agents in steps for agent in agents}
    | {"r0.bootstrap.chair-1.after1"}
)
DONE_MESSAGE = "The launch plan is complete: brief, pricing and launch-day checklist are all accepted."
REMARK_TO_OPERATIVE_2 = ("- from operative-1 [question] in round 1's Write: Can the student price be quoted as a monthly "
                         "figure in the brief?")
SELF_REMARK = ("- from operative-1 [note] in round 1's Write: The checklist needs the final price, so it comes after the "
               "pricing decision.")


@pytest.fixture(scope="session")
def home(graph_server) -> Path:
    """Missions share the session's workspace; each one is its own named graph."""
    return graph_server.home


def open_graph(home: Path, mission_id: str) -> ContextGraph:
    return ContextGraph.open(name=mission_id, home=home)


def turns(graph: ContextGraph) -> dict[str, dict]:
    fields = ["round", "step", "agent", "outcome", "attempts", "problems", "prose",
              "input_tokens", "output_tokens", "cache_read_tokens"]
    return {t["id"]: t for t in graph.find("moment", {"type": "turn"}, fields=fields)}


def spoken(graph: ContextGraph) -> list[tuple[int, str, str]]:
    """The conversation the user sees: (round, speaker, content) in order."""
    messages = graph.find("message", fields=["round", "position", "as_agent", "content"])
    return [(m["round"], m["as_agent"], m["content"]) for m in sorted(messages, key=lambda m: (m["round"], m["position"]))]


def script_args(round_number: int, step: str, agent: str) -> dict:
    return ScriptPlayer().script_answer((round_number, step, agent))


def launch_with_budget(tokens: int, when_spent: str = "ask"):
    spec, _ = load_mission(LAUNCH_MISSION)
    return spec.model_copy(update={"budget": spec.budget.model_copy(update={"tokens": tokens, "when_spent": when_spent})})


# ------------------------------------------------------------------ 1. the example as shipped


def test_launch_example_leaves_exactly_this_graph(home: Path) -> None:
    result = run_mission(LAUNCH_MISSION, home=home)  # the mission's own script, offline

    assert (result.state, result.stop_reason, result.round, result.detail) == ("done", "concluded", 2, DONE_MESSAGE)
    assert result.pending_halt is None
    assert result.usage.calls == len(LAUNCH_TURNS)
    with open_graph(home, result.mission_id) as graph:
        products = {p["id"]: (p["name"], p["type"], p["owner"], p["status"], p["accepted_version"], p["accepted_round"])
                    for p in graph.find("product")}
        assert products == {
            BRIEF: ("Launch brief", "Content", "operative-1", "accepted", BRIEF_V1, 1),
            PRICING: ("Pricing decision", "Decision", "operative-2", "accepted", PRICING_V2, 2),
            CHECKLIST: ("Launch-day checklist", "Content", "operative-1", "accepted", CHECKLIST_V1, 2),
        }

        # Versions: numbered per product, each with the content its author wrote.
        versions = sorted((v["product_id"], v["number"], v["id"], v["author"], v["round"], v["content"])
                          for v in graph.find("version"))
        written = {(r, agent): script_args(r, "write", agent)["versions"][0]["newVersion"]["content"]
                   for r in (1, 2) for agent in ("operative-1", "operative-2")}
        assert versions == [
            (BRIEF, 1, BRIEF_V1, "operative-1", 1, written[1, "operative-1"]),
            (PRICING, 1, PRICING_V1, "operative-2", 1, written[1, "operative-2"]),
            (PRICING, 2, PRICING_V2, "operative-2", 2, written[2, "operative-2"]),
            (CHECKLIST, 1, CHECKLIST_V1, "operative-1", 2, written[2, "operative-1"]),
        ]
        assert [(link["from"], link["to"]) for link in graph.links_from(PRICING_V2, "supersedes")] == [(PRICING_V2, PRICING_V1)]
        assert graph.links_from(PRICING_V1, "supersedes") == []

        # Immutable: writing the same version id again, with other content, changes nothing.
        before = graph.get(PRICING_V1)
        rewrite = Membrane(graph).run("write_version", {
            "mission_id": result.mission_id, "round": 1, "step": "write", "agent_id": "operative-2",
            "actor_id": "operative-2", "turn_id": "r1.write.operative-2", "index": 0, "item_id": PRICING_V1,
            "number": 1, "previous_version_id": None, "title": "Version 1", "references": [], "cited": [],
        }, {"item": {"productId": PRICING, "newVersion": {
            "contentTitle": "Margin pricing, rewritten", "content": "Plus costs 9 euros a month and there is no student discount.",
            "changeSummary": "An attempt to rewrite history."}}}, session_id="test.rewrite-v1")
        assert rewrite.status == "complete"
        assert graph.get(PRICING_V1) == before
        assert len(graph.find("version")) == 4

        # Inspections: pricing v1 blocked in round 1 by a severity-8 finding, v2 approved in round 2.
        inspections = sorted((i["round"], i["version_id"], i["assessment"]) for i in graph.find("inspection"))
        assert inspections == [(1, BRIEF_V1, "approved"), (1, PRICING_V1, "blocked"),
                               (2, CHECKLIST_V1, "approved"), (2, PRICING_V2, "approved")]
        blocked = graph.find("inspection", {"version_id": PRICING_V1})[0]
        findings = [(f["category"], f["severity"], f["issue"], f["dod_criterion"])
                    for f in graph.find("finding", {"inspection_id": blocked["id"]})]
        assert findings == [("completeness", 8, "The DoD asks for at least one comparison; there is none, so the "
                             "reasoning cannot be checked.", "at least one comparison")]

        # Acceptance: each version at the Close of the round it passed inspection in (the brief in
        # round 1, not at round 2's Plan); pricing v1 rejected at round 2's Plan while blocked.
        decisions = sorted((a["round"], a["product_id"], a["version_id"], a["accepted"], a.get("rejection_reason"))
                           for a in graph.find("acceptance"))
        assert decisions == [
            (1, BRIEF, BRIEF_V1, True, None),
            (2, PRICING, PRICING_V1, False, "Blocked by inspection until the comparison is added."),
            (2, PRICING, PRICING_V2, True, None),
            (2, CHECKLIST, CHECKLIST_V1, True, None),
        ]

        # One turn moment per agent per step (the Chair's bootstrap twice: before and after its question).
        moments = turns(graph)
        assert sorted(moments) == LAUNCH_TURNS
        assert Counter(t["round"] for t in moments.values()) == {0: 2, 1: 8, 2: 9}
        assert {key: t["outcome"] for key, t in moments.items() if t["outcome"] != "final"} == {
            "r0.bootstrap.chair-1": "halt"}
        assert {t["attempts"] for t in moments.values()} == {1}

        # The conversation: the Chair's question and its answer, the Envoy's messages, the close.
        halts = sorted((h["id"], h["type"], h["status"], h.get("answer")) for h in graph.find("halt"))
        assert halts == [
            ("r0.bootstrap.halt", "question", "answered",
             "Students first: university students who take lecture notes. Teachers come later."),
            ("r2.close.halt", "done", "done", None),  # the Close that accepted the last products ended it
        ]
        presented = {r: [m["content"] for m in script_args(r, "presentation", "envoy-1")["messages"]] for r in (1, 2)}
        assert spoken(graph) == [
            (1, "chair-1", presented[1][0]), (1, "operative-1", presented[1][1]), (1, "operative-2", presented[1][2]),
            (2, "operative-2", presented[2][0]), (2, "operative-1", presented[2][1]),
            (2, "chair-1", presented[2][2]),  # the last round is presented too
        ]
        assert graph.get(result.mission_id)["stop_reason"] == "concluded"
    # A run writes no transcript file (cabal run does, from the report it reads); it renders any time.
    assert result.transcript_path is None
    assert "stopped: concluded" in transcript(result.mission_id, home=home)


# ------------------------------------------------------ 2. the same mission, with deviations


def _wrong_write() -> dict:
    answer = script_args(1, "write", "operative-1")
    answer["versions"][0]["productId"] = "p2"  # the pricing decision: operative-2's assignment
    return {"tool": "final_output", "args": answer}


def _accept_blocked_pricing() -> dict:
    answer = script_args(2, "plan", "chair-1")
    answer["acceptance"][0] = {"productId": "p2", "accepted": True, "versionId": "p2.v1"}
    return {"tool": "final_output", "args": answer}


def _envoy_as_watchdog() -> dict:
    answer = script_args(1, "presentation", "envoy-1")
    answer["messages"][0]["asAgent"] = "watchdog-1"
    return {"tool": "final_output", "args": answer}


FULL_CONTENT_REQUEST = {"tool": "request_context", "args": {"requests": [
    {"productId": "p2", "need": "full_content", "reason": "Read all of v1 before adding the comparison."}]}}


@dataclass
class Deviated:
    result: MissionResult
    player: ScriptPlayer
    home: Path

    def graph(self) -> ContextGraph:
        return open_graph(self.home, self.result.mission_id)


@pytest.fixture(scope="module")
def deviated(home: Path) -> Deviated:
    """The launch mission with wrong first answers at chosen turns (the retry follows the script)."""
    player = ScriptPlayer(inject={
        (1, "write", "operative-1"): [_wrong_write()],
        (2, "plan", "chair-1"): [_accept_blocked_pricing()],
        (1, "presentation", "envoy-1"): [_envoy_as_watchdog()],
        (2, "write", "operative-2"): [FULL_CONTENT_REQUEST],
    })
    return Deviated(run_mission(LAUNCH_MISSION, model=player.model(), home=home), player, home)


def test_deviations_are_retried_and_the_mission_still_concludes(deviated: Deviated) -> None:
    assert (deviated.result.state, deviated.result.stop_reason, deviated.result.round) == ("done", "concluded", 2)
    with deviated.graph() as graph:
        moments = turns(graph)
        assert sorted(moments) == LAUNCH_TURNS
        assert {key: t["attempts"] for key, t in moments.items() if t["attempts"] != 1} == {
            "r1.write.operative-1": 2, "r2.plan.chair-1": 2, "r1.presentation.envoy-1": 2}
        assert {key: moments[key]["outcome"] for key in ("r1.write.operative-1", "r2.plan.chair-1",
                                                          "r1.presentation.envoy-1", "r2.write.operative-2")} == {
            "r1.write.operative-1": "final", "r2.plan.chair-1": "final", "r1.presentation.envoy-1": "final",
            "r2.write.operative-2": "final"}
        assert all(t["problems"] == [] for t in moments.values())  # a successful retry clears them
        assert {p["id"]: p["status"] for p in graph.find("product")} == {
            BRIEF: "accepted", PRICING: "accepted", CHECKLIST: "accepted"}
    calls = Counter(call.key for call in deviated.player.calls)
    assert {key: n for key, n in calls.items() if n != 1} == {
        (0, "bootstrap", "chair-1"): 2,  # its question, then its charter
        (1, "write", "operative-1"): 2, (2, "plan", "chair-1"): 2, (1, "presentation", "envoy-1"): 2,
        (2, "write", "operative-2"): 2}


def test_operative_versioning_an_unassigned_product_is_refused_and_retried(deviated: Deviated) -> None:
    first, retry = deviated.player.calls_of(1, "write", "operative-1")
    assert "p1 [Content] Launch brief" in first.prompt and "p2 [Decision] Pricing decision" in first.prompt
    wrong_call = retry.messages[-2]
    assert isinstance(wrong_call, AIMessage) and wrong_call.tool_calls[0]["args"]["versions"][0]["productId"] == "p2"
    assert isinstance(retry.last, ToolMessage) and retry.last.status == "error"
    assert retry.last.tool_call_id == wrong_call.tool_calls[0]["id"]
    assert tool_feedback(retry.last) == (
        "Your answer was rejected (2 problem(s)); fix each:\n"
        "- versions.0: you may write versions only of products assigned to you this round (Launch brief); "
        "'Pricing decision' is not one of them\n"
        "- versions: write a new version of every product assigned to you this round; missing: Launch brief")
    with deviated.graph() as graph:
        by_operative_1 = sorted((v["id"], v["product_id"]) for v in graph.find("version", {"author": "operative-1"}))
        assert by_operative_1 == [(BRIEF_V1, BRIEF), (CHECKLIST_V1, CHECKLIST)]
        assert sorted(v["number"] for v in graph.find("version", {"product_id": PRICING})) == [1, 2]
        assert {v["author"] for v in graph.find("version", {"product_id": PRICING})} == {"operative-2"}


def test_chair_accepting_a_blocked_version_is_refused_and_retried(deviated: Deviated) -> None:
    first, retry = deviated.player.calls_of(2, "plan", "chair-1")
    # The ids the injected answer uses: p2 is the pricing decision, v1 its blocked latest version
    # (the brief, accepted at round 1's closing decisions, no longer awaits a decision).
    assert ("### p2 Pricing decision: latest version p2.v1 (by operative-2 in round 1)\n"
            "Verdict: blocked") in first.prompt
    assert tool_feedback(retry.last) == (
        "Your answer was rejected (2 problem(s)); fix each:\n"
        "- acceptance.0: version 1 of 'Pricing decision' did not pass inspection (blocked)\n"
        "- acceptance.0: its owner reports the definition of done as partially_met")
    with deviated.graph() as graph:
        round_2 = sorted((a["product_id"], a["version_id"], a["accepted"]) for a in graph.find("acceptance", {"round": 2}))
        assert round_2 == [(PRICING, PRICING_V1, False), (PRICING, PRICING_V2, True), (CHECKLIST, CHECKLIST_V1, True)]
        pricing = graph.get(PRICING)
        assert (pricing["accepted_version"], pricing["accepted_round"]) == (PRICING_V2, 2)


def test_envoy_speaking_as_the_watchdog_is_refused_and_retried(deviated: Deviated) -> None:
    first, retry = deviated.player.calls_of(1, "presentation", "envoy-1")
    assert "You may speak as: chair-1, operative-1, operative-2." in first.prompt
    assert tool_feedback(retry.last) == (
        "Your answer was rejected (1 problem(s)); fix each:\n"
        "- messages.0.asAgent: String should match pattern '^(chair-1|operative-[a-z0-9]+(?:-[a-z0-9]+)*)$' (got str 'watchdog-1')")
    with deviated.graph() as graph:
        assert [(r, speaker) for r, speaker, _ in spoken(graph) if r == 1] == [
            (1, "chair-1"), (1, "operative-1"), (1, "operative-2")]
        assert graph.find("message", {"as_agent": ["watchdog-1", "envoy-1"]}) == []


def test_context_request_is_served_then_the_final_answer_accepted(deviated: Deviated) -> None:
    ask, answer = deviated.player.calls_of(2, "write", "operative-2")
    assert ask.tools == ("final_output", "request_context")
    with deviated.graph() as graph:
        content_v1 = graph.get(PRICING_V1)["content"]
        moment = turns(graph)["r2.write.operative-2"]
        assert (moment["outcome"], moment["attempts"]) == ("final", 1)  # serving context costs no attempt
        assert graph.get(PRICING_V2)["number"] == 2
    assert isinstance(answer.last, ToolMessage) and answer.last.status == "success"
    assert tool_feedback(answer.last) == ("REQUESTED CONTEXT\n\n### full_content of p2 Pricing decision\n"
                                          f"p2.v1 (by operative-2 in round 1)\n{content_v1}")
    assert answer.messages[:2] == ask.messages[:2]  # the same prompt, then the request and what it got


def test_a_remark_to_another_agent_is_read_once_in_its_next_step(deviated: Deviated) -> None:
    # Written at round 1's Write; operative-2's next step is round 1's Peer Review, and only that one shows it.
    player = deviated.player
    readers = sorted({c.key for c in player.calls if REMARK_TO_OPERATIVE_2 in c.prompt})
    assert readers == [(1, "peer_review", "operative-2")]
    assert (f"## Remarks to you (new since your last step)\n{REMARK_TO_OPERATIVE_2}"
            in player.prompts_of("operative-2", 1)["peer_review"])


def test_a_remark_to_self_is_read_once_in_the_next_step(deviated: Deviated) -> None:
    player = deviated.player
    round_1 = player.prompts_of("operative-1", 1)
    assert {step: SELF_REMARK in prompt for step, prompt in round_1.items()} == {
        "write": False, "peer_review": True}  # written at write, read at the agent's next step
    readers = sorted({c.key for c in player.calls if SELF_REMARK in c.prompt})
    assert readers == [(1, "peer_review", "operative-1")]


# --------------------------------------------------------------- 3. the retry budget runs out


def test_three_wrong_answers_fail_the_turn_and_the_mission_goes_on(home: Path) -> None:
    wrong = script_args(1, "presentation", "envoy-1")
    wrong["messages"][2]["asAgent"] = "operative-3"  # a well-formed id, but not of this team
    player = ScriptPlayer(inject={(1, "presentation", "envoy-1"): [{"tool": "final_output", "args": wrong}] * 3})

    result = run_mission(LAUNCH_MISSION, model=player.model(), home=home)

    assert (result.state, result.stop_reason, result.round) == ("done", "concluded", 2)
    assert len(player.calls_of(1, "presentation", "envoy-1")) == 3
    problem = "messages.2: asAgent 'operative-3' may not speak; speakers are chair-1, operative-1, operative-2"
    assert tool_feedback(player.calls_of(1, "presentation", "envoy-1")[2].last).endswith(f"\n- {problem}")
    with open_graph(home, result.mission_id) as graph:
        failed = turns(graph)["r1.presentation.envoy-1"]
        assert {k: failed[k] for k in ("outcome", "attempts", "problems", "prose")} == {
            "outcome": "failed", "attempts": 3, "problems": [problem],
            "prose": "no valid answer within the retry budget"}
        # Nothing else from that turn: no message, no node of its own, only the moment's own links.
        assert graph.find("message", {"round": 1}) == []
        assert [(link["type"], link["to"]) for link in graph.links_from("r1.presentation.envoy-1")] == [
            ("about", result.mission_id)]
        assert [(link["type"], link["from"]) for link in graph.links_to("r1.presentation.envoy-1")] == [
            ("expresses", "envoy-1")]
        assert [r for r, _, _ in spoken(graph)] == [2, 2, 2]
        assert sorted(turns(graph)) == LAUNCH_TURNS
        assert {p["status"] for p in graph.find("product")} == {"accepted"}
    assert result.failed_turns == 1  # the summary and the exit status say the work is incomplete


# ------------------------------------------------------------------------------ 4. budget


def _budget_question(tokens: int, spent: int) -> str:
    return (f"The token budget of {tokens:,} tokens is spent: {spent:,} used. Continue? Answer 'continue' to double "
            "the budget, a number of tokens to set a new token budget, or 'stop' to end the mission here.")


PASSED_BY_PROMPT = re.compile(r"token budget of ([\d,]+) tokens would be passed by the next call: ([\d,]+) used, "
                              r"and its prompt is about ([\d,]+) tokens")


def _refused_prompt(reason: str, tokens: int, spent: int) -> int:
    """The prompt's size a budget refused a call for (``reason`` says it), checked against the
    budget and the spend: the call was not sent because its prompt alone would pass the budget."""
    found = PASSED_BY_PROMPT.search(reason)
    assert found, reason
    limit, used, prompt = (int(group.replace(",", "")) for group in found.groups())
    assert (limit, used) == (tokens, spent) and spent < tokens < spent + prompt
    return prompt


def _asked_first(tokens: int, spent: int, prompt: int) -> str:
    return (f"The token budget of {tokens:,} tokens would be passed by the next call: {spent:,} used, and its "
            f"prompt is about {prompt:,} tokens. Continue? Answer 'continue' to double the budget, a number of "
            "tokens to set a new token budget, or 'stop' to end the mission here.")


def _spent(home: Path, mission_id: str) -> int:
    with open_graph(home, mission_id) as graph:
        return sum(t["input_tokens"] + t["output_tokens"] for t in turns(graph).values())


ROUND_1_STEPS = [["r1.plan.chair-1"], ["r1.write.operative-1", "r1.write.operative-2"],
                 ["r1.peer_review.operative-1", "r1.peer_review.operative-2"], ["r1.inspect.watchdog-1"],
                 ["r1.close.chair-1"], ["r1.presentation.envoy-1"]]


def _stopped_part_of_the_way(done: list[str]) -> bool:
    """Whether ``done`` is round 1's whole steps up to one, then some but not all of that step's
    turns: the budget gate admits a step's parallel operatives in whichever order their threads
    reach it, so the one refused may be either."""
    for whole in range(len(ROUND_1_STEPS)):
        before = [turn for step in ROUND_1_STEPS[:whole] for turn in step]
        rest = set(done) - set(before)
        if set(before) <= set(done) and rest < set(ROUND_1_STEPS[whole]) and (before or rest):
            return True
    return False


def test_spent_budget_pauses_before_the_next_call_and_stop_ends_the_mission(home: Path) -> None:
    paused = run_mission(launch_with_budget(8000), model=f"scripted:{LAUNCH_SCRIPT}", home=home)

    spent = _spent(home, paused.mission_id)
    assert (paused.state, paused.stop_reason, paused.round) == ("halted", "questionToUser", 1)
    # Checked before every call, not once a round, with the call's prompt: the next call would
    # have passed the budget by its prompt alone, so it asked first (the budget is not overspent).
    halt = paused.pending_halt
    prompt = _refused_prompt(halt["message"], 8000, spent)
    assert paused.usage.total_tokens == spent
    assert {k: halt[k] for k in ("id", "type", "status", "step", "round", "message", "options")} == {
        "id": "r1.budget", "type": "question", "status": "pending", "step": "budget", "round": 1,
        "message": _asked_first(8000, spent, prompt), "options": ["continue", "stop"]}
    with open_graph(home, paused.mission_id) as graph:  # round 1 stopped part of the way: a prefix of it ran
        done = sorted(t for t in turns(graph) if t.startswith("r1."))
        assert _stopped_part_of_the_way(done), done

    stopped = resume_mission(paused.mission_id, answer="stop", home=home)

    assert (stopped.state, stopped.stop_reason, stopped.round) == ("done", "budget", 1)
    assert stopped.detail == "the budget is spent and the user chose to stop"
    assert stopped.pending_halt is None
    with open_graph(home, paused.mission_id) as graph:
        assert (graph.get("r1.budget")["status"], graph.get("r1.budget")["answer"]) == ("answered", "stop")
        assert sorted(t for t in turns(graph) if t.startswith("r1.")) == done


def test_continue_doubles_the_budget_and_a_number_below_the_spend_asks_again(home: Path) -> None:
    paused = run_mission(launch_with_budget(4000), model=f"scripted:{LAUNCH_SCRIPT}", home=home)
    mission = paused.mission_id

    again = resume_mission(mission, answer="continue", home=home)  # 8,000 tokens

    spent = _spent(home, mission)
    assert (again.state, again.pending_halt["id"]) == ("halted", "r1.budget2")
    prompt = _refused_prompt(again.pending_halt["message"], 8000, spent)
    assert again.pending_halt["message"] == _asked_first(8000, spent, prompt)
    with open_graph(home, mission) as graph:
        assert graph.get(mission)["budget_tokens"] == 8000

    # A budget still below the spend is asked about again (it must not replay the answer forever).
    still_short = resume_mission(mission, answer="5000", home=home)
    assert (still_short.state, still_short.pending_halt["id"]) == ("halted", "r1.budget3")
    assert still_short.pending_halt["message"] == _budget_question(5000, spent)

    done = resume_mission(mission, answer="100000 tokens", home=home)
    assert (done.state, done.stop_reason, done.round) == ("done", "concluded", 2)
    with open_graph(home, mission) as graph:
        assert graph.get(mission)["budget_tokens"] == 100000
        assert sorted(turns(graph)) == LAUNCH_TURNS


def test_a_budget_set_to_stop_ends_the_mission_without_asking(home: Path) -> None:
    result = run_mission(launch_with_budget(6000, "stop"), model=f"scripted:{LAUNCH_SCRIPT}", home=home)

    spent = _spent(home, result.mission_id)
    assert (result.state, result.stop_reason, result.round) == ("done", "budget", 1)
    prompt = _refused_prompt(result.detail, 6000, spent)
    assert result.detail == (f"the token budget of 6,000 tokens would be passed by the next call: {spent:,} used, and "
                             f"its prompt is about {prompt:,} tokens") and result.pending_halt is None


def test_a_budget_question_never_takes_the_answer_meant_for_the_chair(home: Path) -> None:
    spec = launch_with_budget(6000)
    spec = spec.model_copy(update={"answers": [*spec.answers, "A later answer, for the Chair's next question."]})

    result = run_mission(spec, model=f"scripted:{LAUNCH_SCRIPT}", home=home)

    # The budget question waits for the user: the file's second answer is the Chair's, not its.
    assert (result.state, result.pending_halt["id"]) == ("halted", "r1.budget")
    with open_graph(home, result.mission_id) as graph:
        assert graph.get("r0.bootstrap.halt")["answer_source"] == "mission file"
    done = resume_mission(result.mission_id, answer="100000", home=home)
    assert (done.state, done.stop_reason, done.round) == ("done", "concluded", 2)
    with open_graph(home, result.mission_id) as graph:
        assert graph.get("r1.budget")["answer_source"] == "user"


# -------------------------------------------------------------------------------- 5. the user


def _close_without_done() -> dict:
    """Round 2's closing decisions, leaving the mission open (the Chair would plan more)."""
    answer = script_args(2, "close", "chair-1")
    del answer["done"]
    return {"tool": "final_output", "args": answer}


def test_user_message_between_rounds_reaches_the_team_and_stop_ends_it(home: Path) -> None:
    note = "Keep the student price under 4 euros a month."
    player = ScriptPlayer(inject={(2, "close", "chair-1"): [_close_without_done()]})
    left: list[str] = []

    def between_rounds(event: MissionEvent) -> None:  # after each round's last turn, before the next round starts
        if isinstance(event, TurnDone) and event.step == "presentation":
            if event.round == 1:
                left.append(say(event.mission, note, home=home))
            elif event.round == 2:
                stop_mission(event.mission, home=home)

    result = run_mission(LAUNCH_MISSION, model=player.model(), home=home, on_event=between_rounds)

    assert (result.state, result.stop_reason, result.round) == ("done", "userHalt", 2)
    assert result.detail == "the user asked the team to stop"
    assert left == ["user.r1.note0"]
    with open_graph(home, result.mission_id) as graph:
        collab = graph.get("user.r1.note0")
        assert {k: collab.get(k) for k in ("node_type", "type", "author", "comment", "importance", "round", "product_id")} == {
            "node_type": "collab", "type": "user_independent", "author": "user", "comment": note, "importance": 6,
            "round": 1, "product_id": None}
        assert [(link["type"], link["from"]) for link in graph.links_to("user.r1.note0")] == [("authored", "user")]
        assert graph.get(result.mission_id)["halt_requested"] is True
        assert {t["round"] for t in turns(graph).values()} == {0, 1, 2}  # round 3 never started

    plan_2 = player.prompts_of("chair-1", 2)["plan"]
    assert "## From the user (every product follows these words; a departure from them is an error)\n" in plan_2
    assert f"\nThe user wrote: {note}" in plan_2
    assert f"- c3 on the mission [user_independent, importance 6] by user (round 1): {note}" in plan_2
    reflect = player.prompts_of("operative-2", 2)["reflect"]  # the note, beside the answer the Chair was given
    assert f"\nThe user answered: Students first: university students who take lecture notes. Teachers come " \
           f"later.\nThe user wrote: {note}\n" in reflect
    assert [c.key for c in player.calls if note in c.prompt and c.key[0] == 1] == []
    assert [c.key for c in player.calls if c.key[0] == 3] == []


def test_a_mission_out_of_rounds_or_stopped_goes_on_to_the_end_of_a_whole_run(home: Path) -> None:
    whole = run_mission(LAUNCH_MISSION, home=home)

    # The Chair leaves the mission open at round 2's closing decisions, the last of a 2-round run.
    short = run_mission(LAUNCH_MISSION, model=ScriptPlayer(inject={(2, "close", "chair-1"): [_close_without_done()]})
                        .model(), home=home, rounds=2)
    assert (short.state, short.stop_reason, short.round) == ("done", "noMoreRounds", 2)
    with open_graph(home, short.mission_id) as graph:  # its last round ends with the Chair's closing decisions
        assert sorted(turns(graph)) == LAUNCH_TURNS
        assert {p["name"]: (p["status"], p.get("accepted_round")) for p in graph.find("product")} == {
            "Launch brief": ("accepted", 1), "Pricing decision": ("accepted", 2),
            "Launch-day checklist": ("accepted", 2)}
    with pytest.raises(MissionError, match="--rounds 2 is not more than the 2 round"):
        resume_mission(short.mission_id, rounds=2, home=home)
    # Everything is accepted: round 3 has nothing to reflect on, and its Plan ends the mission.
    done = {"type": "done", "to": ["u:all"], "message": DONE_MESSAGE}
    player = ScriptPlayer(inject={(3, "plan", "chair-1"): [{"tool": "halt", "args": done}],
                                  (3, "presentation", "envoy-1"): [{"tool": "final_output",
                                                                   "args": script_args(2, "presentation", "envoy-1")}]})
    longer = resume_mission(short.mission_id, rounds=4, model=player.model(), home=home)
    assert (longer.state, longer.stop_reason, longer.round, longer.detail) == ("done", "concluded", 3, DONE_MESSAGE)
    assert [call.key for call in player.calls] == [(3, "plan", "chair-1"), (3, "presentation", "envoy-1")]

    def stop_after_round_1(event: MissionEvent) -> None:
        if isinstance(event, TurnDone) and event.step == "presentation" and event.round == 1:
            stop_mission(event.mission, home=home)

    stopped = run_mission(LAUNCH_MISSION, home=home, on_event=stop_after_round_1)
    assert (stopped.state, stopped.stop_reason, stopped.round) == ("done", "userHalt", 1)
    went_on = resume_mission(stopped.mission_id, home=home)  # the mission file's limit: 4 rounds

    assert (went_on.state, went_on.stop_reason, went_on.round, went_on.detail) == ("done", "concluded", 2, DONE_MESSAGE)
    assert (went_on.usage, went_on.turns) == (whole.usage, whole.turns)
    for result in (longer, went_on):
        with open_graph(home, result.mission_id) as graph:
            if result is went_on:
                assert sorted(turns(graph)) == LAUNCH_TURNS
            assert {p["name"]: p["status"] for p in graph.find("product")} == {
                "Launch brief": "accepted", "Pricing decision": "accepted", "Launch-day checklist": "accepted"}


def test_an_answer_to_an_ended_mission_and_a_graph_that_is_no_mission_are_refused(home: Path) -> None:
    done = run_mission(LAUNCH_MISSION, home=home)
    with pytest.raises(MissionError, match="has ended \\(concluded\\); there is no question to answer"):
        resume_mission(done.mission_id, answer="Students first.", home=home)

    with open_graph(home, "m-not-a-mission") as graph:  # named like a mission, holding something else
        graph.create_cluster([{"id": "m-not-a-mission", "node_type": "space", "type": "module", "name": "x"}])
    with pytest.raises(ResourceNotFound, match="mission not found: 'm-not-a-mission'"):
        mission_status("m-not-a-mission", home=home)


# ------------------------------------------------------------- 6. the real Claude client


TINY = {"name": "welcome-note", "request": "Write a short welcome note for new Margin users.",
        "team": {"operatives": 1}, "rounds": 1}
TINY_ANSWERS = [  # (tool, input) in call order: bootstrap, plan, write, inspect, close, presentation
    ("final_output", {
        "thinking": {"interpretation": "A welcome note for new users.", "scopeDecisions": "One note, nothing else."},
        "mission": "Write the welcome note new Margin users read first.",
        "objectives": ["A welcome note that says what Margin does in two sentences"], "constraints": [],
        "personas": {"operative-1": "A friendly copywriter"},
        "operativeDomains": {"operative-1": {"responsibility": "The welcome note", "area": "copy"}},
        "initialProducts": [{"name": "Welcome note", "type": "Content", "owner": "operative-1",
                             "dod": "Says what Margin does and how to take a first note."}]}),
    ("final_output", {
        "thinking": {"roundStrategy": "Write the note.", "acceptanceRationale": "Nothing to accept yet."},
        "treeOperations": [], "acceptance": [],
        "assignments": [{"productId": "p1", "assignee": "operative-1", "directive": {
            "objective": "Write the welcome note.", "dod": "What Margin does and the first step.",
            "why": "It is the first thing a user reads.", "importance": 7}}]}),
    ("final_output", {"reasoning": "Two sentences: what Margin does, then the first step.",
                      "versions": [{"productId": "p1", "newVersion": {
        "contentTitle": "Welcome to Margin",
        "content": "Margin keeps your lecture notes in one place and turns them into a revision plan. "
                   "Tap the plus button to take your first note.",
        "changeSummary": "First version."}}]}),
    ("final_output", {"reasoning": "It meets its definition of done.",
                      "inspections": [{"productId": "p1", "versionId": "p1.v1", "assessment": "approved", "findings": []}]}),
    ("final_output", {"reasoning": "The note passed inspection and says both things its DoD asks for.",
                      "acceptance": [{"productId": "p1", "accepted": True, "versionId": "p1.v1"}]}),
    ("final_output", {"reasoning": "One thing happened: the note.",
                      "messages": [{"asAgent": "operative-1", "content": "The welcome note is written and passed inspection."}]}),
]
TINY_TURNS = ["r0.bootstrap.chair-1", "r1.plan.chair-1", "r1.write.operative-1", "r1.inspect.watchdog-1",
              "r1.close.chair-1", "r1.presentation.envoy-1"]  # one round: the last, so it closes
TINY_TOOLS = [["final_output", "halt"], ["final_output", "request_context", "halt"],
              ["final_output", "request_context"], ["final_output", "request_context"],
              ["final_output", "request_context", "halt"], ["final_output", "request_context"]]
DUMMY_API_KEY = "sk-ant-test-rounds-0123456789"


@pytest.fixture
def claude(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    """The local Messages API, with the environment aimed at it and nothing that could reach a real one."""
    with fake_api(monkeypatch, DUMMY_API_KEY) as server:
        yield server


def test_claude_client_runs_a_mission_through_the_messages_api(claude: FakeAnthropic, home: Path) -> None:
    for n, (tool, tool_input) in enumerate(TINY_ANSWERS, start=1):
        claude.reply_tool_use(tool, tool_input, tool_id=f"toolu_{n:02d}", model="claude-sonnet-4-6",
                              input_tokens=1000 * n, output_tokens=10 * n, cache_read_input_tokens=100 * n)

    result = run_mission(TINY, model="claude-sonnet-4-6", home=home)

    assert (result.state, result.stop_reason, result.round) == ("done", "noMoreRounds", 1)
    assert len(claude.requests) == len(TINY_ANSWERS)
    for request, tools in zip(claude.requests, TINY_TOOLS):
        body = request.body
        assert (request.path, request.api_key, body["model"]) == ("/v1/messages", DUMMY_API_KEY, "claude-sonnet-4-6")
        assert [tool["name"] for tool in body["tools"]] == tools
        assert all(tool["input_schema"]["type"] == "object" for tool in body["tools"])
        assert body["tool_choice"] == {"type": "any"}
        assert [block.get("cache_control") for block in body["system"]] == [{"type": "ephemeral"}]
        assert [m["role"] for m in body["messages"]] == ["user"]
        # The mission, the role and step, the agent cached; this call's own part not.
        assert [block.get("cache_control") for block in body["messages"][0]["content"]] == [
            {"type": "ephemeral"}] * 3 + [None]
    assert "Bootstrap (round 0)" in claude.requests[0].body["messages"][0]["content"][1]["text"]
    mission, role, agent, now = claude.requests[2].body["messages"][0]["content"]
    assert mission["text"].startswith("## Mission\n") and role["text"].startswith("# Your role: the Operative\n")
    assert "You are " in agent["text"] and now["text"].startswith("# Round 1")
    assert "## Your assignments this round\n### p1 Welcome note [Content]" in now["text"]
    with open_graph(home, result.mission_id) as graph:
        moments = turns(graph)
        assert sorted(moments) == sorted(TINY_TURNS)
        usage = [(moments[t]["input_tokens"], moments[t]["output_tokens"], moments[t]["cache_read_tokens"])
                 for t in TINY_TURNS]
        # LangChain counts cached prompt tokens in input_tokens: 1000n uncached + 100n read from cache.
        assert usage == [(1100 * n, 10 * n, 100 * n) for n in range(1, 7)]
        version = graph.get("r1.write.operative-1.write_version0")
        assert (version["number"], version["title"], version["content"]) == (
            1, "Welcome to Margin", TINY_ANSWERS[2][1]["versions"][0]["newVersion"]["content"])
        assert (graph.get(graph.find("product")[0]["id"])["status"], graph.find("product")[0]["accepted_round"]) == (
            "accepted", 1)  # written, inspected and accepted in the mission's one round
        assert spoken(graph) == [(1, "operative-1", "The welcome note is written and passed inspection.")]
    assert result.usage.input_tokens == sum(1100 * n for n in range(1, 7))
    # The report shows them: the turns' cached tokens in all.
    assert mission_report(result.mission_id, home=home).usage.total.cache_read_tokens == sum(100 * n for n in range(1, 7))
    # Sonnet: $3 per million uncached input tokens, a tenth of that when read from cache, $15 per million output.
    assert result.cost_usd == round(sum(1000 * n * 3 + 100 * n * 0.3 + 10 * n * 15 for n in range(1, 7)) / 1e6, 6)


def test_a_mission_with_no_budget_on_a_priced_model_pauses_at_the_default_2_dollars(claude: FakeAnthropic,
                                                                                      home: Path) -> None:
    # Bootstrap reads 700,000 tokens on Sonnet ($3 per million): $2.10, past the default $2.
    claude.reply_tool_use(*TINY_ANSWERS[0], model="claude-sonnet-4-6", input_tokens=700_000, output_tokens=0)

    paused = run_mission(TINY, model="claude-sonnet-4-6", home=home)

    assert (paused.state, paused.stop_reason) == ("halted", "questionToUser")
    assert len(claude.requests) == 1  # no call starts once the budget is spent
    assert paused.pending_halt["message"].startswith(
        "The cost budget of $2.00 is spent: $2.1000 on claude-sonnet-4-6. Continue? Answer 'continue' to double the budget")
    with open_graph(home, paused.mission_id) as graph:
        node = graph.get(paused.mission_id)
        assert (node["budget_cost_usd"], node.get("budget_tokens")) == (2.0, None)

    claude.reply_tool_use(*TINY_ANSWERS[0], model="claude-sonnet-4-6", input_tokens=700_000, output_tokens=0)
    unbounded = run_mission({**TINY, "budget": "none"}, model="claude-sonnet-4-6", home=home)

    assert len(claude.requests) == 3  # budget: none: the second call starts (and finds no reply queued)
    with open_graph(home, unbounded.mission_id) as graph:
        node = graph.get(unbounded.mission_id)
        assert (node.get("budget_cost_usd"), node.get("budget_tokens")) == (None, None)


def test_claude_bad_request_pauses_the_mission_with_the_servers_message(claude: FakeAnthropic, home: Path) -> None:
    claude.reply_tool_use(*TINY_ANSWERS[0], model="claude-sonnet-4-6")
    claude.reply_error(400, "invalid_request_error", "messages.0.content: text content blocks must be non-empty")

    result = run_mission(TINY, model="claude-sonnet-4-6", home=home)

    assert (result.state, result.stop_reason, result.round) == ("interrupted", None, 1)
    assert result.detail == ("the model is unavailable: anthropic returned 400 invalid_request_error: "
                             "messages.0.content: text content blocks must be non-empty (request id req_fake_2)")
    assert "Traceback" not in result.detail and DUMMY_API_KEY not in result.detail
    assert len(claude.requests) == 2  # a 400 is not retried
    with open_graph(home, result.mission_id) as graph:
        assert sorted(turns(graph)) == ["r0.bootstrap.chair-1"]  # the failed call committed nothing
        assert graph.get(result.mission_id)["status"] == "interrupted"

    # Once the provider answers again, the mission goes on from the step that failed.
    for tool, tool_input in TINY_ANSWERS[1:]:
        claude.reply_tool_use(tool, tool_input, model="claude-sonnet-4-6")
    resumed = resume_mission(result.mission_id, home=home)
    assert (resumed.state, resumed.stop_reason, resumed.round) == ("done", "noMoreRounds", 1)
    with open_graph(home, result.mission_id) as graph:
        assert sorted(turns(graph)) == sorted(TINY_TURNS)


def test_an_answer_nested_900_levels_deep_is_a_rejected_attempt_and_the_mission_goes_on(claude: FakeAnthropic,
                                                                                      home: Path) -> None:
    # A tool argument nested about 900 levels once raised RecursionError and stranded the mission.
    deep: object = "bottom"
    for _ in range(900):
        deep = {"deeper": deep}
    tool, first_answer = TINY_ANSWERS[0]
    claude.reply_tool_use(tool, {**first_answer, "thinking": deep}, model="claude-sonnet-4-6")
    for tool, tool_input in TINY_ANSWERS:
        claude.reply_tool_use(tool, tool_input, model="claude-sonnet-4-6")

    result = run_mission(TINY, model="claude-sonnet-4-6", home=home)

    assert (result.state, result.stop_reason, result.round) == ("done", "noMoreRounds", 1)
    retry = claude.requests[1].body["messages"]
    assert [m["role"] for m in retry] == ["user", "assistant", "user"]
    feedback = retry[2]["content"][0]
    assert (feedback["type"], feedback["is_error"]) == ("tool_result", True)
    assert feedback["content"] == ("Your answer was rejected (1 problem(s)); fix each:\n- thinking."
                                   + ".".join(["deeper"] * 31) + ": nested more than 32 levels deep")
    with open_graph(home, result.mission_id) as graph:
        bootstrap = turns(graph)["r0.bootstrap.chair-1"]
        assert (bootstrap["outcome"], bootstrap["attempts"], bootstrap["problems"]) == ("final", 2, [])
        assert sorted(turns(graph)) == sorted(TINY_TURNS)


def test_the_personas_and_domains_of_the_charter_reach_each_agents_prompts(deviated: Deviated) -> None:
    reflect = deviated.player.calls_of(2, "write", "operative-1")[0]
    # The Chair's bootstrap wrote them (the launch script); the role card's persona is replaced.
    # The agent's own block, after the mission and the role's block (the same for all of the role).
    assert reflect.messages[1].content[2]["text"] == (
        "# Who you are\n\nProduct marketer who writes for students\n\nYou are Ada (operative-1).\n\n"
        "Your domain: Launch brief and checklist (area: marketing)")
    assert "You are a senior specialist on the team" not in reflect.prompt
    (inspect_call,) = deviated.player.calls_of(1, "inspect", "watchdog-1")
    assert inspect_call.messages[1].content[2]["text"] == (
        "# Who you are\n\nReviewer who checks every claim against its definition of done\n\n"
        "You are watchdog-1 (watchdog-1).")
    assert "Your domain" not in inspect_call.prompt  # only operatives have domains


def test_each_turn_moment_keeps_the_agents_reasoning(deviated: Deviated) -> None:
    with deviated.graph() as graph:
        moments = {m["id"]: m for m in graph.find("moment", {"type": "turn"}, fields=["reasoning"])}
    assert moments["r2.reflect.operative-2"]["reasoning"] == script_args(2, "reflect", "operative-2")["reasoning"]
    assert moments["r1.inspect.watchdog-1"]["reasoning"] == script_args(1, "inspect", "watchdog-1")["reasoning"]
    # The Chair's thinking is its reasoning; a halt's message is the reasoning of a halting turn.
    plan = script_args(1, "plan", "chair-1")["thinking"]
    assert moments["r1.plan.chair-1"]["reasoning"] == f"{plan['roundStrategy']} {plan['acceptanceRationale']}"
    assert moments["r0.bootstrap.chair-1"]["reasoning"] == script_args(0, "bootstrap", "chair-1")["message"]


def test_a_run_removes_the_transcript_it_makes_stale_and_writes_none(home: Path) -> None:
    stale = home / "missions" / "m-stale-000001" / "transcript.md"
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_text("# an earlier run's transcript\n")

    result = run_mission(LAUNCH_MISSION, home=home, mission_id="m-stale-000001")

    assert (result.state, result.transcript_path, stale.exists()) == ("done", None, False)
    assert transcript("m-stale-000001", home=home).startswith("# launch-plan (m-stale-000001)")
