"""Usage sums, prices and budgets: pure values, exact numbers."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from cabal.llm import Budget, Usage
from cabal.llm.providers.anthropic import with_cache_breakpoints


def test_usage_adds_field_by_field() -> None:
    total = Usage(10, 5, 2, 1, 1) + Usage(100, 50, 20, 10, 1)

    assert total == Usage(input_tokens=110, output_tokens=55, cache_read_tokens=22, cache_write_tokens=11, calls=2)
    assert total.total_tokens == 165
    assert sum([Usage(1, 1, calls=1)] * 3, Usage()) == Usage(3, 3, calls=3)


def test_usage_from_message_reads_cache_details() -> None:
    message = AIMessage(
        content="",
        usage_metadata={
            "input_tokens": 1000,
            "output_tokens": 40,
            "total_tokens": 1040,
            "input_token_details": {"cache_read": 800, "cache_creation": 0, "ephemeral_5m_input_tokens": 150},
        },
    )

    assert Usage.from_message(message) == Usage(1000, 40, cache_read_tokens=800, cache_write_tokens=150, calls=1)
    assert Usage.from_message(AIMessage(content="no usage")) == Usage(calls=1)


def test_cost_prices_cached_tokens_at_their_own_rate() -> None:
    # Sonnet: $3 in, $15 out per million; cache reads 0.1x, cache writes 1.25x input.
    usage = Usage(input_tokens=3_000_000, output_tokens=1_000_000, cache_read_tokens=1_000_000, cache_write_tokens=1_000_000)

    assert usage.cost_usd("claude-sonnet-4-5") == pytest.approx(3.0 + 0.3 + 3.75 + 15.0)


@pytest.mark.parametrize(
    ("model", "dollars"),
    [
        ("claude-opus-4-5", 5.0 + 25.0),
        ("claude-opus-4-1-20250805", 15.0 + 75.0),
        ("claude-sonnet-4-5-20250929", 3.0 + 15.0),
        ("claude-haiku-4-5", 1.0 + 5.0),
        ("cabal-scripted", 0.0),
        ("gpt-unknown", 0.0),
    ],
)
def test_cost_per_family(model: str, dollars: float) -> None:
    assert Usage(input_tokens=1_000_000, output_tokens=1_000_000).cost_usd(model) == pytest.approx(dollars)


def test_budget_reports_why_it_is_spent() -> None:
    usage = Usage(input_tokens=10_000, output_tokens=234, calls=3)

    assert Budget(max_tokens=10_000).exceeded(usage, "claude-sonnet-4-5") == "token budget of 10,000 tokens is spent: 10,234 used"
    assert Budget(max_tokens=20_000).exceeded(usage, "claude-sonnet-4-5") is None
    assert Budget(max_cost_usd=0.01).exceeded(usage, "claude-sonnet-4-5") == (
        "cost budget of $0.01 is spent: $0.0335 on claude-sonnet-4-5"
    )
    assert Budget(max_cost_usd=0.01).exceeded(usage, "cabal-scripted") is None
    assert Budget().exceeded(usage, "claude-opus-4-5") is None


def test_cache_breakpoints_go_after_the_system_prompt_and_every_block_of_the_first_user_message_but_its_last() -> None:
    # The round engine's prompt: the house block as the system prompt, then the mission, the
    # role and step, the agent and this call's part as the first user message's blocks.
    original = [
        SystemMessage(content=[{"type": "text", "text": "house"}]),
        HumanMessage(content=[{"type": "text", "text": "mission"}, {"type": "text", "text": "role"},
                              {"type": "text", "text": "agent"}, {"type": "text", "text": "call"}]),
        SystemMessage("late note"),
    ]

    marked = with_cache_breakpoints(original)

    assert marked[0].content == [{"type": "text", "text": "house", "cache_control": {"type": "ephemeral"}}]
    assert marked[1].content == [
        {"type": "text", "text": "mission", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "role", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "agent", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "call"},
    ]
    assert marked[2:] == original[2:]
    assert all("cache_control" not in block for block in original[1].content)  # the caller's messages are untouched
    one_block = with_cache_breakpoints([SystemMessage("all of it"), HumanMessage("go")])
    assert one_block[0].content == [{"type": "text", "text": "all of it", "cache_control": {"type": "ephemeral"}}]
    assert one_block[1] == HumanMessage("go")


def test_no_more_than_four_breakpoints_the_first_ones() -> None:
    blocks = [{"type": "text", "text": f"part {n}"} for n in range(6)]

    marked = with_cache_breakpoints([SystemMessage("house"), HumanMessage(content=blocks)])

    assert [("cache_control" in block) for block in marked[1].content] == [True, True, True, False, False, False]


def test_no_breakpoint_without_a_system_prompt_or_with_an_empty_one() -> None:
    assert with_cache_breakpoints([HumanMessage("go")]) == [HumanMessage("go")]
    assert with_cache_breakpoints([SystemMessage(""), HumanMessage("go")])[0].content == ""
