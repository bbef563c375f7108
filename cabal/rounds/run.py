"""One run of a mission: everything its steps need, and how one agent takes a turn.

A ``MissionRun`` is built once per ``run_mission`` or ``resume_mission`` and handed to the round
graph as LangGraph's run context (``Runtime[MissionRun].context``). It holds no position in
the mission (the checkpointer does) and no facts (the context graph does): only the parts a
step works with, and the in-memory view of the graph that steps share.
"""

from __future__ import annotations

import contextvars
import itertools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from cabal.entities import CloseOutput
from cabal.errors import ModelError
from cabal.graph import ContextGraph, reads
from cabal.graph.behind import WriteBehind
from cabal.llm import Budget, CallLimiter, ModelSettings, RetryNotice, Usage
from cabal.llm.observe import CallRecord, calls_heard_by
from cabal.llm.prices import price_of
from cabal.membrane import Cluster, Membrane
from cabal.rounds.agent_models import AgentModels
from cabal.rounds.budget import BudgetSpent, SpendMeter
from cabal.rounds.context import ContextBuilder, PromptLibrary
from cabal.rounds.events import (MissionEvent, ModelCalled, ModelOutputSwitched, ModelRetried, Presented, TurnDone,
                                 TurnStarted, spoken_lines)
from cabal.rounds.facts import TeamTool
from cabal.rounds.ids import halt_id, output_switch_id, status_session, step_prefix, turn_id
from cabal.rounds.mission import MissionSpec
from cabal.rounds.rules import RuleContext
from cabal.rounds.snapshot import Snapshot, load_snapshot, mission_spend
from cabal.rounds.team import Team
from cabal.rounds.tooluse import TOOL_GATE, Approvals, ApprovalPending, PausedTurn, TurnTools, team_tools
from cabal.rounds.turn import DEFAULT_MAX_ATTEMPTS, Turn, TurnResult
from cabal.rounds.writes import TurnPlace, TurnWriter
from cabal.tools.host import ToolHost
from cabal.vocabulary import USER_ID, MissionState, Role, Step, StopReason, TurnOutcome, count_of, halt_phrase

ENGINE_ACTOR = "cabal"  # the engine's own writes (mission status, budget questions) are expressed by this actor


