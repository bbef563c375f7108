"""Every mission has a budget unless it says otherwise: $2 by default, CABAL_BUDGET_USD, the
mission file or --budget-usd change it, `budget: none` removes it. Pure: no graph, no model."""

from __future__ import annotations

from pathlib import Path

import pytest

from cabal.cli import main
from cabal.errors import ConfigError
from cabal.llm.usage import Budget
from cabal.rounds.mission import DEFAULT_BUDGET_USD, MissionBudget, load_mission, parse_mission

REQUEST = {"request": "Plan the onboarding of a dental clinic's online booking."}


@pytest.mark.parametrize(("budget", "environment", "flag", "expected"), [
    (None, None, None, MissionBudget(Budget(None, DEFAULT_BUDGET_USD), "default")),
    ({"tokens": 5000}, None, None, MissionBudget(Budget(5000, 2.0), "default")),
    (None, "7.5", None, MissionBudget(Budget(None, 7.5), "CABAL_BUDGET_USD")),
    (None, "none", None, MissionBudget(Budget(), "none")),
    ({"cost_usd": 5}, "7.5", None, MissionBudget(Budget(None, 5.0), "mission file")),
    ("none", "7.5", None, MissionBudget(Budget(), "none")),
    ({"cost_usd": 5, "tokens": 100}, "7.5", "3", MissionBudget(Budget(100, 3.0), "--budget-usd")),
    ("none", None, "3", MissionBudget(Budget(None, 3.0), "--budget-usd")),
    ({"tokens": 100}, None, "none", MissionBudget(Budget(100, None), "none")),
])
def test_the_cost_budget_comes_from_the_flag_then_the_file_then_the_environment_then_2_dollars(
        budget: dict | str | None, environment: str | None, flag: str | None, expected: MissionBudget,
        monkeypatch: pytest.MonkeyPatch) -> None:
    if environment is None:
        monkeypatch.delenv("CABAL_BUDGET_USD", raising=False)
    else:
        monkeypatch.setenv("CABAL_BUDGET_USD", environment)
    spec = parse_mission({**REQUEST, **({"budget": budget} if budget is not None else {})})

    assert spec.starting_budget(flag) == expected


def test_budget_none_keeps_through_a_round_trip_and_never_stops_to_ask() -> None:
    spec = parse_mission({**REQUEST, "budget": "none"})

    again = parse_mission(spec.model_dump(exclude_none=True))  # as --rounds and a resume re-read it

    assert (again.budget.unlimited, again.when_spent, again.model_dump()["budget"]) == (True, "ask", "none")
    assert parse_mission(REQUEST).budget.unlimited is False
    assert parse_mission({**REQUEST, "budget": {"when_spent": "stop"}}).when_spent == "stop"


@pytest.mark.parametrize(("line", "message"), [
    ("budget: lots", "clinic.mission.yaml:2: invalid mission: budget: Value error, write `budget: none` to run without "
                     "a budget, or a mapping such as {cost_usd: 5, tokens: 400000, when_spent: ask}; got 'lots'"),
    ("budget:", "clinic.mission.yaml:2: invalid mission: budget: Value error, write `budget: none` to run without "
                "a budget, or a mapping such as {cost_usd: 5, tokens: 400000, when_spent: ask}; got None"),
])
def test_a_budget_that_is_neither_a_mapping_nor_none_is_a_located_error(tmp_path: Path, line: str,
                                                                         message: str) -> None:
    path = tmp_path / "clinic.mission.yaml"
    path.write_text(f"request: Plan the onboarding.\n{line}\n")

    with pytest.raises(ConfigError) as refused:
        load_mission(path)

    assert str(refused.value) == str(path.parent / message)


@pytest.mark.parametrize(("where", "value", "message"), [
    ("flag", "two", "cabal: --budget-usd: 'two' is not a cost budget: write dollars above 0 (2.5) or 'none'"),
    ("flag", "0", "cabal: --budget-usd: '0' is not a cost budget: write dollars above 0 (2.5) or 'none'"),
    ("environment", "-1", "cabal: CABAL_BUDGET_USD: '-1' is not a cost budget: write dollars above 0 (2.5) or 'none'"),
])
def test_a_wrong_cost_budget_on_the_command_line_or_in_the_environment_is_a_usage_error(
        where: str, value: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "clinic.mission.yaml"
    path.write_text("request: Plan the onboarding.\n")
    extra = []
    if where == "flag":
        extra = ["--budget-usd", value]
    else:
        monkeypatch.setenv("CABAL_BUDGET_USD", value)

    status = main(["run", str(path), "--home", str(tmp_path / ".cabal"), *extra])

    assert (status, capsys.readouterr().err.splitlines()[0]) == (2, message)
    assert not (tmp_path / ".cabal").exists()  # nothing ran, nothing was written
