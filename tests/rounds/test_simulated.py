"""The simulated team plays whole missions by the rules: no failed turn, work gets accepted; its
products follow the request's deliverables, its versions quote the user's material and take up
the user's word, and its Chair asks a question when the mission file has answers to give."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from cabal.graph import ContextGraph
from cabal.llm import make_model
from cabal.rounds.api import continue_mission, run_mission
from cabal.rounds.control import say
from cabal.rounds.events import Answered, HaltRaised, MissionEvent, TurnDone
from cabal.rounds.deliverables import DEFAULT_DELIVERABLES, deliverables
from cabal.rounds.simulated import simulated_team
from cabal.rounds.workspace import mission_report

from .test_cli import cabal, mission_id_of

REQUEST = "Write a short handbook for new volunteers of a food bank."


@pytest.fixture(scope="module")
def home(graph_server) -> Path:
    return graph_server.home


def play(home: Path, model, *, operatives: int, rounds: int):
    events: list[MissionEvent] = []
    result = run_mission({"request": REQUEST, "team": {"operatives": operatives}, "rounds": rounds},
                         model=model, home=home, on_event=events.append)
    turns = [e for e in events if isinstance(e, TurnDone)]
    return result, turns


def test_three_rounds_with_two_operatives_complete_without_a_failed_turn(home: Path) -> None:
    result, turns = play(home, simulated_team(initial_products=4), operatives=2, rounds=3)

    assert result.state == "done"
    assert [t for t in turns if t.outcome == "failed"] == []
    assert all(t.attempts == 1 for t in turns)  # every answer valid the first time
    # Round 1 writes the three Content products, and its closing decisions accept them and end the mission.
    assert (result.stop_reason, result.round) == ("concluded", 1)
    with ContextGraph.open(name=result.mission_id, home=home) as graph:
        statuses = {p["name"]: p["status"] for p in graph.find("product")}
        # The request names one deliverable; initial_products=4 fills the other two from the topics.
        assert statuses == {"Library": "open", "Short handbook for new volunteers of a food bank": "accepted",
                            "Overview": "accepted", "Audience": "accepted"}
        steps = Counter((t.round, t.step) for t in turns)
    assert steps[(1, "write")] == 2 and steps[(1, "peer_review")] == 2 and steps[(1, "inspect")] == 1
    assert steps[(1, "close")] == 1 and steps[(1, "presentation")] == 1 and max(r for r, _ in steps) == 1


def test_a_growing_tree_keeps_being_accepted(home: Path) -> None:
    rounds = 6
    result, turns = play(home, simulated_team(initial_products=3, products_per_round=2), operatives=3, rounds=rounds)

    assert (result.state, result.stop_reason, result.round) == ("done", "noMoreRounds", rounds)
    assert [t for t in turns if t.outcome != "final"] == []
    with ContextGraph.open(name=result.mission_id, home=home) as graph:
        products = graph.find("product")
        accepted = Counter(a["round"] for a in graph.find("acceptance") if a.get("accepted"))
        written = {v["product_id"]: v["round"] for v in graph.find("version")}
    # The Library at bootstrap, 2 more at round 1 (initial_products=3) and 2 more every round, all under the Library.
    assert len(products) == 3 + 2 * rounds
    library = next(p["id"] for p in products if p["name"] == "Library")
    assert sum(p.get("parent_id") == library for p in products) == 2 + 2 * rounds
    # Round 1's closing decisions accept the 2 initial Content products and round 1's 2; every
    # later round's the 2 products it added and wrote: each in the round it was written and passed.
    assert accepted == {1: 4, **{r: 2 for r in range(2, rounds + 1)}}
    assert all(p["status"] == "accepted" for p in products if p["name"] != "Library")
    assert all(p["accepted_round"] == written[p["id"]] for p in products if p["name"] != "Library")


def test_done_at_round_halts_in_that_rounds_plan_and_presents_the_round(home: Path) -> None:
    result, turns = play(home, simulated_team(products_per_round=1, done_at_round=2), operatives=2, rounds=5)

    assert (result.state, result.stop_reason, result.round) == ("done", "concluded", 2)
    assert [(t.step, t.outcome) for t in turns[-2:]] == [("plan", "halt"), ("presentation", "final")]


def test_the_cli_factory_builds_the_default_team() -> None:
    model = make_model("py:cabal.rounds.simulated:team")
    assert model.fn.products_per_round == 0 and model.fn.initial_products is None  # one per deliverable
    assert make_model("py:cabal.rounds.simulated:team", products_per_round=2).fn.products_per_round == 2


# ----------------------------------------------------------------------- the request's deliverables

RESTAURANT = ("Our restaurant is switching to a kitchen display system. We need to know which options to compare, "
              "a rollout plan for a quiet week, and a one-page staff training guide.")


@pytest.mark.parametrize(("request_text", "expected"), [
    (RESTAURANT, ("Options to compare", "Rollout plan for a quiet week", "One-page staff training guide")),
    ("Plan our spring fair.\n- a volunteer rota\n- The budget.\n* posters: A3, in colour",
     ("Volunteer rota", "Budget", "Posters")),
    ("For the launch we need:\n1. Press release\n2) FAQ for customers\n3. Launch-day checklist",
     ("Press release", "FAQ for customers", "Launch-day checklist")),
    ("Please prepare a menu, a shopping list and a seating plan for the party.",
     ("Menu", "Shopping list", "Seating plan for the party")),
    ("I would like you to write a one-page summary and a slide outline.", ("One-page summary", "Slide outline")),
    ("Deliverables: cost sheet; vendor shortlist and a memo", ("Cost sheet", "Vendor shortlist", "Memo")),
    ("Our café closes late. I need a checklist for closing at night.", ("Checklist for closing at night",)),
    ("Write a short handbook for new volunteers of a food bank.", ("Short handbook for new volunteers of a food bank",)),
    ("Write the opening paragraph for tally, a tool that counts lines; compare its price with Notely's.",
     ("Opening paragraph for tally",)),  # commas with no "and" before the last part: not a list
    ("We want a comparison of three tools and risks and benefits summary.",  # "and" without an article joins
     ("Comparison of three tools and risks and benefits summary",)),
    ("Plan the onboarding of a dental clinic's online booking.", DEFAULT_DELIVERABLES),  # none named
    ("We need to switch to a new supplier soon.", DEFAULT_DELIVERABLES),  # an action, not a thing to deliver
])
def test_the_deliverables_a_request_names_become_product_names(request_text: str, expected: tuple[str, ...]) -> None:
    assert deliverables(request_text) == expected


def test_with_no_default_a_request_that_names_nothing_gives_nothing() -> None:
    assert DEFAULT_DELIVERABLES == ("Overview", "Plan of action", "Risks and open questions")
    assert deliverables("Help us, please.", default=()) == ()
    assert deliverables("Add a rain plan.", default=()) == ("Rain plan",)


def test_a_newcomers_run_names_the_products_after_the_requests_deliverables(home: Path, tmp_path: Path) -> None:
    mission = tmp_path / "kds.mission.yaml"
    mission.write_text(f"request: {RESTAURANT!r}\nteam: {{operatives: 2}}\nrounds: 3\n")

    ran = cabal("run", str(mission), "--model", "simulated", "--home", str(home), "--quiet")

    assert ran.returncode == 0, ran.stderr
    assert "state: done (concluded), round 1" in ran.stdout
    assert "accepted: Library, Options to compare, Rollout plan for a quiet week, One-page staff training guide\n" \
        in ran.stdout
    report = mission_report(mission_id_of(ran.stdout), home=str(home))
    library, *products = report.live_products
    assert [(p.name, p.parent_id) for p in products] == [
        ("Options to compare", library.id), ("Rollout plan for a quiet week", library.id),
        ("One-page staff training guide", library.id)]
    rollout = products[1]
    assert rollout.dod == (f'The rollout plan for a quiet week the user asked for in: "{RESTAURANT}" Done when the '
                           "user can act on it without asking back.")
    assert rollout.accepted_version.content.startswith(
        f"Rollout plan for a quiet week, version 1, by operative-2 in round 1 for [[p:{rollout.id}]]. "
        f"What it is for: {rollout.dod} Outline: who uses it and when;")
    assert report.questions == ()  # no answers in the file: the Chair asks nothing, the run ends by itself


# ------------------------------------------------------------------ sources, the user's word, questions

SOURCES = Path(__file__).parents[2] / "examples" / "sources" / "sources.mission.yaml"


def test_a_version_quotes_the_best_section_found_and_cites_it(home: Path) -> None:
    result = run_mission(SOURCES, model=simulated_team(initial_products=2), rounds=1, home=home)

    assert (result.state, result.failed_turns) == ("done", 0)
    report = mission_report(result.mission_id, home=str(home))
    (version,) = report.product("Overview").versions
    quoted = "The user's material says: \"The student plan must cost less than 5 USD a month.\" "
    assert quoted + "[[s:s1#4]], from [[s:s1]]." in version.content
    assert quoted + "[docs/product-brief.md: Constraints], from [docs/product-brief.md]." \
        in report.readable(version.content)
    with ContextGraph.open(name=result.mission_id, home=home) as graph:
        cited = sorted(link["to"] for link in graph.links_from(version.id, "cites"))
    assert cited == ["s1", "s1#4"]


def test_a_continue_direction_is_taken_up_in_the_next_version_and_what_it_names_is_added(home: Path) -> None:
    request = "Plan a picnic for ten. We need a shopping list and a games plan."
    ended = run_mission({"request": request, "team": {"operatives": 1}, "rounds": 3}, model=simulated_team(),
                        home=home)
    assert (ended.state, ended.stop_reason) == ("done", "concluded")

    result = continue_mission(ended.mission_id, "Add a rain plan.", rounds=3, model=simulated_team(), home=home)

    assert (result.state, result.stop_reason, result.round) == ("done", "concluded", 2)
    report = mission_report(result.mission_id, home=str(home))
    library = report.product("Library")
    assert [(p.name, p.status, p.parent_id) for p in report.live_products] == [
        ("Library", "accepted", None), ("Shopping list", "accepted", library.id),
        ("Games plan", "accepted", library.id), ("Rain plan", "accepted", library.id)]
    first, second = report.product("Shopping list").versions
    assert second.change_summary == "Version 2: takes up the user's new direction: Add a rain plan"
    taken_up = "What this version changes: it takes up the user's new direction: Add a rain plan. Outline:"
    assert taken_up in second.content and "direction" not in first.content
    assert (second.round, report.product("Shopping list").accepted_version.number) == (2, 2)


def test_a_message_the_user_leaves_is_taken_up_in_the_next_version(home: Path) -> None:
    said: list[str] = []

    def leave_a_message(event: MissionEvent) -> None:  # as the user would, while round 1's list is written
        if isinstance(event, TurnDone) and (event.round, event.step) == (1, "write"):
            said.append(say(event.mission, "Keep the list vegetarian.", home=home))

    result = run_mission({"request": "Plan a picnic for ten. I need a shopping list.", "team": {"operatives": 1},
                          "rounds": 4}, model=simulated_team(), home=home, on_event=leave_a_message)

    assert len(said) == 1 and (result.state, result.stop_reason) == ("done", "concluded")
    versions = mission_report(result.mission_id, home=str(home)).product("Shopping list").versions
    # Accepted at round 1's closing decisions, which leave the mission open for the message: round
    # 2's Plan reopens the list for one more version that takes it up.
    assert [(v.number, v.round, v.accepted) for v in versions] == [(1, 1, False), (2, 2, True)]
    assert versions[1].change_summary == "Version 2: takes up the user's message: Keep the list vegetarian"
    assert "it takes up the user's message: Keep the list vegetarian. Outline:" in versions[1].content


def test_the_chair_asks_its_question_when_the_mission_file_has_answers(home: Path) -> None:
    events: list[MissionEvent] = []
    answer = "The cooks first; keep each to one page."
    result = run_mission({"request": RESTAURANT, "team": {"operatives": 2}, "rounds": 3, "answers": [answer]},
                         model=simulated_team(), home=home, on_event=events.append)

    assert (result.state, result.stop_reason) == ("done", "concluded")
    asked = [e for e in events if isinstance(e, HaltRaised)]
    assert [(e.round, e.step, e.message) for e in asked] == [(0, "bootstrap", (
        "Before the team starts on Options to compare, Rollout plan for a quiet week and One-page staff training "
        "guide: who will use them first, and what must the team keep to?"))]
    assert [(e.text, e.source) for e in events if isinstance(e, Answered)] == [(answer, "mission file")]
    report = mission_report(result.mission_id, home=str(home))
    assert report.mission.constraints[-1] == "Keep to the user's answer: The cooks first; keep each to one page"
    assert all(p.dod.endswith("It keeps to the user's answer: The cooks first; keep each to one page.")
               for p in report.live_products if p.type == "Content")


def test_a_message_left_in_the_round_the_chair_would_end_is_taken_up_with_its_words_whole(home: Path) -> None:
    said: list[str] = []

    def leave_a_message(event: MissionEvent) -> None:  # as `cabal say` from another terminal, before the Close
        if isinstance(event, TurnDone) and (event.round, event.step) == (1, "inspect"):
            said.append(say(event.mission, "Ship v1.0 first.", home=home))

    result = run_mission({"request": "Plan a picnic for ten. I need a shopping list.", "team": {"operatives": 1},
                          "rounds": 3}, model=simulated_team(), home=home, on_event=leave_a_message)

    # Accepted in round 1, the list would end the mission at round 1's closing decisions: the
    # message, not yet read by a Plan, keeps it open, and round 2 takes it up.
    assert len(said) == 1 and (result.state, result.stop_reason, result.round) == ("done", "concluded", 2)
    versions = mission_report(result.mission_id, home=str(home)).product("Shopping list").versions
    assert [(v.number, v.round, v.accepted) for v in versions] == [(1, 1, False), (2, 2, True)]
    assert versions[1].change_summary == "Version 2: takes up the user's message: Ship v1.0 first"
