"""A model of the Messages API's prompt cache: what one request reads, writes and pays in full.

The fake server (``fake_anthropic.py``) runs every well-formed request through a
``PromptCache`` so the ``usage`` it returns carries ``input_tokens``,
``cache_read_input_tokens`` and ``cache_creation_input_tokens`` the way the real API would
report them for the same sequence of requests.

Rules implemented, from Anthropic's "Prompt caching" guide
(https://platform.claude.com/docs/en/build-with-claude/prompt-caching, read through the
project's search tool; the same page as docs.claude.com/en/docs/build-with-claude/prompt-caching):

1. The cache covers whole prefixes, in the order ``tools`` -> ``system`` -> ``messages``, up
   to and including a block that carries ``cache_control`` (a *breakpoint*).
2. ``cache_control`` may sit on a tool definition, a system text block or a message content
   block. A top-level ``cache_control`` ("automatic caching") puts a breakpoint on the last
   block of the request; it counts like one.
3. At most 4 breakpoints per request; more is a 400 ``invalid_request_error``.
4. A prefix shorter than the model's minimum cacheable length is not cached, without an
   error (``MINIMUM_CACHEABLE_TOKENS``): 1024 tokens for Sonnet and Opus 4 / 4.1, 2048 for
   Haiku 3 / 3.5 and Opus 4.7, 4096 for Opus 4.5 / 4.6 and Haiku 4.5. The guide's table has
   changed between model generations; the server takes an override.
5. A read: at each breakpoint the API checks whether the prefix up to it was cached by an
   earlier request, and, failing that, the prefixes ending at earlier block boundaries, up
   to ``LOOKBACK_BLOCKS`` (20) blocks before the breakpoint. The longest prefix found is
   read (``cache_read_input_tokens``). Entries are only ever *written* at breakpoints; the
   lookback only finds entries that an earlier request wrote at its own breakpoints.
6. A write: the prefix at every breakpoint past what was read is written; the tokens between
   the read point and the last written breakpoint are ``cache_creation_input_tokens``.
   Everything after that is plain ``input_tokens``. So
   ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens`` is the whole
   prompt.
7. Lifetime: 5 minutes (``"ttl": "5m"``, the default) or 1 hour (``"1h"``), refreshed at no
   cost each time the entry is read. A breakpoint with a longer TTL may not come after one
   with a shorter TTL (400).
8. Changing ``tool_choice`` (or the ``thinking`` settings) keeps tools and system cached but
   invalidates the message blocks. Each model has its own cache.

Approximations (deterministic, so tests can state exact numbers):

- A request is cut into *parts*: each tool definition, each system block, each message
  content block (a string system prompt or message content is one text block). A part's
  tokens are ``ceil(len(canonical JSON) / 4)`` where the canonical JSON has sorted keys, no
  spaces, non-ASCII kept, and no ``cache_control`` key; a message block is counted as
  ``{"role": ..., "content": block}``. ``part_tokens`` computes it.
- A prefix is identified by a hash of the model and its parts' canonical JSON, so
  ``cache_control`` itself never changes what a prefix is.
- No organisation or workspace isolation: one server is one cache.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

LOOKBACK_BLOCKS = 20
MAX_BREAKPOINTS = 4
CHARS_PER_TOKEN = 4
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}

# First matching fragment of the model name wins; the last entry is the default.
MINIMUM_CACHEABLE_TOKENS: tuple[tuple[str, int], ...] = (
    ("opus-4-5", 4096),
    ("opus-4-6", 4096),
    ("haiku-4-5", 4096),
    ("opus-4-7", 2048),
    ("haiku", 2048),
    ("", 1024),
)


class CacheRuleError(ValueError):
    """A request the API would refuse with 400 invalid_request_error."""


def minimum_cacheable_tokens(model: str) -> int:
    for fragment, minimum in MINIMUM_CACHEABLE_TOKENS:
        if fragment in model:
            return minimum
    return 1024


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def part_tokens(part: Mapping[str, Any]) -> int:
    """Tokens of one part (see the module docstring): characters / 4, rounded up."""
    return math.ceil(len(canonical_json(part)) / CHARS_PER_TOKEN)


@dataclass(frozen=True)
class Part:
    """One block of the prompt, as the cache sees it."""

    section: str  # tools, system, messages
    value: dict[str, Any]  # without cache_control
    tokens: int
    ttl: str | None  # the breakpoint's TTL when the block carries cache_control


@dataclass(frozen=True)
class CacheUsage:
    """How one request's prompt was paid for."""

    input_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens

    @property
    def read_share(self) -> float:
        """The share of the prompt read from cache (0.0 for an empty prompt)."""
        total = self.prompt_tokens
        return self.cache_read_input_tokens / total if total else 0.0

    def as_usage(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
        }


