"""Cabal: run a team of AI agents in rounds over a FalkorDB context graph.

The public surface: ``run_mission``, ``resume_mission``, ``mission_status``, ``say``,
``stop_mission``, ``transcript`` and ``MissionResult`` (``cabal.rounds``, imported on first use
so ``import cabal.graph`` stays light). The context graph is ``cabal.graph.ContextGraph``; the
membrane is ``cabal.membrane.Membrane``.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["MissionResult", "mission_status", "resume_mission", "run_mission", "say", "stop_mission", "transcript"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from cabal import rounds

        return getattr(rounds, name)
    raise AttributeError(f"module 'cabal' has no attribute {name!r}")
