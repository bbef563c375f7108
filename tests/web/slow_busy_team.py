"""The busy simulated team (``busy_factory``: the Chair adds a product every round, so no round's
closing decisions end the mission), each call taking CABAL_TEST_LATENCY seconds (default 0.3):
a `cabal run` in another process that goes on round after round until it is stopped or out of
rounds, for the page to follow and stop.

    cabal run ... --model py:tests.web.slow_busy_team:team   (the repository on PYTHONPATH)
"""

from __future__ import annotations

import os
from typing import Any

from cabal.llm import FunctionChatModel
from tests.rounds.data.busy_factory import team as busy_team


def team(**options: Any) -> FunctionChatModel:
    return busy_team(latency_s=float(os.environ.get("CABAL_TEST_LATENCY", "0.3")), **options)
