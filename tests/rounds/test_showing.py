"""What each step shows (``cabal/rounds/showing.py``), held over a whole mission.

The launch example is played from its script, with a few answers changed on the way so that
texts carry references and long comments: the Watchdog's finding names a product, it leaves a
remark for the owner, the Chair's directive names a collab, a reviewer's collab is long. Each
call's messages are kept; the tests read them as the model read them.
"""

from __future__ import annotations

import re
import threading

import pytest
from langchain_core.messages import AIMessage

from cabal.llm import FunctionChatModel, ModelRequest, ScriptedChatModel
from cabal.llm.keys import AGENT_KEY, ROUND_KEY, STEP_KEY
from cabal.report import read_report
from cabal.report.html import render_html
from cabal.report.markdown import render_markdown
from cabal.rounds.api import run_mission
from cabal.rounds.context import REQUESTED_CONTEXT
from cabal.rounds.showing import BOUNDS, Shown, STEP_SHOWS, whole
from cabal.rounds.workspace import Workspace, mission_graph
from cabal.vocabulary import Step

from .players import LAUNCH_MISSION, LAUNCH_SCRIPT

INTERNAL_ID = re.compile(r"\br\d+\.(?:bootstrap|reflect|plan|write|peer_review|inspect|presentation|close)\.[\w.-]+")
LONG_COMMENT = ("Add the comparison with one competitor's student price so the reasoning can be checked. "
                + "Name the competitor, its student plan, its monthly price and where the price was read. " * 6
                + "End of the long comment.")
PRICING_V1 = "Plans: Free (three notebooks, sync on two devices) and Plus at 6 euros a month with"


def _text(message) -> str:
    if isinstance(message.content, str):
        return message.content
    return "\n\n".join(block.get("text", "") for block in message.content if isinstance(block, dict))


def _changed(where: tuple[int, str, str], args: dict, prompt: str) -> dict:
    """The script's answer with this test's changes."""
    if where == (1, "peer_review", "operative-1"):
        args["collabs"][0]["comment"] = LONG_COMMENT
    if where == (1, "inspect", "watchdog-1"):
        finding = args["inspections"][1]["findings"][0]
        finding["issue"] = "The DoD of [[p:p2]] asks for at least one comparison; there is none."
        args["remarks"] = [{"recipients": ["operative-2"], "type": "note", "isBlocker": False,
                            "content": "Read my finding on [[p:p2]] before you plan version 2."}]
    if where == (2, "plan", "chair-1"):
        feedback = re.search(r"- operative-2 on p\d+ Pricing decision: .*\n  Answer to (c\d+)", prompt)
        assert feedback, prompt
        for assignment in args["assignments"]:
            if assignment["productId"] == "p2":
                assignment["directive"]["objective"] = f"Close [[c:{feedback[1]}]] with the competitor comparison."
    if where == (2, "write", "operative-2"):
        named = re.search(r"Objective: Close \[\[c:(c\d+)\]\]", prompt)
        assert named, prompt
        args["versions"][0]["newVersion"]["changeSummary"] = f"Added the comparison that [[c:{named[1]}]] asked for."
    return args


@pytest.fixture(scope="module")
def played(graph_server):
    """Every call of the changed launch example: (round, step, agent, prompt, every message, tools)."""
    script = ScriptedChatModel.from_file(LAUNCH_SCRIPT)
    calls: list[tuple[int, str, str, str, str, list[str]]] = []
    lock = threading.Lock()
    asked_for_context = set()

    def answer(request: ModelRequest):
        meta = request.metadata
        where = (int(meta[ROUND_KEY]), str(meta[STEP_KEY]), str(meta[AGENT_KEY]))
        prompt = _text(request.messages[1])
        with lock:
            calls.append((*where, prompt, "\n".join(_text(m) for m in request.messages),
                          [t["name"] for t in request.tools]))
        if where == (2, "reflect", "operative-2") and where not in asked_for_context:
            asked_for_context.add(where)  # once: read everything about p2 first
            return {"tool": "request_context", "args": {"requests": [
                {"productId": "p2", "need": need, "reason": "the whole record"}
                for need in ("all_feedback", "inspections", "version_history")] + [
                {"need": "remarks", "reason": "what I was told"}]}}
        reply = script.bind_tools(list(request.tools)).invoke(
            [m for m in request.messages if not (getattr(m, "tool_call_id", None) and _text(m).startswith(REQUESTED_CONTEXT))
             and not (isinstance(m, AIMessage) and m.tool_calls and m.tool_calls[0]["name"] == "request_context")],
            config={"metadata": dict(meta)})
        call = reply.tool_calls[0]
        return {"tool": call["name"], "args": _changed(where, dict(call["args"]), prompt)}

    result = run_mission(LAUNCH_MISSION, model=FunctionChatModel(answer), home=graph_server.home)
    assert (result.state, result.stop_reason) == ("done", "concluded"), result.detail
    graph = mission_graph(Workspace.at(graph_server.home), result.mission_id)
    try:
        nodes = {node["id"]: node for kind in ("directive", "version", "finding", "remark")
                 for node in graph.find(kind)}
        report = read_report(graph, result.mission_id)
    finally:
        graph.close()
    return calls, nodes, report


