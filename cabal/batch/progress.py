"""A batch as it runs: what it has spent, and the live view of it.

``SpendTally`` is the batch's spend while missions run: what each mission had spent before
this run, plus each turn its workers report, replaced by the mission's own count from its
graph when it ends. The batch's budget and the live view both read it.

``BatchProgress`` watches the batch's event stream: on a terminal one line kept up to date
(done / running / halted / failed counts, spend against the budget, time left); otherwise
plain lines, one per mission started or ended. ``verbose`` adds every mission's own events,
each led by its mission's id.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO

from cabal.batch.events import BatchEnded, BatchStarted, BudgetReached, MissionAssigned, MissionEnded, MissionLost
from cabal.batch.render import duration
from cabal.rounds.events import MissionEvent, TurnDone
from cabal.vocabulary import MissionState, NotStarted, state_phrase


class SpendTally:
    """Tokens and dollars of a batch's missions, kept current as turns end (thread-safe)."""

    def __init__(self, spent: dict[str, tuple[int, float]]) -> None:
        self._spent = dict(spent)
        self._lock = threading.Lock()

    def turn(self, event: TurnDone) -> None:
        """A mission's turn was committed: what it spent adds to its mission's."""
        with self._lock:
            before = self._spent.get(event.mission, (0, 0.0))
            self._spent[event.mission] = (before[0] + event.input_tokens + event.output_tokens,
                                          before[1] + event.cost_usd)

    def settle(self, mission_id: str, tokens: int, cost_usd: float) -> None:
        """A mission's own count once its attempt ended: the truth, cut turns included."""
        with self._lock:
            self._spent[mission_id] = (tokens, cost_usd)

    @property
    def tokens(self) -> int:
        with self._lock:
            return sum(tokens for tokens, _ in self._spent.values())

    @property
    def cost_usd(self) -> float:
        with self._lock:
            return sum(cost for _, cost in self._spent.values())


class BatchProgress:
    """The live view of a batch (see the module docstring)."""

    def __init__(self, stream: TextIO | None = None, *, verbose: bool = False) -> None:
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty()
        self.verbose = verbose
        self.states: dict[str, str] = {}
        self.running: set[str] = set()
        self.parallel = 1
        self.to_run = 0
        self.ended = 0
        self.durations: list[float] = []
        self.started = time.monotonic()
        self.spend = SpendTally({})
        self.budget: tuple[int | None, float | None] = (None, None)
        self.keys: dict[str, str] = {}

    def __call__(self, event: Any) -> None:
        if isinstance(event, BatchStarted):
            self.states = dict(event.states)
            self.to_run, self.parallel = event.to_run, max(1, event.parallel)
            self.spend = SpendTally(event.spent)
            self.budget = (event.budget_tokens, event.budget_cost_usd)
            invalid = sum(state == NotStarted.INVALID for state in event.states.values())
            before = (f", {event.finished - invalid} finished before" if event.finished > invalid else "") \
                + (f", {invalid} invalid" if invalid else "")
            self._line(f"batch {event.batch_id}: {event.missions} missions{before}; running {event.to_run} "
                       f"on {event.workers}")
        elif isinstance(event, MissionAssigned):
            self.running.add(event.mission_id)
            self.states[event.mission_id] = MissionState.RUNNING
            self.keys[event.mission_id] = event.key
            verb = "resumes" if event.resumed else "starts"
            again = f" (attempt {event.attempt})" if event.attempt > 1 else ""
            self._plain(f"{event.mission_id} ({event.key}) {verb}{again} on {event.worker}")
        elif isinstance(event, MissionEnded):
            outcome = event.outcome
            self.running.discard(outcome.mission_id)
            self.states[outcome.mission_id] = outcome.state
            self.spend.settle(outcome.mission_id, outcome.usage.total_tokens, outcome.cost_usd)
            self.ended += 1
            if outcome.elapsed_s > 0:
                self.durations.append(outcome.elapsed_s)
            note = f": {outcome.pending_question}" if outcome.pending_question else \
                (f": {outcome.detail}" if outcome.detail and outcome.state != MissionState.DONE else "")
            self._line(f"{outcome.mission_id} ({event.key}) {state_phrase(outcome.state, outcome.stop_reason)} in "
                       f"{duration(outcome.elapsed_s)}{note}")
        elif isinstance(event, MissionLost):
            self.running.discard(event.mission_id)
            then = "it resumes in a new worker" if event.retry else "given up"
            self._line(f"{event.mission_id}: {event.reason}; {then}")
        elif isinstance(event, BudgetReached):
            self._line(f"{event.reason}: no new model call starts; running missions pause")
        elif isinstance(event, BatchEnded):
            self._line(f"batch {event.batch_id} ended in {duration(event.elapsed_s)}: "
                       + ", ".join(f"{n} {state}" for state, n in event.counts.items()))
            return
        elif isinstance(event, MissionEvent):
            self._mission_event(event)
            if not self.verbose:
                self._status()
            return
        self._status()

    def status_line(self) -> str:
        counts = {state: 0 for state in ("done", "running", "halted", "failed", "diverged")}
        for state in self.states.values():
            state = "failed" if state == NotStarted.INVALID else state  # a mission file that did not load
            if state in counts:
                counts[state] += 1
        tokens_budget, cost_budget = self.budget
        tokens = f"{self.spend.tokens:,} tokens" + (f" of {tokens_budget:,}" if tokens_budget else "")
        cost = f"${self.spend.cost_usd:.4f}" + (f" of ${cost_budget:.2f}" if cost_budget else "")
        line = (f"{counts['done']}/{len(self.states)} done · {counts['running']} running · {counts['halted']} halted · "
                f"{counts['failed']} failed · " + (f"{counts['diverged']} diverged · " if counts["diverged"] else "")
                + f"{tokens} · {cost}")
        left = self.time_left()
        return line + (f" · ~{duration(left)} left" if left is not None else "")

    def time_left(self) -> float | None:
        """The missions still to run, at the mean time of those that ended, over the workers."""
        if not self.durations:
            return None
        remaining = max(self.to_run - self.ended, 0)
        mean = sum(self.durations) / len(self.durations)
        return remaining * mean / min(self.parallel, max(remaining, 1))

    def _mission_event(self, event: MissionEvent) -> None:
        if isinstance(event, TurnDone):
            self.spend.turn(event)
        if self.verbose:
            values = event.to_json()
            fields = " · ".join(f"{k} {v}" for k, v in values.items()
                                if k not in ("kind", "mission", "at") and v not in (None, "", []))
            self._plain(f"{event.mission} · {event.kind}" + (f" · {fields}" if fields else ""))

    def _status(self) -> None:
        if self.live:
            self.stream.write("\r\033[K" + self.status_line()[:200])
            self.stream.flush()

    def _plain(self, text: str) -> None:
        """A line only when the output is not a terminal (the live line says it otherwise)."""
        if not self.live:
            print(text, file=self.stream, flush=True)

    def _line(self, text: str) -> None:
        if self.live:
            self.stream.write("\r\033[K")
            print(text, file=self.stream, flush=True)
        else:
            print(f"{text} [{self.status_line()}]", file=self.stream, flush=True)

