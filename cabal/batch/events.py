"""What a batch tells its watcher as it runs, and what one mission's run gives back.

The stream a batch emits is every mission's own events, exactly as a single mission's run
emits them (``cabal.rounds.events``: each carries its ``mission`` id), and the batch's own (the
frozen values below, each with a ``kind`` no mission event has). A worker's answer for one
mission is a ``MissionOutcome``; the batch's store keeps one per attempt.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, ClassVar

from cabal.llm.usage import Usage


@dataclass(frozen=True)
class MissionOutcome:
    """How one attempt at one mission ended, as its worker saw it."""

    mission_id: str
    attempt: int  # 1 for the first run of this batch run; a worker that died makes the next
    state: str  # a MissionState, or a NotStarted when it has none (not started, refused)
    stop_reason: str | None = None
    round: int = 0
    usage: Usage = Usage()
    cost_usd: float = 0.0
    failed_turns: int = 0
    pending_question: str | None = None
    detail: str | None = None
    started_at: float = 0.0  # seconds since the epoch
    elapsed_s: float = 0.0
    worker: str = ""  # host:pid
    peak_rss_mb: float | None = None  # the worker process's peak memory
    cpu_s: float | None = None  # CPU the worker process used meanwhile (all its threads)

    def to_wire(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> MissionOutcome:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["usage"] = Usage(**(values.get("usage") or {}))
        return cls(**values)


@dataclass(frozen=True)
class _Event:
    kind: ClassVar[str]

    def to_json(self) -> dict[str, Any]:
        """As one ``--events`` line, like a mission's event: ``kind`` first, then plain values."""
        return {"kind": self.kind, **json.loads(json.dumps(dataclasses.asdict(self), default=str))}


@dataclass(frozen=True)
class BatchStarted(_Event):
    kind: ClassVar[str] = "batch_start"
    batch_id: str
    name: str
    missions: int  # in the plan
    to_run: int  # started or resumed by this run
    finished: int  # finished before this run: skipped
    workers: str  # where they run: "4 local processes", "a Dask LocalCluster of 2 worker processes"
    parallel: int  # how many missions run at once
    states: dict[str, str]  # every mission's state as the run starts
    spent: dict[str, tuple[int, float]]  # (tokens, dollars) each mission had spent before
    budget_tokens: int | None = None
    budget_cost_usd: float | None = None


@dataclass(frozen=True)
class MissionAssigned(_Event):
    """A worker takes a mission: starts it, or resumes it (its own ``mission_start`` or
    ``mission_resume`` follows from the worker)."""

    kind: ClassVar[str] = "mission_assigned"
    mission_id: str
    key: str
    attempt: int
    worker: str  # host:pid
    resumed: bool  # it existed: resumed, not started


@dataclass(frozen=True)
class MissionLost(_Event):
    """The worker running a mission died; it resumes elsewhere (``retry``) or is given up."""

    kind: ClassVar[str] = "mission_lost"
    mission_id: str
    attempt: int
    reason: str
    retry: bool


@dataclass(frozen=True)
class MissionEnded(_Event):
    kind: ClassVar[str] = "mission_end"
    key: str
    outcome: MissionOutcome


@dataclass(frozen=True)
class BudgetReached(_Event):
    kind: ClassVar[str] = "batch_budget"
    reason: str


@dataclass(frozen=True)
class BatchEnded(_Event):
    kind: ClassVar[str] = "batch_end"
    batch_id: str
    counts: dict[str, int]  # missions by state
    elapsed_s: float
    budget_spent: str | None = None  # why the batch stopped early, if its budget did


BatchEvent = BatchStarted | MissionAssigned | MissionLost | MissionEnded | BudgetReached | BatchEnded
