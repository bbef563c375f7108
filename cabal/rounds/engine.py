"""The round engine: a LangGraph graph that runs a mission's steps in order.

    bootstrap ─▶ round_start ─▶ reflect ─▶ plan ─▶ write ─▶ peer_review ─▶ inspect ─▶ presentation ─┐
        │             ▲  │                  │  (only with      (only with new versions)             │
        ▼             │  ▼                  ▼   assignments)                                        │
    await_user ◀──────┼─ finish          await_user                                                 │
                      └─────────────────────────────────────────────────────────────────────────────┘

LangGraph's checkpointer (SQLite in the workspace) holds where the loop is; the context graph
holds the facts. Each agent's turn commits as one cluster whose turn moment has a
deterministic id, and a step skips every agent whose turn is already committed, so a process
killed anywhere resumes without a lost or doubled write. Operatives act in parallel within a
step (a thread each, one model call each). A Chair ``question`` pauses the mission with
``interrupt``; the answer resumes it, in this process or another.
"""

from __future__ import annotations

import json
import threading
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from cabal.errors import AnswerRejected, CabalError, ModelError
from cabal.graph import ContextGraph
from cabal.llm import Budget, Usage, model_name
from cabal.membrane import Membrane
from cabal.rounds.context import ContextBuilder, PromptLibrary
from cabal.rounds.ids import USER_ID, halt_id, turn_id
from cabal.rounds.mission import MissionSpec
from cabal.rounds.rules import RuleContext
from cabal.rounds.snapshot import Snapshot, load_snapshot, mission_spend
from cabal.rounds.team import Team
from cabal.rounds.turn import DEFAULT_MAX_ATTEMPTS, Turn, TurnResult
from cabal.rounds.writes import GroupCommitter, TurnPlace, TurnWriter

# Why a mission stopped (cabal-rounds.md).
CONCLUDED, NO_MORE_ROUNDS, BUDGET, USER_HALT, ERROR, QUESTION = (
    "concluded", "noMoreRounds", "budget", "userHalt", "error", "questionToUser")
STOP_WORDS = {"stop", "no", "n", "halt", "end", "quit"}
BUDGET_HALT = re.compile(r"r\d+\.budget\d*")  # ids of the questions a spent budget raises
ENGINE_ACTOR = "cabal"  # the engine's own writes (mission status) are expressed by this actor


class RoundState(TypedDict, total=False):
    """What the checkpointer keeps: where the loop is. Facts live in the context graph."""

    round: int
    after: str  # the step a paused Chair turn belongs to (bootstrap or plan)
    halt: str | None  # id of the pending halt
    stop: str | None  # stop reason once the mission ends
    detail: str | None


Event = dict[str, Any]


