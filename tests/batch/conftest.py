"""Fixtures of the batch tests: the session's graph server as the workspace, batch files
written for each test, a real PostgreSQL (pgserver) for checkpoints, and the facts of a
mission's graph to compare with a clean run."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cabal.graph import ContextGraph

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
QUESTION_SCRIPT = ROOT / "tests" / "rounds" / "data" / "question.script.yaml"
QUESTION = "Who reads the README first, people installing tally or people contributing to it?"
ANSWER = "People installing it."
CABAL = Path(sys.executable).with_name("cabal")

# Worker processes (forked from a server started once, or spawned by Dask) import the slow
# models from here: it must be on sys.path before the first of them starts.
if str(DATA) not in sys.path:
    sys.path.insert(0, str(DATA))
INPUT, OUTPUT = 8849, 705  # what one question mission's scripted calls count, with the README's requests
TOKENS = INPUT + OUTPUT


@pytest.fixture(scope="module")
def home(graph_server) -> str:
    return os.environ["CABAL_HOME"]


def batch_file(folder: Path, name: str, requests: list, *, model: str | None = None, answers: list | None = None,
               **extra) -> Path:
    """A batch file of the question mission (one operative, three rounds) with ``requests``."""
    mission = {"team": {"operatives": 1}, "rounds": 3, "model": model or f"scripted:{QUESTION_SCRIPT}"}
    if answers is not None:
        mission["answers"] = answers
    path = folder / f"{name}.batch.yaml"
    path.write_text(yaml.safe_dump({"name": name, "mission": mission, "requests": requests, **extra}, sort_keys=False))
    return path


def readme_requests(count: int) -> list[str]:
    """Requests of one length: the scripted model's token counts then agree across missions."""
    return [f"Write the opening paragraph of the README for tool-{n % 10}, a line counter." for n in range(count)]


def cabal(*args: str, timeout: float = 120, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The console script as a user runs it, without a terminal."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(DATA), os.environ.get("PYTHONPATH", "")]),
                   **(env or {})}
    return subprocess.run([str(CABAL), *args], capture_output=True, text=True, stdin=subprocess.DEVNULL, cwd=ROOT,
                          env=environment, timeout=timeout)


class WorkerKiller:
    """An ``on_event`` that kills the worker process of the first mission to reach round 1's
    Inspect, mid-mission (its version written, its closing decisions to come; the process, with
    SIGKILL: no chance to pause), and keeps every event."""

    def __init__(self) -> None:
        self.events: list = []
        self.killed: list[str] = []
        self._workers: dict[str, int] = {}

    def __call__(self, event) -> None:
        from cabal.batch.events import MissionAssigned
        from cabal.rounds.events import StepStarted
        from cabal.vocabulary import Step

        self.events.append(event)
        if isinstance(event, MissionAssigned):
            self._workers[event.mission_id] = int(event.worker.rsplit(":", 1)[1])
        elif isinstance(event, StepStarted) and (event.round, event.step) == (1, Step.INSPECT) and not self.killed:
            self.killed.append(event.mission)
            os.kill(self._workers[event.mission], signal.SIGKILL)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The command line in this process (no interpreter start-up): exit status, stdout, stderr."""
    from cabal.cli import main

    capsys.readouterr()
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def facts(graph: ContextGraph, mission_id: str) -> tuple[list[str], set[tuple[str, str, str]]]:
    """Every node id and every link (type, from, to) of a mission's graph, its own id made
    generic. Nothing is left out: even the engine's status moments have deterministic ids."""
    generic = lambda node_id: "MISSION" if node_id == mission_id else node_id  # noqa: E731
    ids = sorted(generic(n["id"]) for n in graph.read_cypher("MATCH (n) RETURN n.id AS id"))
    links = graph.read_cypher("MATCH (a)-[r]->(b) RETURN type(r) AS type, a.id AS source, b.id AS target")
    return ids, {(link["type"], generic(link["source"]), generic(link["target"])) for link in links}


def mission_facts(home: str, mission_id: str) -> tuple[list[str], set[tuple[str, str, str]]]:
    with ContextGraph.open(name=mission_id, home=home) as graph:
        return facts(graph, mission_id)


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory):
    """A real PostgreSQL server in a temporary folder (the pgserver wheel: no system install)."""
    import pgserver

    folder = tmp_path_factory.mktemp("postgres")
    server = pgserver.get_server(folder, cleanup_mode="stop")
    yield server.get_uri()
    server.cleanup()
    shutil.rmtree(folder, ignore_errors=True)