@dataclass
class MissionRun:
    """Everything the steps of one run need, built once per run or resume."""

    mission_id: str
    spec: MissionSpec
    graph: ContextGraph
    membrane: Membrane
    models: AgentModels  # each agent's model and settings, picked at its turn
    team: Team
    prompts: PromptLibrary
    budget: Budget
    answers: list[str] = field(default_factory=list)  # unattended replies to the Chair's questions
    on_event: Callable[[MissionEvent], None] = lambda event: None
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    meter: SpendMeter | None = None  # the budget's gate; built from the graph's spend at the first use
    limiter: CallLimiter | None = None  # limits on model calls shared with other missions (a batch)
    tools: ToolHost | None = None  # the mission's MCP servers, connected (the caller opens and closes it)
    # The view: one snapshot, loaded at its first use and kept current by applying each
    # committed cluster at the next step boundary (agents within a step share one view).
    _view: Snapshot | None = field(default=None, repr=False)
    _committed: list[Cluster] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _pool: ThreadPoolExecutor = field(init=False, repr=False)
    # A step's write goes to the graph behind it while the next step works (cabal.graph.behind);
    # the graph's queries and the run's checkpoints wait for it.
    writer: WriteBehind = field(default_factory=WriteBehind, repr=False)

    def __post_init__(self) -> None:
        # One pool for the run: operatives of every parallel step, without starting threads anew.
        self._pool = ThreadPoolExecutor(max_workers=max(2, len(self.team.ids(Role.OPERATIVE))),
                                        thread_name_prefix="cabal-turn")
        self.graph.behind(self.writer)

    def close(self, *, wait: bool = True) -> None:
        """Stop the run's thread pool (``wait=False`` leaves turns in flight to finish, or die
        with the process, on their own); the writes already sent still land."""
        self._pool.shutdown(wait=wait, cancel_futures=not wait)
        self.writer.close()
        self.graph.behind(None)

    def settle(self) -> None:
        """Wait until every step's write is acknowledged; raise the failure of one that failed."""
        self.writer.settle()

    def finish_writes(self) -> BaseException | None:
        """After the run stopped on an error: every write sent landed (or the first that failed
        stopped the rest: their steps run again from the last checkpoint) and a failed write's
        error is cleared, so the run can record how it stopped. Returns that error, if any."""
        return self.writer.finish()

    def emit(self, event: MissionEvent) -> None:
        self.on_event(event)

    # -------------------------------------------------------------------------- the view

    def snapshot(self, round_number: int) -> Snapshot:
        """The mission as of now, for a step of ``round_number``.

        Read from the graph once per run, then kept current from what this process commits;
        ``refresh`` adds what the user writes from elsewhere.
        """
        with self._lock:
            if self._view is None:
                self._view, self._committed = load_snapshot(self.graph, self.mission_id, round_number), []
            elif self._view.round != round_number:
                self._view.advance(round_number)
            for cluster in self._committed:
                self._view.apply(cluster.nodes, cluster.updates)
            self._committed = []
            return self._view

    def step_view(self, round_number: int, step: Step) -> Snapshot:
        """The view the turns of a parallel step are built from: the mission as of the step's start.

        That is the run's view, unless the step runs again once some of its turns committed
        (a turn the provider or the budget stopped lets its siblings commit with the step;
        Ctrl-C commits the turns already done): then the mission is read again without what
        those turns wrote, so each turn that runs again gets the very prompt it got the first
        time (and the committed ones are still known as done)."""
        view = self.snapshot(round_number)
        started = step_prefix(round_number, step)
        if not any(turn["id"].startswith(started) for turn in view.turns):
            return view
        return load_snapshot(self.graph, self.mission_id, round_number, step=step)

    def reload(self) -> None:
        """Forget what this run knows of the mission (its view, what it committed, the spend, the
        writes not yet acknowledged), so the step that runs again reads it from the graph, as a
        new process would."""
        self.finish_writes()
        with self._lock:
            self._view, self._committed, self.meter = None, [], None

    def committed(self, clusters: list[Cluster]) -> None:
        """Clusters a turn committed; applied to the view at the next step boundary."""
        with self._lock:
            self._committed += clusters

    def refresh(self, round_number: int) -> dict:
        """At a round start: the mission node and the user's notes, which another process may
        have written (cabal say, cabal stop). Returns the mission node."""
        read = self.graph.read_many({"mission": reads.node_by_id(self.mission_id),
                                     "notes": reads.find("collab", {"author": USER_ID})})
        mission = read["mission"][0] if read["mission"] else {}
        self.snapshot(round_number).refresh(mission, read["notes"])
        return mission

    def usage(self) -> Usage:
        return mission_spend(self.graph).usage

    def spend_meter(self) -> SpendMeter:
        """The gate every model call of this run passes (what the graph says is spent, to start)."""
        with self._lock:
            if self.meter is None:
                spend = mission_spend(self.graph)
                self.meter = SpendMeter(self.budget, spend.usage, spend.cost_usd, self.models.names())
            return self.meter

    def raise_budget(self, budget: Budget) -> None:
        self.budget = budget
        self.spend_meter().raise_to(budget)

    # --------------------------------------------------------------------------- writes

    def write(self, protocol: str, context: dict, answers: dict, *, session_id: str) -> None:
        """An engine-side write through the membrane (status, answers), committed, and kept in
        the view like a turn's."""
        prepared = self.membrane.prepare(protocol, context, answers, session_id=session_id)
        self.membrane.commit([prepared])
        self.committed([prepared])

    def set_status(self, status: MissionState, round_number: int, stop_reason: StopReason | None = None,
                   detail: str | None = None) -> None:
        self.write("mission_status", {
            "mission_id": self.mission_id, "actor_id": ENGINE_ACTOR, "status": status, "round": round_number,
            "stop_reason": stop_reason or "", "detail": detail or "", "budget_tokens": self.budget.max_tokens,
            "budget_cost_usd": self.budget.max_cost_usd,
        }, {}, session_id=status_session(status, round_number))  # deterministic: a replay writes it once

    # ---------------------------------------------------------------------------- turns

    def take_turn(self, snapshot: Snapshot, step: Step, agent_id: str, *, attempt: int = 0) -> TurnResult | None:
        """One agent's turn, committed; None if it was already committed (a replay)."""
        return self.run_step(snapshot, step, [agent_id], attempt=attempt)[0]

    def run_step(self, snapshot: Snapshot, step: Step, agent_ids: list[str], *,
                 attempt: int = 0) -> list[TurnResult | None]:
        """The agents of one step, at the same time (a thread and a model call each), on one view;
        then everything the step's turns write commits as ONE write. None for each agent whose
        turn was already committed (a replay).

        A turn stopped by the budget or the provider still lets its siblings finish; what they
        wrote and what the stopped turn spent are committed before the stop is raised. Ctrl-C
        commits the turns already done and leaves the others to die with the process.
        """
        if len(agent_ids) <= 1:
            finished = [self._turn(snapshot, step, agent, attempt) for agent in agent_ids]
        else:
            # Each thread runs in a copy of this one's context, so what traces a run (LangSmith's
            # run tree, an application's OpenTelemetry span) holds the operatives' calls too.
            futures = [self._pool.submit(contextvars.copy_context().run, self._turn, snapshot, step, agent, attempt)
                       for agent in agent_ids]
            try:
                finished = [future.result() for future in futures]
            except KeyboardInterrupt:
                self.commit_step([future.result() for future in futures
                                  if future.done() and not future.cancelled() and future.exception() is None])
                raise
        self.commit_step(finished)
        # The question the engine waits on: one asked before and still open, else the one committed now.
        asked = next((turn.stopped for turn in sorted(finished, key=lambda t: t.question is not None)
                      if isinstance(turn.stopped, ApprovalPending)), None)
        stop = next((turn.stopped for turn in finished if turn.stopped is not None), None)
        if stop is not None:
            raise asked if asked is not None and not isinstance(stop, BudgetSpent) else stop
        return [turn.result for turn in finished]

    def commit_step(self, finished: list[FinishedTurn]) -> None:
        """One write for every turn of a step that has something to commit, sent behind the step
        (the next step starts on the view rolled forward from it), then their events.

        The events are told when the write is sent, in the order of the steps; if that write
        then fails, the graph's restart replays the step and tells them again."""
        # One question at a time: the user answers the one the engine waits on; another turn that
        # stopped for approval commits what it spent and asks again when its step runs again.
        waiting = any(isinstance(turn.stopped, ApprovalPending) and turn.question is None for turn in finished)
        asking = None if waiting else next((turn for turn in finished if turn.question is not None), None)
        writing = [turn for turn in finished if turn.clusters or turn is asking]
        if not writing:
            return
        clusters = [cluster for turn in writing for cluster in turn.clusters]
        if asking is not None and asking.question is not None:
            clusters.append(asking.question)
        self.writer.send(StepWrite(self.membrane, tuple(clusters)))
        self.committed(clusters)
        for turn in writing:
            if turn.done is None:  # a stopped turn's record of what it spent
                continue
            self.emit(turn.done)
            lines = spoken_lines([node for cluster in turn.clusters for node in cluster.nodes])
            if lines:  # the Envoy's lines reach the user as soon as they are written
                self.emit(Presented(self.mission_id, round=turn.done.round, agent=turn.done.agent, lines=lines))

    def _turn(self, snapshot: Snapshot, step: Step, agent_id: str, attempt: int) -> FinishedTurn:
        """One agent's turn, up to what it would commit (nothing is written here)."""
        place = TurnPlace(self.mission_id, snapshot.round, step, agent_id,
                          turn_id(snapshot.round, step, agent_id, attempt))
        if snapshot.has_turn(place.turn_id):
            return FinishedTurn(None, [])
        self.emit(TurnStarted(self.mission_id, round=snapshot.round, step=step, agent=agent_id))
        builder = ContextBuilder(self.graph, snapshot, self.team, self.prompts, tools=self.team_tools(),
                                  tool_calls_per_turn=self.spec.max_tool_calls)
        prompt = builder.build(agent_id, step)
        if prompt.facts is not None:  # what only the run knows: whether a question would be answered unattended
            prompt.facts = replace(prompt.facts, answers_waiting=len(self.answers))
        writer = TurnWriter(self.membrane, RuleContext(snapshot, self.team, agent_id), place,
                            self.team.writes(agent_id, step))
        chosen = self.models.of(agent_id)
        tools = self._turn_tools(place, step)
        resume = None
        if tools is not None and tools.approvals is not None:
            waiting = tools.approvals.latest(place.turn_id)
            if waiting is not None and waiting.get("status") != "answered":  # asked, not yet answered
                return FinishedTurn(None, [], stopped=ApprovalPending(str(waiting["id"])))
            if waiting is not None:
                resume = (PausedTurn.from_json(str(waiting["paused"])), waiting)
        turn = Turn(chosen.model, prompt, step, agent_id, snapshot.round, writer.check, builder.serve,
                    max_attempts=self.max_attempts, turn_index=attempt, gate=self.spend_meter(),
                    settings=chosen.settings, limiter=self.limiter, tools=tools, resume=resume,
                    on_retry=self._retry_events(snapshot.round, step, agent_id),
                    on_tools_refused=self._tools_refused(snapshot.round, step, agent_id))
        try:
            with calls_heard_by(self._call_events(snapshot.round, step, agent_id)):
                result = turn.run()
        except (BudgetSpent, ModelError) as stopped:
            return FinishedTurn(None, self._cut(snapshot, place, turn.result, str(stopped)), stopped=stopped)
        except ApprovalPending as pending:
            return FinishedTurn(None, self._cut(snapshot, place, turn.result, "waiting for the user's approval"),
                                stopped=pending, question=self._approval_question(place, pending))
        record = self._turn_record(result, chosen.name)
        writes: list[Cluster] = list(result.prepared or ())
        if result.outcome == TurnOutcome.HALT:
            halt = result.halt
            assert halt is not None, "a turn that halts carries its halt"
            # A schema-valid halt always prepares; a failure here is the engine's, not the model's.
            writes = [writer.prepare_one("raise_halt", halt, {
                "status": "pending" if halt.type == "question" else "done",
                "item_id": halt_id(snapshot.round, step, attempt)})]
        elif isinstance(result.answer, CloseOutput) and (ending := result.answer.ending()) is not None:
            # Decisions that leave everything accepted end the mission with them: one unit, so a
            # resume never finds the acceptances without the end, or the end twice.
            writes.append(writer.prepare_one("raise_halt", ending, {
                "status": "done", "item_id": halt_id(snapshot.round, step, attempt)}))
        if tools is not None:
            writes += tools.clusters(self.membrane)
        done = TurnDone(self.mission_id, round=snapshot.round, step=step, agent=agent_id, outcome=result.outcome,
                        attempts=result.attempts, calls=len(result.calls), input_tokens=result.usage.input_tokens,
                        output_tokens=result.usage.output_tokens, cache_read_tokens=result.usage.cache_read_tokens,
                        cost_usd=record["cost_usd"], problems=tuple(record["problems"]), summary=record["prose"],
                        halt=str(result.halt.type) if result.outcome == TurnOutcome.HALT and result.halt else None,
                        priced=record["priced"])
        return FinishedTurn(result, writer.unit(writes, record), done)

    def team_tools(self) -> list[TeamTool]:
        """The mission's tools the Chair is told of: none when no call may be made."""
        if self.tools is None or self.spec.max_tool_calls == 0:
            return []
        return team_tools(self.tools, self.team)

    def _turn_tools(self, place: TurnPlace, step: Step) -> TurnTools | None:
        """The mission's MCP tools ``place``'s agent is offered in ``step``, if any."""
        agent = self.team.get(place.agent_id)
        if self.tools is None or agent is None:
            return None
        offered = self.tools.tools_for(place.agent_id, agent.role, step)
        if not offered or self.spec.max_tool_calls == 0:
            return None
        return TurnTools(self.tools, offered, place, self.spec.max_tool_calls, self.emit,
                         approvals=Approvals(self.graph, self.membrane) if self.tools.asks else None)

    def _approval_question(self, place: TurnPlace, pending: ApprovalPending) -> Cluster:
        """The question a call that waits for the user asks, with the turn as it stopped."""
        assert pending.paused is not None, "a turn that stops for approval carries its conversation"
        return self.membrane.prepare("ask_user", {
            "actor_id": place.agent_id, "item_id": pending.halt_id, "gate": TOOL_GATE, "message": pending.question(),
            "options": ["approve", "deny"], "round": place.round, "step": place.step, "tool": pending.name,
            "arguments": pending.shown, "why": pending.why, "products": [], "paused": pending.paused.to_json(),
        }, {}, session_id=f"{pending.halt_id}.ask")

    def _call_events(self, round_number: int, step: Step, agent_id: str) -> Callable[[CallRecord], None]:
        """The listener that turns each model call of one turn into a ``model_call`` event."""
        numbers = itertools.count(1)

        def heard(call: CallRecord) -> None:
            usage = call.usage
            self.emit(ModelCalled(
                self.mission_id, round=round_number, step=step, agent=agent_id, call=next(numbers), model=call.model,
                input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_tokens, cache_write_tokens=usage.cache_write_tokens,
                cost_usd=usage.cost_usd(call.model), duration_s=round(call.duration_s, 6),
                at=call.started + call.duration_s))

        return heard

    def _retry_events(self, round_number: int, step: Step, agent_id: str) -> Callable[[RetryNotice], None]:
        """The listener that tells, for each model call about to be retried, why and how long it waits."""
        def heard(notice: RetryNotice) -> None:
            self.emit(ModelRetried(self.mission_id, round=round_number, step=step, agent=agent_id, retry=notice.retry,
                                   max_retries=notice.max_retries, wait_s=round(notice.wait_s, 3),
                                   reason=notice.reason))

        return heard

    def _tools_refused(self, round_number: int, step: Step, agent_id: str) -> Callable[[ModelError], ModelSettings]:
        """What a turn does when the provider says its model cannot take tools: that model (for
        every agent on it) answers in JSON text from now on; the first turn to meet the refusal
        records it (the graph keeps it for ``cabal resume``, the event tells the listeners)."""
        def refused(error: ModelError) -> ModelSettings:
            chosen, switched = self.models.switch_to_json(agent_id)
            if switched:
                reason = " ".join(str(error).split())[:300]
                self.write("switch_model_output", {
                    "mission_id": self.mission_id, "actor_id": ENGINE_ACTOR, "agent_id": agent_id,
                    "model": chosen.spec, "reason": reason, "round": round_number, "step": step,
                    "switch_id": output_switch_id(chosen.spec),
                }, {}, session_id=output_switch_id(chosen.spec))
                self.emit(ModelOutputSwitched(self.mission_id, round=round_number, step=step, agent=agent_id,
                                              model=chosen.spec, output=chosen.settings.output, reason=reason))
            return chosen.settings

        return refused

    def _turn_record(self, result: TurnResult, model: str, *, outcome: TurnOutcome | None = None,
                     prose: str | None = None) -> dict:
        """What a turn moment records: outcome, prose, reasoning, problems, the model, usage per call."""
        return {
            "outcome": outcome or result.outcome, "attempts": result.attempts,
            "prose": prose or _summary_of(result), "reasoning": _reasoning_of(result),
            "problems": [str(p) for p in result.problems],
            "input_tokens": result.usage.input_tokens, "output_tokens": result.usage.output_tokens,
            "cache_read_tokens": result.usage.cache_read_tokens,
            "model": model, "cost_usd": round(result.usage.cost_usd(model), 6),
            "priced": price_of(model) is not None,  # else its cost reads "not priced", never $0
            "calls": {"input_tokens": [c.input_tokens for c in result.calls],
                      "output_tokens": [c.output_tokens for c in result.calls],
                      "cache_read_tokens": [c.cache_read_tokens for c in result.calls]},
        }

    def _cut(self, snapshot: Snapshot, place: TurnPlace, partial: TurnResult, why: str) -> list[Cluster]:
        """A turn stopped early writes nothing but what it spent, under an id of its own (the turn
        itself runs again when the mission goes on), so no token goes uncounted."""
        if not partial.calls:
            return []
        # From the graph: a step's view run again leaves out what its turns wrote, earlier cuts too.
        earlier = sum(str(t["id"]).startswith(f"{place.turn_id}.cut") for t in self.graph.find("moment", {"type": "turn"}))
        cut = replace(place, turn_id=f"{place.turn_id}.cut{earlier + 1}")
        record = self._turn_record(partial, self.models.of(place.agent_id).name, outcome=TurnOutcome.INTERRUPTED,
                                   prose=f"stopped early: {why}")
        return TurnWriter(self.membrane, RuleContext(snapshot, self.team, place.agent_id), cut, ()).unit([], record)