@dataclass
class Runtime:
    """Everything the steps need, built once per run or resume."""

    mission_id: str
    spec: MissionSpec
    graph: ContextGraph
    membrane: Membrane
    model: Any
    team: Team
    prompts: PromptLibrary
    budget: Budget
    answers: list[str] = field(default_factory=list)  # unattended replies to the Chair's questions
    on_event: Callable[[Event], None] = lambda event: None
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    # The view: one snapshot per round, loaded at its first use and kept current by applying
    # each committed turn at the next step boundary (agents within a step share one view).
    _view: Snapshot | None = field(default=None, repr=False)
    _committed: list[dict] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _committer: GroupCommitter | None = field(default=None, repr=False)
    _pool: ThreadPoolExecutor | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._committer = GroupCommitter(self.membrane)
        # One pool for the run: operatives of every parallel step, without starting threads anew.
        self._pool = ThreadPoolExecutor(max_workers=max(2, len(self.team.ids("operative"))),
                                        thread_name_prefix="cabal-turn")

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def emit(self, kind: str, **fields: Any) -> None:
        self.on_event({"kind": kind, "mission": self.mission_id, **fields})

    # -------------------------------------------------------------------------- queries

    def snapshot(self, round_number: int) -> Snapshot:
        """The mission as of now, for a step of ``round_number``.

        Read from the graph once per run (or after ``invalidate``), then kept current from what
        this process commits; ``refresh`` adds what the user writes from elsewhere.
        """
        with self._lock:
            if self._view is None:
                self._view, self._committed = load_snapshot(self.graph, self.mission_id, round_number), []
            elif self._view.round != round_number:
                self._view.advance(round_number)
            for cluster in self._committed:
                self._view.apply(cluster.get("nodes", []), cluster.get("updates", []))
            self._committed = []
            return self._view

    def committed(self, clusters: list[dict]) -> None:
        """Clusters a turn committed; applied to the view at the next step boundary."""
        with self._lock:
            self._committed += clusters

    def invalidate(self) -> None:
        """Read the graph again next time (after a write the view cannot follow)."""
        with self._lock:
            self._view, self._committed = None, []

    def refresh(self, round_number: int) -> dict:
        """At a round start: the mission node and the user's notes, which another process may
        have written (cabal say, cabal stop). Returns the mission node."""
        mission = self.graph.get(self.mission_id) or {}
        notes = self.graph.find("collab", {"author": USER_ID})
        self.snapshot(round_number).refresh(mission, notes)
        return mission

    def write(self, protocol: str, context: dict, answers: dict, *, session_id: str | None = None) -> None:
        """An engine-side write through the membrane (status, answers, budget questions),
        committed, and kept in the view like a turn's."""
        result = self.membrane.run(protocol, context, answers, session_id=session_id, commit=False, persist=False)
        if result["status"] != "complete":
            raise CabalError(f"cannot write {protocol}: {result.get('error') or result.get('errors')}")
        committed = self.membrane.commit_many([result])
        if committed["status"] != "complete":
            raise CabalError(f"cannot write {protocol}: {committed.get('error')}")
        self.committed([result["cluster"]])

    def usage(self) -> Usage:
        return mission_spend(self.graph)[0]

    # --------------------------------------------------------------------------- writes

    def set_status(self, status: str, round_number: int, stop_reason: str | None = None, detail: str | None = None) -> None:
        self.write("mission_status", {
            "mission_id": self.mission_id, "actor_id": ENGINE_ACTOR, "status": status, "round": round_number,
            "stop_reason": stop_reason or "", "detail": detail or "", "budget_tokens": self.budget.max_tokens,
            "budget_cost_usd": self.budget.max_cost_usd,
        }, {}, session_id=f"status.{status}.r{round_number}")  # deterministic: a replay writes it once

    # ---------------------------------------------------------------------------- turns

    def take_turn(self, snapshot: Snapshot, step: str, agent_id: str, *, attempt: int = 0) -> TurnResult | None:
        """One agent's turn, committed; None if it was already committed (a replay)."""
        place = TurnPlace(self.mission_id, snapshot.round, step, agent_id,
                          turn_id(snapshot.round, step, agent_id) + (f".after{attempt}" if attempt else ""))
        if snapshot.has_turn(place.turn_id):
            return None
        self.emit("turn_start", round=snapshot.round, step=step, agent=agent_id)
        builder = ContextBuilder(self.graph, snapshot, self.team, self.prompts)
        prompt = builder.build(agent_id, step)
        writer = TurnWriter(self.membrane, RuleContext(snapshot, self.team, agent_id), place,
                            self.team.writes(agent_id, step), self._committer)
        turn = Turn(self.model, prompt, step, agent_id, snapshot.round, writer.check, builder.serve,
                    max_attempts=self.max_attempts, turn_index=attempt)
        result = turn.run()
        cost = result.usage.cost_usd(model_name(self.model))
        record = {
            "outcome": result.outcome, "attempts": result.attempts,
            "prose": _summary_of(result), "reasoning": _reasoning_of(result),
            "problems": [str(p) for p in result.problems],
            "input_tokens": result.usage.input_tokens, "output_tokens": result.usage.output_tokens,
            "cache_read_tokens": result.usage.cache_read_tokens, "cost_usd": round(cost, 6),
            "calls": {"input_tokens": [c.input_tokens for c in result.calls],
                      "output_tokens": [c.output_tokens for c in result.calls],
                      "cache_read_tokens": [c.cache_read_tokens for c in result.calls]},
        }
        if result.outcome == "halt":
            halt = result.halt
            extra = {"status": "pending" if halt.type == "question" else "done", "item_id": halt_id(snapshot.round, step, attempt)}
            try:
                prepared_halt = writer.run_protocol("raise_halt", halt.model_dump(mode="json", by_alias=True), extra)
            except AnswerRejected as rejected:  # cannot happen for a schema-valid halt; record, do not crash
                record.update(outcome="failed", problems=[str(p) for p in rejected.problems])
                self.committed(writer.commit(None, record))
                return result
            self.committed(writer.commit(None, record, extra=[prepared_halt]))
        else:
            self.committed(writer.commit(result.prepared if result.outcome == "final" else None, record))
        self.emit("turn_done", round=snapshot.round, step=step, agent=agent_id, outcome=result.outcome,
                  attempts=result.attempts, input_tokens=result.usage.input_tokens,
                  output_tokens=result.usage.output_tokens, cost_usd=cost,
                  problems=[str(p) for p in result.problems])
        return result

    def run_parallel(self, snapshot: Snapshot, step: str, agent_ids: list[str]) -> list[TurnResult | None]:
        """The agents of one step, at the same time: one thread and one model call each."""
        if len(agent_ids) <= 1:
            return [self.take_turn(snapshot, step, a) for a in agent_ids]
        return list(self._pool.map(lambda agent: self.take_turn(snapshot, step, agent), agent_ids))


