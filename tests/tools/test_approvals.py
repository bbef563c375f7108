"""Tool calls that wait for the user's approval (a tool entry's ``approve:``), enforced by the
engine: a real MCP server (``servers.py counting``) writes one line per call it receives, so
every test counts the calls the tool really got."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cabal import resume_mission, run_mission
from cabal import transcript as cabal_transcript
from cabal.errors import ConfigError
from cabal.graph import ContextGraph
from cabal.rounds.mission import load_mission
from cabal.rounds.tooluse import DENIED, LOST, approves, tool_message
from cabal.tools.host import kept_outcome
from tests.polling import wait_until
from tests.rounds.test_processes import environment, kill_group
from tests.tools.test_tool_processes import run_killed_at
from tests.tools.test_tools import CABAL, QUOTE, mission, tool_moments

QUESTION = ("May I call prices__lookup with {\"product\": \"notely\"}? Why: The paragraph compares tally's price with "
            "Notely's; I need Notely's current price. Answer approve to make the call, or deny (with a reason, if "
            "you like) to refuse it.")
HALT = "r1.write.operative-1.tool1.approval"


@pytest.fixture(scope="module")
def home(graph_server) -> str:
    return str(graph_server.home)


def asking(tmp_path: Path, approve: object = "ask", delay: str = "0") -> tuple[Path, Path]:
    """The tools mission whose server counts its calls in a file, with ``approve``; the mission
    file and the file of calls."""
    calls = tmp_path / "calls.txt"
    path = mission(tmp_path, "counting", server={"approve": approve,
                                                 "env": {"CALLS_FILE": str(calls), "TOOL_DELAY_S": delay}})
    return path, calls


def calls_made(calls: Path) -> list[str]:
    return calls.read_text().splitlines() if calls.exists() else []


def halt(mission_id: str, home: str) -> dict:
    with ContextGraph.open(name=mission_id, home=home) as graph:
        return graph.get(HALT) or {}


def test_a_call_that_asks_halts_the_mission_before_the_call_then_approve_makes_it_once_and_the_turn_goes_on(
        home, tmp_path) -> None:
    path, calls = asking(tmp_path)
    events: list = []

    halted = run_mission(path, home=home, on_event=events.append)

    assert halted.state == "halted"
    assert halted.pending_halt is not None
    assert (halted.pending_halt["id"], halted.pending_halt["message"]) == (HALT, QUESTION)
    assert (halted.pending_halt["tool"], halted.pending_halt["arguments"], halted.pending_halt["author"]) == (
        "prices__lookup", '{"product": "notely"}', "operative-1")
    assert list(halted.pending_halt["options"]) == ["approve", "deny"]
    assert calls_made(calls) == []  # not made on the agent's word
    assert not tool_moments(halted.mission_id, home)
    assert [(e.kind, e.halt) for e in events if e.kind == "halt"] == [("halt", HALT)]

    done = resume_mission(halted.mission_id, answer="approve", home=home)

    assert (done.state, done.stop_reason) == ("done", "concluded")
    assert calls_made(calls) == ["notely"]
    [moment] = tool_moments(done.mission_id, home)
    assert (moment["id"], moment["outcome"], moment["digest"]) == ("r1.write.operative-1.tool1", "ok", QUOTE)
    decided = halt(done.mission_id, home)
    assert (decided["status"], decided["answer"], decided["answer_source"], decided["call"],
            decided["call_outcome"], decided["call_result"]) == ("answered", "approve", "user", "done", "ok", QUOTE)
    with ContextGraph.open(name=done.mission_id, home=home) as graph:  # the decision is a moment: who, when, what
        [answer] = [m for m in graph.find("moment", {"type": "user_answer"}) if "approve" in str(m.get("prose"))]
        assert answer["prose"] == "answered (user): approve"
        assert graph.read_cypher("MATCH (a {id: 'user'})-[:EXPRESSES]->(m {id: $id}) RETURN m.id AS id",
                                 {"id": answer["id"]})
    with ContextGraph.open(name=done.mission_id, home=home) as graph:
        [version] = graph.find("version")
    assert QUOTE in version["content"]  # the operative wrote with the result it was given


def test_deny_gives_the_agent_the_refusal_as_the_calls_result_and_the_tool_is_never_called(home, tmp_path) -> None:
    path, calls = asking(tmp_path)
    halted = run_mission(path, home=home)
    events: list = []

    done = resume_mission(halted.mission_id, answer="deny: no lookups today", home=home, on_event=events.append)

    assert (done.state, done.stop_reason) == ("done", "concluded")
    assert calls_made(calls) == []
    [moment] = tool_moments(done.mission_id, home)
    assert (moment["outcome"], moment["digest"]) == ("denied", "the user denied this call: no lookups today")
    [returned] = [e for e in events if e.kind == "tool_result"]
    assert (returned.ok, returned.denied, returned.digest) == (False, True, "the user denied this call: no lookups today")
    transcript = cabal_transcript(done.mission_id, home=home)
    assert ("- r1 write Ada (operative-1) called prices__lookup {\"product\": \"notely\"}: denied, the user denied "
            "this call: no lookups today.") in transcript
    assert "**you:** deny: no lookups today" in transcript


def test_what_the_agent_reads_of_a_refused_call_and_which_answers_approve() -> None:
    refused = kept_outcome(DENIED + ": too dear", ok=False, denied=True)
    assert tool_message("prices__lookup", refused, "r1.write.operative-1.tool1") == (
        "CALL REFUSED: prices__lookup was not called; the user denied this call: too dear. Do not call it again in "
        "this turn; go on without it.")
    assert [answer for answer in ("approve", "Approve.", "yes", "ok go", "deny", "no", "approve?no", "", "stop")
            if approves(answer)] == ["approve", "Approve.", "yes", "ok go"]


def test_auto_and_deny_policies_and_a_list_of_tools_that_ask(home, tmp_path) -> None:
    (tmp_path / "deny").mkdir()
    path, calls = asking(tmp_path / "deny", approve="deny")
    denied = run_mission(path, home=home)
    assert (denied.state, calls_made(calls)) == ("done", [])
    assert [(m["outcome"], m["digest"]) for m in tool_moments(denied.mission_id, home)] == [
        ("denied", "the mission file denies every call of prices__lookup")]

    (tmp_path / "other").mkdir()
    path, calls = asking(tmp_path / "other", approve=["environment"])  # only another tool asks
    made = run_mission(path, home=home)
    assert (made.state, calls_made(calls)) == ("done", ["notely"])

    (tmp_path / "listed").mkdir()
    path, calls = asking(tmp_path / "listed", approve=["lookup"])
    assert run_mission(path, home=home).pending_halt["id"] == HALT


def test_a_wrong_policy_is_a_located_error_with_the_closest_names(tmp_path) -> None:
    path, _ = asking(tmp_path, approve="asks")
    with pytest.raises(ConfigError) as error:
        load_mission(path)
    assert "approve: 'asks' is not a policy; use ask, auto or deny, or a list of tool names (closest: ask" in str(
        error.value)
    assert str(error.value).startswith(f"{path}:")


# -------------------------------------------------------------------------- kill -9


def test_kill_9_while_the_approval_waits_and_again_while_the_approved_call_runs_never_calls_the_tool_twice(
        home, tmp_path) -> None:
    path, calls = asking(tmp_path, delay="30")  # the tool counts the call, then takes its time
    # kill -9 while the question waits
    mission_id = run_killed_at(path, home, tmp_path / "events.jsonl", '"kind": "halt"', "the approval to be asked")
    assert calls_made(calls) == []

    resumed = subprocess.Popen([str(CABAL), "resume", mission_id, "--answer", "approve", "--home", home, "--quiet"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        wait_until(lambda: calls_made(calls) == ["notely"], timeout=60, what="the approved call to reach the tool")
        kill_group(resumed)  # kill -9 between the decision and the call's commit
    finally:
        kill_group(resumed)
    assert halt(mission_id, home)["call"] == "begun"

    done = resume_mission(mission_id, home=home)

    assert (done.state, done.stop_reason) == ("done", "concluded")
    assert calls_made(calls) == ["notely"]  # exactly once
    [moment] = tool_moments(mission_id, home)
    assert (moment["outcome"], moment["digest"]) == ("error", LOST)


SLOW_MODEL = '''"""The tools script, each answer after a tool's result slow when SLOW_AFTER_TOOL is set."""
import os
import time
from pathlib import Path

