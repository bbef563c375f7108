"""The simulated team, but its model is unavailable for the next ``failures_left`` Write calls
of this process: a mission that pauses ``interrupted``, for the page's Resume button.

    run_mission(..., model="py:tests.web.flaky_team:team")
"""

from __future__ import annotations

from cabal.errors import ModelError
from cabal.llm import FunctionChatModel
from cabal.rounds.simulated import SimulatedTeam

failures_left = 0


def team(**options) -> FunctionChatModel:
    play = SimulatedTeam()

    def answer(request):
        global failures_left
        if failures_left and request.facts.step == "write":
            failures_left -= 1
            raise ModelError("the provider is down (a test)", status=503, provider="test")
        return play(request)

    return FunctionChatModel(answer, **options)
