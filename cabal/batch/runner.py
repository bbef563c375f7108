"""Running a batch: which missions to run, on which workers, within which budget, and what is
recorded as they end.

``execute`` is the coordinator. Under the batch's lock it saves the plan, reads where every
mission is (its graph is the truth), and hands the missions that need a run to a pool: local
processes (``LocalPool``) or a Dask cluster (``DaskPool``). A mission that is done, failed or
waiting for an answer nobody gave is skipped; one interrupted (a kill, an outage, the batch's
budget) is resumed; one halted is resumed when ``answers`` holds its answer.

Everything the workers send passes through one thread here: each mission's events (forwarded
as they are; each names its mission), its start, its outcome (recorded in the store at once), and the
spend, which closes the shared limits once the batch budget is spent: running missions then
pause at their next model call, and missions not started yet do not start.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cabal.batch.events import (BatchEnded, BatchStarted, BudgetReached, MissionAssigned, MissionEnded, MissionLost,
                                MissionOutcome)
from cabal.batch.limits import DaskLimits, FileLimits
from cabal.batch.local import LocalPool, default_workers
from cabal.batch.plan import BatchPlan
from cabal.batch.progress import SpendTally
from cabal.batch.report import FINISHED, BatchReport, collect, needs_run, read_status
from cabal.batch.store import BatchStore
from cabal.batch.worker import MissionTask
from cabal.config import resolve_server
from cabal.errors import ConfigError
from cabal.rounds.checkpoints import CheckpointStore
from cabal.rounds.events import MissionEvent, TurnDone
from cabal.rounds.mission import MissionSpec
from cabal.rounds.workspace import Workspace
from cabal.vocabulary import NotStarted

OnEvent = Callable[[Any], None]


@dataclass(frozen=True)
class RunOptions:
    """How to run a batch (none of it changes what the batch is)."""

    workers: int | None = None  # local processes; default: default_workers()
    dask: str | None = None  # local:N, or a scheduler's address: run on Dask instead
    max_concurrent: int | None = None  # model calls in flight across all workers
    retries: int = 2  # local: new processes for a mission whose process died (Dask: allowed-failures)
    answers: Mapping[str, str] = field(default_factory=dict)  # mission id -> answer to its pending question
    record: bool = True  # keep each mission's model calls in its cassette (llm/cassette.py)


@dataclass(frozen=True)
class BatchResult:
    report: BatchReport  # every mission, as the run left it
    ran: int  # missions this run started or resumed
    elapsed_s: float
    budget_spent: str | None = None  # why the batch stopped starting calls, if its budget did

    @property
    def batch_id(self) -> str:
        return self.report.batch_id


def execute(plan: BatchPlan, options: RunOptions, *, home: str | Path | None = None, url: str | None = None,
            on_event: OnEvent | None = None) -> BatchResult:
    started = time.monotonic()
    emit = on_event or (lambda event: None)
    workspace = Workspace.at(home, url)
    store = BatchStore(workspace.home, plan.batch_id)
    # Sent with every task, so each worker writes where this process would (FALKORDB_URL
    # and CABAL_CHECKPOINTS here, whatever a worker's own environment says).
    url = resolve_server(url, workspace.home).url
    checkpoints = CheckpointStore.from_environment()
    with store.running():
        store.save_plan(plan)
        before = collect(workspace, store, plan)
        answers = _checked_answers(before, options.answers)
        to_run = [row for row in before.rows if needs_run(row.state, row.mission_id in answers)]
        spent_before = {row.mission_id: (row.tokens, row.cost_usd) for row in before.rows}
        tally = SpendTally(spent_before)
        spent = plan.budget.spent(tally.tokens, tally.cost_usd)
        if not to_run or spent:
            return BatchResult(before, 0, time.monotonic() - started, spent)
        pool = _pool(options, len(to_run), url, checkpoints.shared)
        with pool.opened():
            limits = pool.limits(plan.batch_id, str(store.limits_folder), options.max_concurrent)
            limits.prepare()
            tasks = [MissionTask(plan.batch_id, row.mission_id, row.key, _runnable(plan, row.mission_id),
                                 str(workspace.home), url, checkpoints.url, limits, answer=answers.get(row.mission_id),
                                 record=options.record)
                     for row in to_run]
            emit(BatchStarted(plan.batch_id, plan.name, len(before.rows), len(tasks),
                              sum(row.state in FINISHED for row in before.rows), pool.describe(),
                              min(len(tasks), max(1, pool.workers)), {row.mission_id: row.state for row in before.rows},
                              spent_before, plan.budget.tokens, plan.budget.cost_usd))
            coordinator = _Coordinator(plan, store, workspace, limits, tally, emit)
            try:
                pool.run(tasks, coordinator.deliver)
            finally:
                coordinator.close()
        after = collect(workspace, store, plan)
        elapsed = time.monotonic() - started
        emit(BatchEnded(plan.batch_id, after.totals.states, round(elapsed, 3), coordinator.refused))
        return BatchResult(after, len(tasks), elapsed, coordinator.refused)


def _checked_answers(report: BatchReport, answers: Mapping[str, str]) -> dict[str, str]:
    """Answers only for the batch's missions that wait for one: a typo is an error, not a no-op."""
    waiting = {row.mission_id for row in report.pending_questions}
    for mission_id in answers:
        if mission_id not in waiting:
            known = ", ".join(sorted(waiting)) or "none"
            raise ConfigError(f"--answer {mission_id}: not a mission of batch {report.batch_id} that waits for an "
                              f"answer (waiting: {known})")
    return dict(answers)


