"""Missions the server runs itself, each in a worker thread of its own.

Threads, not processes: importing the engine takes seconds (the model clients), so a worker
process per run would make every start and every answer wait for it; a thread reuses the
server's one import and hands the run's events straight to the pages. The workspace's lock
still lets one driver at a time run a mission, so the server and a `cabal` command on the same
workspace never drive the same mission at once.

The threads are daemons: stopping the server does not wait for a model call in flight. A
mission cut off that way keeps every committed turn and shows ``interrupted`` (its lock is free
again), and resumes from its page or with ``cabal resume``, as after a kill.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from cabal.errors import MissionError
from cabal.rounds import events as ev
from cabal.rounds.api import continue_mission, fork_mission, resume_mission, run_mission
from cabal.sources import Wanted
from cabal.rounds.workspace import Workspace

log = logging.getLogger("cabal.web")


class Busy(MissionError):
    """The server already runs as many missions as it may."""


@dataclass(frozen=True)
class Activity:
    """What a run of this server is doing now, from its events."""

    round: int | None = None
    step: str | None = None
    agents: tuple[str, ...] = ()  # whose turns are in flight
    note: str | None = None  # a model call waiting to be tried again

    def hearing(self, event: ev.MissionEvent) -> Activity:
        """This activity once ``event`` has happened."""
        if isinstance(event, ev.RoundStarted):
            return Activity(round=event.round)
        if isinstance(event, ev.StepStarted):
            return Activity(round=event.round, step=str(event.step))
        if isinstance(event, ev.TurnStarted):
            return replace(self, round=event.round, step=str(event.step), agents=(*self.agents, event.agent))
        if isinstance(event, ev.TurnDone):
            rest = list(self.agents)
            if event.agent in rest:
                rest.remove(event.agent)
            return replace(self, agents=tuple(rest), note=None)
        if isinstance(event, ev.ModelRetried):
            return replace(self, note=f"{event.agent}: the model is busy ({event.reason}); try {event.retry + 1} of "
                                      f"{event.max_retries + 1} in {event.wait_s:.0f} s")
        return self


class Watcher(Protocol):
    """Someone who follows one run as it goes (the AG-UI stream): told each of its events, from
    the run's threads, and once when the run is over (``error``: what stopped it, if anything did)."""

    def heard(self, event: ev.MissionEvent) -> None: ...

    def ended(self, error: BaseException | None) -> None: ...


class Runner:
    """Starts and resumes missions in worker threads; tells ``on_change`` (from any thread)
    each time a mission it runs does something."""

    def __init__(self, workspace: Workspace, on_change: Callable[[str], None], *, max_runs: int = 4) -> None:
        self.workspace = workspace
        self.max_runs = max_runs
        self._on_change = on_change
        self._lock = threading.Lock()
        self._runs: dict[str, Activity] = {}  # mission id -> what it does, while this server drives it
        self._starting = 0  # runs whose mission id is not known yet

    # ---------------------------------------------------------------------------- asking

    def start(self, mission: Path | dict, *, model: str | None = None, sources: tuple[Wanted, ...] = (),
              mission_id: str | None = None, watcher: Watcher | None = None) -> Future[str]:
        """Start a new mission (``sources``: folders of files it reads as its sources; ``mission_id``:
        its id, default a new one); the future holds its id once it is written, or the error that
        stopped it before (a bad mission, a source past its limits, a model that cannot be made)."""
        return self._launch(None, lambda listener: run_mission(
            mission, model=model, home=self.workspace.home, url=self.workspace.url, on_event=listener,
            sources=list(sources), mission_id=mission_id), watcher)

    def resume(self, mission_id: str, *, answer: str | None = None, watcher: Watcher | None = None) -> Future[str]:
        """Answer a mission's question, or continue it after an interruption; the future holds its
        id once it goes on, or the error that stopped it from going on."""
        self._not_running(mission_id)
        return self._launch(mission_id, lambda listener: resume_mission(
            mission_id, answer=answer, home=self.workspace.home, url=self.workspace.url,
            on_event=listener), watcher)

    def go_further(self, mission_id: str, direction: str, *, rounds: int | None = None,
                   watcher: Watcher | None = None) -> Future[str]:
        """Continue a mission that ended with a new direction (``continue_mission``)."""
        self._not_running(mission_id)
        return self._launch(mission_id, lambda listener: continue_mission(
            mission_id, direction, rounds=rounds, home=self.workspace.home, url=self.workspace.url,
            on_event=listener), watcher)

    def fork(self, mission_id: str, *, round_number: int, direction: str | None = None) -> Future[str]:
        """A new mission from the start of round ``round_number`` of ``mission_id``
        (``fork_mission``); the future holds the new mission's id once it runs."""
        return self._launch(None, lambda listener: fork_mission(
            mission_id, round=round_number, direction=direction, home=self.workspace.home, url=self.workspace.url,
            on_event=listener))

    def _not_running(self, mission_id: str) -> None:
        with self._lock:
            if mission_id in self._runs:
                raise MissionError(f"this server is already running {mission_id}",
                                   hint="wait for it to pause or finish")

    # ------------------------------------------------------------------------- reading

    def drives(self, mission_id: str) -> bool:
        with self._lock:
            return mission_id in self._runs

    def activity(self, mission_id: str) -> Activity | None:
        with self._lock:
            return self._runs.get(mission_id)

    def running(self) -> int:
        with self._lock:
            return len(self._runs) + self._starting

    # -------------------------------------------------------------------------- workers

    def _launch(self, mission_id: str | None, drive: Callable[[Callable[[ev.MissionEvent], None]], Any],
                watcher: Watcher | None = None) -> Future[str]:
        with self._lock:
            if len(self._runs) + self._starting >= self.max_runs:
                raise Busy(f"this server already runs {self.max_runs} missions",
                           hint="wait for one to pause or end (or start the server with a higher --max-runs)")
            self._starting += 1
        started: Future[str] = Future()
        worker = threading.Thread(target=self._work, args=(mission_id, drive, started, watcher), daemon=True,
                                  name=f"cabal-run-{mission_id or 'new'}")
        worker.start()
        return started

    def _work(self, mission_id: str | None, drive: Callable, started: Future[str], watcher: Watcher | None) -> None:
        known: list[str] = [mission_id] if mission_id else []
        counted = [True]  # still counted in _starting

        def heard(event: ev.MissionEvent) -> None:
            with self._lock:
                if counted[0]:
                    counted[0] = False
                    self._starting -= 1
                    known[:] = [event.mission]
                self._runs[event.mission] = self._runs.get(event.mission, Activity()).hearing(event)
            if not started.done():
                started.set_result(event.mission)
            self._on_change(event.mission)
            if watcher is not None:
                watcher.heard(event)

        stopped: BaseException | None = None
        try:
            drive(heard)
        except BaseException as error:  # noqa: BLE001 - a worker must report, never die silently
            stopped = error
            if not started.done():
                started.set_exception(error)
            else:
                log.error("mission %s stopped with an error: %s", known[0] if known else "?", error)
        finally:
            with self._lock:
                if counted[0]:
                    self._starting -= 1
                if known:
                    self._runs.pop(known[0], None)
            if not started.done() and known:  # it had nothing to do (a mission that had already ended)
                started.set_result(known[0])
            if known:
                self._on_change(known[0])
            if watcher is not None:
                watcher.ended(stopped)
