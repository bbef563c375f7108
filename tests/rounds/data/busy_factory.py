"""The simulated team with a Chair that adds a product every round, so no round's closing
decisions end the mission: `--model py:busy_factory:team` (with this folder on PYTHONPATH) runs a
mission to its round limit. Its model is named as the simulated team's is."""

from __future__ import annotations

from typing import Any

from cabal.llm import FunctionChatModel
from cabal.llm.providers import SIMULATED
from cabal.rounds.simulated import simulated_team


def team(**options: Any) -> FunctionChatModel:
    return simulated_team(products_per_round=1, **options).model_copy(update={"model_name": SIMULATED})
