"""A mission outlives its process: answered from another process, resumed after a kill -9.

The graph holds the facts and the SQLite checkpoint holds the loop's position, so a second
process picks a mission up where the first left it, without a lost or doubled write.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from cabal.graph import ContextGraph
from cabal import run_mission
from tests.polling import wait_until

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
CABAL = Path(sys.executable).with_name("cabal")
LAUNCH = ROOT / "examples" / "launch" / "launch.mission.yaml"
QUESTION = DATA / "question.mission.yaml"


def environment(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(DATA), os.environ.get("PYTHONPATH", "")]), **extra}


def cabal(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CABAL), *args], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          cwd=ROOT, env=environment(**env), timeout=60)


def mission_id_of(output: str) -> str:
    found = re.search(r"^mission:? (m-[\w-]+)", output, re.MULTILINE)
    assert found, output
    return found.group(1)


@pytest.fixture(scope="module")
def home(graph_server) -> str:
    return os.environ["CABAL_HOME"]


def test_a_question_asked_in_one_process_is_answered_in_another(home: str) -> None:
    asked = cabal("run", str(QUESTION), "--home", home)  # process A: runs until the Chair asks
    mission_id = mission_id_of(asked.stdout)

    assert asked.returncode == 3, asked.stderr  # 3: waiting for the user's answer
    with ContextGraph.open(name=mission_id, home=home) as graph:
        assert graph.get(mission_id)["status"] == "halted"
        assert graph.get("r0.bootstrap.halt")["status"] == "pending"
        assert not graph.exists("r0.bootstrap.chair-1.after1")

    answered = cabal("resume", mission_id, "--answer", "People installing it.", "--home", home)  # process B

    assert answered.returncode == 0, answered.stderr
    with ContextGraph.open(name=mission_id, home=home) as graph:
        halt = graph.get("r0.bootstrap.halt")
        second = graph.get("r0.bootstrap.chair-1.after1")
        mission = graph.get(mission_id)
        products = graph.find("product")
    assert (halt["status"], halt["answer"], halt["answered_round"]) == ("answered", "People installing it.", 0)
    assert (second["type"], second["outcome"]) == ("turn", "final")  # the Chair's second bootstrap turn
    assert (mission["status"], mission["stop_reason"], mission["round"]) == ("done", "concluded", 1)
    assert [(p["name"], p["status"]) for p in products] == [("README intro", "accepted")]


def test_two_questions_in_a_row_are_each_asked_and_answered_across_processes(home: str) -> None:
    # The Chair asks, is answered (process B), asks again, is answered (process C): each
    # question is its own halt, and each new process's script cursor starts at the right entry.
    asked = cabal("run", str(QUESTION), "--model", "scripted:two_questions.script.yaml", "--home", home)
    mission_id = mission_id_of(asked.stdout)
    again = cabal("resume", mission_id, "--answer", "People installing it.", "--home", home)
    done = cabal("resume", mission_id, "--answer", "Yes, say so.", "--home", home)

    assert asked.stdout.count("chair-1 asks you: Who reads the README first") == 1
    assert "state: halted (waiting for your answer), round 0" in again.stdout
    # Process B prints the answer it was given and the new question, not the first question again.
    assert "Who reads the README first" not in again.stdout
    assert "you: People installing it." in again.stdout
    assert again.stdout.count("chair-1 asks you: Should the paragraph mention that tally runs on Windows too?") == 1
    assert "state: done (concluded), round 1" in done.stdout, done.stdout + done.stderr
    with ContextGraph.open(name=mission_id, home=home) as graph:
        halts = [(h["id"], h["status"], h.get("answer")) for h in graph.find("halt")]
        turns = sorted(t["id"] for t in graph.find("moment", {"type": "turn", "round": 0}, fields=[]))
        products = graph.find("product")
    assert halts == [("r0.bootstrap.halt", "answered", "People installing it."),
                     ("r0.bootstrap.halt.after1", "answered", "Yes, say so."),
                     ("r1.close.halt", "done", None)]
    assert turns == ["r0.bootstrap.chair-1", "r0.bootstrap.chair-1.after1", "r0.bootstrap.chair-1.after2"]
    assert [(p["name"], p["status"]) for p in products] == [("README intro", "accepted")]


# --------------------------------------------------------------------------- kill -9, resume


def facts(graph: ContextGraph, mission_id: str) -> tuple[list[str], set[tuple[str, str, str]]]:
    """Every node id and every link, the mission's own id made generic. Nothing is left out:
    even the engine's status moments have deterministic ids, so a resumed mission writes
    exactly what a clean run does."""
    nodes = graph.read_cypher("MATCH (n) RETURN n.id AS id")
    ids = sorted("MISSION" if n["id"] == mission_id else n["id"] for n in nodes)
    links = graph.read_cypher("MATCH (a)-[r]->(b) RETURN type(r) AS type, a.id AS source, b.id AS target")
    generic = {(link["type"], "MISSION" if link["source"] == mission_id else link["source"],
                "MISSION" if link["target"] == mission_id else link["target"])
               for link in links}
    return ids, generic


def turn_counts(graph: ContextGraph) -> Counter:
    return Counter((t["round"], t["step"], t["agent"])
                   for t in graph.find("moment", {"type": "turn"}, fields=["round", "step", "agent"]))


def start_slow_run(mission: Path, model: str, latency: str, home: str, log: Path,
                   timeout: float) -> tuple[subprocess.Popen, str]:
    """``cabal run`` in its own process group with a slow model, its output in ``log``; returns
    the process and the mission id once the run has printed it."""
    with open(log, "w") as out:
        process = subprocess.Popen([str(CABAL), "run", str(mission), "--home", home, "--model", model],
                                   stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT,
                                   env=environment(CABAL_TEST_LATENCY=latency), start_new_session=True)
    try:
        started = wait_until(lambda: re.search(r"^mission (m-[\w-]+):", log.read_text(), re.MULTILINE),
                             timeout=timeout, what="the mission to start")
    except BaseException:
        kill_group(process)
        raise
    return process, started.group(1)


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL to the run's whole process group (if it still runs), then reap it."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def test_kill_9_mid_round_then_resume_leaves_the_graph_of_a_clean_run(home: str, tmp_path: Path) -> None:
    clean = run_mission(LAUNCH, home=home)  # the reference: the same mission, uninterrupted
    assert (clean.state, clean.stop_reason) == ("done", "concluded")

    # A slow model (0.3 s a call) keeps round 2's parallel Write turns in flight for a while.
    process, mission_id = start_slow_run(LAUNCH, "py:slow_factory:launch_model", "0.3", home,
                                         tmp_path / "run.log", timeout=30)
    try:
        with ContextGraph.open(name=mission_id, home=home) as graph:
            wait_until(lambda: graph.exists("r2.plan.chair-1"), timeout=30, what="round 2's plan")
            time.sleep(0.15)  # both operatives' round-2 Write calls are now mid-flight
            kill_group(process)
            killed_at = {t["step"] for t in graph.find("moment", {"type": "turn", "round": 2}, fields=["step"])}
            assert graph.get(mission_id)["status"] == "running"
    finally:
        kill_group(process)
    assert process.returncode == -signal.SIGKILL
    assert "presentation" not in killed_at and "plan" in killed_at  # it died inside round 2

    resumed = cabal("resume", mission_id, "--home", home, CABAL_TEST_LATENCY="0.02")

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "state: done (concluded), round 2" in resumed.stdout
    # It continued from the checkpoint: nothing before round 2 ran again, round 2 was finished.
    assert "round 1 · " not in resumed.stdout and "round 2 · presentation · envoy-1" in resumed.stdout
    with ContextGraph.open(name=mission_id, home=home) as graph, \
            ContextGraph.open(name=clean.mission_id, home=home) as reference:
        mission = graph.get(mission_id)
        assert (mission["status"], mission["stop_reason"]) == ("done", "concluded")
        turns = turn_counts(graph)
        assert turns == turn_counts(reference)
        # One turn per (round, step, agent); the Chair's bootstrap has two: the question, then
        # the charter it wrote after the answer (r0.bootstrap.chair-1 and ...chair-1.after1).
        assert turns.pop((0, "bootstrap", "chair-1")) == 2
        assert set(turns.values()) == {1} and len(turns) == 17
        duplicated = graph.read_cypher("MATCH (n) WITH n.id AS id, count(*) AS copies WHERE copies > 1 RETURN id")
        assert duplicated == []
        for node_type in ("product", "version", "inspection", "acceptance", "message", "collab", "review",
                          "reflection", "assignment", "halt"):
            mine = sorted(n["id"] for n in graph.find(node_type, fields=[]))
            theirs = sorted(n["id"] for n in reference.find(node_type, fields=[]))
            assert mine == theirs, node_type
        ids, links = facts(graph, mission_id)
        reference_ids, reference_links = facts(reference, clean.mission_id)
    assert ids == reference_ids
    assert links == reference_links


RESEARCH = ROOT / "examples" / "research" / "research.mission.yaml"
KILLS = 5  # random moments per test run; the seed is printed, so a failure can be replayed


def test_kill_9_at_random_moments_of_the_research_example_then_resume_leaves_a_clean_runs_graph(
        home: str, tmp_path: Path) -> None:
    clean = run_mission(RESEARCH, home=home)  # its unattended answer answers the Chair's question
    assert (clean.state, clean.stop_reason) == ("done", "concluded")
    with ContextGraph.open(name=clean.mission_id, home=home) as reference:
        expected = facts(reference, clean.mission_id)
    seed = int(time.time())
    rng = random.Random(seed)
    for kill in range(KILLS):
        after = rng.uniform(0.2, 2.4)  # seconds after the mission's first turn: anywhere in its life
        process, mission_id = start_slow_run(RESEARCH, "py:slow_factory:research_model", "0.05", home,
                                             tmp_path / f"run{kill}.log", timeout=60)
        try:
            time.sleep(after)
        finally:
            kill_group(process)

        status = cabal("status", mission_id, "--home", home)
        finished_before_the_kill = "done (concluded)" in status.stdout
        if not finished_before_the_kill:  # a dead process's mission is interrupted, never running
            assert f"{mission_id}: interrupted" in status.stdout, (seed, kill, status.stdout)
            resumed = cabal("resume", mission_id, "--home", home, CABAL_TEST_LATENCY="0.005")
            assert resumed.returncode == 0, (seed, kill, after, resumed.stdout + resumed.stderr)
            assert "state: done (concluded), round 3" in resumed.stdout, (seed, kill, resumed.stdout)
        with ContextGraph.open(name=mission_id, home=home) as graph:
            assert facts(graph, mission_id) == expected, (seed, kill, after)


def test_a_kill_between_the_chairs_question_and_the_files_answer_resumes_with_that_answer(home: str) -> None:
    # The narrowest moment of the random test above: the question is pending in the graph and
    # the mission file's answer not yet taken. Resume must take it, as a clean run does, not
    # wait for the user. The listener dies with the process the moment the question is told.
    clean = run_mission(RESEARCH, home=home)
    with ContextGraph.open(name=clean.mission_id, home=home) as reference:
        expected = facts(reference, clean.mission_id)
    die_at_the_question = (
        "import os, sys\nfrom cabal import run_mission\nfrom cabal.rounds.events import HaltRaised\n"
        "def listen(event):\n"
        "    if isinstance(event, HaltRaised):\n"
        "        print(event.mission, flush=True)\n"
        "        os._exit(9)\n"
        "run_mission(sys.argv[1], home=sys.argv[2], on_event=listen)\n")
    killed = subprocess.run([sys.executable, "-c", die_at_the_question, str(RESEARCH), home],
                            capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert killed.returncode == 9, killed.stderr
    mission_id = killed.stdout.strip()

    resumed = cabal("resume", mission_id, "--home", home)

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "state: done (concluded), round 3" in resumed.stdout
    with ContextGraph.open(name=mission_id, home=home) as graph:
        assert facts(graph, mission_id) == expected


# The order of a round's nodes, to say whether a checkpoint is past a step (bootstrap is round 0's).
NODE_ORDER = ("bootstrap", "round_start", "reflect", "plan", "write", "peer_review", "inspect", "close",
              "presentation")


@pytest.mark.parametrize("write", [1, 6, 13])
def test_a_kill_between_a_writes_send_and_its_reply_resumes_to_a_clean_runs_graph(
        home: str, tmp_path: Path, write: int) -> None:
    # Steps send their graph writes behind them (cabal.graph.behind). The process dies after the
    # server applied a step's write and before the reply was read: the write is in the graph,
    # and no checkpoint may say its step is done (the resume would start past it otherwise).
    clean = run_mission(LAUNCH, home=home)
    with ContextGraph.open(name=clean.mission_id, home=home) as reference:
        expected = facts(reference, clean.mission_id)
    died = tmp_path / "died.txt"

    killed = cabal("run", str(LAUNCH), "--home", home, "--model", "py:unacknowledged_factory:launch_model",
                   CABAL_TEST_DIE_AT_WRITE=str(write), CABAL_TEST_DIE_LOG=str(died))

    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    mission_id = mission_id_of(killed.stdout)
    landed = died.read_text().split()
    turn = next(re.fullmatch(r"r(\d+)\.([a-z_]+)\.[\w-]+", node_id) for node_id in landed
                if re.fullmatch(r"r(\d+)\.([a-z_]+)\.[\w-]+", node_id))
    killed_at = (int(turn.group(1)), NODE_ORDER.index(turn.group(2)))
    with ContextGraph.open(name=mission_id, home=home) as graph:
        assert [node_id for node_id in landed if not graph.exists(node_id)] == []  # the write landed whole
    checkpoint = checkpoint_state(home, mission_id)
    if checkpoint is not None:  # none yet if it died in the bootstrap's write
        # The resume starts at the checkpoint's next node, or after the node whose writes it saved
        # (LangGraph keeps a finished task's writes before the checkpoint that follows it).
        if checkpoint.next:
            assert (checkpoint.values["round"], NODE_ORDER.index(checkpoint.next[0])) <= killed_at, checkpoint
        else:
            assert (checkpoint.values["round"], NODE_ORDER.index(checkpoint.tasks[0].name)) < killed_at, checkpoint

    resumed = cabal("resume", mission_id, "--home", home)

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "state: done (concluded), round 2" in resumed.stdout
    with ContextGraph.open(name=mission_id, home=home) as graph:
        assert facts(graph, mission_id) == expected
        assert turn_counts(graph) == turn_counts(ContextGraph.open(name=clean.mission_id, home=home))


def checkpoint_state(home: str, mission_id: str):
    """The round loop's last checkpoint of a mission (LangGraph's state snapshot), or None."""
    from cabal.rounds.engine import build_graph
    from cabal.rounds.workspace import Workspace

    with Workspace.at(home, None).checkpointer() as saver:
        state = build_graph(saver).get_state({"configurable": {"thread_id": mission_id}})
    return state if state.created_at is not None else None
