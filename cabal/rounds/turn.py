"""One agent's turn in one step: ask the model, check the answer, retry with every problem.

The model answers by calling one tool per envelope the step allows (``final_output``,
``request_context``, ``halt``), each tool's input schema generated from the entity models,
so the schema the model sees and the validation are the same thing. A step is offered only
its own tools: with the system prompt for the step they are the prefix the provider caches,
for every agent of the role, from one round to the next (``llm/call.py`` marks it).

Within a turn:
- a ``request_context`` answer is served from the graph and the model asked again
  (at most ``MAX_CONTEXT_REQUESTS`` requests, ``MAX_CONTEXT_ITERATIONS`` times);
- a call to one of the mission's MCP tools offered to the agent (``tooluse.TurnTools``) is
  made and its result (or its error) given back as that call's tool result, and the model
  asked again (at most the mission's ``max_tool_calls`` times); a call that waits for the
  user's approval stops the turn (``ApprovalPending``, carrying the conversation so far), and
  a turn given that ``PausedTurn`` back (``resume``) goes on from the decision;
- an answer that fails (unknown ids, schema, the engine's rules, the membrane) goes back to
  the model with every problem listed, at most ``max_attempts`` answers in all;
- a reply that is not one valid tool call (plain text, several calls, unreadable arguments,
  an answer cut off at ``max_tokens``, a tool the step does not offer, arguments beyond the
  limits of ``cabal.limits``: too deep, too big, a NUL or a control character) is a rejected
  attempt like any other;
- running out of attempts is a ``failed`` outcome the engine records, never an exception and
  never a write.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from typing import Protocol

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from pydantic import BaseModel, ValidationError

from cabal.entities import (FINAL_OUTPUT, HALT, MAX_CONTEXT_ITERATIONS, REQUEST_CONTEXT, Halt, RequestContextEnvelope,
                            envelope_models)
from cabal.errors import AnswerProblem, AnswerRejected, ModelError
from cabal.limits import answer_problems
from cabal.llm import (CallLimiter, ModelReply, ModelSettings, RetryNotice, Usage, call_metadata, call_model,
                       model_name)
from cabal.llm.json_answers import OUTPUT_JSON, refuses_tools
from cabal.llm.usage import estimate_tokens
from cabal.membrane import Cluster
from cabal.membrane.validation import pydantic_problems
from cabal.rounds.context import Prompt
from cabal.rounds.tooluse import ApprovalPending, PausedTurn, TurnTools
from cabal.vocabulary import Step, TurnOutcome

DEFAULT_MAX_ATTEMPTS = 3
TOOL_DESCRIPTIONS = {
    FINAL_OUTPUT: "Your result for this step. Call this when you are ready to answer.",
    REQUEST_CONTEXT: "Ask to see more before answering (1 to 5 requests; at most 3 times per step).",
    HALT: "Pause the mission to ask the user a question (type question), or end it (type done).",
}


def step_tools(step: Step, offered: frozenset[str] = frozenset()) -> list[dict]:
    """The tools of a step (with the envelopes its prompt ``offered`` beyond its own), in the
    Anthropic form {name, description, input_schema}."""
    return json.loads(_step_tools_json(step, offered))  # a fresh copy: callers may adapt what they are given


@functools.cache
def _step_tools_json(step: Step, offered: frozenset[str]) -> str:
    # Generating the JSON schemas costs ~7 ms a step and they never change within a process;
    # parsing the cached text back is 4x cheaper than a deepcopy.
    return json.dumps([
        {"name": name, "description": TOOL_DESCRIPTIONS[name],
         "input_schema": compact_schema(model.model_json_schema(by_alias=True))}
        for name, model in envelope_models(step, offered).items()
    ])


# What pydantic adds to a schema that a model need not read: the generated titles
# ("Referstoproduct"), defaults (a field left out is one not required), and the discriminator of a
# union (each option's ``action`` const says it already).
_UNREAD_KEYS = frozenset({"title", "default", "discriminator"})


def compact_schema(schema: Any) -> Any:
    """A JSON schema as a model reads it, about a third shorter: without what pydantic adds for
    tools (``_UNREAD_KEYS``), without a class's docstring (a developer's note: what a model must
    know is in the step's prompt or on the field it fills), and an optional field as its type
    rather than ``anyOf [type, null]``. Validation still runs on the full model."""
    if isinstance(schema, list):
        return [compact_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    options = schema.get("anyOf")
    if options and len(options) == 2 and {"type": "null"} in options and schema.get("default", ...) is None:
        kept = {key: value for key, value in schema.items() if key not in ("anyOf", "default")}
        return compact_schema({**next(option for option in options if option != {"type": "null"}), **kept})
    compact: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _UNREAD_KEYS or (key == "description" and "properties" in schema):  # a model's docstring
            continue
        if key == "properties":  # names to schemas: the names are kept as they are
            compact[key] = {name: compact_schema(sub) for name, sub in value.items()}
        elif key == "$defs":  # classes: each one's docstring goes
            compact[key] = {name: compact_schema({k: v for k, v in sub.items() if k != "description"})
                            for name, sub in value.items()}
        else:
            compact[key] = compact_schema(value)
    return compact


# Checks a parsed final answer; returns the clusters it writes, or raises AnswerRejected.
Checker = Callable[[BaseModel], list[Cluster]]


@dataclass
class TurnResult:
    outcome: TurnOutcome
    answer: BaseModel | None = None
    prepared: list[Cluster] | None = None  # what the checker returned: the writes to commit
    halt: Halt | None = None
    usage: Usage = field(default_factory=Usage)
    calls: list[Usage] = field(default_factory=list)  # one per model call, in order
    attempts: int = 0
    context_iterations: int = 0
    problems: list[AnswerProblem] = field(default_factory=list)
    transcript: list[BaseMessage] = field(default_factory=list)


class CallGate(Protocol):
    """What a turn asks before each model call (the mission's budget) and tells after it."""

    def admit(self, worst_case: Usage, model: str) -> Any: ...
    def settle(self, reservation: Any, actual: Usage) -> None: ...


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
    gate: CallGate | None = None
    settings: ModelSettings = field(default_factory=ModelSettings)
    on_retry: Callable[[RetryNotice], None] | None = None
    limiter: CallLimiter | None = None  # limits shared with other missions (a batch's workers)
    # A provider said the model cannot be offered tools: the run records it and returns the
    # settings to go on with (json output); the call is made again at once.
    on_tools_refused: Callable[[ModelError], ModelSettings] | None = None
    tools: TurnTools | None = None  # the mission's MCP tools this agent is offered in this step
    resume: tuple[PausedTurn, dict] | None = None  # a turn that stopped for approval, and the answered question
    result: TurnResult = field(default_factory=lambda: TurnResult(outcome=TurnOutcome.FAILED))

    def run(self) -> TurnResult:
        """The turn to its end. ``BudgetSpent`` (from the gate) or ``ModelError`` (the provider)
        stop it early; what it spent until then is in ``self.result``."""
        tools = step_tools(self.step, self.prompt.offered) + (self.tools.definitions() if self.tools else [])
        models = envelope_models(self.step, self.prompt.offered)
        outside = self.tools.names if self.tools else frozenset()
        messages: list[BaseMessage] = [self.prompt.system_message(), self.prompt.first_message()]
        result = self.result
        metadata = call_metadata(round=self.round, step=self.step, agent=self.agent_id, turn=self.turn_index,
                                 facts=self.prompt.facts)
        if self.resume is not None:
            self._go_on(messages)
        while result.attempts < self.max_attempts:
            reply = self._ask(messages, tools, metadata)
            messages.append(reply.history)
            call, problems = _one_call(reply, models, outside)
            if call is not None:  # before anything walks the arguments: depth, size, characters
                problems = answer_problems(call["args"])
            if call is None or problems:
                result.attempts += 1
                self._reject(messages, reply, problems, result)
                continue
            name, raw = call["name"], call["args"]
            if self.tools is not None and name in outside:
                if self.tools.spent():
                    result.attempts += 1
                    self._reject(messages, reply, [AnswerProblem("", f"no more tool calls in this turn (limit "
                                                                     f"{self.tools.max_calls}); give your final_output")], result)
                    continue
                try:
                    outcome = self.tools.call(name, raw, reply.text)
                except ApprovalPending as pending:  # the turn stops here, to go on once the user decided
                    pending.paused = PausedTurn(messages[2:], result.attempts, result.context_iterations,
                                                list(self.tools.calls), {**call, "id": call.get("id")
                                                                         if reply.history.tool_calls else None},
                                                reply.text)
                    result.transcript = messages
                    raise
                messages.append(_result_message(reply, call, self.tools.message(name, outcome), ok=outcome.ok))
                continue
            if name == REQUEST_CONTEXT:
                if result.context_iterations >= MAX_CONTEXT_ITERATIONS:
                    result.attempts += 1
                    self._reject(messages, reply, [AnswerProblem("", f"no more context requests in this step "
                                                                     f"(limit {MAX_CONTEXT_ITERATIONS}); give your final_output")], result)
                    continue
                try:
                    envelope = RequestContextEnvelope.model_validate(raw)  # the request_context tool's model
                except ValidationError as error:
                    result.attempts += 1
                    self._reject(messages, reply, pydantic_problems(error), result)
                    continue
                result.context_iterations += 1
                messages.append(_result_message(reply, call, self.serve_context(envelope.requests, self.prompt.ids)))
                continue
            result.attempts += 1
            if self.tools is not None:  # the results this turn was given are evidence its answer may cite
                self.prompt.ids.tool_calls |= self.tools.answered()
            mapped, problems = self.prompt.ids.answer_to_graph(raw)
            try:
                parsed = models[name].model_validate(mapped)
            except ValidationError as error:
                self._reject(messages, reply, problems + pydantic_problems(error), result)
                continue
            if problems:
                self._reject(messages, reply, problems, result)
                continue
            if name == HALT:
                assert isinstance(parsed, Halt), "the halt tool's model is Halt"
                result.outcome, result.halt = TurnOutcome.HALT, parsed
                break
            try:
                result.prepared = self.check(parsed)
            except AnswerRejected as rejected:
                self._reject(messages, reply, rejected.problems, result)
                continue
            result.outcome, result.answer, result.problems = TurnOutcome.FINAL, parsed, []
            break
        result.transcript = messages
        return result

    def _go_on(self, messages: list[BaseMessage]) -> None:
        """A paused turn again where it stopped: its conversation, then the decided call's result."""
        assert self.resume is not None and self.tools is not None, "a turn pauses only over a tool call"
        paused, question = self.resume
        messages += paused.messages
        self.result.attempts, self.result.context_iterations = paused.attempts, paused.context_iterations
        self.tools.calls = list(paused.calls)
        name, arguments = str(paused.call["name"]), dict(paused.call["args"])
        outcome = self.tools.decided(name, arguments, paused.said, question)
        text = self.tools.message(name, outcome)
        messages.append(ToolMessage(text, tool_call_id=paused.call["id"], status="success" if outcome.ok else "error")
                        if paused.call.get("id") else HumanMessage(text))

    def _ask(self, messages: list[BaseMessage], tools: list[dict], metadata: dict) -> ModelReply:
        """One model call through the gate; its usage is counted even when its answer is not."""
        gate, reservation = self.gate, None
        if gate is not None:
            prompt_chars = (sum(len(m.text) for m in messages) + len(_step_tools_json(self.step, self.prompt.offered))
                            + (len(json.dumps(self.tools.definitions())) if self.tools else 0))
            reservation = gate.admit(Usage(input_tokens=estimate_tokens(prompt_chars),
                                           output_tokens=self.settings.max_tokens, calls=1), self._model_name)
        try:
            reply = self._call(messages, tools, metadata)
        except BaseException:
            if gate is not None and reservation is not None:
                gate.settle(reservation, Usage())
            raise
        if gate is not None and reservation is not None:
            gate.settle(reservation, reply.usage)
        self.result.usage = self.result.usage + reply.usage
        self.result.calls.append(reply.usage)
        return reply

    @functools.cached_property
    def _model_name(self) -> str:
        """The model's name, looked up once a turn (the lookup walks pydantic's attribute access)."""
        return model_name(self.model)

    def _call(self, messages: list[BaseMessage], tools: list[dict], metadata: dict) -> ModelReply:
        """``call_model`` in the settings' output mode; once a provider says the model cannot
        take tools, again at once in json mode (not a rejected answer: the model never saw it)."""
        def ask() -> ModelReply:
            return call_model(self.model, messages, tools, metadata=metadata, retry=self.settings.retry,
                              on_retry=self.on_retry, limiter=self.limiter, output=self.settings.output)

        try:
            return ask()
        except ModelError as error:
            if self.settings.output == OUTPUT_JSON or self.on_tools_refused is None or not refuses_tools(error):
                raise
            self.settings = self.on_tools_refused(error)
        return ask()

    @staticmethod
    def _reject(messages: list[BaseMessage], reply: ModelReply, problems: list[AnswerProblem], result: TurnResult) -> None:
        """Every problem back to the model: as the result of each tool call it made (each call
        must be answered), or as a user message when it made none."""
        result.problems = problems
        feedback = AnswerRejected(problems).feedback()
        calls = reply.history.tool_calls
        if not calls:
            messages.append(HumanMessage(feedback))
        for call in calls:
            messages.append(ToolMessage(feedback, tool_call_id=call["id"], status="error"))


def _result_message(reply: ModelReply, call: dict, text: str, *, ok: bool = True) -> BaseMessage:
    """What answers a served request or a tool's call: the result of its tool call, or (an
    answer read from text, with no tool call to match) a user message."""
    if reply.history.tool_calls:
        return ToolMessage(text, tool_call_id=call["id"], status="success" if ok else "error")
    return HumanMessage(text)


def _one_call(reply: ModelReply, models: Mapping[str, type[BaseModel]],
              outside: frozenset[str] = frozenset()) -> tuple[dict | None, list[AnswerProblem]]:
    """The reply's one usable tool call (an envelope of the step, or one of the ``outside``
    tools offered) and no problem, or no call and why the reply is not an answer."""
    allowed = ", ".join([*models, *sorted(outside)])
    if reply.stop_reason == "max_tokens":
        return None, [AnswerProblem("", "your answer was cut off at the output limit (max_tokens); "
                                        "give a shorter answer: fewer items, shorter texts")]
    if reply.problem:  # an answer read from text (json output) that holds none
        return None, [AnswerProblem("", reply.problem)]
    if reply.invalid_tool_calls:
        bad = reply.invalid_tool_calls[0]
        return None, [AnswerProblem("", f"the arguments of your {bad['name'] or 'tool'} call are not valid JSON "
                                        f"({bad['error'] or 'unreadable'}); call the tool again with a JSON object")]
    if not reply.tool_calls:
        return None, [AnswerProblem("", f"answer by calling exactly one of the tools you were given ({allowed}); "
                                        "plain text is not an answer")]
    if len(reply.tool_calls) > 1:
        names = ", ".join(call["name"] for call in reply.tool_calls)
        return None, [AnswerProblem("", f"call exactly one tool per answer; you called {len(reply.tool_calls)} "
                                        f"({names})")]
    call = reply.tool_calls[0]
    if call["name"] not in models and call["name"] not in outside:
        return None, [AnswerProblem("", f"tool {call['name']!r} is not allowed in this step; use one of {allowed}")]
    if not isinstance(call["args"], dict):
        return None, [AnswerProblem("", f"the arguments of {call['name']} must be a JSON object, "
                                        f"got {type(call['args']).__name__}")]
    return call, []
