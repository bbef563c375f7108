"""A model that answers like a bad real one, over many seeds: no mission crashes, none is left
running, and what reaches the graph is consistent and clean.

The chaos team (``chaos.py``) answers half its calls with the simulated team's valid answer
and the rest with every way a real model or API gets a reply wrong. Missions then end done (some
turns may fail, which the result says), or failed when the bootstrap itself found no valid
answer, with the reason; never with a traceback, never ``running``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from cabal.graph import ContextGraph
from cabal.limits import unprintable
from cabal.rounds.api import run_mission
from cabal.rounds.control import mission_status

from .chaos import CORRUPTIONS, chaos_model

SEEDS = range(12)
MISSION = {"name": "chaos", "request": "Write a short handbook for new volunteers.", "team": {"operatives": 2},
           "rounds": 2}
ANNOUNCED = ("product", "version", "collab", "review", "inspection", "reflection", "assignment", "acceptance",
             "message", "remark", "halt")  # each is written by a turn whose moment is about it
dealt: Counter[str] = Counter()


@pytest.fixture(scope="module")
def home(graph_server) -> Path:
    return graph_server.home


def problems_in(graph: ContextGraph) -> list[str]:
    """What is wrong with a mission's graph: each a sentence, none expected."""
    found = []
    for row in graph.read_cypher("MATCH (v:Version) OPTIONAL MATCH (v)-[:VERSION_OF]->(p:Product) "
                                 "WITH v, count(p) AS products WHERE products <> 1 RETURN v.id AS id"):
        found.append(f"version {row['id']} does not belong to exactly one product")
    for kind in ANNOUNCED:
        for row in graph.read_cypher("MATCH (n) WHERE n.node_type = $kind AND NOT (n)<-[:ABOUT]-(:Moment) "
                                     "RETURN n.id AS id", {"kind": kind}):
            found.append(f"{kind} {row['id']} has no moment about it")
    for row in graph.read_cypher("MATCH (f) WHERE f.node_type = 'finding' AND NOT (f)--(:Inspection) "
                                 "RETURN f.id AS id"):
        found.append(f"finding {row['id']} belongs to no inspection")
    for row in graph.read_cypher("MATCH (m:Moment) WHERE m.type = 'turn' AND NOT (m)<-[:EXPRESSES]-() "
                                 "RETURN m.id AS id"):
        found.append(f"turn {row['id']} is expressed by no one")
    for row in graph.read_cypher("MATCH (n) WHERE NOT (n)--() RETURN n.id AS id"):
        found.append(f"node {row['id']} is linked to nothing")
    for node in graph.read_cypher("MATCH (n) RETURN properties(n) AS p"):
        for key, value in node["p"].items():
            texts = value if isinstance(value, list) else [value]
            for text in texts:
                if isinstance(text, str) and unprintable(text):
                    found.append(f"{node['p'].get('id')}.{key} holds {unprintable(text)}")
    return found


@pytest.mark.parametrize("seed", SEEDS)
def test_a_bad_model_never_crashes_strands_or_stains_a_mission(seed: int, home: Path) -> None:
    model, team = chaos_model(seed, initial_products=3)

    result = run_mission(MISSION, model=model, home=home)

    dealt.update(team.dealt)
    assert result.state in ("done", "failed"), (result.state, result.detail)
    if result.state == "failed":  # only a bootstrap with no valid answer can end a mission this way
        assert (result.stop_reason, result.round) == ("error", 0) and result.detail.startswith("bootstrap failed: ")
    else:
        # Everything accepted at a round's closing decisions ends the mission there; else its rounds run out.
        assert result.stop_reason in ("concluded", "noMoreRounds")
    assert mission_status(result.mission_id, home=home).state == result.state  # and it stays so
    with ContextGraph.open(name=result.mission_id, home=home) as graph:
        assert problems_in(graph) == []
        failed = len(graph.find("moment", {"type": "turn", "outcome": "failed"}))
    assert result.failed_turns == failed


def test_the_seeds_dealt_every_kind_of_bad_reply() -> None:
    # Runs after the seeds above (pytest keeps file order): the chaos was real and varied.
    assert set(CORRUPTIONS) <= set(dealt), sorted(set(CORRUPTIONS) - set(dealt))
    assert dealt["valid"] > sum(n for kind, n in dealt.items() if kind != "valid") / 2
