"""The plan's sign-off (``gates: {plan: ask | auto, every_plan}``, ``--gate plan``), enforced by
the engine: nothing of round 1 runs before the user approves; changes go to a Plan & Assign turn
that sees them first, then the revised plan is asked again; stop ends it; ``auto`` approves by
the stated policy, in the graph and in the transcript."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import pytest
import yaml

from cabal import resume_mission, run_mission
from cabal import transcript as cabal_transcript
from cabal.graph import ContextGraph
from cabal.llm import ScriptedChatModel
from cabal.rounds.simulated import simulated_team
from tests.tools.test_tools import CABAL, DATA, SCRIPT

PLAN = """Sign off the plan before the team starts work.

Mission: Write the opening paragraph of the tally README for the readers the user named.
Objectives:
  - One paragraph that says what tally does, for whom, and how to run it once
Constraints:
  - At most five sentences
Team:
  - chair-1: Editor who keeps it short
  - Ada (operative-1): Technical writer; domain: The README paragraph (documentation)
  - watchdog-1: Reviewer who checks the paragraph against its definition of done
  - envoy-1: Plain narrator
Products:
  - README intro [Content], owner Ada: done when {dod}

Answer approve to start the work, write the changes you want (the Chair revises the plan and asks again), or stop \
to end the mission here."""
DOD = "Says what tally does, who it is for and shows one example command, in at most five sentences."
NEW_DOD = "Says what tally does and for whom, and shows `tally .` as the example, in at most five sentences."
CHANGE = "Make the example command `tally .` part of the definition of done."


@pytest.fixture(scope="module")
def home(graph_server) -> str:
    return str(graph_server.home)


def entries(*extra: dict, plan_r1: dict | None = None) -> list[dict]:
    """The tools mission's script without its tool call (no server here), with ``extra`` entries
    and round 1's plan replaced."""
    script = [e for e in yaml.safe_load(SCRIPT.read_text()) if not e["tool"].startswith("prices__")]
    if plan_r1 is not None:
        script = [plan_r1 if (e["round"], e["step"]) == (1, "plan") else e for e in script]
    return [*extra, *script]


def plan_entry(round_number: int, operations: list[dict], assignments: list[dict] | None = None) -> dict:
    return {"round": round_number, "step": "plan", "agent": "chair-1", "tool": "final_output", "args": {
        "thinking": {"roundStrategy": "Apply the user's changes.", "acceptanceRationale": "Nothing to accept."},
        "treeOperations": operations, "assignments": assignments or [], "acceptance": []}}


def gated(tmp_path: Path, gates: dict | None, script: list[dict] | None = None) -> Path:
    data = yaml.safe_load((DATA / "tools.mission.yaml").read_text())
    data.pop("tools")
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script or entries()))
    data["model"] = "scripted:script.yaml"
    if gates is not None:
        data["gates"] = gates
    path = tmp_path / "gated.mission.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def turns(mission_id: str, home: str) -> list[str]:
    with ContextGraph.open(name=mission_id, home=home) as graph:
        return sorted(t["id"] for t in graph.find("moment", {"type": "turn"}))


def gates_of(mission_id: str, home: str) -> list[tuple]:
    with ContextGraph.open(name=mission_id, home=home) as graph:
        return sorted((h["id"], h["status"], h.get("answer"), h.get("answer_source"))
                      for h in graph.find("halt") if h.get("gate") == "plan")