def _summary_of(result: TurnResult) -> str:
    if result.halt is not None:
        return f"halt ({result.halt.type}): {result.halt.message}"
    if result.answer is None:
        return "no valid answer within the retry budget"
    counts = {name: len(value) for name, value in result.answer if isinstance(value, list) and value}
    return ", ".join(f"{n} {name}" for name, n in counts.items()) or "answered"


def _reasoning_of(result: TurnResult) -> str:
    thinking = getattr(result.answer, "thinking", None)
    return json.dumps(thinking.model_dump(by_alias=True)) if thinking is not None else ""


# ------------------------------------------------------------------------------ the graph


def build_graph(runtime: Runtime, checkpointer: Any):
    rt = runtime

    def chair_step(state: RoundState, step: str) -> RoundState:
        round_number = state.get("round", 0)
        snapshot = rt.snapshot(round_number)
        answered = len([h for h in snapshot.halts if h.get("round") == round_number and h.get("step") == step
                        and h.get("status") == "answered"])
        rt.emit("step", round=round_number, step=step)
        try:
            result = rt.take_turn(snapshot, step, "chair-1", attempt=answered)
        except ModelError as error:
            return {"stop": ERROR, "detail": str(error)}
        if result is None:  # replayed: read what the committed turn decided
            snapshot = rt.snapshot(round_number)
            pending = snapshot.pending_halt()
            if pending is not None:
                return {"halt": pending["id"], "after": step}
            done = [h for h in snapshot.halts if h.get("type") == "done"]
            return {"stop": CONCLUDED, "detail": done[-1]["message"]} if done else {"halt": None}
        if result.outcome == "failed":
            if step == "bootstrap":
                return {"stop": ERROR, "detail": "bootstrap failed: " + "; ".join(map(str, result.problems))}
            return {"halt": None}
        if result.outcome == "halt":
            if result.halt.type == "done":
                return {"stop": CONCLUDED, "detail": result.halt.message}
            return {"halt": halt_id(round_number, step, answered), "after": step}
        return {"halt": None}

    def bootstrap(state: RoundState) -> RoundState:
        return {"round": 0, **chair_step(state, "bootstrap")}

    def await_user(state: RoundState) -> RoundState:
        halt = rt.graph.get(state["halt"]) or {}
        if halt.get("status") != "answered":
            if rt.answers:
                answer = rt.answers.pop(0)
                rt.emit("answer", text=answer, source="mission file")
            else:
                rt.set_status("halted", state.get("round", 0), QUESTION, halt.get("message"))
                rt.emit("halt", message=halt.get("message"), options=halt.get("options") or [])
                answer = interrupt({"halt": state["halt"], "message": halt.get("message"),
                                    "options": halt.get("options") or []})
            answer_halt(rt, state["halt"], str(answer), state.get("round", 0))
            rt.set_status("running", state.get("round", 0))
        if BUDGET_HALT.fullmatch(str(state["halt"])):
            return _budget_answer(rt, state, str(rt.graph.get(state["halt"]).get("answer", "")))
        return {"halt": None}

    def round_start(state: RoundState) -> RoundState:
        round_number = state.get("round", 0) + 1
        mission = rt.refresh(round_number)
        if mission.get("halt_requested"):
            return {"stop": USER_HALT, "detail": "the user asked the team to stop"}
        if round_number > int(mission.get("rounds") or rt.spec.rounds):
            return {"stop": NO_MORE_ROUNDS, "detail": f"the round limit ({mission.get('rounds')}) is reached"}
        limited = rt.budget.max_tokens is not None or rt.budget.max_cost_usd is not None
        # usage() reads every turn of the mission: only worth it when there is a limit to check.
        spent = rt.budget.exceeded(rt.usage(), model_name(rt.model)) if limited else None
        if spent:
            return _raise_budget_halt(rt, state.get("round", 0), spent)
        rt.set_status("running", round_number)
        return {"round": round_number, "halt": None}

    def operatives_step(step: str, agents: Callable[[Snapshot], list[str]]) -> Callable[[RoundState], RoundState]:
        def node(state: RoundState) -> RoundState:
            snapshot = rt.snapshot(state["round"])
            rt.emit("step", round=state["round"], step=step)
            try:
                rt.run_parallel(snapshot, step, agents(snapshot))
            except ModelError as error:
                return {"stop": ERROR, "detail": str(error)}
            return {}
        node.__name__ = step
        return node

    def acting(step: str) -> Callable[[Snapshot], list[str]]:
        return lambda snapshot: [agent.id for agent in rt.team.acting(step)]

    def peer_reviewers(snapshot: Snapshot) -> list[str]:
        new = snapshot.new_versions()
        return [a.id for a in rt.team.acting("peer_review")
                if any(snapshot.products[v["product_id"]].get("owner") != a.id and v.get("author") != a.id for v in new)]

    def finish(state: RoundState) -> RoundState:
        reason = state.get("stop") or CONCLUDED
        status = "failed" if reason == ERROR else "done"
        rt.set_status(status, state.get("round", 0), reason, state.get("detail"))
        rt.emit("stop", reason=reason, detail=state.get("detail"), round=state.get("round", 0))
        return {}

    def after_chair(state: RoundState) -> str:
        if state.get("stop"):
            return "finish"
        if state.get("halt"):
            return "await_user"
        return "round_start" if state.get("round", 0) == 0 else "after_plan"

    # The view is current at a step boundary, so these read no graph.
    def after_plan(state: RoundState) -> str:
        snapshot = rt.snapshot(state["round"])
        if snapshot.assignments_in():
            return "write"
        return "peer_review" if snapshot.new_versions() else "presentation"

    def after_write(state: RoundState) -> str:
        if state.get("stop"):
            return "finish"
        return "peer_review" if rt.snapshot(state["round"]).new_versions() else "presentation"

    def stop_or(next_step: str) -> Callable[[RoundState], str]:
        return lambda state: "finish" if state.get("stop") else next_step

    builder = StateGraph(RoundState)
    builder.add_node("bootstrap", bootstrap)
    builder.add_node("await_user", await_user)
    builder.add_node("round_start", round_start)
    builder.add_node("reflect", operatives_step("reflect", acting("reflect")))
    builder.add_node("plan", lambda state: chair_step(state, "plan"))
    builder.add_node("write", operatives_step("write", lambda s: sorted({a["assignee"] for a in s.assignments_in()})))
    builder.add_node("peer_review", operatives_step("peer_review", peer_reviewers))
    builder.add_node("inspect", operatives_step("inspect", acting("inspect")))
    builder.add_node("presentation", operatives_step("presentation", acting("presentation")))
    builder.add_node("finish", finish)

    builder.add_edge(START, "bootstrap")
    builder.add_conditional_edges("bootstrap", after_chair, ["finish", "await_user", "round_start"])
    builder.add_conditional_edges(
        "await_user",
        lambda s: "finish" if s.get("stop") else ("bootstrap" if s.get("after") == "bootstrap" and s.get("round", 0) == 0
                                                 else "plan" if s.get("after") == "plan" else "round_start"),
        ["finish", "bootstrap", "plan", "round_start"],
    )
    builder.add_conditional_edges("round_start", lambda s: "finish" if s.get("stop") else
                                  ("await_user" if s.get("halt") else "reflect"), ["finish", "await_user", "reflect"])
    builder.add_conditional_edges("reflect", stop_or("plan"), ["finish", "plan"])
    builder.add_conditional_edges(
        "plan", lambda s: after_plan(s) if after_chair(s) == "after_plan" else after_chair(s),
        ["finish", "await_user", "write", "peer_review", "presentation"],
    )
    builder.add_conditional_edges("write", after_write, ["finish", "peer_review", "presentation"])
    builder.add_conditional_edges("peer_review", stop_or("inspect"), ["finish", "inspect"])
    builder.add_conditional_edges("inspect", stop_or("presentation"), ["finish", "presentation"])
    builder.add_conditional_edges("presentation", stop_or("round_start"), ["finish", "round_start"])
    builder.add_edge("finish", END)
    return builder.compile(checkpointer=checkpointer)


