"""The offline models: keyed script replay, function models, and make_model's offline specs."""

from __future__ import annotations

import json
import operator
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
import yaml
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from cabal.errors import ModelError
from cabal.llm import (
    CallKey,
    FunctionChatModel,
    ScriptedChatModel,
    Usage,
    call_metadata,
    call_model,
    make_model,
)

ANSWER = {"name": "answer", "description": "Submit the step's answer.", "input_schema": {"type": "object"}}
PROMPT = [SystemMessage("You are an operative."), HumanMessage("Write product p1 now, please.")]


def ask(model: Any, round_: int, step: str, agent: str, tools: list[dict] | None = None):
    return call_model(
        model, PROMPT, tools or [ANSWER], metadata=call_metadata(round=round_, step=step, agent=agent)
    )


def test_replays_the_entry_for_the_calls_key_with_exact_args() -> None:
    args = {"versions": [{"productId": "p1", "newVersion": {"content": "x" * 60}}], "n": 3, "ok": True}
    model = ScriptedChatModel.from_entries(
        [
            {"round": 2, "step": "write", "agent": "operative-2", "tool": "answer", "args": {"other": 1}},
            {"round": 2, "step": "write", "agent": "operative-1", "tool": "answer", "args": args},
            {"round": 1, "step": "write", "agent": "operative-1", "tool": "answer", "args": {"other": 2}},
        ]
    )

    reply = ask(model, 2, "write", "operative-1")

    assert reply.tool_calls == [{"name": "answer", "args": args, "id": "toolu_2_write_operative-1_1"}]
    assert reply.text == ""


def test_entries_with_the_same_key_are_used_in_order_one_per_attempt() -> None:
    model = ScriptedChatModel.from_entries(
        [
            {"round": 1, "step": "reflect", "agent": "operative-1", "tool": "answer", "args": {"try": 1}},
            {"round": 1, "step": "reflect", "agent": "operative-1", "tool": "answer", "args": {"try": 2}},
        ]
    )

    first = ask(model, 1, "reflect", "operative-1")
    retry = ask(model, 1, "reflect", "operative-1")

    assert [first.tool_calls[0]["args"], retry.tool_calls[0]["args"]] == [{"try": 1}, {"try": 2}]
    assert [call.attempt for call in model.calls] == [1, 2]
    assert first.tool_calls[0]["id"] != retry.tool_calls[0]["id"]


def test_exact_entries_win_over_wildcards_which_serve_once_they_run_out() -> None:
    model = ScriptedChatModel.from_entries(
        [
            {"round": "*", "step": "write", "agent": "*", "tool": "answer", "args": {"from": "any"}},
            {"round": "*", "step": "write", "agent": "operative-1", "tool": "answer", "args": {"from": "agent"}},
            {"round": 3, "step": "write", "agent": "operative-1", "tool": "answer", "args": {"from": "exact"}},
        ]
    )

    answers = [ask(model, 3, "write", "operative-1").tool_calls[0]["args"]["from"] for _ in range(3)]

    assert answers == ["exact", "agent", "any"]


def test_a_repeating_entry_answers_every_matching_call() -> None:
    model = ScriptedChatModel.from_entries(
        [{"step": "presentation", "tool": "answer", "args": {"messages": []}, "repeat": True}]
    )

    for round_ in range(1, 5):
        assert ask(model, round_, "presentation", "envoy-1").tool_calls[0]["args"] == {"messages": []}


def test_running_out_names_the_key_and_the_attempt() -> None:
    model = ScriptedChatModel.from_entries(
        [{"round": 2, "step": "write", "agent": "operative-1", "tool": "answer", "args": {}}]
    )
    ask(model, 2, "write", "operative-1")

    with pytest.raises(ModelError) as used_up:
        ask(model, 2, "write", "operative-1")
    with pytest.raises(ModelError) as unknown:
        ask(model, 2, "write", "operative-9")

    assert str(used_up.value) == (
        "no scripted answer for round 2, step 'write', agent 'operative-1' (attempt 2) "
        "in <entries>: all 1 matching entry used up"
    )
    assert str(unknown.value) == (
        "no scripted answer for round 2, step 'write', agent 'operative-9' (attempt 1) "
        "in <entries>: no entry matches"
    )
    assert used_up.value.provider == "scripted"


def test_a_call_without_cabal_metadata_is_told_so() -> None:
    model = ScriptedChatModel.from_entries([{"round": 1, "step": "write", "agent": "a", "tool": "answer"}])

    with pytest.raises(ModelError, match="metadata lacks cabal_round, cabal_step or cabal_agent"):
        call_model(model, PROMPT, [ANSWER], metadata={})


