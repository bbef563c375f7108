"""A mission file's mistakes, said as a person would want them: where, and what was meant."""

from __future__ import annotations

from pathlib import Path

import pytest

from cabal.errors import ConfigError
from cabal.rounds.mission import load_mission


def test_a_field_typo_names_the_closest_field_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "clinic.mission.yaml"
    path.write_text("request: Onboard the clinic's bookings.\nround: 3\n")

    with pytest.raises(ConfigError) as error:
        load_mission(path)

    assert str(error.value) == (f"{path}:2: invalid mission: unknown field `round`; did you mean `rounds`? "
                                "(allowed: rounds, model, budget, models, request, sources, name, source_limits, tool_timeout_s, tools, memory, answers, chat_answers, max_tool_calls, gates, team)")


def test_typos_inside_sections_name_their_section_in_the_file_order(tmp_path: Path) -> None:
    path = tmp_path / "clinic.mission.yaml"
    path.write_text("request: Onboard.\nteam:\n  operatvies: 2\nbudget: {token: 5}\n")

    with pytest.raises(ConfigError) as error:
        load_mission(path)

    assert str(error.value) == (
        f"{path}:3: invalid mission: team: unknown field `operatvies`; did you mean `operatives`? (allowed: "
        "operatives, names, cards, skills); budget (line 4): unknown field `token`; did you mean `tokens`? (allowed: "
        "tokens, when_spent, cost_usd)")
