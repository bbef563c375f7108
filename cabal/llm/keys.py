"""Call keys: which round, step and agent a model call serves.

The engine names them in the run config's metadata; fake models read them back from there
(``run_manager.metadata`` inside ``_generate`` carries the config's metadata).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ROUND_KEY = "cabal_round"
STEP_KEY = "cabal_step"
AGENT_KEY = "cabal_agent"
TURN_KEY = "cabal_turn"
FACTS_KEY = "cabal_facts"


def call_metadata(*, round: int, step: str, agent: str, turn: int = 0, facts: Any = None) -> dict[str, Any]:  # noqa: A002
    """The metadata the engine passes with every model call.

    ``turn`` counts the agent's earlier turns in this round and step (a Chair turn that
    follows the user's n-th answer is turn n); it is left out when 0. ``facts``: what the
    turn is about as data (the round engine's ``TurnFacts``), for fake models.
    """
    metadata: dict[str, Any] = {ROUND_KEY: round, STEP_KEY: str(step), AGENT_KEY: agent}
    if turn:
        metadata[TURN_KEY] = turn
    if facts is not None:
        metadata[FACTS_KEY] = facts
    return metadata


@dataclass(frozen=True)
class CallKey:
    round: int | None
    step: str | None
    agent: str | None

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> CallKey:
        round_ = metadata.get(ROUND_KEY)
        return cls(
            round=int(round_) if round_ is not None else None,
            step=metadata.get(STEP_KEY),
            agent=metadata.get(AGENT_KEY),
        )

    @property
    def is_complete(self) -> bool:
        return None not in (self.round, self.step, self.agent)

    def __str__(self) -> str:
        return f"round {self.round}, step {self.step!r}, agent {self.agent!r}"