def _prompt(played, round_number: int, step: str, agent: str, index: int = 0) -> str:
    calls = played[0]
    return [c[3] for c in calls if c[:3] == (round_number, step, agent)][index]


def test_every_step_has_its_contract() -> None:
    assert set(STEP_SHOWS) >= set(Step)
    assert STEP_SHOWS[Step.WRITE] == (Shown.DECISION_RECORD, Shown.ASSIGNED_PRODUCTS, Shown.DIRECTIVES, Shown.LATEST_INSPECTION,
                                      Shown.OPEN_COLLABS, Shown.OWN_REFLECTION, Shown.SOURCES_TEXT, Shown.REMARKS,
                                      Shown.USER_WORDS)
    # What the user said reaches every step that writes, judges or decides; the Envoy only reports.
    assert [step for step in Step if Shown.USER_WORDS not in STEP_SHOWS[step]] == [Step.PRESENTATION]


def test_a_text_past_its_bound_shows_its_head_and_says_so() -> None:
    text = "line one\n" + "x" * 30 + "\nline three"
    assert whole(text, 100) == text
    assert whole(text, 20, rest="request full_content of p1") == (
        "line one\n(cut here: 42 more characters; request full_content of p1)")


def test_reflect_shows_the_owners_product_whole_with_the_findings_and_the_collabs(played) -> None:
    prompt = _prompt(played, 2, "reflect", "operative-2")
    product = re.search(r"### (p\d+) Pricing decision \[Decision\] · owner operative-2 · open", prompt)
    assert product, prompt
    assert PRICING_V1 in prompt  # the latest version's content
    assert (f"- [completeness, severity 8] The DoD of [[p:{product[1]}]] asks for at least one comparison; there is "
            "none.\n  Recommendation: Compare with one competitor's student plan.\n  DoD criterion: at least one "
            "comparison") in prompt
    assert LONG_COMMENT in prompt  # a collab whole, however long
    assert ("The directive you are working to:\nDirective to operative-2 (importance 8, round 1):\n"
            "Objective: Decide the launch price with a student discount.\n"
            "Done when: Price per plan, discount, reasoning and one comparison.\n"
            "Why: The checklist and the store listing need the price.") in prompt


def test_a_remark_reaches_its_recipient_in_its_next_step_once(played) -> None:
    reflect = _prompt(played, 2, "reflect", "operative-2")
    p2 = re.search(r"### (p\d+) Pricing decision", reflect)[1]
    assert (f"## Remarks to you (new since your last step)\n- from watchdog-1 [note] in round 1's Inspect: Read my "
            f"finding on [[p:{p2}]] before you plan version 2.") in reflect
    assert "Read my finding" not in _prompt(played, 2, "write", "operative-2")
    assert "Read my finding" not in _prompt(played, 2, "write", "operative-1")


def test_write_shows_the_directive_and_the_writers_own_reflection(played) -> None:
    prompt = _prompt(played, 2, "write", "operative-2")
    assert PRICING_V1 in prompt
    assert "Your reflection this round:\nOn " in prompt
    assert "Next version: Add the competitor comparison and keep the prices." in prompt
    assert re.search(r"Objective: Close \[\[c:c\d+\]\] with the competitor comparison\.", prompt)


