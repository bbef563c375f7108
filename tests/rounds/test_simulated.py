"""The simulated team plays whole missions by the rules: no failed turn, work gets accepted."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from cabal.graph import ContextGraph
from cabal.llm import make_model
from cabal.rounds.api import run_mission
from cabal.rounds.events import MissionEvent, TurnDone
from cabal.rounds.simulated import simulated_team

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
    # Round 1 writes the three Content products, round 2 accepts them, round 3 has nothing left.
    assert (result.stop_reason, result.round) == ("concluded", 3)
    with ContextGraph.open(name=result.mission_id, home=home) as graph:
        statuses = {p["name"]: p["status"] for p in graph.find("product")}
        assert statuses == {"Library": "open", "Overview 1": "accepted", "Audience 2": "accepted",
                            "Requirements 3": "accepted"}
        steps = Counter((t.round, t.step) for t in turns)
    assert steps[(1, "write")] == 2 and steps[(1, "peer_review")] == 2 and steps[(1, "inspect")] == 1
    assert steps[(2, "reflect")] == 2 and steps[(2, "presentation")] == 1


def test_a_growing_tree_keeps_being_accepted(home: Path) -> None:
    rounds = 6
    result, turns = play(home, simulated_team(initial_products=3, products_per_round=2), operatives=3, rounds=rounds)

    assert (result.state, result.stop_reason, result.round) == ("done", "noMoreRounds", rounds)
    assert [t for t in turns if t.outcome != "final"] == []
    with ContextGraph.open(name=result.mission_id, home=home) as graph:
        products = graph.find("product")
        accepted = Counter(a["round"] for a in graph.find("acceptance") if a.get("accepted"))
        collabs = graph.find("collab")
        addressed = {c for r in graph.find("reflection", fields=["addressed"]) for c in r.get("addressed") or []}
    # 3 at bootstrap (the Library among them) and 2 more every round, all under the Library.
    assert len(products) == 3 + 2 * rounds
    library = next(p["id"] for p in products if p["name"] == "Library")
    assert sum(p.get("parent_id") == library for p in products) == 2 * rounds
    # Round 2 accepts the 2 initial Content products and round 1's 2; every later round the
    # 2 products added the round before; the last round's closing decisions also the 2 it wrote.
    assert accepted == {2: 4, **{r: 2 for r in range(3, rounds)}, rounds: 4}
    assert all(p["status"] == "accepted" for p in products if p["name"] != "Library")
    # Every collab on a product accepted at a Plan was answered by its owner's reflection first
    # (at the closing decisions, the last round's reviews stay on the record, unanswered).
    accepted_ids = {p["id"] for p in products if p["status"] == "accepted" and p["accepted_round"] < rounds}
    on_accepted = {c["id"] for c in collabs if c["product_id"] in accepted_ids}
    assert on_accepted and on_accepted <= addressed


def test_done_at_round_halts_in_that_rounds_plan_and_presents_the_round(home: Path) -> None:
    result, turns = play(home, simulated_team(products_per_round=1, done_at_round=2), operatives=2, rounds=5)

    assert (result.state, result.stop_reason, result.round) == ("done", "concluded", 2)
    assert [(t.step, t.outcome) for t in turns[-2:]] == [("plan", "halt"), ("presentation", "final")]


def test_the_cli_factory_builds_the_default_team() -> None:
    model = make_model("py:cabal.rounds.simulated:team")
    assert model.fn.products_per_round == 0 and model.fn.initial_products == 6
    assert make_model("py:cabal.rounds.simulated:team", products_per_round=2).fn.products_per_round == 2
