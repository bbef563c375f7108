"""Claude through ``langchain-anthropic``: the client, its errors, and its prompt-cache breakpoints.

The one provider that is told where to cache: Anthropic caches a request's prefix up to an
explicit ``cache_control`` breakpoint, and only when asked. Every other provider caches a
repeated prefix by itself (or not at all) and must not receive the markup.
"""

from __future__ import annotations

import difflib
import os
import re
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from cabal.errors import ModelError, UnknownModel
from cabal.llm.providers import Provider
from cabal.llm.providers.failures import TRANSIENT_STATUSES, loaded, redact, retry_after_s

if TYPE_CHECKING:
    from langchain_core.language_models.chat_models import BaseChatModel

    from cabal.llm.settings import ModelSettings

ANTHROPIC_DEFAULT_BASE_URL = "https://api.anthropic.com"
CACHE_CONTROL = {"type": "ephemeral"}
MAX_BREAKPOINTS = 4  # the API refuses a request with more blocks marked
# Names of the three model families, with or without a version between (claude-3-5-haiku-...).
_CLAUDE_NAME = re.compile(r"claude-(?:[0-9][0-9.-]*-)?(?:opus|sonnet|haiku)(?:-[a-z0-9.@-]+)?")


def check_name(name: str) -> None:
    """Refuse a Claude name that is no model's (a typo: ``claude-sonet-4``), naming the closest."""
    if _CLAUDE_NAME.fullmatch(name):
        return
    from cabal.llm.prices import known_models

    known = known_models("anthropic")
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    if name in known:
        return
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise UnknownModel(f"unknown Claude model {name!r}{hint}", provider="anthropic")


def build(provider: Provider, name: str, settings: ModelSettings, options: dict[str, Any]) -> BaseChatModel:
    from langchain_anthropic import ChatAnthropic

    client: dict[str, Any] = {
        "max_tokens": settings.max_tokens,
        "timeout": settings.timeout_s,
        **({"temperature": settings.temperature} if settings.temperature is not None else {}),
        **options,
        "max_retries": 0,  # call_model retries, so that every wait is seen and reported
        "model": name,
        # Passed explicitly so ANTHROPIC_BASE_URL alone decides the endpoint: left unset,
        # ChatAnthropic would prefer ANTHROPIC_API_URL and may route to a LangSmith gateway.
        "base_url": settings.base_url or os.environ.get("ANTHROPIC_BASE_URL", "").strip() or ANTHROPIC_DEFAULT_BASE_URL,
        "api_key": provider.key(),
    }
    return ChatAnthropic(**client)


def classify(provider: Provider, error: BaseException) -> ModelError | None:
    anthropic = loaded("anthropic")
    if anthropic is None:
        return None
    if isinstance(error, anthropic.APIStatusError):
        should = (error.response.headers.get("x-should-retry") or "").lower()
        transient = should == "true" or (should != "false" and error.status_code in TRANSIENT_STATUSES)
        return ModelError(_status_message(error), status=error.status_code, provider="anthropic", transient=transient,
                          retry_after_s=retry_after_s(error.response.headers))
    if isinstance(error, anthropic.APITimeoutError):
        return ModelError(redact(f"anthropic did not answer in time ({error.request.url})"),
                          provider="anthropic", transient=True)
    if isinstance(error, anthropic.APIConnectionError):
        return ModelError(redact(f"cannot reach anthropic at {error.request.url}: {error.message}"),
                          provider="anthropic", transient=True)
    if isinstance(error, anthropic.AnthropicError):
        return ModelError(redact(f"anthropic client failed: {error}"), provider="anthropic")
    return None


def _status_message(error: Any) -> str:
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
    return redact(" ".join(message.split()))


def prepare(messages: list[BaseMessage]) -> list[BaseMessage]:
    return with_cache_breakpoints(messages)


def with_cache_breakpoints(messages: list[BaseMessage]) -> list[BaseMessage]:
    """``messages`` with cache breakpoints at the end of the leading system prompt and after
    every block of the first user message but its last: at most ``MAX_BREAKPOINTS``, the first ones.

    Anthropic caches the request prefix up to a breakpoint (tools, then system, then messages).
    The round engine's system prompt is the house block, the same in every call; its first user
    message is the mission, the role and step, the agent, then this call's own part
    (``rounds/context.py``, ``PROMPT_BLOCKS``): so every call with the same tools reads the
    tools and the house block from cache, every call of the step the mission, every agent of
    the role the role's block, and an agent's later calls of its turn its own block too.
    """
    marked = list(messages)
    budget = MAX_BREAKPOINTS
    last_system = -1
    for index, message in enumerate(marked):
        if not isinstance(message, SystemMessage):
            break
        last_system = index
    if last_system >= 0:
        blocks = _with_breakpoint(marked[last_system].content)
        if blocks is not None:
            marked[last_system] = marked[last_system].model_copy(update={"content": blocks})
            budget -= 1
    first_user = last_system + 1
    if first_user < len(marked) and isinstance(marked[first_user], HumanMessage):
        content = marked[first_user].content
        if isinstance(content, list) and len(content) > 1:
            blocks = [{"type": "text", "text": b} if isinstance(b, str) else dict(b) for b in content]
            for block in blocks[:-1][:budget]:
                block["cache_control"] = dict(CACHE_CONTROL)
            marked[first_user] = marked[first_user].model_copy(update={"content": blocks})
    return marked


def _with_breakpoint(content: str | list[Any]) -> list[Any] | None:
    """``content`` as blocks with a breakpoint on its last non-empty text block (None if it has none)."""
    if isinstance(content, str):
        # The API rejects empty text blocks; an empty prompt has nothing to cache anyway.
        return [{"type": "text", "text": content, "cache_control": dict(CACHE_CONTROL)}] if content else None
    blocks: list[dict[str, Any]] = [{"type": "text", "text": b} if isinstance(b, str) else dict(b) for b in content]
    for block in reversed(blocks):
        if block.get("type") == "text" and block.get("text"):
            block["cache_control"] = dict(CACHE_CONTROL)
            return blocks
    return None