def test_the_plan_waits_for_approval_after_bootstrap_and_nothing_of_round_1_runs_before(home, tmp_path) -> None:
    events: list = []
    halted = run_mission(gated(tmp_path, {"plan": "ask"}), home=home, on_event=events.append)

    assert (halted.state, halted.stop_reason, halted.round) == ("halted", "questionToUser", 0)
    assert halted.pending_halt is not None
    assert (halted.pending_halt["id"], halted.pending_halt["author"]) == ("r0.plan.gate1", "cabal")
    assert halted.pending_halt["message"] == PLAN.format(dod=DOD)
    assert list(halted.pending_halt["options"]) == ["approve", "stop"]
    assert turns(halted.mission_id, home) == ["r0.bootstrap.chair-1"]  # no agent spent anything more

    done = resume_mission(halted.mission_id, answer="approve", home=home)

    assert (done.state, done.stop_reason) == ("done", "concluded")
    assert gates_of(done.mission_id, home) == [("r0.plan.gate1", "answered", "approve", "user")]
    ungated = run_mission(gated(tmp_path, None), home=home)
    assert [t for t in turns(done.mission_id, home)] == turns(ungated.mission_id, home)  # then the same work


def test_changes_go_to_a_plan_turn_that_reads_them_first_then_the_revised_plan_is_asked_again(home, tmp_path) -> None:
    revise = plan_entry(0, [{"action": "UPDATE", "productId": "p1", "product": {"dod": NEW_DOD}}])
    path = gated(tmp_path, {"plan": "ask"}, entries(revise))
    model = ScriptedChatModel.from_file(tmp_path / "script.yaml")
    halted = run_mission(path, home=home, model=model)

    revised = resume_mission(halted.mission_id, answer=CHANGE, home=home, model=model)

    assert revised.pending_halt is not None
    assert (revised.state, revised.pending_halt["id"]) == ("halted", "r0.plan.gate2")
    assert revised.pending_halt["message"] == PLAN.format(dod=NEW_DOD)
    [call] = [c for c in model.calls if (c.key.round, c.key.step) == (0, "plan")]
    prompt = call.messages[1].text
    assert ("## The user's changes to the plan\nYou showed the user the plan (the charter, the team, the product "
            f"tree) for sign-off. They asked for these changes before the work goes on: {CHANGE}") in prompt
    assert turns(revised.mission_id, home) == ["r0.bootstrap.chair-1", "r0.plan.chair-1.after1"]

    done = resume_mission(revised.mission_id, answer="Approve.", home=home, model=model)

    assert (done.state, done.stop_reason) == ("done", "concluded")
    assert gates_of(done.mission_id, home) == [("r0.plan.gate1", "answered", CHANGE, "user"),
                                               ("r0.plan.gate2", "answered", "Approve.", "user")]


def test_stop_at_the_sign_off_ends_the_mission_before_any_work(home, tmp_path) -> None:
    halted = run_mission(gated(tmp_path, {"plan": "ask"}), home=home)

    stopped = resume_mission(halted.mission_id, answer="stop", home=home)

    assert (stopped.state, stopped.stop_reason, stopped.round) == ("done", "userHalt", 0)
    assert turns(stopped.mission_id, home) == ["r0.bootstrap.chair-1"]


def test_auto_approves_by_the_stated_policy_never_silently(home, tmp_path) -> None:
    events: list = []

    done = run_mission(gated(tmp_path, {"plan": "auto"}), home=home, on_event=events.append)

    assert (done.state, done.stop_reason) == ("done", "concluded")
    assert gates_of(done.mission_id, home) == [("r0.plan.gate1", "answered", "approve", "policy")]
    assert [(e.kind, e.halt) for e in events if e.kind in ("halt", "answer")] == [
        ("halt", "r0.plan.gate1"), ("answer", "r0.plan.gate1")]
    assert [e.source for e in events if e.kind == "answer"] == ["policy"]
    with ContextGraph.open(name=done.mission_id, home=home) as graph:
        moments = [m for m in graph.find("moment", {"type": "user_answer"})]
        assert [m["prose"] for m in moments] == ["answered (policy): approve"]
        assert graph.read_cypher("MATCH (a {id: 'cabal'})-[:EXPRESSES]->(m {id: $id}) RETURN m.id AS id",
                                 {"id": moments[0]["id"]})
    transcript = cabal_transcript(done.mission_id, home=home)
    assert "**cabal:** approve (by the mission file's policy: gates: {plan: auto})" in transcript