# ------------------------------------------------------------------- halts the engine raises


def answer_halt(rt: Runtime, halt: str, answer: str, round_number: int) -> None:
    node = rt.graph.get(halt) or {}
    rt.write("answer_halt", {"halt_id": halt, "round": round_number, "actor_id": USER_ID,
                             "message": node.get("message", "")},
             {"item": {"answer": answer}}, session_id=f"{halt}.answer")


def _raise_budget_halt(rt: Runtime, round_number: int, spent: str) -> RoundState:
    """A spent budget pauses the mission with a question instead of killing work."""
    halt, asked = f"r{round_number}.budget", 1
    # Answered, yet still spent (a number below the spend): ask again rather than replay that answer forever.
    while (rt.graph.get(halt) or {}).get("status") == "answered":
        asked += 1
        halt = f"r{round_number}.budget{asked}"
    if not rt.graph.exists(halt):
        # The engine asks this, not the Chair: the halt is authored by the engine's actor.
        place = TurnPlace(rt.mission_id, round_number, "budget", ENGINE_ACTOR, f"r{round_number}.budget.turn")
        writer = TurnWriter(rt.membrane, RuleContext(rt.snapshot(round_number), rt.team, ENGINE_ACTOR), place, ())
        message = (f"The {spent}. Continue? Answer 'continue' to double the budget, a number of tokens to "
                   "set a new token budget, or 'stop' to end the mission here.")
        prepared = writer.run_protocol("raise_halt", {"type": "question", "to": ["u:all"], "message": message,
                                                      "options": ["continue", "stop"]},
                                       {"status": "pending", "item_id": halt})
        rt.membrane.commit_many([prepared])
        rt.committed([prepared["cluster"]])
    return {"halt": halt, "after": "round_start"}


def _budget_answer(rt: Runtime, state: RoundState, answer: str) -> RoundState:
    words = answer.strip().lower()
    if words in STOP_WORDS or words.startswith("stop"):
        return {"stop": BUDGET, "detail": "the budget is spent and the user chose to stop"}
    digits = "".join(ch for ch in words if ch.isdigit())
    if digits:
        rt.budget = Budget(max_tokens=int(digits), max_cost_usd=rt.budget.max_cost_usd)
    else:
        rt.budget = Budget(max_tokens=rt.budget.max_tokens * 2 if rt.budget.max_tokens else None,
                           max_cost_usd=rt.budget.max_cost_usd * 2 if rt.budget.max_cost_usd else None)
    rt.set_status("running", state.get("round", 0))  # the new budget is kept on the mission node
    return {"halt": None, "after": "round_start"}
