"""Models that cannot call tools well (``output: json``): the launch example answered in text,
and a model whose provider refuses tools switches the mission to json once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langchain_core.messages import AIMessage, HumanMessage

from cabal.llm import FunctionChatModel, ModelRequest, ScriptedChatModel
from cabal.rounds.api import resume_mission, run_mission
from cabal.rounds.control import OutputSwitch
from cabal.rounds.events import MissionEvent, ModelOutputSwitched, ModelRetried
from cabal.rounds.workspace import Workspace

from .players import LAUNCH_MISSION, LAUNCH_SCRIPT

QUESTION_MISSION = Path(__file__).resolve().parent / "data" / "question.mission.yaml"


@pytest.fixture(scope="module")
def home(graph_server) -> Path:
    return graph_server.home


def test_the_launch_example_completes_in_json_mode(home: Path) -> None:
    model = ScriptedChatModel.from_file(LAUNCH_SCRIPT)
    result = run_mission(LAUNCH_MISSION, model=model, home=home, model_settings={"output": "json"})

    assert (result.state, result.stop_reason, result.round, result.failed_turns) == ("done", "concluded", 2, 0)
    assert len(model.calls) == result.usage.calls == 19  # one per turn, as with tools
    assert {call.tools for call in model.calls} == {()}  # no call offered a tool
    first = model.calls[0]
    assert first.messages[0].content[-1]["text"].startswith("# How to answer\n\nYou have no tools")
    assert "NAME is one of: final_output, halt." in first.messages[0].content[-1]["text"]


def test_a_reply_without_json_and_one_with_wrong_fields_are_rejected_with_every_problem(home: Path) -> None:
    script = ScriptedChatModel.from_file(LAUNCH_SCRIPT)
    wrong = {"tool": "final_output", "args": {"mission": 7}}

    def answer(request: ModelRequest) -> AIMessage:
        if (request.key.round, request.key.step, request.key.agent) == (1, "plan", "chair-1") and request.attempt < 3:
            return AIMessage(content="Let me think about the plan first." if request.attempt == 1
                             else f"Here it is: {json.dumps(wrong)}")
        return script.invoke(list(request.messages), config={"metadata": dict(request.metadata)})

    model = FunctionChatModel(answer)
    result = run_mission(LAUNCH_MISSION, model=model, home=home, model_settings={"output": "json"})

    assert (result.state, result.stop_reason, result.failed_turns) == ("done", "concluded", 0)
    plan = [call for call in model.calls if (call.key.round, call.key.step) == (1, "plan")]
    assert [call.attempt for call in plan] == [1, 2, 3]
    first_feedback, second_feedback = plan[1].messages[-1], plan[2].messages[-1]
    assert isinstance(first_feedback, HumanMessage) and isinstance(second_feedback, HumanMessage)
    assert first_feedback.content == (
        "Your answer was rejected (1 problem(s)); fix each:\n- no JSON object in the answer; answer with one JSON "
        'object {"tool": NAME, "args": {...}} (NAME one of final_output, request_context, halt)')
    assert plan[2].messages[-2].content == f"Here it is: {json.dumps(wrong)}"  # the reply, as the model wrote it
    problems = second_feedback.content.splitlines()[1:]
    assert len(problems) > 1 and all(line.startswith("- ") for line in problems)  # every problem, listed
    with Workspace.at(home).graph(result.mission_id) as graph:
        assert graph.get("r1.plan.chair-1")["attempts"] == 3


def test_a_provider_that_refuses_tools_switches_the_model_to_json_once_and_resume_keeps_it(home: Path) -> None:
    from tests.rounds.data import no_tools_factory

    spec = "py:tests.rounds.data.no_tools_factory:question_model"
    events: list[MissionEvent] = []
    no_tools_factory.BUILT.clear()
    paused = run_mission(QUESTION_MISSION, model=spec, home=home, on_event=events.append)

    assert (paused.state, paused.round) == ("halted", 0)  # the Chair's question, asked in JSON text
    (first,) = no_tools_factory.BUILT
    assert [(call.key.agent, call.attempt, call.tools) for call in first.calls] == [
        ("chair-1", 1, ("final_output", "halt")), ("chair-1", 2, ())]  # refused, then at once without tools
    switched = [event for event in events if isinstance(event, ModelOutputSwitched)]
    reason = f"ollama returned 400: {no_tools_factory.REFUSAL}"
    assert [(e.round, e.step, e.agent, e.model, e.output, e.reason) for e in switched] == [
        (0, "bootstrap", "chair-1", spec, "json", reason)]
    assert paused.output_switches == (OutputSwitch(spec, "chair-1", 0, reason),)
    assert not [event for event in events if isinstance(event, ModelRetried)]  # not a retry, not a failed turn
    assert paused.failed_turns == 0

    resumed_events: list[MissionEvent] = []
    done = resume_mission(paused.mission_id, answer="People installing it.", home=home,
                          on_event=resumed_events.append)

    assert (done.state, done.stop_reason, done.failed_turns) == ("done", "concluded", 0)
    second = no_tools_factory.BUILT[-1]
    assert second is not first and second.calls
    assert {call.tools for call in second.calls} == {()}  # resumed in json mode: no call offered a tool
    assert not [event for event in resumed_events if isinstance(event, ModelOutputSwitched)]
    assert done.output_switches == paused.output_switches


def test_cabal_status_shows_the_switch(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cabal.cli import main

    from tests.rounds.data import no_tools_factory

    spec = "py:tests.rounds.data.no_tools_factory:launch_model"
    result = run_mission(LAUNCH_MISSION, model=spec, home=home)
    assert (result.state, result.stop_reason, result.failed_turns) == ("done", "concluded", 0)

    capsys.readouterr()
    assert main(["status", result.mission_id, "--home", str(home), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    reason = f"ollama returned 400: {no_tools_factory.REFUSAL}"
    assert shown["output_switches"] == [{"model": spec, "agent": "chair-1", "round": 0, "output": "json",
                                         "reason": reason}]
    assert main(["status", result.mission_id, "--home", str(home)]) == 0
    assert (f"model {spec} answers in JSON text since round 0 (its provider refused tools at chair-1's call: "
            f"{reason})") in capsys.readouterr().out


def test_output_json_on_the_command_line_asks_without_tools_from_the_first_call(home: Path,
                                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from cabal.cli import main

    from tests.rounds.data import no_tools_factory

    no_tools_factory.BUILT.clear()
    spec = "py:tests.rounds.data.no_tools_factory:launch_model"
    assert main(["run", str(LAUNCH_MISSION), "--model", spec, "--output", "json", "--quiet", "--home", str(home)]) == 0
    assert "state: done (concluded), round 2" in capsys.readouterr().out
    (model,) = no_tools_factory.BUILT
    assert {call.tools for call in model.calls} == {()}  # never offered tools, so never refused


def test_the_environment_sets_the_output_and_a_wrong_value_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from cabal.errors import ConfigError
    from cabal.llm import ModelSettings

    monkeypatch.setenv("CABAL_MODEL_OUTPUT", "json")
    assert ModelSettings().from_environment().output == "json"
    monkeypatch.setenv("CABAL_MODEL_OUTPUT", "text")
    with pytest.raises(ConfigError, match=r"model settings: output: Input should be 'tools' or 'json' "
                                          r"\(from the CABAL_MODEL\* environment variables\)"):
        ModelSettings().from_environment()
