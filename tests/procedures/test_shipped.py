"""Both shipped procedures run start to end, each gate refusing until its step's work is recorded."""

from __future__ import annotations

import pytest

from cabal.procedures.model import RunStep
from cabal.procedures import Procedures

from tests.procedures.helpers import ACTIVE, COMPLETED, active_steps, narrative, step_links


def about(source: str, target: str, kind: str = "about") -> dict:
    return {"type": kind, "from": source, "to": target}


# step id -> the work an agent records at that step (nodes, links)
WORK = {
    "write_adr": {
        "frame": ([narrative("q", "question", content="Sessions vanish on deploy; where do they live?")], []),
        "options": (
            [narrative("o1", "option", content="Postgres: already run"), narrative("o2", "option", content="Redis: fast")],
            [about("o1", "q"), about("o2", "q")],
        ),
        "decide": (
            [narrative("d", "decision", content="Postgres", rationale="Backed up and known; Redis adds a service.")],
            [about("d", "q", "resolves"), about("d", "o1")],
        ),
        "consequences": (
            [narrative("c1", "consequence", content="positive: one store"), narrative("c2", "consequence", content="negative: load")],
            [about("c1", "d"), about("c2", "d")],
        ),
    },
    "incident_review": {
        "timeline": (
            [
                narrative("e1", "event", content="Deploy starts", at="2025-03-04T14:00:00Z"),
                narrative("e2", "event", content="Error alert fires", at="2025-03-04T14:07:00Z"),
                narrative("e3", "event", content="Rollback done", at="2025-03-04T14:31:00Z"),
            ],
            [],
        ),
        "impact": ([narrative("i", "impact", content="31 minutes, 12% of requests failed")], []),
        "causes": ([narrative("c", "cause", content="Config change skipped review")], [about("c", "e1", "relates")]),
        "actions": (
            [narrative("a", "action", content="Require review for config", owner="platform team")],
            [about("a", "c", "resolves")],
        ),
    },
}


@pytest.mark.parametrize("name", sorted(WORK))
def test_shipped_procedure_runs_start_to_end(graph, actor, name):
    procedures = Procedures(graph)
    started = procedures.start_procedure(name, actor)
    run_id, current = started.run_id, started
    steps = list(WORK[name])
    for index, step in enumerate(steps):
        assert (current.status, current.step_id) == ("active", step)
        for heading in ("What: ", "Why: ", "How: ", "Watch out: ", "Done when"):
            assert heading in current.step_content
        refused = procedures.continue_procedure(run_id)
        assert (refused.status, refused.step_id) == ("validation_failed", step)
        assert refused.validation_error.startswith("the run space needs")
        assert active_steps(graph, run_id) == [step]
        procedures.record(run_id, actor, *WORK[name][step])
        current = procedures.continue_procedure(run_id)
        if index + 1 < len(steps):
            assert step_links(graph, run_id) == {
                **{done: ("receives_from", COMPLETED) for done in steps[: index + 1]},
                steps[index + 1]: ("acts_on", ACTIVE),
            }
    assert current == RunStep(run_id=run_id, status="completed")
    assert graph.get(run_id)["finished"] is True
    assert step_links(graph, run_id) == {step: ("receives_from", COMPLETED) for step in steps}
    assert graph.links_to(run_id) == [{"type": "inhabits", "from": actor, "to": run_id, "properties": {"energy": 1}}]
    recorded = [node for node in graph.contents_of(run_id) if node["node_type"] == "narrative"]
    assert len(recorded) == sum(len(nodes) for nodes, _ in WORK[name].values())
