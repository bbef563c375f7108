"""`cabal fork`: a new mission from the start of a round of another, played by the simulated team
(`py:cabal.rounds.simulated:team`); the original is only read."""

from __future__ import annotations

import re

import pytest

from cabal import fork_mission
from cabal.report.html import render_html
from cabal.report.markdown import render_markdown
from cabal.rounds.api import run_mission
from cabal.rounds.control import mission_status, say
from cabal.rounds.events import MissionEvent, RoundStarted, TurnDone
from cabal.rounds.fork import round_started
from cabal.rounds.workspace import Workspace, mission_report

from .test_cli import cabal

SIMULATED = "py:cabal.rounds.simulated:team"
MISSION = {"request": "Write a short handbook for new volunteers.", "team": {"operatives": 2}, "rounds": 3,
           "model": SIMULATED}
DIRECTION = "Add what volunteers must know about safety at the warehouse."

History = tuple[list[tuple[int, dict]], list[tuple[int, dict]]]


@pytest.fixture(scope="module")
def home(graph_server) -> str:
    return str(graph_server.home)


def history(home: str, mission_id: str) -> History:
    """Every node and link of the mission's graph, with every property, in order of creation."""
    with Workspace.at(home).graph(mission_id) as graph:
        return graph.history()


@pytest.fixture(scope="module")
def original(home: str) -> tuple[str, dict[int, History]]:
    """A mission run to its end, and its graph as each round began (read by a listener of the run
    at the round's start, when the round had written only its status). The user leaves a message
    before rounds 1 and 2 close, so their closing decisions do not end the mission: the next
    Plan takes each message up."""
    at_start: dict[int, History] = {}

    def heard(event: MissionEvent) -> None:
        if isinstance(event, RoundStarted):
            at_start[event.round] = history(home, event.mission)
        if isinstance(event, TurnDone) and event.step == "inspect" and event.round < 3:
            say(event.mission, f"Keep round {event.round}'s changes short.", home=home)

    result = run_mission(MISSION, home=home, on_event=heard)
    assert (result.state, result.stop_reason, result.round) == ("done", "concluded", 3)
    return result.mission_id, at_start


def as_fork_sees_it(graph: History, original: str, fork: str) -> tuple[dict[str, dict], list[tuple[str, str, str]]]:
    """A graph's nodes and links, renamed to the fork's id, without the mission node (whose state
    a fork sets) and without the status the round had just written."""
    marker = {round_started(number) for number in range(1, 10)}
    nodes = {node["id"].replace(original, fork): {k: str(v).replace(original, fork) for k, v in node.items()}
             for _, node in graph[0] if node["id"] not in marker and node["node_type"] != "mission"}
    links = sorted((link["type"], link["from"].replace(original, fork), link["to"].replace(original, fork))
                   for _, link in graph[1] if link["from"] not in marker and link["to"] not in marker)
    return nodes, links


@pytest.mark.parametrize("round_number", [2, 3])
def test_a_fork_starts_from_the_graph_as_the_round_began_and_leaves_the_original_untouched(
        home: str, original: tuple[str, dict[int, History]], round_number: int) -> None:
    mission_id, at_start = original
    before = history(home, mission_id)
    forked: dict[str, History] = {}

    result = fork_mission(mission_id, round=round_number, home=home,
                          on_forked=lambda fork_id: forked.setdefault(fork_id, history(home, fork_id)))

    (fork_id, start), = forked.items()
    assert result.mission_id == fork_id != mission_id
    assert as_fork_sees_it(start, mission_id, fork_id) == as_fork_sees_it(at_start[round_number], mission_id, fork_id)
    head = next(node for _, node in start[0] if node["id"] == fork_id)
    assert (head["forked_from"], head["forked_round"], head["round"], head["status"]) == \
        (mission_id, round_number, round_number - 1, "interrupted")
    # The round's Plan takes up the message left in the round before; its closing decisions end it.
    assert (result.state, result.stop_reason, result.round) == ("done", "concluded", round_number)
    assert history(home, mission_id) == before  # node for node, link for link, every property
    assert mission_status(fork_id, home=home).lineage == f"forked from {mission_id} at round {round_number}"


def test_updates_made_in_later_rounds_are_undone_in_the_fork(home: str,
                                                              original: tuple[str, dict[int, History]]) -> None:
    mission_id, _ = original
    accepted = {p.name: (p.status, p.accepted_version and p.accepted_version.number)
                for p in mission_report(mission_id, home=home).products}
    seen: dict[str, dict] = {}

    def read(fork_id: str) -> None:
        with Workspace.at(home).graph(fork_id) as graph:
            seen.update({p["name"]: p for p in graph.find("product")})

    fork_mission(mission_id, round=2, home=home, on_forked=read)

    # The handbook, accepted at round 1's closing decisions, was reopened at rounds 2 and 3 for the
    # user's messages and accepted again (version 3); at the start of round 2 its version 1 was.
    assert accepted == {"Library": ("accepted", None), "Short handbook for new volunteers": ("accepted", 3)}
    assert {name: (p["status"], p.get("accepted_version")) for name, p in seen.items()} == {
        "Library": ("open", None), "Short handbook for new volunteers": ("accepted", "r1.write.operative-1.write_version0")}


