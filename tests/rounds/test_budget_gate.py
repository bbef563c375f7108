"""The gate every model call passes: a call whose prompt alone would pass the budget asks first.

A 100,000-token budget once stopped at "113,576 used": the last call started because no other
was in flight, and its long prompt was sent over the limit. Now a call alone may pass the budget
by its answer (at most its ``max_tokens``), never by its prompt.
"""

from __future__ import annotations

import pytest

from cabal.llm.usage import Budget, Usage
from cabal.rounds.budget import BudgetSpent, SpendMeter

MODEL = "claude-sonnet-4-6"


def meter(tokens: int, spent: int) -> SpendMeter:
    return SpendMeter(Budget(max_tokens=tokens), Usage(input_tokens=spent, calls=1), 0.0, MODEL)


def test_a_call_whose_prompt_would_pass_the_budget_asks_first() -> None:
    gate = meter(100_000, 98_000)

    with pytest.raises(BudgetSpent) as refused:
        gate.admit(Usage(input_tokens=15_576, output_tokens=8192, calls=1), MODEL)

    assert refused.value.reason == ("token budget of 100,000 tokens would be passed by the next call: 98,000 used, "
                                    "and its prompt is about 15,576 tokens")
    assert gate.spent == Usage(input_tokens=98_000, calls=1)  # nothing was sent


def test_a_call_alone_whose_prompt_fits_may_pass_the_budget_by_its_answer_only() -> None:
    gate = meter(100_000, 98_000)

    reservation = gate.admit(Usage(input_tokens=1_500, output_tokens=8192, calls=1), MODEL)
    gate.settle(reservation, Usage(input_tokens=1_500, output_tokens=3_000, calls=1))

    assert gate.spent.total_tokens == 102_500  # passed by its answer, at most max_tokens
    with pytest.raises(BudgetSpent) as spent:
        gate.admit(Usage(input_tokens=10, output_tokens=8192, calls=1), MODEL)
    assert spent.value.reason == "token budget of 100,000 tokens is spent: 102,500 used"


def test_a_cost_budget_asks_before_a_prompt_that_would_pass_it() -> None:
    gate = SpendMeter(Budget(max_cost_usd=1.0), Usage(), 0.99, MODEL)
    prompt = Usage(input_tokens=10_000)  # $0.03 on claude-sonnet-4-6, at $3 a million input tokens

    with pytest.raises(BudgetSpent) as refused:
        gate.admit(Usage(input_tokens=10_000, output_tokens=8192, calls=1), MODEL)

    assert refused.value.reason == (f"cost budget of $1.00 would be passed by the next call: $0.9900 spent on {MODEL}, "
                                    f"and its prompt costs about ${prompt.cost_usd(MODEL):.4f}")
    assert prompt.cost_usd(MODEL) == pytest.approx(0.03)
