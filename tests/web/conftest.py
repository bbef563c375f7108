"""Fixtures of the web tests: the application under Starlette's test client (fast, no socket),
and a real server on a free port for the browser."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from cabal.rounds.workspace import Workspace
from cabal.web.app import create_app
from cabal.web.security import Security
from tests.polling import wait_until

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "rounds" / "data"
QUESTION = DATA / "question.mission.yaml"
QUESTION_SCRIPT = DATA / "question.script.yaml"
LAUNCH = ROOT / "examples" / "launch" / "launch.mission.yaml"


@pytest.fixture(scope="module")
def workspace(graph_server) -> Workspace:
    return Workspace.at(graph_server.home)


@pytest.fixture(scope="module")
def security() -> Security:
    return Security.for_address("127.0.0.1", 8765)


@pytest.fixture(scope="module")
def client(workspace: Workspace, security: Security):
    """The app as a loopback server at 127.0.0.1:8765 sees it (its lifespan runs: poller, runner)."""
    with TestClient(create_app(workspace, security, poll_s=0.2), base_url="http://127.0.0.1:8765",
                    raise_server_exceptions=False) as test_client:
        yield test_client


def serve_in_thread(server) -> threading.Thread:
    """Run a ``WebServer`` in a thread until its ``stop()``; returns once it accepts requests."""
    thread = threading.Thread(target=server.run, daemon=True, name="cabal-web-test")
    thread.start()
    wait_until(lambda: server.server.started, timeout=20, what="the web server to start")
    return thread
