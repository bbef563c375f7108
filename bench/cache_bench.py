"""Prompt-caching benchmark: how much of each prompt Claude would read from cache, and what a round costs.

Runs both examples end to end through the real Anthropic client against the local fake Messages
API (``tests/llm/fake_anthropic.py``), which follows the API's prompt-caching rules: a request's
prefix up to a ``cache_control`` breakpoint that matches an earlier request's is read from
cache, the rest is written or paid in full. The answers come from the examples' scripts.

Prints one figure per line, ``name value unit  # goal``, for each example:

    calls                             count  model calls of the mission
    prompt_tokens_per_call            tokens
    cache_read_share_all              share  cache reads over all prompt tokens
    cache_read_share_role_2nd_on      share  the same, from the second call of each role on
    cache_read_share_agent_2nd_on     share  from the second call of each agent on
    cache_read_share_agent_step_2nd_on share from the second call of each (agent, step) on
    cost_per_round_cached             USD    at list prices (reads 0.1x, writes 1.25x the input price)
    cost_per_round_uncached           USD    the same calls with nothing cached

Each step sends only the tool schemas it needs, and tools come first in the cached prefix, so
a prefix is shared by the calls of one (agent, step), round after round; the first call of an
agent's next step in the same round writes its own prefix. Sending one role-wide tool set would
share more of the prefix but make every prompt larger; bench/README.md has both measured.

Usage: python bench/cache_bench.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cabal.graph import EmbeddedServer  # noqa: E402
from cabal.llm.usage import Usage  # noqa: E402
from cabal.rounds.api import run_mission  # noqa: E402
from cabal.rounds.mission import load_mission  # noqa: E402
from cabal.vocabulary import FIXED_IDS, OPERATIVE_ID, Role  # noqa: E402
from tests.llm.fake_anthropic import FakeAnthropic  # noqa: E402
from tests.llm.script_responder import call_key, script_responder  # noqa: E402

MODEL = "claude-sonnet-4-6"
EXAMPLES = ("launch", "research")
GOAL_SHARE = 0.70


def role_of(agent_id: str) -> str:
    if OPERATIVE_ID.match(agent_id):
        return Role.OPERATIVE.value
    return next(role.value for role, fixed in FIXED_IDS.items() if fixed == agent_id)


def share_from_second_call(calls: list[tuple[tuple, int, int]]) -> float:
    """Cache reads over prompt tokens of every call but the first of its group, in order."""
    seen: set[tuple] = set()
    read = prompt = 0
    for group, call_read, call_prompt in calls:
        if group in seen:
            read += call_read
            prompt += call_prompt
        seen.add(group)
    return read / prompt if prompt else 0.0


def run_example(example: str) -> None:
    folder = ROOT / "examples" / example
    mission = load_mission(folder / f"{example}.mission.yaml")[0].model_copy(update={"model": MODEL})
    server = FakeAnthropic().start()
    server.respond_with(script_responder(folder / f"{example}.script.yaml"))
    os.environ.update(ANTHROPIC_API_KEY="sk-ant-bench", ANTHROPIC_BASE_URL=server.url)
    with tempfile.TemporaryDirectory(prefix="cabal-cache-bench-") as home:
        try:
            result = run_mission(mission, model=MODEL, home=home)
        finally:
            server.stop()
            EmbeddedServer(Path(home)).stop()
    if result.state != "done":
        raise SystemExit(f"{example} ended {result.state} ({result.stop_reason})")

    keyed = []  # ((round, step, agent), read, prompt) in the order the cache saw the calls
    for record in server.cache_log:
        usage = record.usage
        keyed.append((call_key(server.requests[record.request_index].body), usage.cache_read_input_tokens,
                      usage.prompt_tokens))
    totals = server.cache_totals()
    cached = Usage(input_tokens=int(totals["prompt_tokens"]), output_tokens=result.usage.output_tokens,
                   cache_read_tokens=int(totals["cache_read_tokens"]),
                   cache_write_tokens=int(totals["cache_creation_tokens"]))
    uncached = Usage(input_tokens=cached.input_tokens, output_tokens=cached.output_tokens)

    def figure(name: str, value: float, unit: str, goal: str = "") -> None:
        print(f"{example}_{name} {value:.4f} {unit}" + (f"  # goal: {goal}" if goal else ""), flush=True)

    figure("calls", len(keyed), "count")
    figure("prompt_tokens_per_call", totals["prompt_tokens"] / len(keyed), "tokens")
    figure("cache_read_share_all", totals["read_share"], "share")
    figure("cache_read_share_role_2nd_on",
           share_from_second_call([(role_of(agent), r, p) for (_, _, agent), r, p in keyed]), "share",
           f">= {GOAL_SHARE:.2f}")
    figure("cache_read_share_agent_2nd_on", share_from_second_call([(agent, r, p) for (_, _, agent), r, p in keyed]),
           "share")
    figure("cache_read_share_agent_step_2nd_on",
           share_from_second_call([((agent, step), r, p) for (_, step, agent), r, p in keyed]), "share")
    figure("cost_per_round_cached", cached.cost_usd(MODEL) / result.round, "USD")
    figure("cost_per_round_uncached", uncached.cost_usd(MODEL) / result.round, "USD")


def main() -> None:
    os.chdir(ROOT)
    for example in EXAMPLES:
        run_example(example)


if __name__ == "__main__":
    main()
