"""One question to a model outside the round engine, answered through one tool, within a bound.

The round engine's turns have their own loop (``rounds/turn.py``). The calls around it (a
baseline's one call, a judge's verdicts) share this smaller one: offer the answer tool (and any
side tools, each call of which is answered with what ``side`` returns, at most ``max_side_calls``
in all), read the answer with ``read``, and send every problem back, at most ``max_answers``
answers in all. Every call goes through ``call_model``: recorded, priced and retried like the
team's. A model that never answers validly yields no value and its last problems.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

from cabal.errors import AnswerProblem, AnswerRejected
from cabal.llm.call import ModelReply, call_model
from cabal.llm.usage import Usage

T = TypeVar("T")
Reader = Callable[[dict[str, Any]], tuple[T | None, list[AnswerProblem]]]


@dataclass(frozen=True)
class Answered(Generic[T]):
    """What one bounded question got: the value read (None when no answer was valid, with the
    last answer's ``problems``), every call's usage, and the side calls made (name, args, result)."""

    value: T | None
    usage: Usage
    problems: tuple[AnswerProblem, ...] = ()
    side_calls: tuple[tuple[str, dict[str, Any], str], ...] = field(default=())
    rejected: int = 0  # answers sent back with their problems


def ask_until_valid(model: Any, messages: Sequence[BaseMessage], answer_tool: Mapping[str, Any], read: Reader[T], *,
                    metadata: Mapping[str, Any], max_answers: int, side_tools: Sequence[Mapping[str, Any]] = (),
                    side: Callable[[str, dict[str, Any]], str] | None = None, max_side_calls: int = 0,
                    on_reply: Callable[[ModelReply], None] | None = None) -> Answered[T]:
    """Ask until ``read`` accepts one call of ``answer_tool`` (its arguments), or ``max_answers``
    answers were refused. ``on_reply`` is told of every reply (a caller's progress)."""
    conversation = list(messages)
    name = str(answer_tool["name"])
    usage, rejected = Usage(), 0
    calls: list[tuple[str, dict[str, Any], str]] = []
    problems: list[AnswerProblem] = [AnswerProblem("", "no answer")]
    while rejected < max_answers:
        offered = [*side_tools, answer_tool] if side is not None and len(calls) < max_side_calls else [answer_tool]
        reply = call_model(model, conversation, offered, metadata=metadata)
        usage = usage + reply.usage
        if on_reply is not None:
            on_reply(reply)
        conversation.append(reply.history)
        answers = [c for c in reply.tool_calls if c["name"] == name]
        asides = [c for c in reply.tool_calls if c["name"] != name]
        if asides and not answers and side is not None and len(calls) < max_side_calls:
            for call in asides:  # each call gets its answer, the last ones past the bound a refusal
                if len(calls) < max_side_calls:
                    result = side(call["name"], dict(call["args"]))
                    calls.append((call["name"], dict(call["args"]), result))
                else:
                    result = f"not called: at most {max_side_calls} tool calls; answer with {name} now"
                conversation.append(ToolMessage(result, tool_call_id=call["id"]))
            continue
        if len(answers) == 1 and not asides and not reply.problem:
            value, problems = read(dict(answers[0]["args"]))
            if not problems:
                return Answered(value, usage, (), tuple(calls), rejected)
        else:
            problems = [AnswerProblem("", reply.problem or f"answer with exactly one call of the {name} tool, "
                                                             "and no other call beside it")]
        rejected += 1
        feedback = AnswerRejected(problems).feedback()
        conversation += ([ToolMessage(feedback, tool_call_id=c["id"], status="error")
                          for c in reply.history.tool_calls] or [HumanMessage(feedback)])
    return Answered(None, usage, tuple(problems), tuple(calls), rejected)
