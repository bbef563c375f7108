"""`cabal continue`: a mission that ended goes further with a new direction, played end to end by
the simulated team (`py:cabal.rounds.simulated:team`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cabal.errors import MissionError
from cabal.report.html import render_html
from cabal.report.markdown import render_markdown
from cabal.rounds.api import continue_mission, run_mission
from cabal.rounds.events import MissionContinued, MissionEvent, UserMessage
from cabal.rounds.simulated import simulated_team
from cabal.rounds.workspace import mission_report

from .test_cli import cabal

SIMULATED = "py:cabal.rounds.simulated:team"
DIRECTION = "Add what volunteers must know about safety at the warehouse."


@pytest.fixture(scope="module")
def home(graph_server) -> str:
    return str(graph_server.home)


@pytest.fixture(scope="module")
def concluded(home: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    mission = tmp_path_factory.mktemp("continue") / "volunteers.mission.yaml"
    mission.write_text(f"request: Write a short handbook for new volunteers.\nteam: {{operatives: 2, names: "
                       f"{{operative-1: Dana}}}}\nrounds: 3\nmodel: '{SIMULATED}'\n")
    ran = cabal("run", str(mission), "--home", home, "--quiet")
    assert ran.returncode == 0, ran.stderr
    mission_id = re.search(r"^mission: (\S+)$", ran.stdout, re.MULTILINE)[1]
    assert "state: done (concluded), round 1" in ran.stdout  # everything accepted at round 1's closing decisions
    return mission_id


def test_say_on_an_ended_mission_says_how_to_continue_it(concluded: str, home: str) -> None:
    said = cabal("say", concluded, "one more thing", "--home", home)

    assert said.returncode == 1
    assert said.stderr == (f"cabal: mission {concluded} has ended (concluded): the team reads no more messages\n"
                           f'hint: cabal continue {concluded} "a new direction" [--rounds N]\n')


def test_continue_reopens_the_mission_and_the_report_shows_both_parts(concluded: str, home: str) -> None:
    went_on = cabal("continue", concluded, DIRECTION, "--rounds", "3", "--home", home)

    assert went_on.returncode == 0, went_on.stderr
    assert f"you: {DIRECTION} (the mission continues with this new direction)\nthe mission continues, up to round 4" \
        in went_on.stdout
    assert "state: done (concluded), round 2" in went_on.stdout
    report = mission_report(concluded, home=home)
    # The Chair reopened the first product at round 2's Plan; its new version follows the old one
    # and takes the direction up. What the direction names is added beside it.
    handbook = report.product("Short handbook for new volunteers")
    assert [(v.number, v.round, v.author) for v in handbook.versions] == [(1, 1, "operative-1"), (2, 2, "operative-1")]
    assert (handbook.status, handbook.accepted_version.number) == ("accepted", 2)
    assert handbook.description == f"Reworked for the user's new direction: {DIRECTION[:-1]}"
    assert f"it takes up the user's new direction: {DIRECTION} Outline:" in handbook.accepted_version.content
    added = report.product("What volunteers must know about safety at the warehouse")
    assert (added.round, added.status, added.parent_id) == (2, "accepted", report.product("Library").id)
    # Both parts, in order: the first conclusion, the direction, the rounds after, the second conclusion.
    said = [(line.round, line.kind) for line in report.conversation if line.kind in ("done", "direction")]
    assert said == [(1, "done"), (1, "direction"), (2, "done")]
    markdown = render_markdown(report)
    assert markdown.index("(mission concluded)") < markdown.index(f"**you:** {DIRECTION}") < \
        markdown.index("### Round 2")
    assert '<div class="round">The mission continues</div>' in render_html(report)


def test_the_api_tells_its_listener_and_the_chair_reads_the_direction(home: str) -> None:
    ended = run_mission({"request": "Plan a picnic for ten.", "team": {"operatives": 1}, "rounds": 2},
                        model=simulated_team(initial_products=2), home=home)
    events: list[MissionEvent] = []
    prompts: list[str] = []
    team = simulated_team(initial_products=2)
    play = team.fn

    def chair_reads(request):  # the simulated team, noting what the Chair's Plan prompt says
        if request.facts.step == "plan":
            content = request.messages[-1].content
            prompts.append(content if isinstance(content, str) else " ".join(b.get("text", "") for b in content))
        return play(request)

    team.fn = chair_reads
    result = continue_mission(ended.mission_id, "Add a rain plan.", rounds=1, model=team, home=home,
                              on_event=events.append)

    assert (ended.stop_reason, ended.round) == ("concluded", 1)  # everything accepted at round 1's closing decisions
    assert (result.state, result.round) == ("done", 2)  # one more round
    continued = [e for e in events if isinstance(e, MissionContinued)]
    assert [(e.round, e.direction, e.rounds) for e in continued] == [(1, "Add a rain plan.", 2)]
    assert "## The user's new direction" in prompts[0] and "Add a rain plan." in prompts[0]
    # Told once: the direction is MissionContinued's, not a user's message too (the CLI printed it twice).
    assert [e.text for e in events if isinstance(e, UserMessage)] == []


def test_only_an_ended_mission_continues(home: str, tmp_path: Path) -> None:
    question = Path(__file__).parent / "data" / "question.mission.yaml"
    halted = run_mission(question, home=home)
    assert halted.state == "halted"

    with pytest.raises(MissionError) as refused:
        continue_mission(halted.mission_id, "Something else.", home=home)

    assert str(refused.value) == (f"mission {halted.mission_id} has not ended (halted); answer its question: "
                                  f"cabal chat {halted.mission_id}")
    with pytest.raises(MissionError, match="the direction cannot be used: it is empty"):
        continue_mission(halted.mission_id, "  ", home=home)