def test_every_plan_asks_again_when_a_plan_and_assign_removes_a_product(home, tmp_path) -> None:
    removes = plan_entry(1, [{"action": "REMOVE", "productId": "p1", "reason": "The user wrote it already."}])
    halted = run_mission(gated(tmp_path, {"plan": "ask", "every_plan": True}, entries(plan_r1=removes)), home=home)
    signed = resume_mission(halted.mission_id, answer="approve", home=home)

    assert signed.pending_halt is not None
    assert (signed.state, signed.round, signed.pending_halt["id"]) == ("halted", 1, "r1.plan.gate1")
    assert "Products:\n  (none)\n" in str(signed.pending_halt["message"])
    (tmp_path / "once").mkdir()
    once = run_mission(gated(tmp_path / "once", {"plan": "ask"}, entries(plan_r1=copy.deepcopy(removes))), home=home)
    resume_mission(once.mission_id, answer="approve", home=home)
    assert gates_of(once.mission_id, home) == [("r0.plan.gate1", "answered", "approve", "user")]  # asked once only


def test_cabal_run_gate_plan_shows_the_plan_and_waits(home, tmp_path) -> None:
    path = gated(tmp_path, None)

    shown = subprocess.run([str(CABAL), "run", str(path), "--home", home, "--gate", "plan"], capture_output=True,
                           text=True, stdin=subprocess.DEVNULL, timeout=120)

    assert shown.returncode == 3, shown.stderr
    assert "cabal asks you: " + PLAN.format(dod=DOD) + "  [approve / stop]" in shown.stdout
    assert "state: halted (waiting for your answer), round 0" in shown.stdout


ON_CALL = ("We need three things: a revised on-call policy, a rota for the holidays, and a one-page guide for new "
           "staff.")


def _products_shown(message: str) -> list[str]:
    """The product lines of a plan's sign-off, each cut before its definition of done."""
    lines = message.split("Products:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    return [line.split(": done when ", 1)[0] for line in lines]


def test_the_simulated_chair_shows_the_whole_tree_to_sign_off_and_applies_the_users_changes(home) -> None:
    halted = run_mission({"request": ON_CALL, "team": {"operatives": 2}, "rounds": 3}, model=simulated_team(),
                         gates=["plan"], home=home)

    # Bootstrap made the Library alone: the Chair lays the work out under it before the question.
    assert _products_shown(halted.pending_halt["message"]) == [
        "  - Library [Collection], owner operative-1", "    - Revised on-call policy [Content], owner operative-1",
        "    - Rota for the holidays [Content], owner operative-2",
        "    - One-page guide for new staff [Content], owner operative-1"]
    assert ("    - Rota for the holidays [Content], owner operative-2: done when The rota for the holidays the user "
            f"asked for in: \"{ON_CALL}\" Done when the user can act on it without asking back.") \
        in halted.pending_halt["message"]
    assert turns(halted.mission_id, home) == ["r0.bootstrap.chair-1", "r0.plan.chair-1"]

    change = "Rename 'Revised on-call policy' to 'On-call policy', drop the rota and add a contact list."
    revised = resume_mission(halted.mission_id, answer=change, model=simulated_team(), home=home)

    assert _products_shown(revised.pending_halt["message"]) == [
        "  - Library [Collection], owner operative-1",
        "    - Contact list [Content], owner operative-2",  # in the order of the products' ids
        "    - On-call policy [Content], owner operative-1",
        "    - One-page guide for new staff [Content], owner operative-1"]
    done = resume_mission(halted.mission_id, answer="approve", model=simulated_team(), home=home)
    assert (done.state, done.stop_reason) == ("done", "concluded")
    with ContextGraph.open(name=done.mission_id, home=home) as graph:
        accepted = sorted(p["name"] for p in graph.find("product") if p["status"] == "accepted")
    assert accepted == ["Contact list", "On-call policy", "One-page guide for new staff"]
