"""Fixtures of the procedure tests: a Procedures runtime on the test's real graph, and an actor."""

from __future__ import annotations

from pathlib import Path

import pytest

from cabal.procedures import Procedures

TEST_PROCEDURES = Path(__file__).parent / "procedures"
ACTOR = "actor:ada"


@pytest.fixture
def procedures(graph) -> Procedures:
    return Procedures(graph, [TEST_PROCEDURES])


@pytest.fixture
def actor(graph) -> str:
    graph.create_cluster([{"id": ACTOR, "node_type": "actor", "type": "agent", "name": "Ada"}])
    return ACTOR
