"""What a model's tokens cost: the mission file's ``price:``, else the genai-prices database
(input, output, cache read and cache write prices for OpenAI, Anthropic, Google, Mistral,
Groq, Bedrock, ...), else nothing known (the model reports $0 and a cost budget cannot be
enforced on it).

Usage and budgets know a model only by the name its provider reports (``gpt-4o``,
``qwen3:8b``); ``make_model`` tells this module which provider each name came from and any
price the mission file set for it, so that a local ``ollama:llama3.1`` is not priced as some
cloud's model of the same name. genai-prices is imported at the first price asked for (about
0.3 s), never by the commands that only read a mission: their costs are stored.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import TYPE_CHECKING

from cabal.llm.settings import ModelPrice

if TYPE_CHECKING:
    from genai_prices.types import PriceCalculation

    from cabal.llm.providers import Provider

FREE = ModelPrice(input_per_mtok=0.0, output_per_mtok=0.0)
_OWN_MODELS = "cabal-"  # Cabal's scripted and function models: known to cost nothing
_SAMPLE = 1000  # tokens priced at a time: far below any tier that starts at a long prompt
_own_prices: dict[str, ModelPrice] = {}  # a model's name -> the price its mission file set
_lock = threading.Lock()


def remember(model_name: str, provider: Provider, price: ModelPrice | None) -> None:
    """``model_name`` was built for ``provider``, with the mission file's ``price`` if it set one."""
    from cabal.llm.providers import record_built

    record_built(model_name, provider)
    if price is not None:
        with _lock:
            _own_prices[model_name] = price


def price_of(model_name: str) -> ModelPrice | None:
    """The price of ``model_name``'s tokens, or None when nothing says."""
    if model_name.startswith(_OWN_MODELS) or model_name == "simulated":  # providers.SIMULATED, imported lazily
        return FREE
    with _lock:
        own = _own_prices.get(model_name)
    if own is not None:
        return own
    from cabal.llm.providers import provider_named

    provider = provider_named(model_name)
    if provider is not None and provider.prices_id is None:
        return None  # a provider the database does not price (a local server)
    return database_price(model_name, provider.prices_id if provider is not None else None)


@lru_cache(maxsize=256)
def database_price(model_name: str, prices_id: str | None = None) -> ModelPrice | None:
    """genai-prices' figures for ``model_name`` (at ``prices_id`` when known), or None."""
    found = _calculation(model_name, prices_id, input_tokens=_SAMPLE)
    if found is None:
        return None

    def per_mtok(**usage: int) -> float:
        calculation = _calculation(model_name, prices_id, **usage)
        return float(calculation.total_price) * 1_000_000 / _SAMPLE if calculation is not None else 0.0

    return ModelPrice(input_per_mtok=float(found.total_price) * 1_000_000 / _SAMPLE,
                      output_per_mtok=per_mtok(output_tokens=_SAMPLE),
                      cached_input_per_mtok=per_mtok(input_tokens=_SAMPLE, cache_read_tokens=_SAMPLE),
                      cache_write_per_mtok=per_mtok(input_tokens=_SAMPLE, cache_write_tokens=_SAMPLE))


def context_window(model_name: str, prices_id: str | None = None) -> int | None:
    """The model's context window in tokens, when the price database says."""
    found = _calculation(model_name, prices_id, input_tokens=_SAMPLE)
    window = getattr(found.model, "context_window", None) if found is not None else None
    return int(window) if window else None


def known_models(prices_id: str) -> list[str]:
    """The names the price database knows for one provider."""
    from genai_prices import data_snapshot

    return [m.id for p in data_snapshot.get_snapshot().providers if p.id == prices_id for m in p.models]


def _calculation(model_name: str, prices_id: str | None, **usage: int) -> PriceCalculation | None:
    from genai_prices import Usage, calc_price

    try:
        return calc_price(Usage(**usage), model_name, provider_id=prices_id)
    except LookupError:
        return None
