"""Shared fixtures: one real embedded FalkorDB server per test session, a fresh graph per test."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from cabal.graph import ContextGraph, EmbeddedServer
# The fake providers' servers, as fixtures every test folder may ask for by name.
from tests.llm.fake_ollama import ollama_api  # noqa: F401 - a fixture
from tests.llm.fake_openai import openai_api  # noqa: F401 - a fixture

_graph_names = itertools.count()

# The servers tests start stay up for the session (or until the test stops them): no idle watcher
# beside each of them. tests/graph/test_idle.py gives its servers an idle time of their own.
os.environ.setdefault("CABAL_GRAPH_IDLE_MINUTES", "0")


@pytest.fixture(scope="session")
def graph_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The workspace of the session's embedded server (CABAL_HOME points at it)."""
    home = tmp_path_factory.mktemp("cabal-home")
    return home


@pytest.fixture(scope="session")
def graph_server(graph_home: Path):
    previous = {key: os.environ.pop(key, None) for key in ("FALKORDB_URL", "NGRAM_FALKORDB_HOST", "NGRAM_FALKORDB_PORT")}
    os.environ["CABAL_HOME"] = str(graph_home)
    server = EmbeddedServer(graph_home)
    server.start()
    yield server
    server.stop()
    for key, value in previous.items():
        if value is not None:
            os.environ[key] = value


@pytest.fixture
def graph(graph_server: EmbeddedServer, request: pytest.FixtureRequest):
    """A fresh, empty named graph on the session's server, dropped after the test."""
    name = f"test_{os.getpid()}_{next(_graph_names)}"
    context_graph = ContextGraph.open(name=name, home=graph_server.home)
    yield context_graph
    context_graph.delete_graph()
    context_graph.close()
