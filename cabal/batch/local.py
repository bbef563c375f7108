"""Missions in processes of this machine: at most N at once, one process per mission.

Each process is forked from a server process that has already imported the engine, so a
start costs milliseconds instead of the seconds an import takes; a crash takes one mission
down, never the batch; and a process that dies (killed, out of memory) is seen at once: its
pipe closes without an outcome, and its mission runs again in a new process, resuming from
its last checkpoint.

Each process has a pipe of its own to the batch. Its writes are synchronous, so all it sent
is in the pipe when it exits; and if the batch itself goes away, a write fails instead of
blocking, and the mission goes on to its end unwatched.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any, cast

from cabal.batch.events import MissionLost, MissionOutcome
from cabal.batch.limits import FileLimits
from cabal.batch.worker import MissionTask, run_task

# Imported once by the fork server, so no mission process pays for it: the engine, the Claude
# client (imported at a Claude mission's first call otherwise), and the plan's py: model modules.
PRELOAD = ["cabal.batch.worker"]
POLL_S = 0.5  # the longest the loop sleeps with nothing to read (a pipe that has something wakes it)
EXIT_GRACE_S = 10.0  # a process that reported its outcome but does not exit is ended after this


def default_workers(missions: int) -> int:
    """Two processes per core, at most 16: a mission mostly waits on its model, not the CPU."""
    return max(1, min(missions, 2 * (os.cpu_count() or 1), 16))


@dataclass
class _Running:
    task: MissionTask
    process: BaseProcess
    pipe: Connection  # the batch's end: what the process sends
    outcome: MissionOutcome | None = None
    reported_at: float = 0.0  # when the outcome came: the process should end soon after


class LocalPool:
    """Runs tasks in forked processes, ``workers`` at a time, retrying a task whose process
    died up to ``retries`` times."""

    def __init__(self, workers: int, *, retries: int = 2) -> None:
        self.workers = workers
        self.retries = retries

    def describe(self) -> str:
        return f"{self.workers} local process{'es' if self.workers != 1 else ''}"

    def limits(self, batch_id: str, folder: str, max_concurrent: int | None) -> FileLimits:
        return FileLimits(folder, max_concurrent)

    @contextmanager
    def opened(self) -> Iterator[None]:
        yield  # the fork server starts with the first mission

    def run(self, tasks: list[MissionTask], deliver: Callable[[Any], None]) -> None:
        """Run every task; ``deliver`` gets each message of the processes (events, outcomes)
        and a ``MissionLost`` for each process that died before its outcome."""
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD + _model_modules(tasks))  # once the server runs, it stays as it is
        waiting = deque(tasks)
        running: dict[Connection, _Running] = {}
        try:
            while waiting or running:
                # A process that reported is only ending: its place goes to the next mission.
                while waiting and sum(entry.outcome is None for entry in running.values()) < self.workers:
                    entry = self._start(context, waiting.popleft())
                    running[entry.pipe] = entry
                # wait() gives back some of the connections it was given (typeshed says any waitable).
                for pipe in cast("list[Connection]", wait(list(running), timeout=POLL_S)):
                    entry = running[pipe]
                    if self._receive(entry, deliver):
                        continue
                    del running[pipe]  # its pipe closed: the process ended
                    self._ended(entry, deliver, waiting)
                for entry in running.values():
                    if entry.outcome is not None and time.monotonic() - entry.reported_at > EXIT_GRACE_S:
                        entry.process.kill()  # reported, yet hangs on its way out
        finally:
            for entry in running.values():  # interrupted (Ctrl-C): the missions pause themselves
                entry.process.join(EXIT_GRACE_S)
                entry.pipe.close()

    @staticmethod
    def _start(context: Any, task: MissionTask) -> _Running:
        reader, writer = context.Pipe(duplex=False)
        process = context.Process(target=_main, args=(task, writer), name=f"cabal-{task.mission_id}")
        process.start()
        writer.close()  # the process has its own: EOF here once it is gone
        return _Running(task, process, reader)

    @staticmethod
    def _receive(entry: _Running, deliver: Callable[[Any], None]) -> bool:
        """Everything ``entry``'s process sent so far; False once its pipe is closed."""
        while True:
            try:
                message = entry.pipe.recv()
            except (EOFError, OSError):
                return False
            if isinstance(message, MissionOutcome):
                entry.outcome, entry.reported_at = message, time.monotonic()
            deliver(message)
            if not entry.pipe.poll():
                return True

    def _ended(self, entry: _Running, deliver: Callable[[Any], None], waiting: deque[MissionTask]) -> None:
        entry.process.join(EXIT_GRACE_S)
        if entry.process.exitcode is None:  # closed its pipe, yet hangs on its way out
            entry.process.kill()
            entry.process.join()
        reason = _death(entry.process)
        entry.process.close()
        entry.pipe.close()
        if entry.outcome is not None:
            return
        retry = entry.task.attempt <= self.retries
        deliver(MissionLost(entry.task.mission_id, entry.task.attempt, reason, retry))
        if retry:
            waiting.appendleft(replace(entry.task, attempt=entry.task.attempt + 1))


def _model_modules(tasks: list[MissionTask]) -> list[str]:
    """The modules that build the tasks' models: each provider's LangChain package (its SDK
    with it), each ``py:MODULE:FACTORY``'s module."""
    from cabal.llm.models import modules_to_preload

    return sorted({module for task in tasks for module in modules_to_preload(task.spec.model_settings().name)})


def _death(process: BaseProcess) -> str:
    code = process.exitcode
    if code is not None and code < 0:
        return f"its process was killed (signal {-code})"
    return f"its process ended with status {code} before it reported"


def _main(task: MissionTask, pipe: Connection) -> None:
    """A mission process: run the task, send everything through ``pipe``."""
    lock = threading.Lock()  # operatives' turns run in threads; one message at a time on the pipe
    watched = [True]

    def send(message: Any) -> None:
        if not watched[0]:
            return
        try:
            with lock:
                pipe.send(message)
        except OSError:  # the batch is gone: finish the mission unwatched
            watched[0] = False

    send(run_task(task, send))
    pipe.close()
