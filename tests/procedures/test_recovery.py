"""Recovery from graph state alone: E3 (orphan run space) and B6 (a process killed mid-run)."""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from cabal.graph import ContextGraph
from cabal.procedures import Procedures, load_procedure, template_id

from tests.procedures.conftest import TEST_PROCEDURES
from tests.procedures.helpers import ACTIVE, COMPLETED, active_steps, narrative, notes, step_links

TEMPLATE = template_id(load_procedure("checklist", [TEST_PROCEDURES]))
REPO = Path(__file__).resolve().parents[2]


def orphan(graph, run_id: str) -> None:
    """Damage a run the way only an outside writer could: take away its active step link."""
    step = next(link["to"] for link in graph.links_from(run_id, "acts_on"))
    graph.create_cluster([], [], unlinks=[{"type": "acts_on", "from": run_id, "to": step}])
    assert active_steps(graph, run_id) == []


def test_e3_continue_repairs_an_orphan_run_and_goes_on(graph, procedures, actor, caplog):
    run_id = procedures.start_procedure("checklist", actor).run_id
    procedures.record(run_id, actor, notes("n1", "n2"))
    orphan(graph, run_id)
    assert procedures.state(run_id).orphaned
    with caplog.at_level(logging.WARNING, logger="cabal.procedures"):
        moved = procedures.continue_procedure(run_id)
    assert (moved.status, moved.step_id) == ("active", "summarize")
    assert step_links(graph, run_id) == {"gather": ("receives_from", COMPLETED), "summarize": ("acts_on", ACTIVE)}
    assert [r.getMessage() for r in caplog.records] == [
        f"run {run_id} had no active step; heated {TEMPLATE}/gather after the last completed step"
    ]


def test_e3_recover_heats_the_step_after_the_last_completed_one(graph, procedures, actor):
    run_id = procedures.start_procedure("checklist", actor).run_id
    procedures.record(run_id, actor, notes("n1", "n2"))
    procedures.continue_procedure(run_id)
    healthy = procedures.recover(run_id)
    assert (healthy.recovered, healthy.step_id) == (False, "summarize")
    orphan(graph, run_id)
    repaired = procedures.recover(run_id)
    assert (repaired.recovered, repaired.status, repaired.step_id) == (True, "active", "summarize")
    assert step_links(graph, run_id) == {"gather": ("receives_from", COMPLETED), "summarize": ("acts_on", ACTIVE)}


def test_e3_an_orphan_with_every_step_done_is_ended(graph, procedures, actor):
    run_id = procedures.start_procedure("checklist", actor).run_id
    steps = [f"{TEMPLATE}/{s}" for s in ("gather", "summarize", "sign")]
    graph.create_cluster(
        [], [{"type": "receives_from", "from": run_id, "to": s, "properties": COMPLETED} for s in steps],
        unlinks=[{"type": "acts_on", "from": run_id, "to": steps[0]}],
    )  # fmt: skip
    assert procedures.recover(run_id).status == "completed"
    assert graph.get(run_id)["status"] == "completed"
    assert graph.links_to(run_id) == [{"type": "inhabits", "from": actor, "to": run_id, "properties": {"energy": 1}}]


def test_two_active_steps_keep_the_furthest(graph, procedures, actor):
    run_id = procedures.start_procedure("checklist", actor).run_id
    graph.create_cluster([], [{"type": "acts_on", "from": run_id, "to": f"{TEMPLATE}/summarize", "properties": ACTIVE}])
    assert active_steps(graph, run_id) == ["gather", "summarize"]
    assert procedures.recover(run_id).step_id == "summarize"
    assert step_links(graph, run_id) == {"gather": ("receives_from", COMPLETED), "summarize": ("acts_on", ACTIVE)}


CHILD = textwrap.dedent(
    """
    import json, sys, time
    from cabal.graph import ContextGraph
    from cabal.procedures import Procedures

    graph_name, actor = sys.argv[1], sys.argv[2]
    procedures = Procedures(ContextGraph.open(name=graph_name))
    run_id = procedures.start_procedure("write_adr", actor).run_id
    question = {"id": "q", "node_type": "narrative", "type": "question", "name": "How do we store sessions?",
                "content": "Sessions live in memory and vanish on deploy."}
    procedures.record(run_id, actor, [question])
    moved = procedures.continue_procedure(run_id)
    print(json.dumps({"run_id": run_id, "step_id": moved.step_id}), flush=True)
    time.sleep(600)  # between two steps: the parent kills this process here
    """
)


def test_b6_a_new_process_finishes_a_run_whose_process_was_killed(graph, graph_server, actor):
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # CABAL_HOME points at the session's server
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, graph.name, actor], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO
    )
    try:
        ready, _, _ = select.select([child.stdout], [], [], 60)
        assert ready, "the child never reported its first step"
        line = child.stdout.readline()
        assert line, child.stderr.read().decode()
        report = json.loads(line)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    assert report["step_id"] == "options"
    run_id = report["run_id"]

    # A new connection and a new runtime: everything it knows comes from the graph.
    with ContextGraph.open(name=graph.name, home=graph_server.home) as fresh:
        procedures = Procedures(fresh)
        state = procedures.state(run_id)
        template = procedures.template(state.template_id)
        assert [template.procedure.steps[template.index_of_node(s)].id for s in state.active] == ["options"]
        assert [template.procedure.steps[template.index_of_node(s)].id for s in state.completed] == ["frame"]
        assert state.occupants == (actor,)
        contents = fresh.contents_of(run_id)
        assert [n["id"] for n in contents if n["node_type"] == "narrative"] == ["q"]
        assert [n["type"] for n in contents if n["node_type"] == "moment"] == ["procedure_work"]

        options = [narrative(f"o{i}", "option", content=f"Option {i}") for i in (1, 2)]
        procedures.record(run_id, actor, options, [{"type": "about", "from": o["id"], "to": "q"} for o in options])
        assert procedures.continue_procedure(run_id).step_id == "decide"
        decision = narrative("d", "decision", content="Postgres", rationale="Already run, backed up, shared.")
        procedures.record(run_id, actor, [decision], [
            {"type": "resolves", "from": "d", "to": "q"}, {"type": "about", "from": "d", "to": "o1"},
        ])  # fmt: skip
        assert procedures.continue_procedure(run_id).step_id == "consequences"
        effects = [narrative(f"c{i}", "consequence", content=text) for i, text in ((1, "positive: one store"), (2, "negative: load"))]
        procedures.record(run_id, actor, effects, [{"type": "about", "from": c["id"], "to": "d"} for c in effects])
        assert procedures.continue_procedure(run_id).status == "completed"
        assert fresh.get(run_id)["status"] == "completed"
        assert active_steps(fresh, run_id) == []
        assert fresh.links_to(run_id) == [{"type": "inhabits", "from": actor, "to": run_id, "properties": {"energy": 1}}]
