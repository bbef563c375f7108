"""Output whose reader may go away (``cabal run FILE | head -3``) while a mission runs.

Python ignores SIGPIPE, so a write to a closed pipe raises ``BrokenPipeError``: raised inside a
listener of the engine, it failed the mission at whatever step printed. The terminal is only a
view of the run: the run goes on (its state is in the graph, ``cabal status`` and ``cabal show``
read it), its lines are dropped, and the command ends as the mission does, quietly.
"""

from __future__ import annotations

import os
import sys
from typing import IO, Any, cast


def silence(stream: IO[str]) -> None:
    """Point ``stream``'s file at /dev/null, so that what it still holds, and the interpreter's
    last flush, go nowhere instead of failing again."""
    try:
        descriptor = stream.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's StringIO): nothing to point
        return
    os.dup2(os.open(os.devnull, os.O_WRONLY), descriptor)


def silence_stdout() -> None:
    silence(sys.stdout)


class ReaderMayLeave:
    """A text stream for a run's lines: once its reader has gone, what is written is dropped.

    Everything else (``isatty``, ``encoding``, ``fileno``) is the wrapped stream's, so the live
    display and the event log treat it as the stream it wraps."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.reader_gone = False

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                return self.stream.write(text)
            except BrokenPipeError:
                self._left()
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._left()

    def _left(self) -> None:
        self.reader_gone = True
        silence(self.stream)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def reader_may_leave(stream: IO[str]) -> IO[str]:
    """``stream`` for a run's lines, whose reader may go away (``ReaderMayLeave``). A text stream
    in all but its type: write and flush are its own, every other attribute the stream's."""
    return cast("IO[str]", ReaderMayLeave(stream))