def _runnable(plan: BatchPlan, mission_id: str) -> MissionSpec:
    """The mission file of a mission to run: one that does not load is invalid, and never runs."""
    spec = plan.mission(mission_id).spec
    assert spec is not None, f"{mission_id}: an invalid mission cannot be run"
    return spec


def _pool(options: RunOptions, missions: int, url: str | None, checkpoints_shared: bool) -> Any:
    if options.dask:
        from cabal.batch.cluster import DaskPool

        return DaskPool(options.dask, url=url, checkpoints_shared=checkpoints_shared)
    return LocalPool(options.workers or default_workers(missions), retries=options.retries)


class _Coordinator:
    """Handles what the workers send, one message at a time, in a thread of its own (a Dask
    client delivers from its event loop, where nothing may block)."""

    def __init__(self, plan: BatchPlan, store: BatchStore, workspace: Workspace, limits: FileLimits | DaskLimits,
                 tally: SpendTally, emit: OnEvent) -> None:
        self.plan, self.store, self.workspace, self.limits = plan, store, workspace, limits
        self.tally, self.emit = tally, emit
        self.refused: str | None = None
        self.starts: dict[str, int] = {}
        self.started: dict[str, tuple[float, float, str]] = {}  # the attempt running: clock, time, worker
        self.ended: set[str] = set()
        self._failure: BaseException | None = None
        self._inbox: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="cabal-batch", daemon=True)
        self._thread.start()

    def deliver(self, message: Any) -> None:
        self._inbox.put(message)

    def close(self) -> None:
        self._inbox.put(None)
        self._thread.join()
        if self._failure is not None:
            raise self._failure

    def _work(self) -> None:
        while (message := self._inbox.get()) is not None:
            try:
                self._handle(message)
            except Exception as error:  # noqa: BLE001 - kept for close(); the missions go on meanwhile
                self._failure = self._failure or error

    def _handle(self, message: Any) -> None:
        if isinstance(message, MissionAssigned):
            if message.mission_id in self.started:  # started again with no word from the last attempt
                self._handle(MissionLost(message.mission_id, self.starts[message.mission_id],
                                         "its worker died; the scheduler gave the mission to another", retry=True))
            # The pool numbers local retries; a Dask worker cannot know it runs a task again.
            attempt = self.starts[message.mission_id] = max(message.attempt, self.starts.get(message.mission_id, 0) + 1)
            self.started[message.mission_id] = (time.monotonic(), time.time(), message.worker)
            self.emit(replace(message, attempt=attempt))
        elif isinstance(message, MissionOutcome):
            self._ended(replace(message, attempt=max(self.starts.get(message.mission_id, 1), message.attempt)))
        elif isinstance(message, MissionLost):
            self.emit(message)
            lost = self._lost(message)
            if message.retry:
                self.store.record(lost)  # its time counts; the mission goes on in the next attempt
            else:
                self._ended(lost)
        elif isinstance(message, MissionEvent):
            if isinstance(message, TurnDone) and message.mission not in self.ended:
                self.tally.turn(message)
                self._check_budget()
            self.emit(message)

    def _ended(self, outcome: MissionOutcome) -> None:
        self.started.pop(outcome.mission_id, None)
        self.store.record(outcome)
        self.ended.add(outcome.mission_id)
        self.tally.settle(outcome.mission_id, outcome.usage.total_tokens, outcome.cost_usd)
        self.emit(MissionEnded(self.plan.mission(outcome.mission_id).key, outcome))
        self._check_budget()

    def _lost(self, lost: MissionLost) -> MissionOutcome:
        """The outcome of an attempt whose worker died: where the mission's graph says it is."""
        clock, started_at, worker = self.started.pop(lost.mission_id, (time.monotonic(), time.time(), ""))
        elapsed_s = round(time.monotonic() - clock, 3)
        status, _ = read_status(self.workspace, lost.mission_id)
        if status is None:
            return MissionOutcome(lost.mission_id, lost.attempt, NotStarted.PENDING, detail=lost.reason,
                                  started_at=started_at, elapsed_s=elapsed_s, worker=worker)
        return MissionOutcome(lost.mission_id, lost.attempt, status.state, status.stop_reason, status.round,
                              status.usage, status.cost_usd, status.failed_turns, detail=lost.reason,
                              started_at=started_at, elapsed_s=elapsed_s, worker=worker)

    def _check_budget(self) -> None:
        if self.refused is not None:
            return
        reason = self.plan.budget.spent(self.tally.tokens, self.tally.cost_usd)
        if reason is not None:
            self.refused = reason
            self.limits.refuse(reason)
            self.emit(BudgetReached(reason))
