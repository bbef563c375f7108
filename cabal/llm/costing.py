"""What a recorded run would cost at a named model's list prices, with and without prompt caching.

The calls come from a cassette (every call a mission, a baseline or a judge made, with the
texts it sent), so a run recorded on any model, a relay or a replay included, can be priced as
if another model had answered the same prompts with the same answers: ``cabal cost ID --model
SPEC``. Tokens are the ones each call reported (characters / 4 where it reported none).

Caching is estimated the way providers cache: a prompt is laid out as they read it (the tools,
then the messages in order), and the part of it that repeats the start of an earlier call's
prompt, from ``CACHE_MIN_TOKENS`` on (the least Anthropic and OpenAI cache), is read from the
cache at the cached-input price; a part that a later call reads is written once, at the
cache-write price where the provider charges one (Anthropic). Where a provider reported cache
reads itself, those are used. The estimate ignores the cache's lifetime (5 minutes to an hour):
a run that waits longer between calls gets less.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cabal.errors import ConfigError
from cabal.llm.cassette import Cassette, canonical_json
from cabal.llm.settings import ModelPrice
from cabal.llm.usage import CHARS_PER_TOKEN, Usage, estimate_tokens

CACHE_MIN_TOKENS = 1024
CACHE_MIN_CHARS = CACHE_MIN_TOKENS * CHARS_PER_TOKEN


@dataclass(frozen=True)
class CallTokens:
    """One call's tokens: its prompt's, the part a cache could serve or must write, its answer's."""

    input_tokens: int
    output_tokens: int
    cached_tokens: int  # read from the cache (as reported, else estimated)
    written_tokens: int  # written to the cache for a later call to read (estimated)


@dataclass(frozen=True)
class RunCost:
    """A run's calls priced at one model's list prices."""

    model: str
    calls: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    written_tokens: int
    usd_without_cache: float | None  # None: the model has no known price
    usd_with_cache: float | None

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def cacheable_share(self) -> float:
        """The share of the prompts' tokens a cache could serve."""
        return self.cached_tokens / self.input_tokens if self.input_tokens else 0.0


def call_tokens(cassette: Cassette, *, min_chars: int = CACHE_MIN_CHARS) -> list[CallTokens]:
    """Each call of ``cassette``, in order, with what a prompt cache could do for it."""
    prompts = [_prompt(cassette, index) for index in range(len(cassette.calls))]
    # Each pair once: what a call shares with an earlier one is what it reads, with a later one what it writes.
    shared = {(earlier, index): _shared(prompts[earlier], prompt)
              for index, prompt in enumerate(prompts) for earlier in range(index)}
    hits = [_at_least(max((shared[earlier, index] for earlier in range(index)), default=0), min_chars)
            for index in range(len(prompts))]
    reused = [max((shared[index, later] for later in range(index + 1, len(prompts))), default=0)
              for index in range(len(prompts))]
    rows = []
    for index, call in enumerate(cassette.calls):
        chars = max(len(prompts[index]), 1)
        usage = call.usage
        input_tokens = int(usage.get("input_tokens") or 0) or estimate_tokens(chars)
        output_tokens = int(usage.get("output_tokens") or 0)
        reported = int((usage.get("input_token_details") or {}).get("cache_read") or 0)
        cached = reported or input_tokens * hits[index] // chars
        written = input_tokens * max(reused[index] - hits[index], 0) // chars if reused[index] >= min_chars else 0
        rows.append(CallTokens(input_tokens, output_tokens, cached, written))
    return rows


def price_run(calls: Sequence[CallTokens], model: str, price: ModelPrice | None) -> RunCost:
    """``calls`` priced at ``price`` (None: not priced)."""
    input_tokens = sum(c.input_tokens for c in calls)
    output_tokens = sum(c.output_tokens for c in calls)
    cached = sum(c.cached_tokens for c in calls)
    written = sum(c.written_tokens for c in calls)
    if price is None:
        return RunCost(model, len(calls), input_tokens, output_tokens, cached, written, None, None)
    plain = Usage(input_tokens=input_tokens, output_tokens=output_tokens)
    cache = Usage(input_tokens=input_tokens, output_tokens=output_tokens, cache_read_tokens=cached,
                  cache_write_tokens=written)
    return RunCost(model, len(calls), input_tokens, output_tokens, cached, written, plain.cost_usd_at(price),
                   cache.cost_usd_at(price))


def model_price(spec: str) -> tuple[str, ModelPrice | None]:
    """The name of the model ``spec`` names and its list price, without building it (no key needed)."""
    from cabal.llm.models import resolve
    from cabal.llm.prices import database_price, price_of

    provider, name = resolve(spec)
    if provider.family == "local" or provider.prices_id is None:
        return spec, price_of(spec)
    return name, database_price(name, provider.prices_id)


def cost_of_cassettes(paths: Sequence[Path], spec: str) -> RunCost:
    """Every call of the cassettes at ``paths`` (a mission's, a judge's) priced as ``spec``'s."""
    name, price = model_price(spec)
    calls: list[CallTokens] = []
    for path in paths:
        if not path.is_file():
            raise ConfigError(f"no cassette at {path}: the run kept no record of its calls",
                              hint="a run records one unless --no-record was given")
        calls += call_tokens(Cassette.read(path))
    return price_run(calls, name, price)


def schema_chars(cassette: Cassette) -> tuple[int, int]:
    """The characters of every call's tools' schemas, and of its whole prompt (tools and messages,
    as ``call_tokens`` lays them out), summed over the cassette: the schemas' share of the input."""
    tools = sum(len(canonical_json([cassette.text(sha) for sha in call.tool_hashes])) for call in cassette.calls)
    return tools, sum(len(_prompt(cassette, index)) for index in range(len(cassette.calls)))


def _prompt(cassette: Cassette, index: int) -> str:
    """A call's prompt laid out as a provider reads it for caching: the tools, then the messages."""
    call = cassette.calls[index]
    parts = [canonical_json([cassette.text(sha) for sha in call.tool_hashes])]
    parts += [canonical_json(cassette.text(sha)) for sha in call.message_hashes]
    return "\x00".join(parts)


def _shared(a: str, b: str) -> int:
    """The length of the longest common start of ``a`` and ``b``."""
    low, high = 0, min(len(a), len(b))
    while low < high:  # a binary search over equal prefixes: fast on prompts of 100k characters
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _at_least(shared: int, min_chars: int) -> int:
    """A shared start a provider caches: none under ``min_chars``."""
    return shared if shared >= min_chars else 0
