"""One mission of a batch, in the process that runs it: start it, resume it, or say where it is.

Whatever runs a batch's missions (a local process, a Dask worker) calls ``run_task`` with a
``MissionTask`` and a ``send`` function for what the batch's watcher should see. The mission's
id is fixed by the plan, so a task that runs again (its worker died, the batch was run again)
finds the mission and resumes it from its last checkpoint: nothing is lost or written twice.
"""

from __future__ import annotations

import functools
import os
import resource
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cabal.batch.events import MissionAssigned, MissionOutcome
from cabal.batch.limits import DaskLimits, FileLimits
from cabal.batch.report import needs_run
from cabal.errors import CabalError
from cabal.llm.usage import Usage
from cabal.rounds.api import MissionResult, resume_mission, run_mission, status_of
from cabal.rounds.checkpoints import CHECKPOINTS_ENV
from cabal.rounds.mission import MissionSpec
from cabal.rounds.workspace import Workspace
from cabal.vocabulary import MissionState, NotStarted

DRIVEN_WAIT_S = 120.0  # how long a retry waits for a worker presumed dead that still drives the mission

Send = Callable[[Any], None]


@dataclass(frozen=True)
class MissionTask:
    """What a worker needs to run one mission of a batch (a picklable value)."""

    batch_id: str
    mission_id: str
    key: str
    spec: MissionSpec
    home: str
    url: str | None  # the graph server every worker writes to (None: this machine's embedded one)
    checkpoints: str | None  # CABAL_CHECKPOINTS for the worker (None: SQLite in the workspace)
    limits: FileLimits | DaskLimits
    attempt: int = 1
    answer: str | None = None  # an answer to the mission's pending question
    record: bool = True  # keep the mission's model calls in its cassette


def run_task(task: MissionTask, send: Send) -> MissionOutcome:
    """Run ``task``'s mission until it ends or pauses; never raises for the mission's sake."""
    _use_checkpoints(task.checkpoints)
    started_at, clock, cpu = time.time(), time.monotonic(), _cpu_s()
    worker = f"{socket.gethostname()}:{os.getpid()}"

    def outcome(state: str, result: MissionResult | None = None, detail: str | None = None) -> MissionOutcome:
        return _outcome(task, state, result, detail, started_at, time.monotonic() - clock, _cpu_s() - cpu, worker)

    workspace = _workspace(task.home, task.url)
    try:
        status = _status(workspace, task.mission_id)
        if status is not None and status.state == MissionState.RUNNING:
            status = _wait_until_free(workspace, task.mission_id)
    except CabalError as error:  # the graph server is unreachable: nothing can be read or run
        return outcome(NotStarted.PENDING, None, str(error))
    refusal = task.limits.refusal()
    if refusal is not None:
        return outcome(status.state if status else NotStarted.PENDING, status, refusal)
    if status is not None and not needs_run(status.state, task.answer is not None):
        return outcome(status.state, status)

    send(MissionAssigned(task.mission_id, task.key, task.attempt, worker, resumed=status is not None))
    try:  # the mission's own events go to the batch as they are: each names its mission
        if status is None:
            result = run_mission(task.spec, mission_id=task.mission_id, workspace=workspace,
                                 on_event=send, call_limiter=task.limits, record=task.record)
        else:
            answer = task.answer if status.state == MissionState.HALTED else None
            result = resume_mission(task.mission_id, answer=answer, workspace=workspace, on_event=send,
                                    call_limiter=task.limits, record=task.record)
    except Exception as error:  # noqa: BLE001 - one mission's trouble is reported, never the batch's end
        # Refused before it wrote anything (a model that cannot be built, a bad answer), the
        # graph went away, or a bug: say where the mission is now, and why.
        if not isinstance(error, CabalError):
            error = CabalError(f"{type(error).__name__}: {' '.join(str(error).split())[:300]}")
        try:
            after = _status(workspace, task.mission_id)
        except CabalError:
            after = status
        if after is None:
            return outcome(NotStarted.REFUSED, None, str(error))
        return outcome(after.state, after, str(error))
    return outcome(result.state, result, result.detail)


@functools.lru_cache(maxsize=8)
def _workspace(home: str, url: str | None) -> Workspace:
    """The batch's workspace, resolved once in this worker process, its graph server with it:
    every mission the worker runs, and every status it reads, goes through the same one."""
    return Workspace.at(home, url)


def _status(workspace: Workspace, mission_id: str) -> MissionResult | None:
    with workspace.graph(mission_id) as graph:
        return status_of(workspace, graph, mission_id) if graph.exists(mission_id) else None


def _wait_until_free(workspace: Workspace, mission_id: str) -> MissionResult | None:
    """A worker thought dead may still drive the mission (Dask lost sight of it): let it end."""
    deadline = time.monotonic() + DRIVEN_WAIT_S
    while workspace.is_driven(mission_id) and time.monotonic() < deadline:
        time.sleep(0.2)
    return _status(workspace, mission_id)


def _use_checkpoints(checkpoints: str | None) -> None:
    """The batch's checkpoint store for this worker process (a worker serves one batch at a time)."""
    if checkpoints:
        os.environ[CHECKPOINTS_ENV] = checkpoints
    else:
        os.environ.pop(CHECKPOINTS_ENV, None)


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _outcome(task: MissionTask, state: str, result: MissionResult | None, detail: str | None, started_at: float,
             elapsed_s: float, cpu_s: float, worker: str) -> MissionOutcome:
    pending = result.pending_halt if result is not None else None
    return MissionOutcome(
        mission_id=task.mission_id, attempt=task.attempt, state=str(state),
        stop_reason=str(result.stop_reason) if result is not None and result.stop_reason else None,
        round=result.round if result is not None else 0,
        usage=result.usage if result is not None else Usage(),
        cost_usd=result.cost_usd if result is not None else 0.0,
        failed_turns=result.failed_turns if result is not None else 0,
        pending_question=str(pending.get("message")) if pending else None,
        detail=detail, started_at=started_at, elapsed_s=round(elapsed_s, 3), worker=worker,
        peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1), cpu_s=round(cpu_s, 3),
    )
