"""What happens while a mission runs, as typed values: one frozen dataclass per kind of event.

A run hands each event to its listener (``run_mission(on_event=...)``) when it happens; the
turns of parallel operatives arrive interleaved, from their threads, so a listener that keeps
state must lock. Every event has ``kind`` (its name in JSON), ``mission`` (the mission id) and
``at`` (when it happened, seconds since the epoch); ``to_json()`` is the object ``cabal run
--events FILE`` writes as one JSON line.

Adding a kind of event is one dataclass here (a ``kind`` and a docstring: the docs site's events
table and ``cabal schema events`` are made from them) and one ``emit`` where it happens.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import IO, Any, ClassVar, Literal

from cabal.vocabulary import MissionState, Step, StopReason, TurnOutcome

EVENT_TYPES: dict[str, type[MissionEvent]] = {}
"""Every kind of event by its ``kind``, in the order they are declared."""


@dataclass(frozen=True)
class MissionEvent:
    """Base of every event: which mission, and when."""

    kind: ClassVar[str] = ""
    mission: str
    at: float = field(default_factory=time.time, kw_only=True)

    def __init_subclass__(cls, **options: Any) -> None:
        super().__init_subclass__(**options)
        if cls.kind:
            EVENT_TYPES[cls.kind] = cls

    def to_json(self) -> dict[str, Any]:
        """The event as a JSON object of plain values: ``kind`` first, ``at`` to the millisecond."""
        fields = _plain(dataclasses.asdict(self))
        fields["at"] = round(self.at, 3)
        return {"kind": self.kind, **fields}


def _plain(value: Any) -> Any:
    """Tuples as lists and enums as their strings, all the way down."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, StrEnum):
        return value.value
    return value


# ------------------------------------------------------------------------------ the mission


@dataclass(frozen=True)
class MissionStarted(MissionEvent):
    """A new mission is written and its team about to start (bootstrap comes next).
    ``budget_source`` says where its cost budget came from (``default``: $2)."""

    kind: ClassVar[str] = "mission_start"
    name: str
    request: str
    operatives: int
    rounds: int
    model: str
    budget_tokens: int | None
    budget_cost_usd: float | None
    budget_source: str  # where the cost limit came from: default, CABAL_BUDGET_USD, mission file, --budget-usd, none
    names: dict[str, str] = field(default_factory=dict)  # the team's own names by agent id (team.names, cards)


@dataclass(frozen=True)
class MissionResumed(MissionEvent):
    """A process picks a mission up again: with the user's answer, or after a crash. ``spent_*``
    is what earlier runs spent, so a display can count the whole mission against its budget.
    ``round`` is the round the run goes on in; ``at_start``: it begins that round (a fork that
    has not run yet, an ended mission given more rounds) rather than going on in the middle of it."""

    kind: ClassVar[str] = "mission_resume"
    name: str
    round: int
    answer: str | None
    model: str
    budget_tokens: int | None
    budget_cost_usd: float | None
    spent_tokens: int
    spent_cost_usd: float
    names: dict[str, str] = field(default_factory=dict)  # the team's own names by agent id (team.names, cards)
    at_start: bool = False
    spent_turns: int = 0  # the turns earlier runs committed, and how many were on a model without a price
    spent_unpriced_turns: int = 0


@dataclass(frozen=True)
class MissionContinued(MissionEvent):
    """The user takes a mission that had ended further (``cabal continue``): it reopens after
    ``round`` with a new direction, which the Chair reads at the next Plan, up to round ``rounds``."""

    kind: ClassVar[str] = "mission_continued"
    round: int
    direction: str
    rounds: int


@dataclass(frozen=True)
class RoundStarted(MissionEvent):
    """A round begins (after the checks of the round limit, a stop request and the budget)."""

    kind: ClassVar[str] = "round_start"
    round: int
    budget_tokens: int | None
    budget_cost_usd: float | None


