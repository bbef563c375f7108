"""Who answers a protocol when the doctor runs it: a chat model, a script of answers, or any function.

An answerer is a callable ``(AnswerRequest) -> {step key: answer}``. The request carries the
form (the JSON Schema of every answer the session needs up to where the path depends on one),
the step the session waits on, the skill whose knowledge should guide the answer, and the
problems of the previous attempt, if any. The answers go to ``Membrane.submit``.

- ``ModelAnswerer``: one model call per form, the form's schema offered as the only tool,
  the skill's text as the system prompt (``cabal.llm.call_model``).
- ``ScriptedAnswers``: answers keyed by protocol name (a YAML file for ``cabal doctor
  --answers``); text in them is a template filled from the gap's context (``{target_id}``).
- any function taking an ``AnswerRequest``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage

from cabal.doctor.gaps import Gap
from cabal.errors import AnswerProblem, ConfigError, ModelError, ProtocolLoadError, ProtocolRuntimeError
from cabal.llm import call_metadata, call_model
from cabal.membrane.results import AskView, Form
from cabal.membrane.templates import Scope, interpolate
from cabal.skills import Skill
from cabal.yaml_reader import read_text_file, read_yaml

__all__ = ["AnswerRequest", "Answerer", "ModelAnswerer", "ScriptedAnswers", "answer_tool_name"]


@dataclass(frozen=True)
class AnswerRequest:
    """Everything an answerer needs for one attempt at one form."""

    gap: Gap
    skill: Skill
    protocol: str
    protocol_description: str
    session_id: str
    context: Mapping[str, Any]
    form: Form  # the JSON Schema of every answer up to where the path depends on one
    step: AskView  # the ask step the session waits on
    problems: tuple[AnswerProblem, ...] = ()  # what was wrong with the previous attempt
    attempt: int = 1
    answered: Mapping[str, Any] = field(default_factory=dict)  # step key -> answers accepted in earlier forms


Answerer = Callable[[AnswerRequest], Mapping[str, Any]]


# --------------------------------------------------------------------------------- a model

SYSTEM_PROMPT = """You fill gaps in a project's context graph by answering membrane protocols.
A protocol is a form: each property of the answer tool is one step, with its question in the
property's description. Answer every property in one call of the tool, in the exact shape its
schema asks for. Where a step records a moment, put the answer itself under "answer", what you
did or decided under "description" and why under "reasoning": that prose is what later readers
of the graph see. Use only ids that appear in the questions or the context.

Follow the skill below: its process, patterns and anti-patterns are the standard your answers
are judged by.

{skill}"""


def answer_tool_name(protocol: str) -> str:
    """The tool a model answers a protocol's form with (a name every provider accepts)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"answer_{protocol}")[:64]


class ModelAnswerer:
    """Answers each form with one model call: the form's JSON Schema is the only tool offered."""

    def __init__(self, model: Any, *, agent: str = "doctor") -> None:
        self.model = model
        self.agent = agent

    def __call__(self, request: AnswerRequest) -> Mapping[str, Any]:
        tool = {
            "name": answer_tool_name(request.protocol),
            "description": f"Answer the {request.protocol} protocol: {request.protocol_description}".strip(),
            "input_schema": dict(request.form.schema),
        }
        messages = [SystemMessage(SYSTEM_PROMPT.format(skill=request.skill.text)), HumanMessage(task_text(request))]
        reply = call_model(
            self.model,
            messages,
            [tool],
            metadata=call_metadata(round=0, step=request.protocol, agent=self.agent),
            tool_choice={"type": "tool", "name": tool["name"]},
        )
        calls = [call for call in reply.tool_calls if call["name"] == tool["name"]]
        if not calls:
            raise ModelError(f"the model did not call {tool['name']} (it said: {reply.text[:200]!r})")
        return calls[0]["args"]


