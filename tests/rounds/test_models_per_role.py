"""A model per role or agent: each agent calls its own model, usage and cost are counted per
model (status, report, events), a mission file's unknown key is a located error, and a batch
matrix varies one role's model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cabal.cli import main
from cabal.errors import ConfigError
from cabal.llm.usage import Usage
from cabal.report import read_report
from cabal.rounds.api import resume_mission, run_mission
from cabal.rounds.events import MissionEvent, ModelCalled
from cabal.rounds.mission import load_mission, parse_mission
from cabal.rounds.workspace import Workspace
from tests.rounds.data import priced_factory

from .players import LAUNCH_MISSION

QUESTION_MISSION = Path(__file__).resolve().parent / "data" / "question.mission.yaml"
QUESTION_SCRIPT = QUESTION_MISSION.parent / "question.script.yaml"

OPUS, HAIKU = "claude-opus-4-1", "claude-haiku-4-5"
FACTORY = "py:tests.rounds.data.priced_factory"


@pytest.fixture(scope="module")
def home(graph_server) -> Path:
    return graph_server.home


def launch_with_models(models: dict) -> dict:
    spec, _ = load_mission(LAUNCH_MISSION)
    return {**spec.model_dump(exclude_none=True, exclude={"model"}), "models": models}


def test_the_chair_calls_its_model_and_the_others_the_default_each_priced_on_its_own(home: Path,
                                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    priced_factory.BUILT.clear()
    events: list[MissionEvent] = []
    result = run_mission(launch_with_models({"default": f"{FACTORY}:haiku", "chair": f"{FACTORY}:opus"}),
                         home=home, on_event=events.append)

    assert (result.state, result.stop_reason, result.failed_turns) == ("done", "concluded", 0)
    (opus,), (haiku,) = priced_factory.BUILT[OPUS], priced_factory.BUILT[HAIKU]  # each built once
    assert {call.key.agent for call in opus.calls} == {"chair-1"}
    assert {call.key.agent for call in haiku.calls} == {"operative-1", "operative-2", "watchdog-1", "envoy-1"}
    assert len(opus.calls) + len(haiku.calls) == result.usage.calls == 19
    assert {(e.agent == "chair-1", e.model) for e in events if isinstance(e, ModelCalled)} == {(True, OPUS),
                                                                                                (False, HAIKU)}

    with Workspace.at(home).graph(result.mission_id) as graph:
        report = read_report(graph, result.mission_id)
    expected = {}  # each turn priced on its own model, as the turn moments record it
    for turn in report.turns:
        model = OPUS if turn.agent == "chair-1" else HAIKU
        assert turn.model == model
        cost = round(Usage(input_tokens=turn.input_tokens, output_tokens=turn.output_tokens,
                           cache_read_tokens=turn.cache_read_tokens).cost_usd(model), 6)
        assert turn.cost_usd == cost > 0
        tokens, dollars, turns = expected.get(model, (0, 0.0, 0))
        expected[model] = (tokens + turn.input_tokens + turn.output_tokens, round(dollars + cost, 6), turns + 1)
    by_model = {row.model: (row.spend.total_tokens, row.spend.cost_usd, row.spend.turns) for row in report.usage.by_model}
    assert by_model == expected
    chair = next(row.spend for row in report.usage.by_agent if row.agent == "chair-1")
    assert next(row.spend for row in report.usage.by_model if row.model == OPUS) == chair
    assert result.cost_usd == round(expected[OPUS][1] + expected[HAIKU][1], 6)

    capsys.readouterr()
    assert main(["status", result.mission_id, "--home", str(home), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["usage"]["by_model"]
    assert [(row["model"], row["input_tokens"] + row["output_tokens"], row["cost_usd"], row["turns"])
            for row in shown] == [(HAIKU, *expected[HAIKU]), (OPUS, *expected[OPUS])]
    assert main(["status", result.mission_id, "--home", str(home)]) == 0
    text = capsys.readouterr().out
    for model, (tokens, dollars, turns) in expected.items():
        assert f"  {model}: {turns} turns, {tokens:,} tokens, ${dollars:.4f}\n" in text

    assert main(["export", result.mission_id, "--home", str(home), "--format", "md"]) == 0
    markdown = capsys.readouterr().out
    assert "| model | turns | input tokens | output tokens | cached | cost |" in markdown
    assert f"| {OPUS} | {expected[OPUS][2]} |" in markdown
    page = home / f"{result.mission_id}.html"
    assert main(["export", result.mission_id, "--home", str(home), "--format", "html", "-o", str(page)]) == 0
    assert '<h3>By model</h3>' in page.read_text()
    assert f'<tr><td class="mono">{OPUS}</td><td class="n">{expected[OPUS][2]}</td>' in page.read_text()


def test_a_cost_budget_counts_every_model_at_its_own_price(home: Path) -> None:
    data = launch_with_models({"default": f"{FACTORY}:haiku", "chair": f"{FACTORY}:opus"})
    result = run_mission({**data, "budget": {"cost_usd": 0.2, "when_spent": "stop"}}, home=home)

    assert (result.state, result.stop_reason) == ("done", "budget")
    # The next call would have passed the budget by its prompt alone: it was not sent.
    prompt = float(result.detail.rsplit("$", 1)[1])
    assert result.detail == (f"the cost budget of $0.20 would be passed by the next call: ${result.cost_usd:.4f} "
                             f"spent on {HAIKU}, {OPUS}, and its prompt costs about ${prompt:.4f}")
    with Workspace.at(home).graph(result.mission_id) as graph:
        report = read_report(graph, result.mission_id)
    by_model = {row.model: row.spend.cost_usd for row in report.usage.by_model}
    assert set(by_model) == {HAIKU, OPUS} and result.cost_usd == round(sum(by_model.values()), 6)
    assert result.cost_usd < 0.2 < result.cost_usd + prompt
    # Priced on one model alone, the same tokens would be far off the budget's count.
    alone = Usage(input_tokens=result.usage.input_tokens, output_tokens=result.usage.output_tokens)
    assert alone.cost_usd(HAIKU) < 0.2 < alone.cost_usd(OPUS)


def test_resume_calls_each_agent_on_the_model_it_started_with(home: Path) -> None:
    priced_factory.BUILT.clear()
    spec, _ = load_mission(QUESTION_MISSION)
    data = {**spec.model_dump(exclude_none=True, exclude={"model"}),
            "models": {"default": f"scripted:{QUESTION_SCRIPT}", "chair": f"{FACTORY}:opus_question"}}
    paused = run_mission(data, home=home)
    assert (paused.state, paused.round) == ("halted", 0)

    done = resume_mission(paused.mission_id, answer="People installing it.", home=home)

    assert (done.state, done.stop_reason, done.failed_turns) == ("done", "concluded", 0)
    first, again = priced_factory.BUILT[OPUS]  # built again by the resuming run, from what the mission stored
    assert {call.key.agent for call in first.calls + again.calls} == {"chair-1"}
    assert again.calls
    with Workspace.at(home).graph(done.mission_id) as graph:
        report = read_report(graph, done.mission_id)
    assert {(turn.agent == "chair-1", turn.model) for turn in report.turns} == {(True, OPUS), (False, "cabal-scripted")}


def test_an_agent_id_beats_its_role_and_a_role_beats_the_default() -> None:
    spec = parse_mission({"request": "r", "team": {"operatives": 2}, "model": {"name": "a", "timeout_s": 30},
                          "models": {"operative": "b", "operative-2": {"output": "json"}, "envoy": {"name": "c"}}})
    chosen = {agent: (s.name, s.timeout_s, s.output) for agent, s in spec.agent_model_settings().items()}
    assert chosen == {"chair-1": ("a", 30.0, "tools"), "operative-1": ("b", 30.0, "tools"),
                      "operative-2": ("a", 30.0, "json"), "watchdog-1": ("a", 30.0, "tools"),
                      "envoy-1": ("c", 30.0, "tools")}


def test_an_unknown_role_or_agent_is_a_located_error_with_the_closest_names(tmp_path: Path) -> None:
    mission = tmp_path / "m.mission.yaml"
    mission.write_text("request: plan it\nteam: {operatives: 2}\nmodels:\n  default: scripted:x.yaml\n"
                       "  chiar: scripted:y.yaml\n")
    with pytest.raises(ConfigError) as raised:
        load_mission(mission)
    assert str(raised.value) == (
        f"{mission}:3: invalid mission: models: Value error, unknown role or agent 'chiar'; closest: chair, chair-1, "
        "watchdog (known: default, chair, operative, watchdog, envoy, chair-1, operative-1, operative-2, watchdog-1, "
        "envoy-1)")
    # An agent id the file alone cannot rule out (a role card may name it) is checked against the
    # team the mission gets.
    spec = parse_mission({"request": "r", "team": {"operatives": 2}, "models": {"operative-3": "x"}})
    with pytest.raises(ConfigError, match="unknown role or agent 'operative-3'; closest: operative-1, operative-2"):
        spec.agent_model_settings()
    with pytest.raises(ConfigError, match="both `model` and `models.default` name the default model: keep one"):
        parse_mission({"request": "r", "model": "x", "models": {"default": "y"}})


def test_a_batch_matrix_over_the_chairs_model_expands_to_one_mission_per_model(tmp_path: Path) -> None:
    from cabal.batch.plan import load_plan

    (tmp_path / "scripts").mkdir()
    batch = tmp_path / "chairs.batch.yaml"
    batch.write_text("mission: {team: {operatives: 2}, models: {default: scripted:scripts/team.yaml, "
                     "operative-2: {output: json}}}\n"
                     "requests: [Plan the launch., Price the app.]\n"
                     "matrix: {models.chair: [claude-opus-4-1, scripted:scripts/chair.yaml], operatives: [2, 3]}\n")

    plan = load_plan(batch)

    team, chair = f"scripted:{tmp_path / 'scripts' / 'team.yaml'}", f"scripted:{tmp_path / 'scripts' / 'chair.yaml'}"
    assert [(m.key, m.spec.request, m.spec.team.operatives, m.model) for m in plan.missions] == [
        (f"r{r}-chair{c}-o{o}", request, o, f"scripted:team.yaml; chair: {shown}")
        for r, request in ((1, "Plan the launch."), (2, "Price the app."))
        for c, shown in ((1, "claude-opus-4-1"), (2, "scripted:chair.yaml")) for o in (2, 3)]
    first = plan.missions[0].spec.agent_model_settings()
    assert {agent: (s.name, s.output) for agent, s in first.items()} == {
        "chair-1": ("claude-opus-4-1", "tools"), "operative-1": (team, "tools"), "operative-2": (team, "json"),
        "watchdog-1": (team, "tools"), "envoy-1": (team, "tools")}
    assert plan.missions[2].spec.agent_model_settings()["chair-1"].name == chair  # made absolute, as `model` is
    assert len({m.mission_id for m in plan.missions}) == 8

    batch.write_text("requests: [A]\nmatrix: {models: {chiar: [x, y]}}\n")
    with pytest.raises(ConfigError, match=r"\(request 1\): invalid mission: models: Value error, unknown role or "
                                          r"agent 'chiar'; closest: chair, chair-1"):
        load_plan(batch)
