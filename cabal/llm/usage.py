"""Token usage, its price, and budgets over it: plain values with pure checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.messages import AIMessage

    from cabal.llm.settings import ModelPrice

CHARS_PER_TOKEN = 4  # Claude's tokenizer averages about 4 characters of English per token


def estimate_tokens(text_chars: int) -> int:
    """Tokens of a text of ``text_chars`` characters, where no provider counted them."""
    return max(1, text_chars // CHARS_PER_TOKEN)


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
        from cabal.llm.prices import price_of

        price = price_of(model_name)
        return 0.0 if price is None else self.cost_usd_at(price)

    def cost_usd_at(self, price: ModelPrice) -> float:
        """What these tokens cost at ``price``."""
        cached = price.input_per_mtok if price.cached_input_per_mtok is None else price.cached_input_per_mtok
        written = price.input_per_mtok if price.cache_write_per_mtok is None else price.cache_write_per_mtok
        uncached = max(self.input_tokens - self.cache_read_tokens - self.cache_write_tokens, 0)
        dollars_times_million = (
            uncached * price.input_per_mtok
            + self.cache_read_tokens * cached
            + self.cache_write_tokens * written
            + self.output_tokens * price.output_per_mtok
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
            return f"token budget of {self.max_tokens:,} tokens is spent: {usage.total_tokens:,} used"
        if self.max_cost_usd is not None and cost_usd >= self.max_cost_usd:
            return f"cost budget of ${self.max_cost_usd:.2f} is spent: ${cost_usd:.4f} on {models}"
        return None

    def passed_by_prompt(self, usage: Usage, cost_usd: float, prompt: Usage, prompt_cost_usd: float,
                         models: str) -> str | None:
        """Why a call whose prompt is ``prompt`` (``prompt_cost_usd`` on its model) would take
        ``usage``, which cost ``cost_usd``, past this budget before its answer's first token, or
        None when the prompt fits. Such a call asks first: a budget is then passed by at most
        one answer (its ``max_tokens``), never by a prompt."""
        if self.max_tokens is not None and usage.total_tokens + prompt.input_tokens > self.max_tokens:
            return (f"token budget of {self.max_tokens:,} tokens would be passed by the next call: "
                    f"{usage.total_tokens:,} used, and its prompt is about {prompt.input_tokens:,} tokens")
        if self.max_cost_usd is not None and cost_usd + prompt_cost_usd > self.max_cost_usd:
            return (f"cost budget of ${self.max_cost_usd:.2f} would be passed by the next call: ${cost_usd:.4f} "
                    f"spent on {models}, and its prompt costs about ${prompt_cost_usd:.4f}")
        return None