@dataclass(frozen=True)
class StepStarted(MissionEvent):
    """A step of the round begins; its agents' turns follow."""

    kind: ClassVar[str] = "step_start"
    round: int
    step: Step


# -------------------------------------------------------------------------------- the turns


@dataclass(frozen=True)
class TurnStarted(MissionEvent):
    """An agent starts its turn in a step (operatives of a step start at once)."""

    kind: ClassVar[str] = "turn_start"
    round: int
    step: Step
    agent: str


@dataclass(frozen=True)
class ModelCalled(MissionEvent):
    """One model call of a turn returned (a turn makes one call per answer or context request).
    ``at`` is when it returned; it started ``duration_s`` earlier."""

    kind: ClassVar[str] = "model_call"
    round: int
    step: Step
    agent: str
    call: int  # 1 for the turn's first call
    model: str
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float
    duration_s: float


@dataclass(frozen=True)
class TurnDone(MissionEvent):
    """A turn is committed: its outcome, the answers it took, what it cost, and the problems of
    its last rejected answer (a ``failed`` turn's are why it failed)."""

    kind: ClassVar[str] = "turn_done"
    round: int
    step: Step
    agent: str
    outcome: TurnOutcome
    attempts: int
    calls: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cost_usd: float
    problems: tuple[str, ...]
    summary: str
    halt: str | None = None  # a halt turn's kind of halt: question (it asks the user) or done
    priced: bool = True  # whether a price is known for its model: if not, cost_usd (0) says nothing


@dataclass(frozen=True)
class ModelRetried(MissionEvent):
    """A model call failed in a way worth another try (rate limit, overload, 5xx, timeout, a
    dropped connection); the next try starts after ``wait_s`` (the server's retry-after when it
    gave one)."""

    kind: ClassVar[str] = "model_retry"
    round: int
    step: Step
    agent: str
    retry: int  # 1 for the first retry
    max_retries: int
    wait_s: float
    reason: str


@dataclass(frozen=True)
class ToolCalled(MissionEvent):
    """An agent calls a tool of one of the mission's MCP servers (``server__tool``), within its
    turn; ``arguments`` as JSON, ``why`` as the agent gave it."""

    kind: ClassVar[str] = "tool_call"
    round: int
    step: Step
    agent: str
    tool: str
    arguments: str
    why: str


@dataclass(frozen=True)
class ToolReturned(MissionEvent):
    """The call's end: ``ok`` when the tool answered, else the error the agent was given (the
    tool failed, outlasted its timeout, returned nothing readable, or its server is down).
    ``digest``: the start of the result, printable. ``denied``: the call was not made (the user
    denied it, or the mission file denies the tool)."""

    kind: ClassVar[str] = "tool_result"
    round: int
    step: Step
    agent: str
    tool: str
    ok: bool
    digest: str
    duration_s: float
    denied: bool = False


# ---------------------------------------------------------------------- the user's channel


@dataclass(frozen=True)
class ModelOutputSwitched(MissionEvent):
    """The provider said a model cannot be offered tools (an HTTP 400): from now on that model
    answers with a JSON object in its text (``output: json``), for every agent on it, and the
    call is made again at once. Recorded once per model; ``cabal resume`` keeps it."""

    kind: ClassVar[str] = "model_output_switched"
    round: int
    step: Step
    agent: str
    model: str
    output: str
    reason: str


@dataclass(frozen=True)
class SpokenLine:
    """One line of the conversation: who speaks, and what they say."""

    speaker: str
    text: str


@dataclass(frozen=True)
class Presented(MissionEvent):
    """The Envoy's lines for the user, as soon as its Presentation turn is committed."""

    kind: ClassVar[str] = "presentation"
    round: int
    agent: str
    lines: tuple[SpokenLine, ...]


@dataclass(frozen=True)
class HaltRaised(MissionEvent):
    """The mission asks the user a question (the Chair's; the engine's when the budget is spent,
    when the plan waits for the user's sign-off, or when a tool call waits for approval); it
    waits for an ``answer``."""

    kind: ClassVar[str] = "halt"
    round: int
    step: str
    halt: str  # the halt's id
    asker: str  # chair-1, or the engine's actor (cabal) for a spent budget
    message: str
    options: tuple[str, ...]