def request_parts(body: Mapping[str, Any]) -> list[Part]:
    """The request's parts in prefix order, with their breakpoints. Raises ``CacheRuleError``."""
    parts: list[Part] = []
    for tool in body.get("tools") or []:
        if isinstance(tool, Mapping):
            parts.append(_part("tools", tool))
    system = body.get("system")
    for block in ([{"type": "text", "text": system}] if isinstance(system, str) else system or []):
        if isinstance(block, Mapping):
            parts.append(_part("system", block))
    for message in body.get("messages") or []:
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        for block in blocks:
            if isinstance(block, Mapping):
                parts.append(_part("messages", block, role=str(message.get("role"))))
    automatic = body.get("cache_control")
    if isinstance(automatic, Mapping) and parts and parts[-1].ttl is None:
        last = parts[-1]
        parts[-1] = Part(last.section, last.value, last.tokens, _ttl(automatic))
    breakpoints = [p.ttl for p in parts if p.ttl is not None]
    if len(breakpoints) > MAX_BREAKPOINTS:
        raise CacheRuleError(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(breakpoints)}."
        )
    for earlier, later in itertools.pairwise(breakpoints):
        if TTL_SECONDS[later] > TTL_SECONDS[earlier]:
            raise CacheRuleError(
                f"a ttl='{later}' cache_control block must not come after a ttl='{earlier}' cache_control block"
            )
    return parts


def _part(section: str, block: Mapping[str, Any], role: str | None = None) -> Part:
    value = {k: v for k, v in block.items() if k != "cache_control"}
    counted = {"role": role, "content": value} if section == "messages" else value
    control = block.get("cache_control")
    ttl = _ttl(control) if isinstance(control, Mapping) else None
    return Part(section, counted, part_tokens(counted), ttl)


def _ttl(control: Mapping[str, Any]) -> str:
    if control.get("type") != "ephemeral":
        raise CacheRuleError(f"cache_control.type: Input should be 'ephemeral', got {control.get('type')!r}")
    ttl = control.get("ttl", "5m")
    if ttl not in TTL_SECONDS:
        raise CacheRuleError(f"cache_control.ttl: Input should be '5m' or '1h', got {ttl!r}")
    return str(ttl)


class PromptCache:
    """Cache entries by prefix, with expiry on an injectable clock. Thread-safe."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        minimum_tokens: int | Callable[[str], int] | None = None,
    ) -> None:
        self._clock = clock
        self._minimum = minimum_tokens
        self._entries: dict[str, float] = {}  # prefix key -> expiry time
        self._lock = threading.Lock()

    def minimum_for(self, model: str) -> int:
        if self._minimum is None:
            return minimum_cacheable_tokens(model)
        return self._minimum(model) if callable(self._minimum) else int(self._minimum)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    @property
    def entries(self) -> int:
        """Live entries (expired ones included until the next request sweeps them)."""
        with self._lock:
            return len(self._entries)

    def account(self, body: Mapping[str, Any]) -> CacheUsage:
        """Read and write the cache for one request; its usage. Raises ``CacheRuleError``."""
        parts = request_parts(body)
        keys = _prefix_keys(str(body.get("model", "")), parts, _message_settings(body))
        cumulative = list(_running_sum(p.tokens for p in parts))
        total = cumulative[-1] if cumulative else 0
        breakpoints = [i for i, p in enumerate(parts) if p.ttl is not None]
        minimum = self.minimum_for(str(body.get("model", "")))
        now = self._clock()
        with self._lock:
            self._entries = {k: expiry for k, expiry in self._entries.items() if expiry > now}
            read_end = -1  # index of the last part read from cache
            for breakpoint in breakpoints:
                for index in range(breakpoint, max(breakpoint - LOOKBACK_BLOCKS, 0) - 1, -1):
                    if keys[index] in self._entries:
                        read_end = max(read_end, index)
                        break
            if read_end >= 0:
                # A read refreshes the entry it found, for the TTL of the breakpoint that found it.
                self._entries[keys[read_end]] = now + self._ttl_covering(parts, breakpoints, read_end)
            write_end = read_end
            for breakpoint in breakpoints:
                if breakpoint > read_end and cumulative[breakpoint] >= minimum:
                    self._entries[keys[breakpoint]] = now + TTL_SECONDS[parts[breakpoint].ttl or "5m"]
                    write_end = max(write_end, breakpoint)
        read = cumulative[read_end] if read_end >= 0 else 0
        written = (cumulative[write_end] if write_end >= 0 else 0) - read
        return CacheUsage(input_tokens=total - read - written, cache_read_input_tokens=read,
                          cache_creation_input_tokens=written)

    @staticmethod
    def _ttl_covering(parts: list[Part], breakpoints: list[int], index: int) -> float:
        covering = next(b for b in breakpoints if b >= index)
        return TTL_SECONDS[parts[covering].ttl or "5m"]


def _message_settings(body: Mapping[str, Any]) -> str:
    """What, besides the blocks, makes message prefixes differ (rule 8)."""
    return canonical_json({"tool_choice": body.get("tool_choice"), "thinking": body.get("thinking")})


def _prefix_keys(model: str, parts: list[Part], message_settings: str) -> list[str]:
    digest = hashlib.sha256(canonical_json({"model": model}).encode())
    keys = []
    settings_folded = False
    for part in parts:
        if part.section == "messages" and not settings_folded:
            digest.update(message_settings.encode())
            settings_folded = True
        digest.update(canonical_json([part.section, part.value]).encode())
        digest.update(b"\x00")
        keys.append(digest.copy().hexdigest())
    return keys


def _running_sum(values: Any) -> Any:
    total = 0
    for value in values:
        total += value
        yield total
