"""Missions in processes of this machine: at most N at once, one process per mission.

Each process is forked from a server process that has already imported the engine, so a
start costs milliseconds instead of the seconds an import takes; a crash takes one mission
down, never the batch; and a process that dies (killed, out of memory) is seen at once by its
exit status, and its mission runs again in a new process, resuming from its last checkpoint.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from multiprocessing.process import BaseProcess
from typing import Any

from cabal.batch.events import MissionLost, MissionOutcome
from cabal.batch.limits import FileLimits
from cabal.batch.worker import MissionTask, run_task

PRELOAD = ["cabal.batch.worker"]  # imported once by the fork server, shared by every mission process
POLL_S = 0.1
EXIT_GRACE_S = 10.0  # a process that reported its outcome but does not exit is ended after this


def default_workers(missions: int) -> int:
    """Two processes per core, at most 16: a mission mostly waits on its model, not the CPU."""
    return max(1, min(missions, 2 * (os.cpu_count() or 1), 16))


@dataclass
class _Running:
    task: MissionTask
    process: BaseProcess
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
        """Run every task; ``deliver`` gets each message of the workers (events, outcomes) and a
        ``MissionLost`` for each process that died before its outcome."""
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        inbox = context.Queue()
        waiting = deque(tasks)
        running: dict[str, _Running] = {}
        try:
            while waiting or running:
                # A process that reported is only ending: its place goes to the next mission.
                while waiting and sum(entry.outcome is None for entry in running.values()) < self.workers:
                    task = waiting.popleft()
                    process = context.Process(target=_main, args=(task, inbox), name=f"cabal-{task.mission_id}")
                    process.start()
                    running[task.mission_id] = _Running(task, process)
                self._receive(inbox, running, deliver, timeout=POLL_S)
                for mission_id, entry in list(running.items()):
                    if entry.process.exitcode is None:
                        if entry.outcome is not None and time.monotonic() - entry.reported_at > EXIT_GRACE_S:
                            entry.process.kill()
                        continue
                    self._receive(inbox, running, deliver, timeout=0)  # what it sent just before it ended
                    del running[mission_id]
                    entry.process.close()
                    if entry.outcome is None:
                        retry = entry.task.attempt <= self.retries
                        deliver(MissionLost(mission_id, entry.task.attempt, _death(entry.process), retry))
                        if retry:
                            waiting.appendleft(replace(entry.task, attempt=entry.task.attempt + 1))
        finally:
            for entry in running.values():  # interrupted (Ctrl-C): the missions pause themselves
                entry.process.join(EXIT_GRACE_S)
            inbox.close()

    @staticmethod
    def _receive(inbox: Any, running: dict[str, _Running], deliver: Callable[[Any], None], *, timeout: float) -> None:
        """Everything the processes sent so far (waiting up to ``timeout`` for the first)."""
        while True:
            try:
                message = inbox.get(timeout=timeout) if timeout else inbox.get_nowait()
            except queue.Empty:
                return
            timeout = 0
            if isinstance(message, MissionOutcome) and message.mission_id in running:
                running[message.mission_id].outcome = message
                running[message.mission_id].reported_at = time.monotonic()
            deliver(message)


def _death(process: BaseProcess) -> str:
    code = process.exitcode
    if code is not None and code < 0:
        return f"its process was killed (signal {-code})"
    return f"its process ended with status {code} before it reported"


def _main(task: MissionTask, inbox: Any) -> None:
    """A mission process: run the task, report everything through ``inbox``."""
    inbox.put(run_task(task, inbox.put))