def test_a_reference_names_the_same_collab_in_every_later_step(played) -> None:
    nodes = played[1]
    directive = next(n for n in nodes.values() if n.get("node_type") == "directive"
                     and str(n.get("objective", "")).startswith("Close [["))
    version = next(n for n in nodes.values() if n.get("node_type") == "version"
                   and str(n.get("change_summary", "")).startswith("Added the comparison that [["))
    in_directive = re.search(r"\[\[c:([^\]]+)\]\]", directive["objective"])[1]
    in_version = re.search(r"\[\[c:([^\]]+)\]\]", version["change_summary"])[1]
    assert in_directive == in_version  # the graph's id both times, whatever short id each prompt used
    assert in_directive.startswith("r1.peer_review.operative-1.add_collab")  # the reviewer's feedback on the price


def test_no_prompt_and_no_context_answer_carries_an_internal_id(played) -> None:
    leaked = {match for call in played[0] for match in INTERNAL_ID.findall(call[4])}
    assert leaked == set()


def test_no_output_carries_an_internal_id(played) -> None:
    report = played[2]
    for output in (render_markdown(report), render_html(report)):
        assert INTERNAL_ID.findall(output) == []
    assert "Added the comparison that " in render_markdown(report)


def test_request_context_answers_whole_and_lists_each_collab_once(played) -> None:
    calls = played[0]
    second = [c for c in calls if c[:3] == (2, "reflect", "operative-2")][1]
    answer = second[4].split(REQUESTED_CONTEXT, 1)[1]
    assert LONG_COMMENT in answer
    assert answer.count("[feedback, importance 6]") == 1
    assert "### inspections of p" in answer and "Recommendation: Compare with one competitor's student plan." in answer
    assert "### remarks to you, this round and the last\n- from watchdog-1 [note] in round 1: Read my finding" in answer


def test_the_chair_sees_the_verdicts_findings_and_whole_reflections_at_plan(played) -> None:
    prompt = _prompt(played, 2, "plan", "chair-1")
    assert re.search(r"### p\d+ Pricing decision: latest version p\d+\.v1 \(by operative-2 in round 1\)\n"
                     r"Verdict: blocked; owner's DoD report this round: partially_met\n- \[completeness, severity 8\]",
                     prompt)
    assert ("- operative-2 on p2 Pricing decision: DoD partially_met\n  Answer to c1: accept: The comparison is part "
            "of the DoD. (planned: Compare with a competitor's student plan.)\n  Next version: Add the competitor "
            "comparison and keep the prices.") in prompt


def test_the_envoy_sees_why(played) -> None:
    prompt = _prompt(played, 1, "presentation", "envoy-1")
    assert "## Why: each Watchdog's verdict and findings\n- Launch brief, version 1: approved by watchdog-1\n" in prompt
    assert "- Pricing decision, version 1: blocked by watchdog-1\n  - [completeness, severity 8] The DoD of [[p:" in prompt


def test_bootstrap_shows_sources_that_fit_and_offers_requests_for_those_that_do_not(graph_server, tmp_path) -> None:
    small, big = tmp_path / "notes.md", tmp_path / "handbook.md"
    small.write_text("# Notes\n\nThe cafe opens at seven and seats forty.\n")
    big.write_text("# Handbook\n\n" + "\n\n".join(f"## Part {n}\n\n" + "All staff read this part. " * 60
                                                  for n in range(1, 25)))
    seen: list[tuple[str, list[str]]] = []

    def chair(request: ModelRequest):
        seen.append((_text(request.messages[1]), [t["name"] for t in request.tools]))
        return {"tool": "halt", "args": {"type": "done", "to": ["u:all"], "message": "Seen."}}

    for sources in ([small], [small, big]):
        run_mission({"request": "Plan the cafe's week.", "rounds": 1, "budget": "none"},
                    model=FunctionChatModel(chair), home=graph_server.home, sources=[str(s) for s in sources])
    fits, too_big = seen
    assert "## The user's sources, whole" in fits[0] and "> The cafe opens at seven and seats forty." in fits[0]
    assert fits[1] == ["final_output", "halt"]
    assert "read them with request_context" in too_big[0] and "> The cafe opens" not in too_big[0]
    assert too_big[1] == ["final_output", "request_context", "halt"]
    assert BOUNDS.sources_inline < big.stat().st_size
