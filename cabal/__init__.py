"""Cabal: run a team of AI agents in rounds over a FalkorDB context graph."""

__version__ = "0.1.0"

from cabal.rounds.api import (  # noqa: E402 - the public surface
    MissionResult,
    mission_status,
    resume_mission,
    run_mission,
    say,
    stop_mission,
)

__all__ = ["MissionResult", "mission_status", "resume_mission", "run_mission", "say", "stop_mission"]
