"""The round engine: a LangGraph graph that runs a mission's steps in order.

    bootstrap ─▶ round_start ─▶ reflect ─▶ plan ─▶ write ─▶ peer_review ─▶ inspect ─▶ close ─▶ presentation ─┐
        │             ▲  │      (only who      │  (only with      (only with new   (a new version       │
        ▼             │  ▼      owns a version) ▼   assignments)     versions)     passed; the last     │
        │             │  │                      │                                  round: any new)      │
    await_user ◀──────┼─ finish             await_user                                                  │
                      └─────────────────────────────────────────────────────────────────────────────────┘

Read top-down: the state the checkpointer keeps, one function per node, then ``ROUTES``, the
table of where each node goes next, and ``build_graph``. Nodes and routes are plain functions
of the state and of LangGraph's run context (``Runtime[MissionRun]``, see ``run``), which
carries everything a step works with.

LangGraph's checkpointer (SQLite in the workspace) holds where the loop is; the context graph
holds the facts. Each agent's turn commits as one cluster whose turn moment has a
deterministic id, and a step skips every agent whose turn is already committed, so a process
killed anywhere resumes without a lost or doubled write. Operatives act in parallel within a
step (a thread each, one model call each). A Chair ``question`` pauses the mission with
``interrupt``; the answer resumes it, in this process or another.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final, Protocol, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from cabal.llm import Budget
from cabal.rounds.budget import BudgetSpent
from cabal.rounds.events import (Answered, AnswerSource, HaltRaised, MissionStopped, RoundStarted, StepStarted,
                                  UserMessage)
from cabal.rounds.gates import (PLAN_GATE, PLAN_OPTIONS, POLICY, gate_due, holds_work, live_product_ids, plan_decision,
                                plan_question, stops)
from cabal.rounds.ids import halt_id
from cabal.rounds.rules import RuleContext, closing_versions
from cabal.rounds.run import ENGINE_ACTOR, MissionRun
from cabal.rounds.snapshot import Snapshot
from cabal.rounds.tooluse import APPROVE, TOOL_GATE, ApprovalPending
from cabal.rounds.writes import TurnPlace, TurnWriter
from cabal.entities import CloseOutput, Halt
from cabal.vocabulary import (ANSWER_FROM_FILE, BUDGET_HALT, CHAIR_ID, USER_DIRECTION_TYPE, USER_ID, MissionState, Step,
                              StopReason, TurnOutcome)



class RoundState(TypedDict, total=False):
    """What the checkpointer keeps: where the loop is. Facts live in the context graph.

    Plain values only (a ``StopReason``'s value, not the enum): the checkpointer stores them
    without a type registry."""

    round: int
    after: str  # the node a pending halt returns to once answered (bootstrap, plan or round_start)
    halt: str | None  # id of the pending halt
    stop: str | None  # the StopReason once the mission ends
    detail: str | None


Context = Runtime[MissionRun]


class Node(Protocol):
    """A node of the round graph: LangGraph passes the run's context as ``runtime``."""

    def __call__(self, state: RoundState, runtime: Context) -> RoundState: ...


RoundGraph = CompiledStateGraph[RoundState, MissionRun, RoundState, RoundState]


# ----------------------------------------------------------------------------- the nodes


def bootstrap(state: RoundState, runtime: Context) -> RoundState:
    run = runtime.context
    decided = _chair_turn(run, state, Step.BOOTSTRAP)
    if decided.get("stop") or decided.get("halt"):
        return {"round": 0, **decided}
    if run.spec.gates.plan != "off" and not holds_work(run.snapshot(0)):
        return {"round": 0, **decided, "after": Step.PLAN.value}  # the work to sign off is laid out first
    return {"round": 0, **(_plan_signoff(run, 0) or decided)}


def plan(state: RoundState, runtime: Context) -> RoundState:
    decided = _chair_turn(runtime.context, state, Step.PLAN)
    if decided.get("stop") or decided.get("halt"):
        return decided
    return _plan_signoff(runtime.context, state.get("round", 0)) or decided


def close(state: RoundState, runtime: Context) -> RoundState:
    """The Chair's closing decisions after Inspect: a version that passed every inspection is
    decided in the round it passed, not a whole round later at the next Plan; in the last round
    every new version is (the next Plan never comes)."""
    return _chair_turn(runtime.context, state, Step.CLOSE)


def round_start(state: RoundState, runtime: Context) -> RoundState:
    run = runtime.context
    round_number = state.get("round", 0) + 1
    mission = run.refresh(round_number)
    if mission.get("halt_requested"):
        return {"stop": StopReason.USER_HALT.value, "detail": "the user asked the team to stop"}
    if round_number > int(mission.get("rounds") or run.spec.rounds):
        return {"stop": StopReason.NO_MORE_ROUNDS.value, "detail": f"the round limit ({mission.get('rounds')}) is reached"}
    meter = run.spend_meter()
    spent = meter.exceeded() if meter.limited else None
    if spent:
        return _budget_spent(run, state.get("round", 0), spent, after="round_start")
    run.set_status(MissionState.RUNNING, round_number)
    run.emit(RoundStarted(run.mission_id, round=round_number, budget_tokens=run.budget.max_tokens,
                          budget_cost_usd=run.budget.max_cost_usd))
    for note in run.snapshot(round_number).collabs:  # what the user said since the last round started
        # (a continued mission's direction is a note too, already told by MissionContinued)
        if note.get("author") == USER_ID and note.get("round") == round_number - 1 \
                and note.get("type") != USER_DIRECTION_TYPE:
            run.emit(UserMessage(run.mission_id, round=note["round"], note=note["id"], text=str(note.get("comment")),
                                 product=note.get("product_id")))
    return {"round": round_number, "halt": None}


def await_user(state: RoundState, runtime: Context) -> RoundState:
    """Wait for the answer to the pending halt (a mission file's unattended answer first)."""
    run = runtime.context
    pending_id = state["halt"]
    assert pending_id is not None, "the engine waits on a pending halt only"
    halt = run.graph.get(pending_id) or {}
    budget_question = BUDGET_HALT.fullmatch(pending_id) is not None
    chairs = not budget_question and not halt.get("gate")  # the mission file's answers are the Chair's only
    if halt.get("status") != "answered":
        # On resume this node runs again from the top: the question was told when it was asked.
        asked = HaltRaised(run.mission_id, round=state.get("round", 0), step=str(halt.get("step") or ""),
                           halt=pending_id, asker=str(halt.get("author") or CHAIR_ID), message=str(halt.get("message")),
                           options=tuple(halt.get("options") or ()))
        source: AnswerSource = "user"
        if run.answers and chairs:
            run.emit(asked)
            answer, source = run.answers.pop(0), ANSWER_FROM_FILE
            run.emit(Answered(run.mission_id, round=asked.round, halt=asked.halt, text=answer, source=source))
        else:
            if (run.graph.get(run.mission_id) or {}).get("status") != MissionState.HALTED:
                run.emit(asked)
            run.set_status(MissionState.HALTED, state.get("round", 0), StopReason.QUESTION, halt.get("message"))
            answer = interrupt({"halt": pending_id, "message": halt.get("message"),
                                "options": halt.get("options") or []})
            run.emit(Answered(run.mission_id, round=asked.round, halt=asked.halt, text=str(answer), source="user"))
        _answer_halt(run, pending_id, str(answer), state.get("round", 0), source)
        run.set_status(MissionState.RUNNING, state.get("round", 0))
        # What the user wrote while the question waited (cabal say) is read with the answer, as a
        # resume reads it: the same whether the answer came from the user or the mission file.
        run.refresh(state.get("round", 0))
    if budget_question:
        return _budget_answer(run, state, str((run.graph.get(pending_id) or {}).get("answer", "")))
    if halt.get("gate") == PLAN_GATE:
        return _plan_answer(run, state, str((run.graph.get(pending_id) or {}).get("answer", "")))
    return {"halt": None}


def finish(state: RoundState, runtime: Context) -> RoundState:
    run = runtime.context
    reason = StopReason(state.get("stop") or StopReason.CONCLUDED)
    status = MissionState.FAILED if reason == StopReason.ERROR else MissionState.DONE
    run.set_status(status, state.get("round", 0), reason, state.get("detail"))
    run.emit(MissionStopped(run.mission_id, round=state.get("round", 0), reason=StopReason(reason),
                            detail=state.get("detail")))
    return {}


def _acting(step: Step) -> Callable[[MissionRun, Snapshot], list[str]]:
    return lambda run, snapshot: [agent.id for agent in run.team.acting(step)]


def _reflectors(run: MissionRun, snapshot: Snapshot) -> list[str]:
    """Operatives with something to reflect on: an open product of theirs that has a version
    (round 1 has none, so it opens with the Plan)."""
    return [a.id for a in run.team.acting(Step.REFLECT)
            if any(p.get("status") == "open" and snapshot.latest_version(p["id"]) for p in snapshot.owned_by(a.id))]


def _assignees(run: MissionRun, snapshot: Snapshot) -> list[str]:
    return sorted({a["assignee"] for a in snapshot.assignments_in()})


def _peer_reviewers(run: MissionRun, snapshot: Snapshot) -> list[str]:
    """Operatives with a new version to review: one they neither own nor wrote."""
    new = snapshot.new_versions()
    return [a.id for a in run.team.acting(Step.PEER_REVIEW)
            if any(snapshot.products[v["product_id"]].get("owner") != a.id and v.get("author") != a.id for v in new)]


def _parallel_step(step: Step, agents: Callable[[MissionRun, Snapshot], list[str]]) -> Node:
    """The node of a step whose agents act at the same time, on one view of the mission: the
    view as of the step's start, even when the step runs again after a crash."""

    def node(state: RoundState, runtime: Context) -> RoundState:
        run = runtime.context
        snapshot = run.step_view(state["round"], step)
        run.emit(StepStarted(run.mission_id, round=state["round"], step=step))
        try:
            run.run_step(snapshot, step, agents(run, snapshot))
        except BudgetSpent as spent:
            return _budget_spent(run, state["round"], spent.reason, after=step.value)
        except ApprovalPending as pending:  # a tool call waits for the user; the step goes on after
            return {"halt": pending.halt_id, "after": step.value}
        return {}

    node.__name__ = step.value
    return node


reflect = _parallel_step(Step.REFLECT, _reflectors)
write = _parallel_step(Step.WRITE, _assignees)
peer_review = _parallel_step(Step.PEER_REVIEW, _peer_reviewers)
inspect = _parallel_step(Step.INSPECT, _acting(Step.INSPECT))
presentation = _parallel_step(Step.PRESENTATION, _acting(Step.PRESENTATION))


# ------------------------------------------------------------------------------ routing


def _after_chair(state: RoundState, runtime: Context) -> str:
    if state.get("stop"):
        return "finish"
    if state.get("halt"):
        return "await_user"
    return "round_start"


def _after_bootstrap(state: RoundState, runtime: Context) -> str:
    """A plan to sign off whose tree holds no work yet goes to a Plan & Assign of round 0 first."""
    if not state.get("stop") and not state.get("halt") and state.get("after") == Step.PLAN.value:
        return "plan"
    return _after_chair(state, runtime)


def _after_answer(state: RoundState, runtime: Context) -> str:
    if state.get("stop"):
        return "finish"
    return state.get("after") or "round_start"


def _after_round_start(state: RoundState, runtime: Context) -> str:
    run = runtime.context
    return _paused(state) or ("reflect" if _reflectors(run, run.snapshot(state["round"])) else "plan")


def _paused(state: RoundState) -> str | None:
    """Where a node goes when it ended the mission or raised a question, else None."""
    if state.get("stop"):
        return "finish"
    return "await_user" if state.get("halt") else None


# The view is current at a step boundary, so these read no graph.
def _after_plan(state: RoundState, runtime: Context) -> str:
    if state.get("stop") == StopReason.CONCLUDED:
        return "presentation"  # the Envoy tells the user about the last round too
    if state.get("stop") or state.get("halt"):
        return _after_chair(state, runtime)
    return _work_after_plan(runtime.context, state["round"])


def _work_after_plan(run: MissionRun, round_number: int) -> str:
    """Where a round goes once its plan stands: the writing it assigned, else the reviews of new
    versions, else the Envoy. A plan made at round 0 (a change the user asked for before any
    work) waits for round 1."""
    if round_number == 0:
        return "round_start"
    snapshot = run.snapshot(round_number)
    if snapshot.assignments_in():
        return "write"
    return "peer_review" if snapshot.new_versions() else "presentation"


def _after_write(state: RoundState, runtime: Context) -> str:
    return _paused(state) or ("peer_review" if runtime.context.snapshot(state["round"]).new_versions()
                              else "presentation")


def closing_round(run: MissionRun, snapshot: Snapshot) -> bool:
    """Whether this round ends with the Chair's closing decisions: the Chair's card acts at Close
    and a version awaits them (``rules.closing_versions``)."""
    last = snapshot.round >= int(snapshot.mission.get("rounds") or run.spec.rounds)
    return bool(run.team.acting(Step.CLOSE)) and bool(
        closing_versions(RuleContext(snapshot, run.team, CHAIR_ID), last_round=last))


def _after_inspect(state: RoundState, runtime: Context) -> str:
    run = runtime.context
    return _paused(state) or ("close" if closing_round(run, run.snapshot(state["round"])) else "presentation")


def _after_close(state: RoundState, runtime: Context) -> str:
    if state.get("stop") == StopReason.CONCLUDED:
        return "presentation"  # the Envoy tells the user how the mission ended
    return _paused(state) or "presentation"


def _then(next_node: str) -> Callable[[RoundState], str]:
    # A route of the state alone: ``update_state(as_node=...)`` runs it without a run context
    # (resuming an ended mission replays Presentation's route that way).
    return lambda state: _paused(state) or next_node


NODES = {node.__name__: node for node in (bootstrap, await_user, round_start, reflect, plan, write, peer_review,
                                          inspect, close, presentation, finish)}
ROUTES: dict[str, tuple[Callable[..., str], list[str]]] = {
    # node: (where it goes next, every place it can go)
    "bootstrap": (_after_bootstrap, ["finish", "await_user", "plan", "round_start"]),  # a plan to sign off: await_user
    # back to the node that asked: a Chair turn, a round start, or a step whose budget ran out
    "await_user": (_after_answer, ["finish", "bootstrap", "round_start", "reflect", "plan", "write", "peer_review",
                                   "inspect", "close", "presentation"]),
    "round_start": (_after_round_start, ["finish", "await_user", "reflect", "plan"]),
    "reflect": (_then("plan"), ["finish", "await_user", "plan"]),
    "plan": (_after_plan, ["finish", "await_user", "round_start", "write", "peer_review", "presentation"]),
    "write": (_after_write, ["finish", "await_user", "peer_review", "presentation"]),
    "peer_review": (_then("inspect"), ["finish", "await_user", "inspect"]),
    "inspect": (_after_inspect, ["finish", "await_user", "close", "presentation"]),
    "close": (_after_close, ["finish", "await_user", "presentation"]),
    "presentation": (_then("round_start"), ["finish", "await_user", "round_start"]),
}


def build_graph(checkpointer: Any) -> RoundGraph:
    """The compiled round graph; run it with ``invoke(..., context=MissionRun(...))``.

    Compiled once per process (about 10 ms) and copied with each run's checkpointer."""
    return _compiled().copy({"checkpointer": checkpointer})


@functools.cache
def _compiled() -> RoundGraph:
    builder = StateGraph(RoundState, context_schema=MissionRun)
    for name, node in NODES.items():
        builder.add_node(name, node)
    builder.add_edge(START, "bootstrap")
    for name, (route, destinations) in ROUTES.items():
        builder.add_conditional_edges(name, route, destinations)
    builder.add_edge("finish", END)
    return builder.compile()


# ------------------------------------------------------------------------- Chair turns


def _chair_turn(run: MissionRun, state: RoundState, step: Step) -> RoundState:
    """The Chair's turn at bootstrap, plan or close; a turn after the user's n-th answer is attempt n."""
    round_number = state.get("round", 0)
    if step in (Step.PLAN, Step.CLOSE):  # a message the user left during this round, read before the Chair
        run.refresh(round_number)        # decides (it may end here)
    snapshot = run.snapshot(round_number)
    # Each answer the Chair heard in this step starts a turn of its own (a tool call's approval
    # belongs to the turn that asked it; a plan's sign-off answered with changes starts the next).
    answered = len([h for h in snapshot.halts if h.get("round") == round_number and h.get("step") == step
                    and h.get("status") == "answered" and h.get("gate") != TOOL_GATE])
    run.emit(StepStarted(run.mission_id, round=round_number, step=step))
    try:
        result = run.take_turn(snapshot, step, CHAIR_ID, attempt=answered)
    except BudgetSpent as spent:
        return _budget_spent(run, round_number, spent.reason, after=step.value)
    except ApprovalPending as waiting:
        return {"halt": waiting.halt_id, "after": step.value}
    if result is None:  # replayed: read what the committed turn decided
        snapshot = run.snapshot(round_number)
        pending = snapshot.pending_halt()
        if pending is not None:
            return {"halt": pending["id"], "after": step.value}
        done = [h for h in snapshot.halts if h.get("type") == "done"]
        return ({"stop": StopReason.CONCLUDED.value, "detail": snapshot.named(str(done[-1]["message"]))} if done
                else {"halt": None})
    if result.outcome == TurnOutcome.FAILED:
        if step == Step.BOOTSTRAP:
            return {"stop": StopReason.ERROR.value, "detail": "bootstrap failed: " + "; ".join(map(str, result.problems))}
        return {"halt": None}
    if result.outcome == TurnOutcome.HALT:
        assert result.halt is not None, "a turn that halts carries its halt"
        if result.halt.type == "done":
            return {"stop": StopReason.CONCLUDED.value, "detail": run.snapshot(round_number).named(result.halt.message)}
        return {"halt": halt_id(round_number, step, answered), "after": step.value}
    ending = result.answer.ending() if isinstance(result.answer, CloseOutput) else None
    if ending is not None:  # closing decisions that accepted the last open work ended the mission
        return {"stop": StopReason.CONCLUDED.value, "detail": run.snapshot(round_number).named(ending.message)}
    return {"halt": None}


# ------------------------------------------------------------------- halts the engine raises


def _answer_halt(run: MissionRun, halt: str, answer: str, round_number: int, source: str) -> None:
    node = run.graph.get(halt) or {}
    run.write("answer_halt", {"halt_id": halt, "round": round_number,
                              "actor_id": ENGINE_ACTOR if source == POLICY else USER_ID,
                              "message": node.get("message", ""), "source": source},
              {"item": {"answer": answer}}, session_id=f"{halt}.answer")


def _plan_signoff(run: MissionRun, round_number: int) -> RoundState | None:
    """The plan's sign-off at the end of Bootstrap or a Plan & Assign, when the mission file's
    gates ask for one (``gates.py``): the question the mission waits on, or None to go on. The
    ``auto`` policy answers it at once, in the graph and before the listeners, as a user would."""
    gates = run.spec.gates
    if gates.plan == "off":
        return None
    snapshot = run.snapshot(round_number)
    gate = gate_due(snapshot, round_number, every_plan=gates.every_plan)
    if gate is None:
        return None
    if not run.graph.exists(gate):
        run.write("ask_user", {
            "actor_id": ENGINE_ACTOR, "item_id": gate, "gate": PLAN_GATE, "message": plan_question(snapshot, run.team),
            "options": list(PLAN_OPTIONS), "round": round_number, "step": Step.PLAN, "tool": "", "arguments": "",
            "why": "", "products": live_product_ids(snapshot), "paused": "",
        }, {}, session_id=f"{gate}.ask")
    if gates.plan == "auto":
        halt = run.graph.get(gate) or {}
        if halt.get("status") != "answered":
            run.emit(HaltRaised(run.mission_id, round=round_number, step=Step.PLAN, halt=gate, asker=ENGINE_ACTOR,
                                message=str(halt.get("message")), options=PLAN_OPTIONS))
            run.emit(Answered(run.mission_id, round=round_number, halt=gate, text=APPROVE, source=POLICY))
            _answer_halt(run, gate, APPROVE, round_number, POLICY)
        return None
    return {"halt": gate, "after": Step.PLAN.value}


def _plan_answer(run: MissionRun, state: RoundState, answer: str) -> RoundState:
    """Where the user's answer to the plan's sign-off leads: on to the work, to a Plan & Assign
    turn that applies their changes (then the sign-off again), or to the end."""
    decision = plan_decision(answer)
    if decision == "stop":
        return {"stop": StopReason.USER_HALT.value, "detail": "the user stopped the mission at the plan's sign-off"}
    if decision == "change":
        return {"halt": None, "after": Step.PLAN.value}
    return {"halt": None, "after": _work_after_plan(run, state.get("round", 0))}


def _budget_spent(run: MissionRun, round_number: int, reason: str, *, after: str) -> RoundState:
    """The budget allows no further call: stop, or ask the user (the mission file says which).
    ``after``: the node that resumes once the user raises the budget."""
    if run.spec.when_spent == "stop":
        return {"stop": StopReason.BUDGET.value, "detail": f"the {reason}"}
    return _raise_budget_halt(run, round_number, reason, after=after)


def _raise_budget_halt(run: MissionRun, round_number: int, spent: str, *, after: str) -> RoundState:
    """A spent budget pauses the mission with a question instead of killing work."""
    halt, asked = f"r{round_number}.budget", 1
    # Answered, yet still spent (a number below the spend): ask again rather than replay that answer forever.
    while (run.graph.get(halt) or {}).get("status") == "answered":
        asked += 1
        halt = f"r{round_number}.budget{asked}"
    if not run.graph.exists(halt):
        # The engine asks this, not the Chair: the halt is authored by the engine's actor.
        place = TurnPlace(run.mission_id, round_number, "budget", ENGINE_ACTOR, f"r{round_number}.budget.turn")
        writer = TurnWriter(run.membrane, RuleContext(run.snapshot(round_number), run.team, ENGINE_ACTOR), place, ())
        message = (f"The {spent}. Continue? Answer 'continue' to double the budget, a number of tokens to "
                   "set a new token budget, or 'stop' to end the mission here.")
        question = Halt(type="question", to=["u:all"], message=message, options=["continue", "stop"])
        prepared = writer.prepare_one("raise_halt", question, {"status": "pending", "item_id": halt})
        run.membrane.commit([prepared])
        run.committed([prepared])
    return {"halt": halt, "after": after}


def _budget_answer(run: MissionRun, state: RoundState, answer: str) -> RoundState:
    words = answer.strip().lower()
    if stops(words):
        return {"stop": StopReason.BUDGET.value, "detail": "the budget is spent and the user chose to stop"}
    digits = "".join(ch for ch in words if ch.isdigit())
    if digits:
        run.raise_budget(Budget(max_tokens=int(digits), max_cost_usd=run.budget.max_cost_usd))
    else:
        run.raise_budget(Budget(max_tokens=run.budget.max_tokens * 2 if run.budget.max_tokens else None,
                                max_cost_usd=run.budget.max_cost_usd * 2 if run.budget.max_cost_usd else None))
    run.set_status(MissionState.RUNNING, state.get("round", 0))  # the new budget is kept on the mission node
    return {"halt": None}
