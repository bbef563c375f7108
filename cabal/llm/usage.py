"""Token usage, its price, and budgets over it: plain values with pure checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.messages import AIMessage

# USD per million tokens (input, output), first matching fragment of the model name wins.
# Older models that kept their launch price are listed before the family defaults.
_PRICES_PER_MTOK: tuple[tuple[str, float, float], ...] = (
    ("claude-opus-4-1", 15.0, 75.0),
    ("claude-opus-4-0", 15.0, 75.0),
    ("claude-opus-4-2025", 15.0, 75.0),
    ("claude-3-opus", 15.0, 75.0),
    ("claude-3-5-haiku", 0.80, 4.0),
    ("claude-3-haiku", 0.25, 1.25),
    ("opus", 5.0, 25.0),
    ("sonnet", 3.0, 15.0),
    ("haiku", 1.0, 5.0),
    ("cabal-", 0.0, 0.0),  # Cabal's own scripted and function models: known to cost nothing
)
CHARS_PER_TOKEN = 4  # Claude's tokenizer averages about 4 characters of English per token


def estimate_tokens(text_chars: int) -> int:
    """Tokens of a text of ``text_chars`` characters, where no provider counted them."""
    return max(1, text_chars // CHARS_PER_TOKEN)


_CACHE_READ_FACTOR = 0.1
_CACHE_WRITE_FACTOR = 1.25  # the 5-minute ephemeral cache, the only kind Cabal asks for


def price_per_mtok(model_name: str) -> tuple[float, float] | None:
    """(input, output) USD per million tokens for a Claude model, or None when unpriced."""
    name = model_name.lower()
    for fragment, input_price, output_price in _PRICES_PER_MTOK:
        if fragment in name:
            return input_price, output_price
    return None


@dataclass(frozen=True)
class Usage:
    """Tokens spent by one or more model calls.

    ``input_tokens`` counts every prompt token, cached or not (LangChain's convention);
    ``cache_read_tokens`` and ``cache_write_tokens`` say how many of them hit or filled the
    prompt cache.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    calls: int = 0

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            calls=self.calls + other.calls,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @classmethod
    def from_message(cls, message: AIMessage) -> Usage:
        """The usage one model reply reports (zero tokens when it reports none)."""
        metadata: dict[str, Any] = dict(message.usage_metadata or {})
        details: dict[str, Any] = dict(metadata.get("input_token_details") or {})
        # langchain-anthropic moves cache writes to per-TTL keys when the API itemises them.
        cache_write = sum(
            int(details.get(key) or 0)
            for key in ("cache_creation", "ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")
        )
        return cls(
            input_tokens=int(metadata.get("input_tokens") or 0),
            output_tokens=int(metadata.get("output_tokens") or 0),
            cache_read_tokens=int(details.get("cache_read") or 0),
            cache_write_tokens=cache_write,
            calls=1,
        )

    def cost_usd(self, model_name: str) -> float:
        """What these tokens cost on ``model_name``; 0.0 for models without a price."""
        prices = price_per_mtok(model_name)
        if prices is None:
            return 0.0
        input_price, output_price = prices
        uncached = max(self.input_tokens - self.cache_read_tokens - self.cache_write_tokens, 0)
        dollars_times_million = (
            uncached * input_price
            + self.cache_read_tokens * input_price * _CACHE_READ_FACTOR
            + self.cache_write_tokens * input_price * _CACHE_WRITE_FACTOR
            + self.output_tokens * output_price
        )
        return dollars_times_million / 1_000_000


@dataclass(frozen=True)
class Budget:
    """Limits on a mission's spending. ``None`` means unlimited."""

    max_tokens: int | None = None
    max_cost_usd: float | None = None

    def exceeded(self, usage: Usage, model_name: str) -> str | None:
        """Why ``usage`` on ``model_name`` has spent this budget, or None while some of it is left."""
        return self.exceeded_by(usage, usage.cost_usd(model_name), model_name)

    def exceeded_by(self, usage: Usage, cost_usd: float, models: str) -> str | None:
        """Why ``usage``, which cost ``cost_usd`` on ``models`` (one name, or several: a model
        per role), has spent this budget, or None while some of it is left.

        A budget is spent once usage reaches the limit: no further call should start.
        """
        if self.max_tokens is not None and usage.total_tokens >= self.max_tokens:
            return f"token budget {self.max_tokens} spent: {usage.total_tokens} tokens"
        if self.max_cost_usd is not None and cost_usd >= self.max_cost_usd:
            return f"cost budget ${self.max_cost_usd:.2f} spent: ${cost_usd:.4f} on {models}"
        return None
