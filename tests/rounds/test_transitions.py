"""The mission's life in one table: which state each action may take a mission from."""

from __future__ import annotations

from cabal.batch.report import needs_run
from cabal.rounds.transitions import ENDED, TRANSITIONS, Action, allows, transition
from cabal.vocabulary import MissionState, NotStarted, StopReason

STATES = [*MissionState, *NotStarted]


def from_states(action: Action, stop_reason: str | None = None) -> set[str]:
    return {str(state) for state in STATES if allows(action, state, stop_reason)}


def test_each_action_and_the_states_it_leaves():
    assert from_states(Action.RUN) == {"pending", "refused"}
    assert from_states(Action.RESUME) == {"interrupted"}
    assert from_states(Action.ANSWER) == {"halted"}
    assert from_states(Action.STOP) == {"running", "halted", "interrupted"}
    assert from_states(Action.PAUSE) == from_states(Action.FAIL) == from_states(Action.DIVERGE) == {"running"}
    assert from_states(Action.CONTINUE) == set()  # a mission that ended goes on only for some reasons
    assert from_states(Action.CONTINUE, StopReason.USER_HALT) == from_states(
        Action.CONTINUE, StopReason.NO_MORE_ROUNDS) == {"done"}
    assert not allows(Action.CONTINUE, MissionState.DONE, StopReason.CONCLUDED)
    assert {t.action for t in TRANSITIONS} == set(Action) and transition(Action.FAIL).target == MissionState.FAILED
    assert ENDED == {MissionState.DONE, MissionState.FAILED, MissionState.DIVERGED}


def test_a_batch_runs_what_the_table_lets_it():
    assert {str(s) for s in STATES if needs_run(s, answered=False)} == {"pending", "refused", "interrupted"}
    assert {str(s) for s in STATES if needs_run(s, answered=True)} == {"pending", "refused", "interrupted", "halted"}
