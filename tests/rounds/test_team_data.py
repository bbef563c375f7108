"""The team is data: skills reach the prompts, and a project's own folders override by name."""

from __future__ import annotations

import pytest

from cabal.errors import ResourceNotFound
from cabal.graph import ContextGraph
from cabal.llm import FunctionChatModel
from cabal.rounds.api import Workspace, run_mission
from cabal.rounds.simulated import SimulatedTeam

MISSION = {"name": "data", "request": "Write a short style guide for commit messages.", "rounds": 1,
           "team": {"operatives": 1, "skills": {"operative-1": ["decision_capture"]}}}


def recording_team():
    calls = []
    team = SimulatedTeam(initial_products=2)

    def answer(request):
        calls.append((request.key.step, request.key.agent, request.messages[0].text, request.messages[1].text))
        return team(request)

    return FunctionChatModel(answer), calls


def test_an_agents_skills_are_in_its_own_prompt_only(graph_server):
    model, calls = recording_team()
    result = run_mission(MISSION, model=model, home=graph_server.home)
    assert result.state == "done"
    prompts = {(step, agent): prompt for step, agent, _, prompt in calls}
    assert "Your skill, decision_capture:\n\n# Decision Capture Skill" in prompts[("write", "operative-1")]
    assert "Your skill" not in prompts[("plan", "chair-1")]


def test_an_unknown_skill_stops_the_run_before_anything_is_written(graph_server):
    before = Workspace.at(graph_server.home).missions()
    bad = {**MISSION, "team": {"operatives": 1, "skills": {"operative-1": ["astrology"]}}}
    with pytest.raises(ResourceNotFound, match="skill not found: 'astrology'"):
        run_mission(bad, model=recording_team()[0], home=graph_server.home)
    assert Workspace.at(graph_server.home).missions() == before


def test_a_projects_own_prompt_overrides_the_built_in_one(graph_server, tmp_path, monkeypatch):
    (tmp_path / "prompts" / "steps").mkdir(parents=True)
    (tmp_path / "prompts" / "steps" / "write.md").write_text("Write in the house style: MARKER-7.\n")
    monkeypatch.chdir(tmp_path)
    model, calls = recording_team()
    result = run_mission({**MISSION, "team": {"operatives": 1}}, model=model, home=graph_server.home)
    assert result.state == "done"
    prompts = {(step, agent): prompt for step, agent, _, prompt in calls}
    assert "Write in the house style: MARKER-7." in prompts[("write", "operative-1")]
    assert "MARKER-7" not in prompts[("inspect", "watchdog-1")]  # the other steps keep the built-in text
    with ContextGraph.open(name=result.mission_id, home=graph_server.home) as graph:
        assert graph.get(result.mission_id)["status"] == "done"