def test_a_fork_with_a_direction_goes_another_way_and_diff_shows_how(home: str,
                                                                       original: tuple[str, dict[int, History]]) -> None:
    mission_id, _ = original

    forked = cabal("fork", mission_id, "--round", "3", "--direction", DIRECTION, "--home", home, "--quiet")

    assert forked.returncode == 0, forked.stderr
    fork_id = re.search(rf"^forked {mission_id} at the start of round 3: (\S+)$", forked.stdout, re.MULTILINE)[1]
    assert "state: done (concluded), round 3" in forked.stdout
    report = mission_report(fork_id, home=home)
    said = [(line.round, line.kind, line.text) for line in report.conversation if line.kind == "direction"]
    assert said == [(2, "direction", DIRECTION)]
    # The simulated Chair reopens the first accepted product for a new direction at its Plan (the
    # original reopened it for the user's message); its version 3, written in the last round, is
    # accepted at the closing decisions.
    overview = report.product("Short handbook for new volunteers")
    assert (overview.status, [v.number for v in overview.versions]) == ("accepted", [1, 2, 3])
    assert overview.description.startswith("Reworked for the user's new direction: Add what volunteers")
    original_overview = mission_report(mission_id, home=home).product("Short handbook for new volunteers")
    assert (original_overview.status, [v.number for v in original_overview.versions]) == ("accepted", [1, 2, 3])
    assert original_overview.description.startswith("Reworked for the user's message: Keep round 2's changes")
    # The report (cabal show, the exports, the web room's page) says where the fork came from.
    assert f'<p class="lineage muted">forked from {mission_id} at round 3</p>' in render_html(report)
    assert f"\n_forked from {mission_id} at round 3_\n\n## Request\n" in render_markdown(report)

    diff = cabal("diff", mission_id, fork_id, "--home", home)
    assert diff.returncode == 0, diff.stderr
    assert f"A: `{mission_id}`  \nB: `{fork_id}`\n\nB was forked from A at the start of round 3: rounds 1 to 2 are " \
           "A's\n\n1 same, 1 changed, 1 added product(s)\n" in diff.stdout
    assert ("### Short handbook for new volunteers (changed)\n\n- status: accepted / accepted; version compared: v3 / v3\n"
            in diff.stdout)
    assert "### What volunteers must know about safety at the warehouse (added)\n" in diff.stdout
    listed = cabal("missions", "--home", home)
    assert f"{fork_id}: done (concluded), round 3 · forked from {mission_id} at round 3\n" in listed.stdout


@pytest.mark.parametrize(("round_number", "shared"), [(1, "only the bootstrap is A's"), (2, "round 1 is A's")])
def test_a_fork_says_it_begins_the_round_it_was_forked_at_and_diff_what_it_shares(
        home: str, original: tuple[str, dict[int, History]], round_number: int, shared: str) -> None:
    mission_id, _ = original

    forked = cabal("fork", mission_id, "--round", str(round_number), "--home", home)

    assert forked.returncode == 0, forked.stderr
    fork_id = re.search(rf"^forked {mission_id} at the start of round {round_number}: (\S+)$", forked.stdout,
                        re.MULTILINE)[1]
    resumed = next(line for line in forked.stdout.splitlines() if " resumed " in line)
    assert resumed.startswith(f"mission {fork_id} resumed at the start of round {round_number} (")
    diff = cabal("diff", mission_id, fork_id, "--home", home)
    assert f"\n\nB was forked from A at the start of round {round_number}: {shared}\n\n" in diff.stdout


def test_a_fork_of_a_fork_and_its_own_round_limit(home: str, original: tuple[str, dict[int, History]]) -> None:
    mission_id, _ = original
    first = fork_mission(mission_id, round=3, home=home)
    first_graph = history(home, first.mission_id)

    second = fork_mission(first.mission_id, round=3, home=home, rounds=4, model="simulated")

    assert (second.state, second.stop_reason, second.round) == ("done", "concluded", 3)
    mission = mission_report(second.mission_id, home=home).mission
    assert (mission.lineage, mission.rounds, mission.model) == (f"forked from {first.mission_id} at round 3", 4,
                                                                "simulated")
    assert history(home, first.mission_id) == first_graph
    # Its rounds 1 and 2 are the first fork's, whose round 1 is the original's.
    turns = {(t.round, t.step, t.agent) for t in mission_report(second.mission_id, home=home).turns if t.round < 3}
    assert turns == {(t.round, t.step, t.agent) for t in mission_report(first.mission_id, home=home).turns
                     if t.round < 3}


@pytest.mark.parametrize(("round_number", "why"), [
    ("0", "round 0 is the Chair's bootstrap, before the first round"),
    ("4", "it started rounds 1 to 3"),
])
def test_a_round_the_mission_never_started_is_refused(home: str, original: tuple[str, dict[int, History]],
                                                      round_number: str, why: str) -> None:
    mission_id, _ = original
    listed = cabal("missions", "--home", home).stdout

    refused = cabal("fork", mission_id, "--round", round_number, "--home", home)

    assert refused.returncode == 2
    assert refused.stderr == (f"cabal: cannot fork {mission_id} at round {round_number}: {why}\n"
                              f"hint: cabal fork {mission_id} --round N, N from 1 to 3\n")
    assert cabal("missions", "--home", home).stdout == listed  # nothing was made
