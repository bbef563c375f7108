"""The events of a run: typed, in order, written as JSON lines, and adding up to what the summary reports."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import jsonschema
import pytest

from cabal.errors import ConfigError
from cabal.graph import ContextGraph
from cabal.rounds.event_schema import events_schema
from cabal.rounds.api import run_mission
from cabal.rounds.control import say
from cabal.rounds.events import (
    EVENT_TYPES, Answered, HaltRaised, MissionEvent, MissionStarted, Presented, RunEnded, SpokenLine, TurnDone,
    TurnStarted, UserMessage,
)
from cabal.rounds.streams import arun_mission, stream_mission, stream_resume

from .players import LAUNCH_MISSION, ScriptPlayer
from .test_cli import QUESTION, ROOT, cabal, mission_id_of

RESEARCH = ROOT / "examples" / "research" / "research.mission.yaml"
QUESTION_TEXT = "Who reads the README first, people installing tally or people contributing to it?"


@pytest.fixture(scope="module")
def home(graph_server) -> str:
    return str(graph_server.home)


def test_every_kind_is_a_frozen_dataclass_whose_json_has_kind_mission_and_at() -> None:
    assert list(EVENT_TYPES) == ["mission_start", "mission_resume", "mission_continued", "round_start", "step_start",
                                 "turn_start", "model_call", "turn_done", "model_retry", "tool_call", "tool_result",
                                 "model_output_switched", "presentation", "halt", "answer", "user_message", "stop",
                                 "graph_restart", "interrupted", "warning", "run_end"]
    event = Presented("m-x", round=2, agent="envoy-1", lines=(SpokenLine("chair-1", "Done."),), at=12.34567)
    assert event.to_json() == {"kind": "presentation", "mission": "m-x", "at": 12.346, "round": 2,
                               "agent": "envoy-1", "lines": [{"speaker": "chair-1", "text": "Done."}]}
    with pytest.raises(AttributeError):
        event.round = 3  # frozen


def test_the_research_examples_event_stream_accounts_for_every_turn_and_token(home: str, tmp_path: Path) -> None:
    events_file = tmp_path / "events.jsonl"

    result = cabal("run", str(RESEARCH), "--home", home, "--quiet", "--events", str(events_file))

    assert result.returncode == 0, result.stderr
    mission_id = mission_id_of(result.stdout)
    lines = events_file.read_text().splitlines()
    events = [json.loads(line) for line in lines]  # every line parses on its own
    validator = jsonschema.Draft202012Validator(events_schema())
    for event in events:
        validator.validate(event)
    turns = [e for e in events if e["kind"] == "turn_done"]
    summary = re.search(r"^usage: ([\d,]+) in, ([\d,]+) out, ([\d,]+) cached", result.stdout, re.MULTILINE)
    reported = [int(group.replace(",", "")) for group in summary.groups()]
    assert reported == [80211, 8707, 0]
    assert [sum(t[key] for t in turns) for key in ("input_tokens", "output_tokens", "cache_read_tokens")] == reported
    # Each turn's tokens are its model calls', and every turn the graph holds is in the stream.
    calls = [e for e in events if e["kind"] == "model_call"]
    assert sum(c["input_tokens"] for c in calls) == reported[0] and len(calls) == sum(t["calls"] for t in turns)
    with ContextGraph.open(name=mission_id, home=home) as graph:
        moments = graph.find("moment", {"type": "turn"}, fields=["round", "step", "agent"])
    assert len(turns) == len(moments) == 30
    assert sorted((t["round"], t["step"], t["agent"]) for t in turns) == sorted(
        (m["round"], m["step"], m["agent"]) for m in moments)
    assert events[0]["kind"] == "mission_start" and events[0]["mission"] == mission_id
    assert events[-1] == {**events[-1], "kind": "run_end", "state": "done", "stop_reason": "concluded", "round": 3,
                          "turns": 30, "input_tokens": 80211, "output_tokens": 8707, "question": None}
    assert [e["kind"] for e in events].count("round_start") == 3
    assert [(e["kind"], e.get("source")) for e in events if e["kind"] in ("halt", "answer")] == [
        ("halt", None), ("answer", "mission file")]
    assert [e["round"] for e in events if e["kind"] == "presentation"] == [1, 2, 3]  # the last round too


def test_events_dash_writes_json_lines_to_stdout_and_peoples_lines_to_stderr(home: str) -> None:
    result = cabal("run", str(LAUNCH_MISSION), "--home", home, "--events", "-")

    assert result.returncode == 0, result.stderr
    kinds = [json.loads(line)["kind"] for line in result.stdout.splitlines()]
    assert kinds[0] == "mission_start" and kinds[-1] == "run_end" and kinds.count("turn_done") == 19
    assert "round 1 · plan · chair-1 · " in result.stderr and "state: done (concluded), round 2" in result.stderr


def test_an_events_file_that_cannot_be_written_is_a_one_line_error(home: str, tmp_path: Path) -> None:
    result = cabal("run", str(LAUNCH_MISSION), "--home", home, "--events", str(tmp_path / "missing" / "e.jsonl"))

    assert result.returncode == 2  # a usage error: the file cannot be written
    assert result.stderr == f"cabal: cannot write events to {tmp_path / 'missing' / 'e.jsonl'}: No such file or directory\n"


def test_on_event_gets_typed_events_in_order_with_the_envoys_lines(home: str) -> None:
    events: list[MissionEvent] = []

    result = run_mission(LAUNCH_MISSION, home=home, on_event=events.append)

    started = events[0]
    assert isinstance(started, MissionStarted)
    assert (started.mission, started.name, started.operatives, started.rounds, started.budget_tokens) == (
        result.mission_id, "launch-plan", 2, 4, 400000)
    kinds = [e.kind for e in events]
    assert kinds[:8] == ["mission_start", "step_start", "turn_start", "model_call", "turn_done", "halt", "answer",
                         "step_start"]
    asked, answered = events[5], events[6]
    assert (asked.halt, asked.asker, asked.options) == ("r0.bootstrap.halt", "chair-1", ("students", "teachers", "both"))
    assert (answered.text, answered.source) == (
        "Students first: university students who take lecture notes. Teachers come later.", "mission file")
    # Round 1's lines arrive right after the Envoy's turn, before round 2 starts.
    first = next(i for i, e in enumerate(events) if isinstance(e, Presented))
    assert isinstance(events[first - 1], TurnDone) and events[first - 1].agent == "envoy-1"
    assert events[first + 1].kind == "round_start" and events[first + 1].round == 2
    assert events[first].lines == (
        SpokenLine("chair-1", "We chartered the launch for university students and started with the brief and the price."),
        SpokenLine("operative-1", "The launch brief is written, passed inspection and is accepted."),
        SpokenLine("operative-2", "My pricing proposal is blocked until I add a competitor comparison, which I will do "
                                  "next round."))
    # Parallel operatives both start before either is done.
    write = [e for e in events if e.kind in ("turn_start", "turn_done") and e.round == 1 and e.step == "write"]
    assert [e.kind for e in write][:2] == ["turn_start", "turn_start"]
    ended = events[-1]
    assert isinstance(ended, RunEnded)
    assert (ended.turns, ended.input_tokens, ended.output_tokens) == (
        19, result.usage.input_tokens, result.usage.output_tokens)


def test_a_failed_turn_says_why_in_its_event(home: str) -> None:
    player = ScriptPlayer()
    wrong = player.script_answer((1, "presentation", "envoy-1"))
    wrong["messages"][2]["asAgent"] = "operative-3"
    player.inject[(1, "presentation", "envoy-1")] = [{"tool": "final_output", "args": wrong}] * 3
    events: list[MissionEvent] = []

    run_mission(LAUNCH_MISSION, model=player.model(), home=home, on_event=events.append)

    failed = [e for e in events if isinstance(e, TurnDone) and e.outcome == "failed"]
    assert [(e.round, e.step, e.agent, e.attempts, e.calls, e.problems) for e in failed] == [
        (1, "presentation", "envoy-1", 3, 3,
         ("messages.2: asAgent 'operative-3' may not speak; speakers are chair-1, operative-1, operative-2",))]
    assert [e.round for e in events if isinstance(e, Presented)] == [2]  # nothing was said in round 1


def test_a_question_is_told_once_and_the_resumed_run_tells_the_answer_and_the_users_message(home: str) -> None:
    first: list[MissionEvent] = []
    halted = run_mission(QUESTION, home=home, on_event=first.append)
    note = say(halted.mission_id, "Mention Windows, macOS and Linux.", home=home)
    second = stream_resume(halted.mission_id, answer="People installing it.", home=home)
    resumed = list(second)

    assert halted.state == "halted"
    assert [(e.kind, e.message) for e in first if isinstance(e, HaltRaised)] == [("halt", QUESTION_TEXT)]
    assert first[-1].kind == "run_end" and first[-1].question == QUESTION_TEXT
    assert [e.kind for e in resumed][:2] == ["mission_resume", "answer"]
    assert not any(isinstance(e, HaltRaised) for e in resumed)  # not told again
    assert [(e.text, e.source) for e in resumed if isinstance(e, Answered)] == [("People installing it.", "user")]
    assert [(e.round, e.note, e.text) for e in resumed if isinstance(e, UserMessage)] == [
        (0, note, "Mention Windows, macOS and Linux.")]
    assert second.result.state == "done"


def test_stream_mission_yields_what_on_event_gets_and_raises_the_runs_error(home: str) -> None:
    heard: list[MissionEvent] = []
    stream = stream_mission(LAUNCH_MISSION, home=home, on_event=heard.append)

    streamed = list(stream)

    assert streamed == heard and len(streamed) == 81
    assert stream.result.state == "done" and stream.result.mission_id == streamed[0].mission
    with pytest.raises(ConfigError, match="mission file no-such.mission.yaml: cannot read"):
        list(stream_mission("no-such.mission.yaml", home=home))


def test_the_async_forms(home: str) -> None:
    async def both():
        events = [event async for event in stream_mission(LAUNCH_MISSION, home=home, rounds=1)]
        result = await arun_mission(LAUNCH_MISSION, home=home, rounds=1)
        return events, result

    events, result = asyncio.run(both())

    assert (result.state, result.stop_reason, result.round) == ("done", "noMoreRounds", 1)
    assert events[-1].kind == "run_end" and events[-1].stop_reason == "noMoreRounds"
    assert [e.agent for e in events if isinstance(e, TurnStarted)][:2] == ["chair-1", "chair-1"]
