"""Waiting in tests for something another process or thread does: poll, and fail the test
with what was awaited when it does not come in time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(check: Callable[[], T], *, timeout: float = 30, what: str = "the condition",
               every: float = 0.02) -> T:
    """``check()``'s first true value, polled every ``every`` seconds; fails the test after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
