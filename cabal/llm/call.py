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

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, convert_to_messages

from cabal.errors import ModelError
from cabal.llm import json_answers
from cabal.llm.models import model_name, redact_secrets
from cabal.llm.observe import call_returned
from cabal.llm.settings import RetryPolicy
from cabal.llm.usage import Usage

if TYPE_CHECKING:
    import anthropic

CACHE_CONTROL = {"type": "ephemeral"}
# Statuses worth another try: timeout, conflict, rate limit, server errors, overload (529).
TRANSIENT_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))
# Statuses that speak for the whole account (rate limit, overload), not for one request.
SHARED_BACKOFF_STATUSES = frozenset({429, 529})


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
    and ``cabal_agent`` from it). The stable prefix is marked for prompt caching
    (``with_cache_breakpoints``).
    Transient failures (rate limits, overload, 5xx, timeouts, dropped connections) are retried
    under ``retry``; a failure that outlasts it, or one no retry can fix (a bad request, a bad
    key), raises ``ModelError`` (``transient`` says which).

    ``output="json"``: no tools are sent; they are described in the prompt and the reply's
    first JSON object is read back as the tool call (``cabal.llm.json_answers``).
    """
    offered = [str(tool["name"]) for tool in tools]
    if output == json_answers.OUTPUT_JSON:
        messages, tools = with_answer_instructions(convert_to_messages(messages), tools), ()
    prepared = with_cache_breakpoints(convert_to_messages(messages))
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
        except _failures_to_judge() as error:
            # ValueError and friends: a body the client could not read (not JSON, not a message).
            failure = _model_error(error)
            if not failure.transient or attempt >= retry.max_retries:
                raise failure from error
            wait = retry.wait_s(attempt + 1, _retry_after_s(error))
            if limiter is not None and failure.status in SHARED_BACKOFF_STATUSES:
                limiter.hold_off(wait)
            if on_retry is not None:
                on_retry(RetryNotice(attempt + 1, retry.max_retries, wait, str(failure)))
            sleep(wait)
    if not isinstance(raw, AIMessage):
        raise ModelError(f"{model_name(model)} returned {type(raw).__name__}, not an AIMessage")
    reply = _text_reply_of(raw, offered) if output == json_answers.OUTPUT_JSON else _reply_of(raw)
    call_returned(model_name(model), reply.usage, started)  # to the run's events and traces
    return reply


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
    stop_reason = metadata.get("stop_reason") or metadata.get("finish_reason")
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


# A body the client could not read (not JSON, not a message) surfaces as one of these.
_UNREADABLE_REPLY = (ValueError, KeyError, TypeError)


def _failures_to_judge() -> tuple[type[Exception], ...]:
    """What a call's failure may be: an unreadable reply, or the anthropic SDK's errors once a
    Claude model has loaded it. Importing the SDK costs ~0.8 s and ~75 MB, so a scripted or
    function model never does, and then none of its errors can occur."""
    anthropic = sys.modules.get("anthropic")
    return (anthropic.AnthropicError, *_UNREADABLE_REPLY) if anthropic is not None else _UNREADABLE_REPLY


def _model_error(error: Exception) -> ModelError:
    anthropic = sys.modules.get("anthropic")
    if anthropic is None:
        return _unreadable(error)
    if isinstance(error, anthropic.APIStatusError):
        should = (error.response.headers.get("x-should-retry") or "").lower()
        transient = should == "true" or (should != "false" and error.status_code in TRANSIENT_STATUSES)
        return ModelError(_status_message(error), status=error.status_code, provider="anthropic", transient=transient)
    if isinstance(error, anthropic.APITimeoutError):
        return ModelError(redact_secrets(f"anthropic did not answer in time ({error.request.url})"),
                          provider="anthropic", transient=True)
    if isinstance(error, anthropic.APIConnectionError):
        message = redact_secrets(f"cannot reach anthropic at {error.request.url}: {error.message}")
        return ModelError(message, provider="anthropic", transient=True)
    if isinstance(error, anthropic.AnthropicError):
        return ModelError(redact_secrets(f"anthropic client failed: {error}"), provider="anthropic")
    return _unreadable(error)


def _unreadable(error: Exception) -> ModelError:
    summary = " ".join(str(error).split())[:200]
    return ModelError(redact_secrets(f"the model's reply could not be read ({type(error).__name__}: {summary})"),
                      transient=True)


def _retry_after_s(error: Exception) -> float | None:
    """The wait the server asks for (``retry-after-ms``, else ``retry-after`` in seconds)."""
    response = getattr(error, "response", None)
    if response is None:
        return None
    for header, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = response.headers.get(header)
        if value:
            try:
                return float(value) / scale
            except ValueError:
                return None  # an HTTP date: fall back to our own backoff
    return None


def with_cache_breakpoints(messages: list[BaseMessage]) -> list[BaseMessage]:
    """``messages`` with cache breakpoints at the end of the leading system prompt, after its
    first block when it has several, and after the first block of the first user message when
    that has several.

    Anthropic caches the request prefix up to a breakpoint (tools, then system, then messages).
    The round engine's system prompt is the role's block then the agent's own, and its first
    user block is the mission's charter: so every call of a step reads the tools and the role's
    block from cache for every agent of the role, an agent's later calls of the step read its
    own block too, and every call that also shares the charter reads that. Three of the four
    breakpoints a request may carry.
    """
    marked = list(messages)
    last_system = -1
    for index, message in enumerate(marked):
        if not isinstance(message, SystemMessage):
            break
        last_system = index
    if last_system >= 0:
        blocks = _with_breakpoint(marked[last_system].content)
        if blocks is not None and len(blocks) > 1:
            blocks = (_with_breakpoint(blocks[:1]) or blocks[:1]) + blocks[1:]
        if blocks is not None:
            marked[last_system] = marked[last_system].model_copy(update={"content": blocks})
    first_user = last_system + 1
    if first_user < len(marked) and isinstance(marked[first_user], HumanMessage):
        content = marked[first_user].content
        if isinstance(content, list) and len(content) > 1:
            blocks = _with_breakpoint(content[:1])
            if blocks is not None:
                marked[first_user] = marked[first_user].model_copy(update={"content": blocks + list(content[1:])})
    return marked


def _with_breakpoint(content: str | list[Any]) -> list[Any] | None:
    """``content`` as blocks with a breakpoint on its last non-empty text block (None if it has none)."""
    if isinstance(content, str):
        # The API rejects empty text blocks; an empty prompt has nothing to cache anyway.
        return [{"type": "text", "text": content, "cache_control": dict(CACHE_CONTROL)}] if content else None
    blocks = [{"type": "text", "text": b} if isinstance(b, str) else dict(b) for b in content]
    for block in reversed(blocks):
        if block.get("type") == "text" and block.get("text"):
            block["cache_control"] = dict(CACHE_CONTROL)
            return blocks
    return None


def _status_message(error: anthropic.APIStatusError) -> str:
    detail = error.api_message
    if not detail:
        try:
            detail = error.response.text.strip()[:300]
        except Exception:  # noqa: BLE001 - a streamed or closed body: fall back below
            detail = ""
    kind = f" {error.type}" if error.type else ""
    message = f"anthropic returned {error.status_code}{kind}: {detail or 'no error message'}"
    if error.request_id:
        message += f" (request id {error.request_id})"
    return redact_secrets(" ".join(message.split()))