@dataclass(frozen=True)
class StepWrite:
    """A step's clusters, committed as one write when the run's writer gets to them; steps that
    queued meanwhile join into one write (all or nothing: no checkpoint passes any of them before
    it lands, so a failure replays each of those steps)."""

    membrane: Membrane
    clusters: tuple[Cluster, ...]

    def __call__(self) -> None:
        self.membrane.commit(self.clusters)

    def join(self, later: object) -> StepWrite | None:
        if not isinstance(later, StepWrite) or later.membrane is not self.membrane:
            return None
        return StepWrite(self.membrane, self.clusters + later.clusters)


@dataclass
class FinishedTurn:
    """A turn of a step that ended, and what it commits with its step: its writes and turn
    moment; nothing for a replayed turn; only what it spent for a turn the budget or the
    provider stopped (``stopped``)."""

    result: TurnResult | None
    clusters: list[Cluster]
    done: TurnDone | None = None
    stopped: BaseException | None = None
    question: Cluster | None = None  # a turn stopped for approval: the question it asks the user


# What an answer's lists hold, as people count them (singular, plural); a field not named here is
# counted by its name with its underscores as spaces.
_COUNTED = {"tree_operations": ("change to the tree", "changes to the tree"),
            "acceptance": ("acceptance decision", "acceptance decisions"),
            "chair_versions": ("version by the Chair", "versions by the Chair"),
            "initial_products": ("initial product", "initial products"),
            "missing_details": ("missing detail", "missing details")}


def counted(field_name: str, number: int) -> str:
    """``number`` of an answer's ``field_name`` items, in words: "1 review", "5 acceptance decisions"."""
    plain = field_name.replace("_", " ")
    singular, plural = _COUNTED.get(field_name, (plain.removesuffix("s"), plain if plain.endswith("s") else plain + "s"))
    return count_of(number, singular, plural)


def _summary_of(result: TurnResult) -> str:
    if result.halt is not None:
        return f"{halt_phrase(result.halt.type)}: {result.halt.message}"
    if result.answer is None:
        return "no valid answer within the retry budget"
    counts = {name: len(value) for name, value in result.answer if isinstance(value, list) and value}
    return ", ".join(counted(name, n) for name, n in counts.items()) or "answered"


def _reasoning_of(result: TurnResult) -> str:
    """The agent's prose about its answer (pattern P6): a step's ``reasoning``, or the Chair's
    ``thinking``, or the message of a halt."""
    answer = result.answer
    reasoning = getattr(answer, "reasoning", None)
    if reasoning:
        return reasoning
    thinking = getattr(answer, "thinking", None)
    if thinking is not None:
        return " ".join(str(value) for _, value in thinking)
    return result.halt.message if result.halt is not None else ""