def task_text(request: AnswerRequest) -> str:
    """The user turn: the gap, the protocol, the context, and what went wrong last time."""
    lines = [
        f"Gap found: {request.gap.description} (kind {request.gap.kind}).",
        f"The {request.skill.title} skill chose the protocol {request.protocol}: {request.protocol_description}",
        f"Context: {json.dumps(dict(request.context), ensure_ascii=False, sort_keys=True)}",
        f"Steps to answer now: {', '.join(request.form.steps)}.",
    ]
    if request.answered:
        lines.append(f"Answered earlier in this session: {json.dumps(dict(request.answered), ensure_ascii=False)}")
    if request.problems:
        lines.append(f"Attempt {request.attempt}: your previous answers were rejected; fix each problem:")
        lines += [f"- {p.path or '(answer)'}: {p.message}" for p in request.problems]
    return "\n".join(lines)


# ------------------------------------------------------------------------------- a script


class ScriptedAnswers:
    """Answers by protocol name: a mapping of step keys to answers, or a list used one per run.

    Text anywhere in an answer is a template filled from the request's context, so one file
    serves every gap of a kind: ``guarded_behaviors: {answer: ["{behavior_id}"], ...}``
    (write ``{{`` and ``}}`` for literal braces). A script cannot learn from rejected answers,
    so a rejection ends the run with the problems as the error.
    """

    def __init__(self, answers: Mapping[str, Any], *, source: str = "<answers>") -> None:
        self.source = source
        self._answers: dict[str, list[Mapping[str, Any]]] = {}
        self._repeat: set[str] = set()  # given as one mapping: used for every run
        self._taken: dict[str, int] = {}  # protocol -> entries handed out
        self._session_runs: dict[str, int] = {}  # session id -> its entry
        if not isinstance(answers, Mapping):
            raise ConfigError(f"{source}: answers must be a mapping of protocol name to answers")
        for protocol, value in answers.items():
            runs = value if isinstance(value, list) else [value]
            if not runs or not all(isinstance(run, Mapping) for run in runs):
                raise ConfigError(
                    f"{source}: answers for {protocol!r} must be a mapping of step key to answer, or a list of them"
                )
            if not isinstance(value, list):
                self._repeat.add(str(protocol))
            self._answers[str(protocol)] = list(runs)

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedAnswers:
        path = Path(path)
        try:
            data = read_yaml(read_text_file(path), str(path))
        except ProtocolLoadError as exc:
            raise ConfigError(f"answers file {exc}") from None
        return cls(data or {}, source=str(path))

    def __call__(self, request: AnswerRequest) -> Mapping[str, Any]:
        runs = self._answers.get(request.protocol)
        if runs is None:
            raise ProtocolRuntimeError(
                f"{self.source} has no answers for protocol {request.protocol!r} "
                f"(it has: {', '.join(sorted(self._answers)) or 'none'})",
                protocol=request.protocol,
            )
        if request.attempt > 1:  # a script cannot learn: the same answers would fail the same way
            raise ProtocolRuntimeError(
                f"scripted answers for {request.protocol!r} were rejected: "
                + "; ".join(map(str, request.problems)),
                protocol=request.protocol,
            )
        index = self._run_index(request)
        return interpolate(dict(runs[index]), Scope(dict(request.context)))

    def _run_index(self, request: AnswerRequest) -> int:
        """A session's entry: its first form takes the protocol's next entry, later forms reuse it."""
        if request.protocol in self._repeat:
            return 0
        if request.session_id not in self._session_runs:
            taken = self._taken.get(request.protocol, 0)
            if taken >= len(self._answers[request.protocol]):
                raise ProtocolRuntimeError(
                    f"{self.source}: all {taken} answer set(s) for {request.protocol!r} are used up",
                    protocol=request.protocol,
                )
            self._taken[request.protocol] = taken + 1
            self._session_runs[request.session_id] = taken
        return self._session_runs[request.session_id]
