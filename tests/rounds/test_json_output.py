"""Models that cannot call tools well (``output: json``): the launch example answered in text,
and a model whose provider refuses tools switches the mission to json once."""

from __future__ import annotations

from pathlib import Path

import pytest

from cabal.llm import ScriptedChatModel
from cabal.rounds.api import run_mission
from cabal.rounds.events import MissionEvent
from cabal.rounds.mission import load_mission

from .players import LAUNCH_MISSION, LAUNCH_SCRIPT


@pytest.fixture(scope="module")
def home(graph_server) -> Path:
    return graph_server.home


def test_the_launch_example_completes_in_json_mode(home: Path) -> None:
    model = ScriptedChatModel.from_file(LAUNCH_SCRIPT)
    result = run_mission(LAUNCH_MISSION, model=model, home=home, model_settings={"output": "json"})

    assert (result.state, result.stop_reason, result.round, result.failed_turns) == ("done", "concluded", 4, 0)
    assert len(model.calls) == result.usage.calls == 28  # one per turn, as with tools
    assert {call.tools for call in model.calls} == {()}  # no call offered a tool
    first = model.calls[0]
    assert first.messages[0].content[-1]["text"].startswith("# How to answer\n\nYou have no tools")
    assert "NAME is one of: final_output, halt." in first.messages[0].content[-1]["text"]
