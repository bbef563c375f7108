"""Cabal: run a team of AI agents in rounds over a FalkorDB context graph.

The public surface (``cabal.rounds``, imported on first use so ``import cabal.graph`` stays
light): ``run_mission``, ``resume_mission``, ``continue_mission``, ``fork_mission`` and their ``MissionResult``; ``stream_mission``,
``stream_resume``, ``arun_mission``, ``aresume_mission`` (the same runs as events, or awaited);
``mission_status``, ``mission_report``, ``transcript``, ``say``, ``stop_mission``, ``remove_mission``. The events are
``cabal.rounds.events``; the context graph is ``cabal.graph.ContextGraph``; the membrane is
``cabal.membrane.Membrane``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names, typed for checkers; at run time each loads on first use
    from cabal.rounds import (
        MissionResult, aresume_mission, arun_mission, continue_mission, fork_mission, mission_report, mission_status,
        remove_mission, resume_mission, run_mission, say, stop_mission, stream_mission, stream_resume, transcript,
    )

from cabal.vocabulary import CABAL_VERSION as __version__  # written once, where every layer can read it

__all__ = ["MissionResult", "aresume_mission", "arun_mission", "continue_mission", "fork_mission", "mission_report",
           "mission_status", "remove_mission", "resume_mission", "run_mission", "say", "stop_mission", "stream_mission",
           "stream_resume", "transcript"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from cabal import rounds

        return getattr(rounds, name)
    raise AttributeError(f"module 'cabal' has no attribute {name!r}")
