"""The limits a batch's workers share on their model calls: how many are in flight at once
(``--max-concurrent``), a rate limit's hold-off (one worker told to wait makes all wait), and
the batch budget's refusal (once it is spent, no new call starts anywhere).

Two ways to share them, one per kind of worker:

- ``FileLimits``: files in the batch's folder, for processes on this machine (local workers,
  a ``LocalCluster``). A call slot is an ``flock`` on one of N files: the kernel releases it
  when its process dies, so a killed worker never keeps a slot.
- ``DaskLimits``: a Dask ``Semaphore`` (leases expire when a worker dies), a ``Variable`` and an
  ``Event`` on the scheduler, for workers on other machines.

Both are frozen values a worker receives with its task and opens where it runs; the batch
(the coordinator) calls ``refuse`` and ``clear``.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cabal.errors import CallRefused
from cabal.private import open_private, private_folder, write_private

POLL_S = 0.01  # how often a call waiting for a slot looks again (calls take seconds)


@dataclass(frozen=True)
class FileLimits:
    """Call limits shared through files in ``folder`` (processes on one machine)."""

    folder: str
    max_concurrent: int | None = None

    @property
    def _path(self) -> Path:
        return Path(self.folder)

    def prepare(self) -> None:
        """Create the folder and start with no refusal and no hold-off (a new run)."""
        private_folder(self._path)  # the batch's folder, private already (BatchStore.private)
        self.clear()
        (self._path / "hold-off").unlink(missing_ok=True)

    # ------------------------------------------------------------------- the workers' side

    @contextmanager
    def slot(self) -> Iterator[None]:
        self._raise_if_refused()
        self._wait_hold_off()
        if self.max_concurrent is None:
            yield
            return
        with self._one_slot(self.max_concurrent):
            self._raise_if_refused()  # it may have been refused while this call waited
            yield

    def hold_off(self, seconds: float) -> None:
        until = time.time() + seconds
        if until > self._hold_off_until():
            _write_atomically(self._path / "hold-off", repr(until))

    def refusal(self) -> str | None:
        try:
            return (self._path / "refused").read_text() or "the batch refuses further model calls"
        except FileNotFoundError:
            return None

    # --------------------------------------------------------------- the coordinator's side

    def refuse(self, reason: str) -> None:
        _write_atomically(self._path / "refused", reason)

    def clear(self) -> None:
        (self._path / "refused").unlink(missing_ok=True)

    # ----------------------------------------------------------------------------- inside

    def _raise_if_refused(self) -> None:
        reason = self.refusal()
        if reason is not None:
            raise CallRefused(reason)

    def _hold_off_until(self) -> float:
        try:
            return float((self._path / "hold-off").read_text())
        except (FileNotFoundError, ValueError):
            return 0.0

    def _wait_hold_off(self) -> None:
        while (wait := self._hold_off_until() - time.time()) > 0:
            time.sleep(min(wait, 1.0))  # another worker may extend it meanwhile

    @contextmanager
    def _one_slot(self, count: int) -> Iterator[None]:
        slots = self._path / "slots"
        private_folder(slots)
        while True:
            for number in range(count):
                handle = open_private(slots / str(number), "a")  # closed below, with its lock
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    handle.close()
                    continue
                try:
                    yield
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
                    handle.close()
                return
            time.sleep(POLL_S)


@dataclass(frozen=True)
class DaskLimits:
    """Call limits shared through the Dask scheduler, under names that start with ``prefix``."""

    prefix: str
    max_concurrent: int | None = None

    def prepare(self) -> None:
        self.clear()
        self._parts()["hold_off"].set(0.0)

    @contextmanager
    def slot(self) -> Iterator[None]:
        parts = self._parts()
        self._raise_if_refused()
        while (wait := float(parts["hold_off"].get()) - time.time()) > 0:
            time.sleep(min(wait, 1.0))
        if parts["calls"] is None:
            yield
            return
        with parts["calls"]:
            self._raise_if_refused()
            yield

    def hold_off(self, seconds: float) -> None:
        variable = self._parts()["hold_off"]
        until = time.time() + seconds  # the workers' clocks are assumed in step (NTP)
        if until > float(variable.get()):
            variable.set(until)

    def refusal(self) -> str | None:
        parts = self._parts()
        return str(parts["reason"].get()) if parts["refused"].is_set() else None

    def refuse(self, reason: str) -> None:
        parts = self._parts()
        parts["reason"].set(reason)
        parts["refused"].set()

    def clear(self) -> None:
        self._parts()["refused"].clear()

    def _raise_if_refused(self) -> None:
        reason = self.refusal()
        if reason is not None:
            raise CallRefused(reason)

    def _parts(self) -> dict[str, Any]:
        """The scheduler-side objects, made once per process (a Semaphore registers itself)."""
        with _DASK_LOCK:
            parts = _DASK_PARTS.get(self)
            if parts is None:
                from distributed import Event, Semaphore, Variable

                parts = {
                    "calls": Semaphore(max_leases=self.max_concurrent, name=f"{self.prefix}-calls")
                    if self.max_concurrent else None,
                    "hold_off": Variable(f"{self.prefix}-hold-off"),
                    "reason": Variable(f"{self.prefix}-refusal"),
                    "refused": Event(f"{self.prefix}-refused"),
                }
                _DASK_PARTS[self] = parts
            return parts


_DASK_PARTS: dict[DaskLimits, dict[str, Any]] = {}
_DASK_LOCK = threading.Lock()


def _write_atomically(path: Path, text: str) -> None:
    """Readers see the old text or the new one, never half of it."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    write_private(temporary, text)
    os.replace(temporary, path)