def test_a_scripted_tool_that_was_not_offered_is_an_error() -> None:
    model = ScriptedChatModel.from_entries([{"tool": "halt", "args": {}}])

    with pytest.raises(ModelError, match=r"calls tool 'halt', which was not offered \(offered: answer\)"):
        ask(model, 1, "write", "operative-1")


def test_parallel_calls_each_get_their_own_agents_answer_without_waiting_on_each_other() -> None:
    agents = [f"operative-{n}" for n in range(1, 9)]
    model = ScriptedChatModel.from_entries(
        [{"round": 1, "step": "write", "agent": a, "tool": "answer", "args": {"by": a}} for a in agents],
        latency_s=0.2,
    )

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(agents)) as pool:
        replies = list(pool.map(lambda a: ask(model, 1, "write", a), agents))
    elapsed = time.monotonic() - started

    assert [r.tool_calls[0]["args"]["by"] for r in replies] == agents
    assert sorted(call.key.agent for call in model.calls) == sorted(agents)
    assert elapsed < 0.2 * len(agents) / 2  # latencies overlap: the lock guards only the cursor


def test_langgraph_send_fan_out_reaches_each_agents_entry() -> None:
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Send

    class State(TypedDict):
        answers: Annotated[list, operator.add]

    agents = ["operative-1", "operative-2", "operative-3"]
    model = ScriptedChatModel.from_entries(
        [{"round": 4, "step": "reflect", "agent": a, "tool": "answer", "args": {"by": a}} for a in agents]
    )

    def reflect(task: dict) -> dict:
        reply = call_model(model, PROMPT, [ANSWER], metadata=call_metadata(round=4, step="reflect", agent=task["agent"]))
        return {"answers": [(task["agent"], reply.tool_calls[0]["args"]["by"])]}

    builder = StateGraph(State)
    builder.add_node("reflect", reflect)
    builder.add_conditional_edges(START, lambda _: [Send("reflect", {"agent": a}) for a in agents])
    builder.add_edge("reflect", END)

    result = builder.compile().invoke({"answers": []})

    assert sorted(result["answers"]) == [(a, a) for a in agents]


def test_calls_record_key_tools_choice_and_the_messages_as_sent() -> None:
    model = ScriptedChatModel.from_entries([{"tool": "answer", "args": {}}])

    ask(model, 0, "bootstrap", "chair-1", tools=[ANSWER, {**ANSWER, "name": "halt"}])

    (call,) = model.calls
    assert call.key == CallKey(round=0, step="bootstrap", agent="chair-1")
    assert call.tools == ("answer", "halt")
    assert call.tool_choice == "any"
    assert call.messages[0].content == [
        {"type": "text", "text": "You are an operative.", "cache_control": {"type": "ephemeral"}}
    ]
    assert call.messages[1].text == "Write product p1 now, please."


def test_usage_is_estimated_from_characters() -> None:
    model = ScriptedChatModel.from_entries([{"tool": "answer", "args": {"text": "y" * 100}}])

    reply = ask(model, 1, "write", "operative-1")

    prompt_chars = len("You are an operative.") + len("Write product p1 now, please.")
    answer_chars = len(json.dumps({"text": "y" * 100}))
    assert reply.usage == Usage(input_tokens=prompt_chars // 4, output_tokens=answer_chars // 4, calls=1)


def test_function_model_answers_with_a_dict_or_a_message() -> None:
    seen: list[tuple[str, list[str], dict]] = []

    def answer(request):
        seen.append((request.messages[-1].text, [t["name"] for t in request.tools], request.key, request.facts,
                     dict(request.metadata)))
        if request.key.agent == "chair-1":
            return {"tool": "answer", "args": {"agent": request.key.agent}}
        return AIMessage(content="I would rather talk.")

    model = FunctionChatModel(answer)

    chair = ask(model, 1, "plan", "chair-1")
    operative = ask(model, 1, "reflect", "operative-1")

    assert chair.tool_calls == [{"name": "answer", "args": {"agent": "chair-1"}, "id": "toolu_1_plan_chair-1_1"}]
    assert chair.usage.output_tokens > 0
    assert operative.tool_calls == [] and operative.text == "I would rather talk."
    assert seen[0] == (
        "Write product p1 now, please.",
        ["answer"],
        CallKey(1, "plan", "chair-1"),
        None,  # facts: the round engine's TurnFacts, when the engine makes the call
        {"cabal_round": 1, "cabal_step": "plan", "cabal_agent": "chair-1"},
    )


def test_function_model_rejects_an_unusable_answer() -> None:
    with pytest.raises(ModelError, match="expected an AIMessage or"):
        ask(FunctionChatModel(lambda *_: "just text"), 1, "write", "operative-1")


def test_make_model_loads_a_yaml_script(tmp_path: Path) -> None:
    script = tmp_path / "mission.yaml"
    script.write_text(
        yaml.safe_dump([{"round": 1, "step": "write", "agent": "operative-1", "tool": "answer", "args": {"a": [1, 2]}}])
    )

    model = make_model(f"scripted:{script}", latency_s=0.01)

    assert isinstance(model, ScriptedChatModel) and model.latency_s == 0.01
    assert ask(model, 1, "write", "operative-1").tool_calls[0]["args"] == {"a": [1, 2]}


def test_make_model_loads_a_json_script(tmp_path: Path) -> None:
    script = tmp_path / "mission.json"
    script.write_text(json.dumps([{"round": "*", "step": "write", "agent": "*", "tool": "answer", "args": {"b": None}}]))

    assert ask(make_model(f"scripted:{script}"), 7, "write", "operative-3").tool_calls[0]["args"] == {"b": None}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("- round: 1\n  tool: answer\n  agnet: x\n", "entry 0: unknown field(s) ['agnet']"),
        ("- round: first\n  tool: answer\n", "entry 0: 'round' must be an integer or '*'"),
        ("- {round: 1, args: {}}\n", "entry 0: 'tool' must be a non-empty string"),
        ("round: 1\n", "must hold a list of entries"),
        ("- [unclosed\n", "bad.yaml:2: invalid YAML"),
    ],
)
def test_a_malformed_script_is_refused_with_its_location(tmp_path: Path, content: str, message: str) -> None:
    script = tmp_path / "bad.yaml"
    script.write_text(content)

    with pytest.raises(ModelError) as caught:
        make_model(f"scripted:{script}")

    assert message in str(caught.value)


