"""A whole mission through the real Claude client against the fake API's responder mode.

The launch example's script answers every request (``script_responder``); the engine talks to
it through ``ChatAnthropic`` and the ``anthropic`` SDK exactly as it would to the real API, on
a real embedded FalkorDB.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cabal.rounds.api import run_mission
from cabal.rounds.mission import load_mission

from .fake_anthropic import FakeAnthropic, fake_api
from .prompt_cache import CacheUsage, minimum_cacheable_tokens, part_tokens
from .script_responder import script_responder

MODEL = "claude-sonnet-4-6"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "launch"
MISSION = load_mission(EXAMPLE / "launch.mission.yaml")[0].model_copy(update={"model": MODEL})


@pytest.fixture
def home(graph_server) -> Path:
    return graph_server.home


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    with fake_api(monkeypatch, "sk-ant-test-mission") as server:
        server.respond_with(script_responder(EXAMPLE / "launch.script.yaml"))
        yield server


def expected_cache_usage(bodies: list[dict]) -> list[CacheUsage]:
    """The engine's breakpoints (each system block, the end of the charter block): the
    prefix at each is written the first time it is seen (if long enough) and read after."""
    seen: set[str] = set()
    expected = []
    for body in bodies:
        parts = [*body["tools"], *body["system"]] + [
            {"role": m["role"], "content": block}
            for m in body["messages"]
            for block in ([{"type": "text", "text": m["content"]}] if isinstance(m["content"], str) else m["content"])]
        plain = [{k: v for k, v in part.items() if k != "cache_control"} for part in parts]
        plain = [{**p, "content": {k: v for k, v in p["content"].items() if k != "cache_control"}} if "role" in p else p
                 for p in plain]
        marked = [i for i, part in enumerate(parts)
                  if "cache_control" in part or "cache_control" in (part.get("content") or {})]
        upto = [sum(part_tokens(p) for p in plain[:i + 1]) for i in range(len(plain))]
        keys = {i: repr(plain[:i + 1]) for i in marked}
        read = max((upto[i] for i in marked if keys[i] in seen), default=0)
        written = max((upto[i] for i in marked if upto[i] > read and upto[i] >= minimum_cacheable_tokens(MODEL)),
                      default=read)
        seen |= {keys[i] for i in marked if upto[i] >= minimum_cacheable_tokens(MODEL)}
        expected.append(CacheUsage(upto[-1] - written, read, written - read))
    return expected


def test_mission_runs_against_the_responder_and_reads_its_prompts_from_cache(api: FakeAnthropic, home: Path) -> None:
    result = run_mission(MISSION, model=MODEL, home=home)

    assert (result.state, result.stop_reason, result.round) == ("done", "concluded", 2)
    bodies = [request.body for request in api.requests]
    assert len(bodies) == len(api.cache_log) == result.usage.calls
    for body in bodies:
        (house,) = body["system"]  # the same in every call, cached with the tools before it
        assert house["cache_control"] == {"type": "ephemeral"} and "Cabal team" in house["text"]
        assert not any("cache_control" in tool for tool in body["tools"])
        mission, role, agent, now = body["messages"][0]["content"]  # each cached but the call's own part
        assert [block.get("cache_control") for block in (mission, role, agent, now)] == [{"type": "ephemeral"}] * 3 + [None]
        assert role["text"].startswith("# Your role: ") and agent["text"].startswith("# Who you are\n")
    # Operatives call in parallel: the cache saw the requests in cache_log's order.
    in_cache_order = [api.requests[record.request_index].body for record in api.cache_log]
    assert [record.usage for record in api.cache_log] == expected_cache_usage(in_cache_order)

    totals = api.cache_totals()
    assert totals["cache_read_tokens"] > 0
    assert result.usage.input_tokens == totals["prompt_tokens"]
    assert result.usage.cache_read_tokens == totals["cache_read_tokens"]
    # Sonnet per million tokens: $3 input, $0.30 cache read, $3.75 cache write, $15 output.
    expected_cost = (totals["input_tokens"] * 3 + totals["cache_read_tokens"] * 0.3
                     + totals["cache_creation_tokens"] * 3.75 + result.usage.output_tokens * 15) / 1e6
    assert result.cost_usd == pytest.approx(expected_cost, abs=1e-5)


def test_overload_injected_before_the_responder_is_retried_by_the_client(api: FakeAnthropic, home: Path) -> None:
    api.reply_overloaded(retry_after=0.01)

    result = run_mission(MISSION, model=MODEL, home=home)

    assert (result.state, result.round) == ("done", 2)
    assert len(api.requests) == len(api.cache_log) + 1
    assert api.requests[0].body == api.requests[1].body
    # Cabal retried it (the client runs with max_retries=0): to the SDK both are first tries.
    assert [r.headers["x-stainless-retry-count"] for r in api.requests[:2]] == ["0", "0"]


# The prompt budget of one call (issue 10): what a real model reads well, and what a round costs.
SYSTEM_TOKENS, USER_TOKENS, CALL_TOKENS = 2_000, 5_000, 8_000
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("example", ["launch", "research"])
def test_every_call_of_both_examples_stays_within_the_prompt_budget(
        example: str, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mission = load_mission(EXAMPLES / example / f"{example}.mission.yaml")[0].model_copy(update={"model": MODEL})
    with fake_api(monkeypatch, "sk-ant-test-budget") as server:
        server.respond_with(script_responder(EXAMPLES / example / f"{example}.script.yaml"))
        result = run_mission(mission, model=MODEL, home=home)

    assert result.state == "done" and not result.failed_turns
    sizes = []
    for request in server.requests:
        body = request.body
        system = sum(part_tokens(block) for block in body["system"])
        user = sum(part_tokens(message) for message in body["messages"])
        tools = sum(part_tokens(tool) for tool in body["tools"])
        sizes.append((system, user, system + user + tools))
    assert len(sizes) == result.usage.calls > 15
    assert max(s for s, _, _ in sizes) <= SYSTEM_TOKENS
    assert max(u for _, u, _ in sizes) <= USER_TOKENS
    assert max(t for _, _, t in sizes) <= CALL_TOKENS
