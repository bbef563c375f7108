"""Which state of a mission may go to which, and why: the one table of a mission's life.

``rounds.api`` (run, resume, answer, continue), ``rounds.control`` (stop), the web page (which
buttons it offers) and the batch runner (which missions it runs) all ask ``allows`` instead of
judging states themselves. Values only, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from cabal.vocabulary import MissionState, NotStarted, StopReason


class Action(StrEnum):
    """What moves a mission from one state to another."""

    RUN = "run"  # a new mission starts
    RESUME = "resume"  # it goes on from its last checkpoint after a pause
    ANSWER = "answer"  # the user answers the Chair's question
    CONTINUE = "continue"  # a mission that ended goes on
    STOP = "stop"  # the user asks the team to stop at its next round
    PAUSE = "pause"  # a model outage, the budget's refusal, a kill or Ctrl-C pauses the run
    FAIL = "fail"  # an error in the engine or the team's data ends it
    DIVERGE = "diverge"  # a replayed call its recording does not answer ends it


State = MissionState | NotStarted


@dataclass(frozen=True)
class Transition:
    action: Action
    sources: frozenset[State]
    target: MissionState
    why: str
    stop_reasons: frozenset[StopReason] | None = None  # the source's stop reason must be one of these


ENDED = frozenset({MissionState.DONE, MissionState.FAILED, MissionState.DIVERGED})
"""The states no run leaves by itself: only ``continue`` takes a mission out of ``done``."""

TRANSITIONS: tuple[Transition, ...] = (
    Transition(Action.RUN, frozenset({NotStarted.PENDING, NotStarted.REFUSED}), MissionState.RUNNING,
               "a mission not started yet (or refused at its start) starts"),
    Transition(Action.RESUME, frozenset({MissionState.INTERRUPTED}), MissionState.RUNNING,
               "a paused mission goes on from its last checkpoint; committed turns are not run again"),
    Transition(Action.ANSWER, frozenset({MissionState.HALTED}), MissionState.RUNNING,
               "the Chair's pending question gets its answer and the round goes on"),
    Transition(Action.CONTINUE, frozenset({MissionState.DONE}), MissionState.RUNNING,
               "a mission the user stopped, or one out of rounds given more, goes on",
               frozenset({StopReason.USER_HALT, StopReason.NO_MORE_ROUNDS})),
    Transition(Action.STOP, frozenset({MissionState.RUNNING, MissionState.HALTED, MissionState.INTERRUPTED}),
               MissionState.DONE, "the team stops at its next round (stop reason userHalt)"),
    Transition(Action.PAUSE, frozenset({MissionState.RUNNING}), MissionState.INTERRUPTED,
               "the run cannot go on now but can later: `cabal resume`"),
    Transition(Action.FAIL, frozenset({MissionState.RUNNING}), MissionState.FAILED,
               "an error that running again would not mend"),
    Transition(Action.DIVERGE, frozenset({MissionState.RUNNING}), MissionState.DIVERGED,
               "a replay meets a call its recording does not answer (stop reason replayDiverged): it ends there"),
)
_BY_ACTION = {transition.action: transition for transition in TRANSITIONS}


def transition(action: Action) -> Transition:
    return _BY_ACTION[action]


def allows(action: Action, state: str, stop_reason: str | None = None) -> bool:
    """Whether ``action`` may take a mission in ``state`` (with ``stop_reason``) anywhere."""
    rule = _BY_ACTION[action]
    if state not in rule.sources:
        return False
    return rule.stop_reasons is None or stop_reason in rule.stop_reasons
