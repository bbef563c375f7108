"""How a mission's outcome is told: the run's summary, `cabal status` and `cabal missions` say
what a state alone does not (failed turns, why it failed or paused) and what to run next."""

from __future__ import annotations

from pathlib import Path

import pytest

from cabal.cli import exits
from cabal.cli.missions import exit_status, next_steps, outcome
from cabal.errors import ConfigError
from cabal.llm import FunctionChatModel, ModelSettings, Usage
from cabal.rounds.api import run_mission
from cabal.rounds.control import MissionResult, mission_status
from cabal.rounds.events import MissionEvent, RoundStarted, Warned
from cabal.rounds.simulated import simulated_team
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
    def explode_in_round_two(event: MissionEvent) -> None:  # a Chair with work to add: round 2 comes
        if isinstance(event, RoundStarted) and event.round == 2:
            raise RuntimeError("a listener broke")

    ran = run_mission({"name": "breaks", "request": "Plan a small launch.", "team": {"operatives": 2}, "rounds": 3},
                      model=simulated_team(products_per_round=1), home=home,
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


@pytest.mark.parametrize(("state", "failed_turns", "status"), [
    (MissionState.DONE, 0, exits.DONE), (MissionState.DONE, 2, exits.FAILED_TURNS),
    (MissionState.HALTED, 0, exits.HALTED), (MissionState.INTERRUPTED, 0, exits.INTERRUPTED),
    (MissionState.FAILED, 0, exits.FAILED)])
def test_each_outcome_has_its_exit_status(state, failed_turns, status) -> None:
    assert exit_status(result(state, failed_turns=failed_turns)) == status


def test_model_settings_come_from_the_file_then_the_environment_then_the_command(monkeypatch) -> None:
    monkeypatch.setenv("CABAL_MODEL_TIMEOUT_S", "30")
    monkeypatch.setenv("CABAL_MODEL_MAX_RETRIES", "7")
    from_file = ModelSettings(name="claude-sonnet-4-6", timeout_s=120, max_tokens=2000)

    settings = from_file.from_environment().with_overrides(max_retries=2)

    assert (settings.timeout_s, settings.max_retries, settings.max_tokens) == (30.0, 2, 2000)
    monkeypatch.setenv("CABAL_MODEL_TEMPERATURE", "hot")
    with pytest.raises(ConfigError, match="CABAL_MODEL"):
        from_file.from_environment()


class UnpricedModel(FunctionChatModel):
    """The simulated team under a provider's name that has no price list."""

    model: str = "gpt-unpriced"


def test_a_cost_budget_on_a_model_without_prices_is_warned_at_start(home: Path) -> None:
    warnings: list[Warned] = []

    run_mission({"name": "unpriced", "request": "Plan a small launch.", "team": {"operatives": 2}, "rounds": 1,
                 "budget": {"cost_usd": 0.5}}, model=UnpricedModel(simulated_team().fn), home=home,
                on_event=lambda event: warnings.append(event) if isinstance(event, Warned) else None)

    assert [w.message for w in warnings] == [
        "no prices are known for gpt-unpriced: the cost budget ($0.5) cannot be enforced; the token budget still is"]