def test_a_missing_script_is_a_model_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="model script .*nope.yaml: cannot read"):
        make_model(f"scripted:{tmp_path / 'nope.yaml'}")


def test_make_model_calls_a_python_factory() -> None:
    model = make_model("py:tests.llm.factories:make", latency_s=0.0)

    assert ask(model, 5, "write", "operative-2").tool_calls[0]["args"] == {"from": "factory"}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("py:tests.llm.no_such_module:make", "cannot import 'tests.llm.no_such_module'"),
        ("py:tests.llm.factories:missing", "has no callable 'missing'"),
        ("py:tests.llm.factories:not_a_factory", "not_a_factory() returned int, not a chat model"),
        ("py:make", "must be py:MODULE:FACTORY"),
        ("scriptd:x.yaml", "unknown model spec 'scriptd:x.yaml'"),
        ("  ", "empty model spec"),
    ],
)
def test_unusable_specs_are_model_errors(spec: str, message: str) -> None:
    with pytest.raises(ModelError) as caught:
        make_model(spec)

    assert message in str(caught.value)


def test_a_turn_after_the_users_answer_starts_after_the_keys_halt_entries() -> None:
    # What a process that resumes a mission sees: a fresh cursor, and the Chair's call for the
    # turn after the user's n-th answer (cabal_turn n) must not replay the question.
    key = {"round": 0, "step": "bootstrap", "agent": "chair-1"}
    halt = {"name": "halt", "description": "Ask the user.", "input_schema": {"type": "object"}}
    entries = [
        {**key, "tool": "answer", "args": {"try": "rejected"}},
        {**key, "tool": "halt", "args": {"ask": 1}},
        {**key, "tool": "halt", "args": {"ask": 2}},
        {**key, "tool": "answer", "args": {"charter": True}},
    ]

    def turn(model: ScriptedChatModel, n: int) -> dict:
        metadata = call_metadata(round=0, step="bootstrap", agent="chair-1", turn=n)
        return call_model(model, PROMPT, [ANSWER, halt], metadata=metadata).tool_calls[0]["args"]

    assert call_metadata(round=0, step="bootstrap", agent="chair-1", turn=0) == {
        "cabal_round": 0, "cabal_step": "bootstrap", "cabal_agent": "chair-1"}
    assert turn(ScriptedChatModel.from_entries(entries), 1) == {"ask": 2}
    assert turn(ScriptedChatModel.from_entries(entries), 2) == {"charter": True}
    one_process = ScriptedChatModel.from_entries(entries)  # the same calls in one process
    assert [turn(one_process, n) for n in (0, 0, 1, 2)] == [{"try": "rejected"}, {"ask": 1}, {"ask": 2}, {"charter": True}]


def test_a_fake_model_told_to_keep_no_calls_keeps_none_and_still_counts_attempts() -> None:
    from cabal.llm import FunctionChatModel

    seen: list[int] = []
    model = FunctionChatModel(lambda request: seen.append(request.attempt) or {"tool": "noop", "args": {}},
                              keep_calls=False)
    bound = model.bind_tools([{"name": "noop", "description": "nothing", "input_schema": {"type": "object"}}])
    for _ in range(2):
        bound.invoke("hello", config={"metadata": {"cabal_round": 1, "cabal_step": "write", "cabal_agent": "a"}})
    assert model.calls == [] and seen == [1, 2]
