"""One agent's turn in one step: ask the model, check the answer, retry with every problem.

The model answers by calling one tool per envelope the step allows (``final_output``,
``request_context``, ``halt``), each tool's input schema generated from the entity models,
so the schema the model sees and the validation are the same thing.

Within a turn:
- a ``request_context`` answer is served from the graph and the model asked again
  (at most ``MAX_CONTEXT_REQUESTS`` requests, ``MAX_CONTEXT_ITERATIONS`` times);
- an answer that fails (unknown ids, schema, the engine's rules, the membrane) goes back to
  the model with every problem listed, at most ``max_attempts`` answers in all;
- running out of attempts is a ``failed`` outcome the engine records, never an exception and
  never a write.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from pydantic import BaseModel, ValidationError

from cabal.entities import FINAL_OUTPUT, HALT, MAX_CONTEXT_ITERATIONS, REQUEST_CONTEXT, envelope_models
from cabal.errors import AnswerProblem, AnswerRejected
from cabal.llm import Usage, call_metadata, call_model
from cabal.membrane import Cluster
from cabal.membrane.validation import pydantic_problems
from cabal.rounds.context import Prompt
from cabal.vocabulary import Step, TurnOutcome

DEFAULT_MAX_ATTEMPTS = 3
TOOL_DESCRIPTIONS = {
    FINAL_OUTPUT: "Your result for this step. Call this when you are ready to answer.",
    REQUEST_CONTEXT: "Ask to see more before answering (1 to 5 requests; at most 3 times per step).",
    HALT: "Pause the mission to ask the user a question (type question), or end it (type done).",
}


def step_tools(step: str) -> list[dict]:
    """The tools of a step, in the Anthropic form {name, description, input_schema}."""
    return json.loads(_step_tools_json(step))  # a fresh copy: callers may adapt what they are given


@functools.cache
def _step_tools_json(step: str) -> str:
    # Generating the JSON schemas costs ~7 ms a step and they never change within a process;
    # parsing the cached text back is 4x cheaper than a deepcopy.
    return json.dumps([
        {"name": name, "description": TOOL_DESCRIPTIONS[name], "input_schema": model.model_json_schema(by_alias=True)}
        for name, model in envelope_models(step).items()
    ])


# Checks a parsed final answer; returns the clusters it writes, or raises AnswerRejected.
Checker = Callable[[BaseModel], list[Cluster]]


@dataclass
class TurnResult:
    outcome: TurnOutcome
    answer: BaseModel | None = None
    prepared: list[Cluster] | None = None  # what the checker returned: the writes to commit
    halt: BaseModel | None = None
    usage: Usage = field(default_factory=Usage)
    calls: list[Usage] = field(default_factory=list)  # one per model call, in order
    attempts: int = 0
    context_iterations: int = 0
    problems: list[AnswerProblem] = field(default_factory=list)
    transcript: list[BaseMessage] = field(default_factory=list)


@dataclass
class Turn:
    model: Any
    prompt: Prompt
    step: Step
    agent_id: str
    round: int
    check: Checker
    serve_context: Callable[[list, Any], str]
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    turn_index: int = 0  # the agent's earlier turns in this round and step (Chair turns after answers)

    def run(self) -> TurnResult:
        tools = step_tools(self.step)
        models = envelope_models(self.step)
        messages: list[BaseMessage] = [SystemMessage(self.prompt.system), HumanMessage(self.prompt.user)]
        result = TurnResult(outcome=TurnOutcome.FAILED)
        metadata = call_metadata(round=self.round, step=self.step, agent=self.agent_id, turn=self.turn_index,
                                 facts=self.prompt.facts)
        while result.attempts < self.max_attempts:
            reply = call_model(self.model, messages, tools, metadata=metadata)
            result.usage = result.usage + reply.usage
            result.calls.append(reply.usage)
            call = reply.tool_calls[0] if reply.tool_calls else None
            messages.append(reply.raw if call else AIMessage(reply.text or "(no tool call)"))
            if call is None:
                result.attempts += 1
                result.problems = [AnswerProblem("", "answer by calling exactly one of the tools you were given")]
                messages.append(HumanMessage(AnswerRejected(result.problems).feedback()))
                continue
            name, raw = call["name"], call.get("args") or {}
            if name == REQUEST_CONTEXT and name in models:
                if result.context_iterations >= MAX_CONTEXT_ITERATIONS:
                    result.attempts += 1
                    self._reject(messages, call, [AnswerProblem("", f"no more context requests in this step "
                                                                    f"(limit {MAX_CONTEXT_ITERATIONS}); give your final_output")], result)
                    continue
                try:
                    envelope = models[name].model_validate(raw)
                except ValidationError as error:
                    result.attempts += 1
                    self._reject(messages, call, pydantic_problems(error), result)
                    continue
                result.context_iterations += 1
                messages.append(ToolMessage(self.serve_context(envelope.requests, self.prompt.ids),
                                            tool_call_id=call["id"]))
                continue
            result.attempts += 1
            if name not in models:
                self._reject(messages, call, [AnswerProblem("", f"tool {name!r} is not allowed in this step; "
                                                                f"use one of {', '.join(models)}")], result)
                continue
            mapped, problems = self.prompt.ids.answer_to_graph(raw)
            try:
                parsed = models[name].model_validate(mapped)
            except ValidationError as error:
                self._reject(messages, call, problems + pydantic_problems(error), result)
                continue
            if problems:
                self._reject(messages, call, problems, result)
                continue
            if name == HALT:
                result.outcome, result.halt = TurnOutcome.HALT, parsed
                break
            try:
                result.prepared = self.check(parsed)
            except AnswerRejected as rejected:
                self._reject(messages, call, rejected.problems, result)
                continue
            result.outcome, result.answer, result.problems = TurnOutcome.FINAL, parsed, []
            break
        result.transcript = messages
        return result

    @staticmethod
    def _reject(messages: list[BaseMessage], call: dict, problems: list[AnswerProblem], result: TurnResult) -> None:
        result.problems = problems
        messages.append(ToolMessage(AnswerRejected(problems).feedback(), tool_call_id=call["id"], status="error"))