from cabal.llm import FunctionChatModel, ScriptedChatModel


def model(**options):
    script = ScriptedChatModel.from_file(Path(__file__).with_name("script.yaml"))

    def answer(request):
        if os.environ.get("SLOW_AFTER_TOOL") and any(message.type == "tool" for message in request.messages):
            time.sleep(60)
        return script.bind_tools(list(request.tools)).invoke(list(request.messages),
                                                             config={"metadata": dict(request.metadata)})

    return FunctionChatModel(answer, **options)
'''


def test_kill_9_after_the_approved_calls_result_was_kept_gives_the_turn_that_result_without_calling_again(
        home, tmp_path) -> None:
    path, calls = asking(tmp_path)
    (tmp_path / "slow.py").write_text(SLOW_MODEL)
    path.write_text(path.read_text().replace("model: scripted:script.yaml", "model: py:slow:model"))
    halted = run_mission(path, home=home)
    assert halted.pending_halt is not None and halted.pending_halt["id"] == HALT

    resumed = subprocess.Popen([str(CABAL), "resume", halted.mission_id, "--answer", "approve", "--home", home,
                                "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               stdin=subprocess.DEVNULL, start_new_session=True,
                               env=environment(SLOW_AFTER_TOOL="1"))
    try:  # the result is kept; the model's next answer takes its time: kill -9 before the turn commits
        wait_until(lambda: halt(halted.mission_id, home).get("call") == "done", timeout=60,
                   what="the approved call's result to be kept")
        kill_group(resumed)
    finally:
        kill_group(resumed)
    assert not tool_moments(halted.mission_id, home)  # the turn had not committed

    done = resume_mission(halted.mission_id, home=home)

    assert (done.state, done.stop_reason) == ("done", "concluded")
    assert calls_made(calls) == ["notely"]
    [moment] = tool_moments(done.mission_id, home)
    assert (moment["outcome"], moment["digest"]) == ("ok", QUOTE)
    with ContextGraph.open(name=done.mission_id, home=home) as graph:
        [version] = graph.find("version")
    assert QUOTE in version["content"]
