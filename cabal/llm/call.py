"""The one way the engine calls a model: tools offered, prefix cached, transient failures retried,
errors made plain.

Retries live here, not in the provider's SDK (the client is built with ``max_retries=0``), so
one policy covers every provider, honours the server's ``retry-after``, and tells the caller
about each wait (``on_retry``): a run whose output is not a terminal still says why it waits.

Processes that share one provider account (a batch's workers) also share a ``CallLimiter``:
each call holds one of its slots while it is in flight, and a rate-limit reply makes every
worker hold off, not only the one that got it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, convert_to_messages

from cabal.errors import ModelError
from cabal.llm import json_answers
from cabal.llm.cassette import record_call
from cabal.llm.models import model_name
from cabal.llm.observe import call_returned
from cabal.llm.providers import provider_of
from cabal.llm.providers.failures import SHARED_BACKOFF_STATUSES, judged
from cabal.llm.settings import RetryPolicy
from cabal.llm.usage import Usage


class CallLimiter(Protocol):
    """Limits on model calls shared beyond one mission (the workers of a batch)."""

    def slot(self) -> AbstractContextManager[None]:
        """Held while one call is in flight: waits for a free slot and for any hold-off to
        pass; raises ``CallRefused`` when no further call may start."""
        ...

    def hold_off(self, seconds: float) -> None:
        """The provider asked to slow down: no call of any sharer starts for ``seconds``."""
        ...


@dataclass(frozen=True)
class RetryNotice:
    """A call failed in a way worth retrying; the next try starts after ``wait_s``."""

    retry: int  # 1 for the first retry
    max_retries: int
    wait_s: float
    reason: str


@dataclass(frozen=True)
class ModelReply:
    """What a model answered: its tool calls (``{name, args, id}``), any text, the usage.

    ``invalid_tool_calls`` are calls whose arguments could not be read (``{name, args, id,
    error}``); ``stop_reason`` is the provider's (``max_tokens`` means the answer was cut off).
    ``history`` is the reply as it goes back into the conversation: its text and its tool calls
    only, so a block the provider sent but would refuse to receive (a thinking or server-tool
    block) never breaks the next request. ``problem``: why a reply read as text (``output:
    json``) holds no answer.
    """

    tool_calls: list[dict[str, Any]]
    text: str
    usage: Usage
    raw: AIMessage
    invalid_tool_calls: list[dict[str, Any]]
    stop_reason: str | None
    history: AIMessage
    problem: str | None = None


def call_model(
    model: Any,
    messages: Sequence[BaseMessage],
    tools: Sequence[Mapping[str, Any]],
    *,
    metadata: Mapping[str, Any],
    tool_choice: str | dict[str, Any] | None = "any",
    retry: RetryPolicy = RetryPolicy(),
    on_retry: Callable[[RetryNotice], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    limiter: CallLimiter | None = None,
    output: str = json_answers.OUTPUT_TOOLS,
) -> ModelReply:
    """Offer ``tools`` (Anthropic format: name, description, input_schema) and ask once.

    ``metadata`` travels in the run config (fake models read ``cabal_round``, ``cabal_step``
    and ``cabal_agent`` from it). The model's provider prepares the prompt (Anthropic marks
    its stable prefix for caching; the others cache a repeated prefix by themselves) and
    judges its failures (``cabal.llm.providers``).
    Transient failures (rate limits, overload, 5xx, timeouts, dropped connections) are retried
    under ``retry``; a failure that outlasts it, or one no retry can fix (a bad request, a bad
    key, an error from inside the provider's SDK), raises ``ModelError`` (``transient`` says
    which). Any other exception is Cabal's own and goes up as it is.

    ``output="json"``: no tools are sent; they are described in the prompt and the reply's
    first JSON object is read back as the tool call (``cabal.llm.json_answers``).
    """
    provider = provider_of(model)
    offered = [str(tool["name"]) for tool in tools]
    prepared = convert_to_messages(messages)
    if output == json_answers.OUTPUT_JSON:
        prepared, tools = with_answer_instructions(prepared, tools), ()
    if provider is not None:
        prepared = provider.module().prepare(prepared)
    runnable = model
    if tools:
        try:
            runnable = model.bind_tools(list(tools), tool_choice=tool_choice)
        except ValueError as error:
            raise ModelError(f"cannot offer tools to {model_name(model)}: {error}") from error
    for attempt in range(retry.max_retries + 1):
        try:
            with limiter.slot() if limiter is not None else nullcontext():
                started = time.time()  # after any wait for a slot: the call's own duration
                raw = runnable.invoke(prepared, config={"metadata": dict(metadata)})
            break
        except ModelError:
            raise  # a fake model's own refusal, or the limiter's (CallRefused): nothing to retry
        except Exception as error:
            failure = judged(provider, error)
            if failure is None:
                raise  # not the provider's: Cabal's own bug, which fails the mission
            if not failure.transient or attempt >= retry.max_retries:
                raise failure from error
            wait = retry.wait_s(attempt + 1, failure.retry_after_s)
            if limiter is not None and failure.status in SHARED_BACKOFF_STATUSES:
                limiter.hold_off(wait)
            if on_retry is not None:
                on_retry(RetryNotice(attempt + 1, retry.max_retries, wait, str(failure)))
            sleep(wait)
    if not isinstance(raw, AIMessage):
        raise ModelError(f"{model_name(model)} returned {type(raw).__name__}, not an AIMessage")
    reply = _text_reply_of(raw, offered) if output == json_answers.OUTPUT_JSON else _reply_of(raw)
    name = model_name(model)  # once: it walks the model's attributes through pydantic's lookup
    record_call(name, prepared, tools, metadata, raw)  # kept before anyone uses it (llm/cassette.py)
    call_returned(name, reply.usage, started)  # to the run's events and traces
    return reply


_CUT_OFF = frozenset({"length", "MAX_TOKENS"})


def _reply_of(raw: AIMessage) -> ModelReply:
    calls = [{"name": c["name"], "args": c["args"], "id": c["id"]} for c in raw.tool_calls]
    invalid = [{"name": c.get("name"), "args": c.get("args"), "id": c.get("id"), "error": c.get("error")}
               for c in raw.invalid_tool_calls]
    text = str(raw.text)
    # Every call the model made, readable or not, keeps its id: each must get an answer.
    echoed = calls + [{"name": c["name"] or "unknown", "args": {}, "id": c["id"]} for c in invalid if c["id"]]
    history = AIMessage(content=text, tool_calls=[{**c, "type": "tool_call"} for c in echoed
                                                  if isinstance(c["args"], dict)])
    metadata = raw.response_metadata or {}
    stop_reason = metadata.get("stop_reason") or metadata.get("finish_reason") or metadata.get("done_reason")
    if stop_reason in _CUT_OFF:  # OpenAI's and Ollama's "length", Gemini's "MAX_TOKENS": Anthropic's name
        stop_reason = "max_tokens"
    return ModelReply(tool_calls=calls, text=text, usage=Usage.from_message(raw), raw=raw,
                      invalid_tool_calls=invalid, stop_reason=stop_reason, history=history)


def with_answer_instructions(messages: list[BaseMessage], tools: Sequence[Mapping[str, Any]]) -> list[BaseMessage]:
    """``messages`` with the tools described as plain instructions at the end of the leading
    system prompt (after its own blocks, so the cached prefix before them stays the same)."""
    instructions = {"type": "text", "text": json_answers.answer_instructions(tools)}
    marked = list(messages)
    leading = next((i for i, message in enumerate(marked) if not isinstance(message, SystemMessage)), len(marked))
    last_system = leading - 1
    if last_system < 0:
        return [SystemMessage([instructions]), *marked]
    content = marked[last_system].content
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    marked[last_system] = marked[last_system].model_copy(update={"content": [*blocks, instructions]})
    return marked


def _text_reply_of(raw: AIMessage, offered: Sequence[str]) -> ModelReply:
    """A reply to a call without tools: its first JSON object as the one tool call. The text
    goes back into the conversation as it was written (no tool call for the provider to match)."""
    text = str(raw.text)
    call, problem = json_answers.answer_of(text, offered)
    metadata = raw.response_metadata or {}
    return ModelReply(tool_calls=[call] if call else [], text=text, usage=Usage.from_message(raw), raw=raw,
                      invalid_tool_calls=[], stop_reason=metadata.get("stop_reason") or metadata.get("finish_reason"),
                      history=AIMessage(content=text), problem=problem)
