"""The round engine: a team of agents runs a mission in rounds (``engine``), every write through
a membrane protocol.

The public API, imported on first use so ``import cabal.rounds.mission`` stays light:

- ``run_mission``, ``resume_mission``, ``continue_mission``, ``fork_mission`` (``api``): a run of the
  round engine;
- ``mission_status``, ``mission_overview``, ``say``, ``stop_mission``, ``remove_mission``,
  ``transcript`` and ``MissionResult`` (``control``): a mission's state and requests between runs, without the engine;
- ``stream_mission``, ``stream_resume``, ``arun_mission``, ``aresume_mission`` (``streams``):
  the same runs as an iterator of events, or awaited;
- ``mission_report`` (``workspace``): everything about a mission, read from its graph;
- ``MissionSpec``, ``load_mission`` (``mission``): the mission file;
- ``simulated_team`` (``simulated``): a model that plays any mission offline.

Everything else in the package is the engine's own: ``engine`` (the LangGraph graph), ``run``
(one run's parts and how a turn is taken), ``events`` (what a run tells its listener),
``turn`` (the retry loop of one answer), ``context`` and ``facts`` (what a turn is shown),
``rules`` and ``contracts`` (what is checked and how each protocol is called), ``writes`` (dry
runs and one commit per turn), ``snapshot`` (the view).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cabal.lazy import lazy_names

if TYPE_CHECKING:  # the same names, typed for checkers; at run time each loads on first use
    from cabal.rounds.api import continue_mission, fork_mission, resume_mission, run_mission
    from cabal.rounds.control import (
        MissionResult, mission_status, mission_overview, remove_mission, say, stop_mission, transcript,
    )
    from cabal.rounds.workspace import mission_report
    from cabal.rounds.streams import stream_mission, stream_resume, arun_mission, aresume_mission
    from cabal.rounds.mission import MissionSpec, load_mission
    from cabal.rounds.simulated import simulated_team

_EXPORTS = {
    "run_mission": "api", "resume_mission": "api", "continue_mission": "api", "fork_mission": "api",
    "MissionResult": "control", "mission_status": "control", "mission_overview": "control", "say": "control",
    "stop_mission": "control", "remove_mission": "control", "transcript": "control", "mission_report": "workspace",
    "stream_mission": "streams", "stream_resume": "streams", "arun_mission": "streams", "aresume_mission": "streams",
    "MissionSpec": "mission", "load_mission": "mission",
    "simulated_team": "simulated",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_names(__name__, _EXPORTS)