AnswerSource = Literal["mission file", "user", "policy"]


@dataclass(frozen=True)
class Answered(MissionEvent):
    """The answer to a question: from the mission file (unattended), from the user, or from the
    mission file's gates policy (``gates: {plan: auto}``: the plan approved by a stated policy)."""

    kind: ClassVar[str] = "answer"
    round: int
    halt: str
    text: str
    source: AnswerSource


@dataclass(frozen=True)
class UserMessage(MissionEvent):
    """A message the user left (``cabal say``), reaching the team as the next round starts.
    ``round`` is the round it was left in."""

    kind: ClassVar[str] = "user_message"
    round: int
    note: str  # the note's id
    text: str
    product: str | None


@dataclass(frozen=True)
class MissionStopped(MissionEvent):
    """The mission ends: the Chair concluded it, the rounds or the budget ran out, the user
    stopped it, or an error did."""

    kind: ClassVar[str] = "stop"
    round: int
    reason: StopReason
    detail: str | None


@dataclass(frozen=True)
class GraphRestarted(MissionEvent):
    """The embedded graph server stopped while the mission ran (killed, out of memory); Cabal
    started it again and replays the step from the last checkpoint (committed turns are skipped
    by their ids). ``restart`` of ``max_restarts`` for this run; past them the mission pauses
    ``interrupted``."""

    kind: ClassVar[str] = "graph_restart"
    round: int
    restart: int
    max_restarts: int
    detail: str


@dataclass(frozen=True)
class MissionInterrupted(MissionEvent):
    """The mission pauses without an end: the model stayed unavailable through its retries, the
    graph server could not be brought back, or the user pressed Ctrl-C. ``hint`` is the command that goes on from where it stopped."""

    kind: ClassVar[str] = "interrupted"
    round: int
    detail: str
    hint: str


@dataclass(frozen=True)
class Warned(MissionEvent):
    """Something the user should know that does not stop the mission (a cost budget that cannot
    be enforced because the model has no known prices, ...)."""

    kind: ClassVar[str] = "warning"
    message: str


@dataclass(frozen=True)
class RunEnded(MissionEvent):
    """This process stops driving the mission (it ended, or it waits for an answer). The totals
    are the whole mission's, earlier runs included: what ``cabal status`` reports."""

    kind: ClassVar[str] = "run_end"
    state: MissionState
    stop_reason: StopReason | None
    round: int
    turns: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cost_usd: float
    question: str | None  # the pending question, when the mission waits for one


def spoken_lines(nodes: Iterable[Mapping[str, Any]]) -> tuple[SpokenLine, ...]:
    """The conversation lines among a turn's committed nodes (the message nodes, in order)."""
    messages = sorted((n for n in nodes if n.get("node_type") == "message"), key=lambda n: n.get("position", 0))
    return tuple(SpokenLine(str(m.get("as_agent")), str(m.get("content"))) for m in messages)


# ------------------------------------------------------------------------------- listeners


class EventLog:
    """A listener that writes each event as one JSON line and flushes it (``--events FILE``);
    lines from parallel turns never interleave."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self._lock = threading.Lock()

    def __call__(self, event: MissionEvent) -> None:
        line = json.dumps(event.to_json(), ensure_ascii=False)
        with self._lock:
            self.stream.write(line + "\n")
            self.stream.flush()


def fan_out(*listeners: Callable[[MissionEvent], None] | None) -> Callable[[MissionEvent], None] | None:
    """One listener that hands each event to every given one, in order (None when none is given)."""
    chosen = [listener for listener in listeners if listener is not None]
    if len(chosen) <= 1:
        return chosen[0] if chosen else None

    def every(event: MissionEvent) -> None:
        for listener in chosen:
            listener(event)

    return every
