"""Locks between processes: a file held with ``flock`` while a process works on something; and
whether a process is alive at all (``alive``), for what knows only a pid.

The kernel releases the lock when its process dies, however it dies, so a lock never
outlives its holder: "is it held?" is the same question as "is its holder alive?".
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from cabal.private import open_private


@contextmanager
def exclusive(path: Path, busy: Callable[[], Exception]) -> Iterator[None]:
    """Hold ``path``'s lock for the block, or raise ``busy()`` at once if another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_private(path) as lock:  # the workspace is private: its lock files too
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise busy() from None
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def is_held(path: Path) -> bool:
    """Whether a live process holds ``path``'s lock now."""
    try:
        lock = open(path)  # noqa: SIM115 - closed below, our probe released with it
    except FileNotFoundError:
        return False
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of a dead parent is gone for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except OSError:
        return False
