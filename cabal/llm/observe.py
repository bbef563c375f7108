"""Who hears of each model call: a listener that the code making the calls installs around them.

The round engine runs each turn in a worker thread and wants every call of the turn (for its
events and traces) without threading a callback through the turn loop. A context variable
scopes the listener to the block that set it, thread by thread, the way OpenTelemetry scopes
its current span.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from cabal.llm.usage import Usage


@dataclass(frozen=True)
class CallRecord:
    """One model call that returned: the model's name, its usage, when and how long."""

    model: str
    usage: Usage
    started: float  # seconds since the epoch
    duration_s: float


CallListener = Callable[[CallRecord], None]
_LISTENER: ContextVar[CallListener | None] = ContextVar("cabal_call_listener", default=None)


@contextmanager
def calls_heard_by(listener: CallListener) -> Iterator[None]:
    """Within the block (in this thread), every call ``call_model`` completes goes to ``listener``."""
    token = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(token)


def call_returned(model: str, usage: Usage, started: float) -> None:
    """Tell the current listener, if any, of a call that started at ``started`` and returned now."""
    listener = _LISTENER.get()
    if listener is not None:
        listener(CallRecord(model, usage, started, max(time.time() - started, 0.0)))
