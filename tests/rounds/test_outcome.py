"""How a mission's outcome is told: the run's summary, `cabal status` and `cabal missions` say
what a state alone does not (failed turns, why it failed or paused) and what to run next."""

from __future__ import annotations

from pathlib import Path

import pytest

from cabal.cli.missions import next_steps, outcome
from cabal.llm import Usage
from cabal.rounds.api import run_mission
from cabal.rounds.control import MissionResult, mission_status
from cabal.rounds.events import MissionEvent, RoundStarted
from cabal.vocabulary import MissionState, StopReason

from .test_cli import cabal


def result(state: MissionState, reason: StopReason | None = None, **extra) -> MissionResult:
    return MissionResult(mission_id="m-x", state=state, stop_reason=reason, round=2, usage=Usage(), cost_usd=0.0,
                         pending_halt=None, transcript_path=None, **extra)


def test_a_clean_end_is_one_short_line_with_nothing_to_do() -> None:
    done = result(MissionState.DONE, StopReason.CONCLUDED)

    assert (outcome(done), next_steps(done)) == ("done (concluded), round 2", [])


def test_failed_turns_are_counted_beside_the_state() -> None:
    assert outcome(result(MissionState.DONE, StopReason.CONCLUDED, failed_turns=1)) == (
        "done (concluded), round 2, 1 failed turn (their work is missing)")
    assert outcome(result(MissionState.DONE, StopReason.CONCLUDED, failed_turns=3)) == (
        "done (concluded), round 2, 3 failed turns (their work is missing)")


def test_an_interrupted_mission_says_why_and_how_to_resume() -> None:
    killed = result(MissionState.INTERRUPTED, detail="the process running it stopped (killed or crashed)")

    assert outcome(killed) == "interrupted, round 2: the process running it stopped (killed or crashed)"
    assert next_steps(killed) == ["resume with: cabal resume m-x"]


def test_a_failed_mission_gives_its_message_and_its_traceback(tmp_path: Path) -> None:
    log = tmp_path / "error.log"
    failed = result(MissionState.FAILED, StopReason.ERROR, detail="RuntimeError: boom", error_log=log)

    assert outcome(failed) == "failed (error), round 2: RuntimeError: boom"
    assert next_steps(failed) == [f"traceback: {log}"]


@pytest.fixture(scope="module")
def home(graph_server) -> Path:
    return graph_server.home


def test_an_engine_error_fails_the_mission_and_status_tells_it(home: Path) -> None:
    def explode_in_round_two(event: MissionEvent) -> None:
        if isinstance(event, RoundStarted) and event.round == 2:
            raise RuntimeError("a listener broke")

    ran = run_mission({"name": "breaks", "request": "Plan a small launch.", "team": {"operatives": 2}, "rounds": 3},
                      model="py:cabal.rounds.simulated:team", home=home,
                      on_event=explode_in_round_two)

    status = mission_status(ran.mission_id, home=home)
    assert (status.state, status.stop_reason, status.detail) == ("failed", "error", "RuntimeError: a listener broke")
    assert status.error_log is not None and "RuntimeError: a listener broke" in status.error_log.read_text()
    shown = cabal("status", ran.mission_id, "--home", str(home))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[:2] == [f"{ran.mission_id}: failed (error), round 2: RuntimeError: a listener broke",
                                             f"traceback: {status.error_log}"]
    listed = cabal("missions", "--home", str(home))
    assert f"{ran.mission_id}: failed (error), round 2: RuntimeError: a listener broke" in listed.stdout.splitlines()
