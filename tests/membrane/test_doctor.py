"""The doctor: gap queries on a seeded graph, skills choosing protocols, fixes through the membrane.

Both the Python API (``Doctor``) and the ``cabal doctor`` command are tested; after a fix, the
same gap query returns nothing for the nodes that had the gap.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from langchain_core.messages import HumanMessage, SystemMessage

from cabal.cli import main
from cabal.llm import FunctionChatModel
from cabal.doctor.answerers import ModelAnswerer, ScriptedAnswers, answer_tool_name
from cabal.doctor.doctor import DOCTOR_ACTOR, Doctor
from cabal.doctor.gaps import GAP_KINDS, find_gaps, is_open

ANSWERS = Path(__file__).parent / "data" / "doctor_answers.yaml"
REPO = Path(__file__).resolve().parents[2]

# One node with each gap kind (and nodes that must not count as gaps).
SEED_NODES = [
    {"id": "mod-a", "node_type": "space", "type": "module", "name": "orders"},
    {"id": "mod-b", "node_type": "space", "type": "module", "name": "billing"},
    {"id": "run-1", "node_type": "space", "type": "run", "name": "not a module"},
    {"id": "obj-b", "node_type": "narrative", "type": "objective", "name": "bill every order"},
    {"id": "impl-b", "node_type": "narrative", "type": "implementation", "name": "billing code"},
    {"id": "beh-open", "node_type": "narrative", "type": "behavior", "name": "invoice is sent"},
    {"id": "beh-safe", "node_type": "narrative", "type": "behavior", "name": "invoice is numbered"},
    {"id": "val-numbers", "node_type": "narrative", "type": "validation", "name": "numbers never repeat"},
    {"id": "health-numbers", "node_type": "narrative", "type": "health", "name": "duplicate numbers check"},
    {"id": "val-open", "node_type": "narrative", "type": "validation", "name": "totals match lines"},
    {"id": "esc-open", "node_type": "narrative", "type": "escalation", "name": "who approves credit notes?"},
    {"id": "esc-done", "node_type": "narrative", "type": "escalation", "name": "which currency?"},
    {"id": "why-done", "node_type": "narrative", "type": "rationale", "name": "euros only"},
    {"id": "someone", "node_type": "actor", "type": "agent", "name": "someone"},
    {"id": "moment-b", "node_type": "moment", "type": "progress", "status": "spoken", "prose": "billing handoff"},
]
SEED_LINKS = [
    {"type": "contains", "from": "mod-b", "to": "obj-b"},
    {"type": "contains", "from": "mod-b", "to": "impl-b"},
    {"type": "contains", "from": "mod-b", "to": "beh-open"},
    {"type": "contains", "from": "mod-b", "to": "beh-safe"},
    {"type": "contains", "from": "mod-b", "to": "val-numbers"},
    {"type": "contains", "from": "mod-b", "to": "val-open"},
    {"type": "contains", "from": "mod-b", "to": "esc-open"},
    {"type": "ensures", "from": "val-numbers", "to": "beh-safe"},
    {"type": "ensures", "from": "val-open", "to": "beh-safe"},
    {"type": "verifies", "from": "health-numbers", "to": "val-numbers"},
    {"type": "resolves", "from": "why-done", "to": "esc-done"},
    {"type": "expresses", "from": "someone", "to": "moment-b"},
    {"type": "about", "from": "moment-b", "to": "mod-b"},
]
EXPECTED = [
    ("module_without_objectives", "mod-a"),
    ("behavior_without_validation", "beh-open"),
    ("module_without_implementation", "mod-a"),
    ("validation_without_health", "val-open"),
    ("escalation_without_resolution", "esc-open"),
    ("space_without_progress", "mod-a"),
]


@pytest.fixture
def seeded(graph):
    graph.create_cluster(SEED_NODES, SEED_LINKS)
    return graph


def kinds_and_nodes(gaps):
    return [(gap.kind, gap.node_id) for gap in gaps]


# ------------------------------------------------------------------------------ gap queries


def test_every_gap_kind_is_found_in_the_seeded_graph(seeded):
    gaps = find_gaps(seeded)
    assert kinds_and_nodes(gaps) == EXPECTED
    assert {gap.kind for gap in gaps} == set(GAP_KINDS)
    by_kind = {gap.kind: gap for gap in gaps}
    assert by_kind["behavior_without_validation"].context == {
        "target_id": "beh-open", "behavior_id": "beh-open", "space_id": "mod-b"
    }  # fmt: skip
    assert by_kind["module_without_objectives"].domain == "module_design"
    assert by_kind["escalation_without_resolution"].description == (
        "escalation who approves credit notes? (esc-open) has no resolution"
    )


def test_plan_names_the_skill_and_protocol_of_each_gap(seeded):
    plan = Doctor(seeded).plan()
    assert [(t.gap.kind, t.skill.name, t.protocol) for t in plan] == [
        ("module_without_objectives", "module_design", "add_objectives"),
        ("behavior_without_validation", "feature_implementation", "add_invariant"),
        ("module_without_implementation", "feature_implementation", "add_implementation"),
        ("validation_without_health", "health_coverage", "add_health_coverage"),
        ("escalation_without_resolution", "escalation_handling", "resolve_blocker"),
        ("space_without_progress", "progress_tracking", "record_work"),
    ]
    assert seeded.find("session") == [] and not seeded.exists(DOCTOR_ACTOR)  # planning writes nothing


def test_a_skill_without_a_row_for_the_gap_is_reported_not_run(seeded, tmp_path):
    (tmp_path / "module_design.md").write_text(
        "# Module Design Skill\n\n## When to Use Which Protocol\n\n| Situation | Protocol |\n|---|---|\n"
        "| Anything | `protocol:explore_space` |\n"
    )
    doctor = Doctor(seeded, skill_dirs=[tmp_path])
    (treatment,) = doctor.plan(doctor.find_gaps(["module_without_objectives"]))
    assert treatment.protocol is None and "no row tagged gap:module_without_objectives" in treatment.reason
    (outcome,) = doctor.fix(ScriptedAnswers({}), [treatment.gap])
    assert (outcome.status, outcome.closed) == ("skipped", False)


# ------------------------------------------------------------------------ fixing, Python API


def test_scripted_fix_closes_every_gap(seeded):
    doctor = Doctor(seeded)
    outcomes = doctor.fix(ScriptedAnswers.from_file(ANSWERS))
    assert [(o.gap.kind, o.gap.node_id, o.treatment.protocol, o.status, o.closed) for o in outcomes] == [
        (kind, node, protocol, "complete", True)
        for (kind, node), protocol in zip(
            EXPECTED,
            ["add_objectives", "add_invariant", "add_implementation", "add_health_coverage", "resolve_blocker", "record_work"],
        )
    ]
    for outcome in outcomes:
        assert not is_open(seeded, outcome.gap)
        assert outcome.created["nodes"] == len(outcome.nodes) > 0
    by_protocol = {o.treatment.protocol: o for o in outcomes}
    # the clusters the skills' protocols were chosen to create
    assert {(n["node_type"], n["type"]) for n in by_protocol["add_health_coverage"].nodes} == {
        ("narrative", "health"), ("thing", "dock"), ("moment", "health_design"), ("moment", "docking")
    }  # fmt: skip
    assert ("moment", "progress") in {(n["node_type"], n["type"]) for n in by_protocol["record_work"].nodes}
    assert seeded.get("esc-open")["status"] == "resolved"
    # moments are spoken by the doctor, registered as an actor on the first fix
    assert seeded.get(DOCTOR_ACTOR)["node_type"] == "actor"
    remaining = find_gaps(seeded)
    assert not set(kinds_and_nodes(remaining)) & set(EXPECTED)
    # add_invariant wrote a new validation, which has no health check yet: a second pass closes it
    assert kinds_and_nodes(remaining) == [("validation_without_health", "validation-mod-b-outcome-holds-for-every-request")]
    second = doctor.fix(ScriptedAnswers.from_file(ANSWERS))
    assert [(o.status, o.closed) for o in second] == [("complete", True)]
    assert find_gaps(seeded) == []


def test_rejected_answers_are_shown_again_then_the_session_is_aborted(seeded):
    seen = []

    def stubborn(request):
        seen.append((request.attempt, [p.path for p in request.problems]))
        return {"primary": {"answer": "too short", "description": "d", "reasoning": "r"}}

    doctor = Doctor(seeded, max_attempts=2)
    (gap,) = doctor.find_gaps(["module_without_objectives"])
    (outcome,) = doctor.fix(stubborn, [gap])
    assert (outcome.status, outcome.closed, outcome.attempts) == ("failed", False, 2)
    assert "primary.answer: expected at least 15 characters" in outcome.error
    assert seen == [(1, []), (2, ["primary.answer", "secondary"])]
    assert seeded.get(outcome.session_id)["status"] == "aborted"
    assert seeded.find("narrative", {"type": "objective"}, in_space="mod-a") == []


def test_a_model_answers_each_form_with_one_tool_call_and_retries_with_the_errors(seeded):
    canned = yaml.safe_load(ANSWERS.read_text())
    calls = []

    def model(request):
        calls.append((list(request.messages), list(request.tools), dict(request.metadata)))
        (tool,) = request.tools
        request_protocol = request.key.step
        answers = dict(canned[request_protocol])  # what a capable model answers for that protocol
        answers = json.loads(json.dumps(answers).replace("{behavior_id}", "beh-open"))
        if len(calls) == 1:  # the first answer breaks a rule; the retry fixes it
            answers["guarded_behaviors"] = {**answers["guarded_behaviors"], "answer": ["obj-b"]}
        return {"tool": tool["name"], "args": answers}

    doctor = Doctor(seeded)
    (gap,) = doctor.find_gaps(["behavior_without_validation"])
    (outcome,) = doctor.fix(ModelAnswerer(FunctionChatModel(model)), [gap])
    assert (outcome.status, outcome.closed, outcome.attempts) == ("complete", True, 2)
    first_messages, first_tools, metadata = calls[0]
    assert metadata == {"cabal_round": 0, "cabal_step": "add_invariant", "cabal_agent": "doctor"}
    assert first_tools[0]["name"] == answer_tool_name("add_invariant") == "answer_add_invariant"
    schema = first_tools[0]["input_schema"]
    assert schema["required"] == ["guarded_behaviors", "rule"]
    assert "beh-open" in schema["properties"]["guarded_behaviors"]["description"]  # the query ran first
    system, human = first_messages
    assert isinstance(system, SystemMessage) and "# Feature Implementation Skill" in system.content[0]["text"]
    assert isinstance(human, HumanMessage) and "behavior invoice is sent (beh-open)" in human.content
    retry_human = calls[1][0][1].content
    assert "Attempt 2" in retry_human and "guarded_behaviors.answer.0: node 'obj-b' has type='objective'" in retry_human


def test_scripted_answers_for_a_missing_protocol_fail_cleanly(seeded):
    doctor = Doctor(seeded)
    (outcome,) = doctor.fix(ScriptedAnswers({"record_work": {}}), doctor.find_gaps(["module_without_objectives"]))
    assert outcome.status == "failed" and "has no answers for protocol 'add_objectives'" in outcome.error
    assert seeded.get(outcome.session_id)["status"] == "aborted"


# ------------------------------------------------------------------------------- the command


def cabal(*args, home):
    """The real command in a new process, as a user runs it."""
    env = {**os.environ, "CABAL_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "cabal.cli", *args], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=60)  # fmt: skip


def test_doctor_command_lists_then_fixes(seeded, graph_server, capsys):
    options = ["--graph", seeded.name, "--home", str(graph_server.home)]
    assert main(["doctor", *options]) == 0
    listed = capsys.readouterr().out
    assert f"6 gap(s) in graph {seeded.name!r}:" in listed
    assert "module_without_objectives: mod-a (orders)" in listed
    assert "skill escalation_handling -> protocol resolve_blocker" in listed
    assert seeded.find("session") == []

    fixed = cabal("doctor", "--fix", *options, "--answers", str(ANSWERS), home=graph_server.home)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert f"6 of 6 gap(s) closed in graph {seeded.name!r}:" in fixed.stdout
    assert "validation_without_health: val-open -> add_health_coverage: complete" in fixed.stdout
    assert "narrative:health health-val-open-outcomes-match-accepted-requests" in fixed.stdout
    assert not set(kinds_and_nodes(find_gaps(seeded))) & set(EXPECTED)

    assert main(["doctor", "--json", *options]) == 0
    assert [t["gap"]["kind"] for t in json.loads(capsys.readouterr().out)] == ["validation_without_health"]


def test_doctor_command_refuses_fix_without_an_answerer(seeded, graph_server, capsys):
    assert main(["doctor", "--fix", "--graph", seeded.name, "--home", str(graph_server.home)]) == 2
    assert capsys.readouterr().err.startswith("cabal: --fix needs someone to answer the protocols")


def test_doctor_command_fails_when_a_fix_fails(seeded, graph_server, tmp_path, capsys):
    answers = tmp_path / "answers.yaml"
    answers.write_text("add_objectives:\n  primary: {answer: short, description: d, reasoning: r}\n")
    code = main(["doctor", "--fix", "--gap", "module_without_objectives", "--graph", seeded.name,
                 "--home", str(graph_server.home), "--answers", str(answers)])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 1
    assert "0 of 1 gap(s) closed" in out and "module_without_objectives: mod-a -> add_objectives: failed, gap still open" in out


def test_doctor_command_with_a_scripted_model(seeded, graph_server, tmp_path, capsys):
    script = tmp_path / "model.yaml"
    answers = {
        "primary": {"answer": "Every order placed is accepted or refused within 1 s.", "description": "d", "reasoning": "r"},
        "secondary": {"answer": [], "description": "d", "reasoning": "r"},
        "non_objectives": {"answer": ["Not payment: billing owns it."], "description": "d", "reasoning": "r"},
    }
    script.write_text(json.dumps([{"step": "add_objectives", "agent": "doctor", "tool": "answer_add_objectives", "args": answers}]))
    code = main(["doctor", "--fix", "--gap", "module_without_objectives", "--graph", seeded.name,
                 "--home", str(graph_server.home), "--model", f"scripted:{script}"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert "1 of 1 gap(s) closed" in out and "narrative:objective objective-mod-a-every-order-placed" in out
    assert find_gaps(seeded, ["module_without_objectives"]) == []


def test_scripted_answers_given_as_a_list_are_used_one_per_run(seeded):
    runs = [
        {"handoff": {"answer": {"done": "First baseline of the module.", "state": "Untested, nothing was run."},
                     "description": "d", "reasoning": "r"},
         "next_goals": {"answer": [], "description": "d", "reasoning": "r"},
         "blockers": {"answer": [], "description": "d", "reasoning": "r"}},
    ]  # fmt: skip
    seeded.create_cluster([{"id": "mod-c", "node_type": "space", "type": "module", "name": "shipping"}])
    doctor = Doctor(seeded)
    first, second = doctor.fix(ScriptedAnswers({"record_work": runs}), doctor.find_gaps(["space_without_progress"]))
    assert (first.gap.node_id, first.status, first.closed) == ("mod-a", "complete", True)
    assert (second.gap.node_id, second.status) == ("mod-c", "failed")
    assert "all 1 answer set(s) for 'record_work' are used up" in second.error
