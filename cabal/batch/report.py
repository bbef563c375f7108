"""Where every mission of a batch is, read from the missions' own graphs and the batch's store.

``collect`` builds a ``BatchReport``: one ``MissionRow`` per planned mission (its request,
state, stop reason, rounds, products accepted out of total, failed turns, tokens, cost, the
time the batch's workers spent on it, any pending question) and ``Totals``. The renderers
(``render``, ``html``) and ``cabal batch status`` only format it.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections import Counter
from dataclasses import dataclass
from typing import Any

from cabal.batch.events import MissionOutcome
from cabal.batch.plan import BatchBudget, BatchPlan, PlannedMission
from cabal.batch.store import BatchStore
from cabal.graph import ContextGraph
from cabal.report.model import settled_statuses
from cabal.rounds.control import MissionResult, status_of
from cabal.rounds.transitions import ENDED, Action, allows
from cabal.rounds.workspace import Workspace
from cabal.vocabulary import MissionState, NotStarted

MISSION_REPORT = "report.html"  # a mission's own report, in its folder, where one was written
# The states a batch has nothing more to do for, unless someone answers or raises a limit.
FINISHED = ENDED | {NotStarted.INVALID}
STATE_ORDER = (MissionState.DONE, MissionState.HALTED, MissionState.INTERRUPTED, MissionState.FAILED,
               MissionState.DIVERGED, MissionState.RUNNING, NotStarted.PENDING, NotStarted.REFUSED, NotStarted.INVALID)


def needs_run(state: str, answered: bool) -> bool:
    """Whether a batch runs a mission in ``state``: one not started or interrupted, or one halted
    that has been given its answer."""
    return allows(Action.RUN, state) or allows(Action.RESUME, state) or (answered and allows(Action.ANSWER, state))


@dataclass(frozen=True)
class MissionRow:
    key: str
    mission_id: str
    request: str
    model: str
    operatives: int | None
    repeat: int
    state: str
    stop_reason: str | None
    round: int
    rounds_limit: int | None
    products_accepted: int
    products_total: int
    failed_turns: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    duration_s: float  # what the batch's workers spent on it, every attempt together
    attempts: int
    pending_question: str | None
    detail: str | None  # a broken file's located error, or why it stopped or paused
    report_path: str | None  # its own report, where one exists

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class Totals:
    missions: int
    states: dict[str, int]
    products_accepted: int
    products_total: int
    failed_turns: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    duration_s: float

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def finished(self) -> int:
        return sum(n for state, n in self.states.items() if state in FINISHED)


@dataclass(frozen=True)
class BatchReport:
    batch_id: str
    name: str
    source: str
    running: bool  # a process is running the batch now
    budget: BatchBudget
    rows: tuple[MissionRow, ...]

    @property
    def totals(self) -> Totals:
        rows = self.rows
        counts = Counter(row.state for row in rows)
        return Totals(
            missions=len(rows), states={str(s): counts[s] for s in STATE_ORDER if counts[s]},
            products_accepted=sum(r.products_accepted for r in rows), products_total=sum(r.products_total for r in rows),
            failed_turns=sum(r.failed_turns for r in rows), input_tokens=sum(r.input_tokens for r in rows),
            output_tokens=sum(r.output_tokens for r in rows), cost_usd=round(sum(r.cost_usd for r in rows), 6),
            duration_s=round(sum(r.duration_s for r in rows), 3),
        )

    @property
    def pending_questions(self) -> list[MissionRow]:
        return [row for row in self.rows if row.pending_question]

    def summary(self) -> str:
        """``6 missions: 4 done, 1 halted, 1 invalid``."""
        totals = self.totals
        states = ", ".join(f"{n} {state}" for state, n in totals.states.items())
        return f"{totals.missions} mission{'s' if totals.missions != 1 else ''}: {states}"

    def to_wire(self) -> dict[str, Any]:
        totals = self.totals
        return {
            "batch": {"id": self.batch_id, "name": self.name, "source": self.source, "running": self.running,
                      "budget": self.budget.model_dump()},
            "missions": [{**dataclasses.asdict(row), "tokens": row.tokens} for row in self.rows],
            "totals": {**dataclasses.asdict(totals), "tokens": totals.tokens},
        }


def collect(workspace: Workspace, store: BatchStore, plan: BatchPlan | None = None) -> BatchReport:
    plan = plan or store.load_plan()
    attempts: dict[str, list[MissionOutcome]] = {}
    for outcome in store.outcomes():
        attempts.setdefault(outcome.mission_id, []).append(outcome)
    readable = [mission.mission_id for mission in plan.missions if mission.spec]
    with contextlib.ExitStack() as stack:
        # One connection for the whole report, each mission's graph selected on it (opening each
        # one resolved the server and connected again, once per mission).
        connection = stack.enter_context(workspace.graph(readable[0])) if readable else None
        rows = tuple(_row(workspace, connection, mission, attempts.get(mission.mission_id, []))
                     for mission in plan.missions)
    return BatchReport(plan.batch_id, plan.name, plan.source, store.is_running(), plan.budget, rows)


def read_status(workspace: Workspace, mission_id: str,
                connection: ContextGraph | None = None) -> tuple[MissionResult | None, tuple[int, int]]:
    """A mission's status and (products accepted, products in its tree), or None if it never
    started; read over ``connection`` (another graph's, on the same server) when given."""
    if connection is None:
        with workspace.graph(mission_id) as graph:
            return _status_in(workspace, graph, mission_id)
    return _status_in(workspace, connection.select(mission_id), mission_id)


def _status_in(workspace: Workspace, graph: ContextGraph, mission_id: str) -> tuple[MissionResult | None, tuple[int, int]]:
    if not graph.exists(mission_id):
        return None, (0, 0)
    status = status_of(workspace, graph, mission_id)
    statuses = settled_statuses(((p["id"], str(p.get("type")), str(p.get("status")), p.get("parent_id"))
                                 for p in graph.find("product", fields=["type", "status", "parent_id"])))
    live = [product for product in statuses.values() if product != "removed"]
    return status, (live.count("accepted"), len(live))


def _row(workspace: Workspace, connection: ContextGraph | None, mission: PlannedMission,
         attempts: list[MissionOutcome]) -> MissionRow:
    spec = mission.spec
    status, (accepted, products) = read_status(workspace, mission.mission_id, connection) if spec else (None, (0, 0))
    last = attempts[-1] if attempts else None
    state: MissionState | NotStarted
    detail: str | None
    if mission.error is not None:
        state, detail = NotStarted.INVALID, mission.error
    elif status is not None:
        state, detail = status.state, status.detail
    elif last is not None and last.state == NotStarted.REFUSED:
        state, detail = NotStarted.REFUSED, last.detail
    else:
        state, detail = NotStarted.PENDING, last.detail if last else None
    report = workspace.mission_dir(mission.mission_id) / MISSION_REPORT
    pending = status.pending_halt if status is not None else None
    return MissionRow(
        key=mission.key, mission_id=mission.mission_id, request=mission.request, model=mission.model,
        operatives=spec.team.counted_operatives if spec else None, repeat=mission.repeat, state=str(state),
        stop_reason=str(status.stop_reason) if status is not None and status.stop_reason else None,
        round=status.round if status is not None else 0, rounds_limit=spec.rounds if spec else None,
        products_accepted=accepted, products_total=products,
        failed_turns=status.failed_turns if status is not None else 0,
        input_tokens=status.usage.input_tokens if status is not None else 0,
        output_tokens=status.usage.output_tokens if status is not None else 0,
        cost_usd=status.cost_usd if status is not None else 0.0,
        duration_s=round(sum(a.elapsed_s for a in attempts), 3), attempts=len(attempts),
        pending_question=str(pending.get("message")) if pending else None, detail=detail,
        report_path=str(report) if report.is_file() else None,
    )

