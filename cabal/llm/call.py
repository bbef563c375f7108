"""The one way the engine calls a model: tools offered, prefix cached, errors made plain."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anthropic
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, convert_to_messages

from cabal.errors import ModelError
from cabal.llm.models import model_name, redact_secrets
from cabal.llm.observe import call_returned
from cabal.llm.usage import Usage

CACHE_CONTROL = {"type": "ephemeral"}


@dataclass(frozen=True)
class ModelReply:
    """What a model answered: its tool calls (``{name, args, id}``), any text, the usage."""

    tool_calls: list[dict[str, Any]]
    text: str
    usage: Usage
    raw: AIMessage


def call_model(
    model: Any,
    messages: Sequence[BaseMessage],
    tools: Sequence[Mapping[str, Any]],
    *,
    metadata: Mapping[str, Any],
    tool_choice: str | dict[str, Any] | None = "any",
) -> ModelReply:
    """Offer ``tools`` (Anthropic format: name, description, input_schema) and ask once.

    ``metadata`` travels in the run config (fake models read ``cabal_round``,
    ``cabal_step`` and ``cabal_agent`` from it). The leading system prompt is marked for
    prompt caching. Provider failures raise ``ModelError``; the client has already retried
    the retryable ones (overload, rate limit, 5xx) by then.
    """
    prepared = with_cached_system_prompt(convert_to_messages(messages))
    runnable = model
    if tools:
        try:
            runnable = model.bind_tools(list(tools), tool_choice=tool_choice)
        except ValueError as error:
            raise ModelError(f"cannot offer tools to {model_name(model)}: {error}") from error
    started = time.time()
    try:
        raw = runnable.invoke(prepared, config={"metadata": dict(metadata)})
    except anthropic.APIStatusError as error:
        raise ModelError(_status_message(error), status=error.status_code, provider="anthropic") from error
    except anthropic.APIConnectionError as error:
        message = redact_secrets(f"cannot reach anthropic at {error.request.url}: {error.message}")
        raise ModelError(message, provider="anthropic") from error
    except anthropic.AnthropicError as error:
        raise ModelError(redact_secrets(f"anthropic client failed: {error}"), provider="anthropic") from error
    if not isinstance(raw, AIMessage):
        raise ModelError(f"{model_name(model)} returned {type(raw).__name__}, not an AIMessage")
    reply = ModelReply(
        tool_calls=[{"name": c["name"], "args": c["args"], "id": c["id"]} for c in raw.tool_calls],
        text=str(raw.text),
        usage=Usage.from_message(raw),
        raw=raw,
    )
    call_returned(model_name(model), reply.usage, started)  # to the run's events and traces
    return reply


def with_cached_system_prompt(messages: list[BaseMessage]) -> list[BaseMessage]:
    """``messages`` with a cache breakpoint on the last block of the leading system prompt.

    Anthropic caches the request prefix up to the breakpoint (tools, then system), so every
    call that shares a step's tools and system prompt reads it from cache.
    """
    last_system = -1
    for index, message in enumerate(messages):
        if not isinstance(message, SystemMessage):
            break
        last_system = index
    if last_system < 0:
        return list(messages)
    system = messages[last_system]
    blocks = _with_breakpoint(system.content)
    if blocks is None:
        return list(messages)
    marked = system.model_copy(update={"content": blocks})
    return [*messages[:last_system], marked, *messages[last_system + 1 :]]


def _with_breakpoint(content: str | list[Any]) -> list[Any] | None:
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
