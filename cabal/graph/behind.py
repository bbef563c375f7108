"""Write-behind: a step's graph write goes out on its own thread while the next step works.

A mission's step commits its turns as one write and its in-memory view is rolled forward from
what it wrote at once (``MissionRun.committed``), so the next step need not wait for the
server's reply before it builds its prompts and calls its model. ``WriteBehind`` runs the writes
it is sent, in order, on one thread; everything that must not get ahead of them waits for it:

- every query of the graph it is attached to (``ContextGraph.behind``) from any other thread:
  a read then sees every write sent before it, and a write from a step (the mission's status)
  lands after them, in order;
- every checkpoint (``cabal.rounds.settled``): LangGraph's checkpoint says a step is done, so it
  is saved only once that step's write is acknowledged. A process killed between a write's
  send and its reply leaves the checkpoint before the step; the resume runs the step again and
  its turns already in the graph (FalkorDB applies a write whole or not at all) are skipped by
  their turn-moment ids, as after any kill.

A write that fails is sticky: every later ``send``, query and checkpoint raises it (so no
checkpoint passes it and no later write overtakes it) until the run that handles it calls
``forget``. The writes queued after it are dropped: they belong to steps that run again.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Protocol, runtime_checkable

Write = Callable[[], object]


@runtime_checkable
class Joinable(Protocol):
    """A write that can go out as one with the write queued after it."""

    def __call__(self) -> object: ...

    def join(self, later: Write) -> Write | None:
        """This write and ``later`` as one write (all or nothing), or None if they cannot be."""
        ...


class WriteBehind:
    """One thread that runs the writes it is sent, in order; ``settle`` waits for them."""

    def __init__(self, name: str = "cabal-writer") -> None:
        self._name = name
        self._queue: deque[Write] = deque()
        self._busy = False
        self._failure: BaseException | None = None
        self._closed = False
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        # For the benches: writes sent, how many went out joined to an earlier one, how many
        # times a query or checkpoint waited.
        self.sent = self.joined = self.waits = 0

    def send(self, write: Write) -> None:
        """Queue ``write`` behind the ones sent before it (an earlier failure is raised here)."""
        with self._changed:
            self._raise_failure()
            if self._closed:
                raise RuntimeError("this writer is closed")
            self._queue.append(write)
            self.sent += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
                self._thread.start()
            self._changed.notify_all()

    def settle(self) -> None:
        """Wait until every write sent so far is acknowledged; raise the failure of one that
        failed. Returns at once on the writer's own thread (its writes are already in order)."""
        if threading.current_thread() is self._thread:
            return
        with self._changed:
            if self._queue or self._busy:
                self.waits += 1
            while (self._queue or self._busy) and self._failure is None:
                self._changed.wait()
            self._raise_failure()

    def finish(self) -> BaseException | None:
        """Once the run stopped (on an error, or to close): let every write sent land, or stop at
        the first that fails (the later ones are dropped: their steps run again); clear that
        failure and return it, so the run can go on or record how it stopped."""
        if threading.current_thread() is self._thread:
            return None
        with self._changed:
            while self._queue or self._busy:
                self._changed.wait()
            failure, self._failure = self._failure, None
            return failure

    def close(self) -> None:
        """Let the queued writes finish, then stop the thread (a failure is left to ``finish``)."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    @property
    def idle(self) -> bool:
        with self._changed:
            return not (self._queue or self._busy)

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def _work(self) -> None:
        while True:
            with self._changed:
                while not self._queue and not self._closed:
                    self._changed.wait()
                if not self._queue:
                    return
                write, self._busy = self._queue.popleft(), True
                # What queued while the last write waited on the server goes as one write, where
                # the writes say they join (several steps' clusters: one round trip, not one each).
                while self._queue and isinstance(write, Joinable):
                    joined = write.join(self._queue[0])
                    if joined is None:
                        break
                    write = joined
                    self._queue.popleft()
                    self.joined += 1
            try:
                write()
            except BaseException as failure:  # noqa: BLE001 - handed to whoever waits next
                with self._changed:
                    self._failure = failure
                    self._queue.clear()  # their steps run again after the failure is handled
            finally:
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()
