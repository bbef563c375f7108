"""Missions for applications: a run's events as an iterator, or a run awaited.

    for event in (stream := stream_mission("examples/launch/launch.mission.yaml")):
        print(event.kind, event.to_json())
    print(stream.result.state)

    result = await arun_mission("examples/launch/launch.mission.yaml")

A stream runs the mission in a thread of its own and hands over its events in order, through
``for`` or ``async for``; once they are all out, ``result`` holds the ``MissionResult`` and an
error of the run is raised where the iteration ends. Leaving the loop early does not stop the
mission (``stop_mission`` does, at its next round): the thread finishes it, and the process
waits for it at exit.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

from cabal.rounds.api import resume_mission, run_mission
from cabal.rounds.control import MissionResult
from cabal.rounds.events import MissionEvent, fan_out
from cabal.rounds.mission import MissionSpec

_END = object()


class MissionStream:
    """The events of one run, in order, as they happen; ``result`` once the run has ended."""

    def __init__(self, start: Callable[[Callable[[MissionEvent], None]], MissionResult]) -> None:
        self.result: MissionResult | None = None
        self._events: queue.Queue[Any] = queue.Queue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(start,), name="cabal-mission")
        self._thread.start()

    def _run(self, start: Callable[[Callable[[MissionEvent], None]], MissionResult]) -> None:
        try:
            self.result = start(self._events.put)
        except BaseException as error:  # noqa: BLE001 - raised again in the consumer's thread
            self._error = error
        finally:
            self._events.put(_END)

    def __iter__(self) -> Iterator[MissionEvent]:
        while (event := self._events.get()) is not _END:
            yield event
        self._finish()

    async def __aiter__(self) -> AsyncIterator[MissionEvent]:
        loop = asyncio.get_running_loop()
        while (event := await loop.run_in_executor(None, self._events.get)) is not _END:
            yield event
        self._finish()

    def _finish(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error


def stream_mission(mission: str | Path | MissionSpec | dict, *, on_event: Callable[[MissionEvent], None] | None = None,
                   **options: Any) -> MissionStream:
    """``run_mission`` in a thread, its events as a stream; ``options`` are ``run_mission``'s."""
    return MissionStream(lambda emit: run_mission(mission, on_event=fan_out(emit, on_event), **options))


def stream_resume(mission_id: str, *, on_event: Callable[[MissionEvent], None] | None = None,
                  **options: Any) -> MissionStream:
    """``resume_mission`` in a thread, its events as a stream; ``options`` are ``resume_mission``'s."""
    return MissionStream(lambda emit: resume_mission(mission_id, on_event=fan_out(emit, on_event), **options))


async def arun_mission(mission: str | Path | MissionSpec | dict, **options: Any) -> MissionResult:
    """``run_mission`` without blocking the event loop (it runs in a worker thread; an ``on_event``
    listener is called from the run's threads)."""
    return await asyncio.to_thread(run_mission, mission, **options)


async def aresume_mission(mission_id: str, **options: Any) -> MissionResult:
    """``resume_mission`` without blocking the event loop."""
    return await asyncio.to_thread(resume_mission, mission_id, **options)
