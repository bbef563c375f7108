"""What the pages show, read from the workspace: a row per mission for the list, a mission's
whole view (its ``MissionReport`` and its status), and a cheap fingerprint of each mission for
the poll of ``live``.

Nothing here reads a mission its own way: the view is ``read_report`` and ``status_of``, what
``cabal show``, ``cabal status`` and the exports read.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

from cabal.batch.plan import short_model
from cabal.batch.store import BatchMembers, batch_members
from cabal.errors import GraphUnavailable, ResourceNotFound
from cabal.graph import ContextGraph
from cabal.report import MissionReport, read_report
from cabal.rounds.control import MissionResult, status_of
from cabal.rounds.workspace import MISSION_ID, MISSION_PREFIX, Workspace

T = TypeVar("T")

THIS_SERVER, ANOTHER_PROCESS = "this server", "another process"
log = logging.getLogger("cabal.web")


@dataclass(frozen=True)
class MissionRow:
    """One mission in the missions list."""

    id: str
    name: str
    request: str  # its first line
    model: str | None
    started_at: str | None  # when it started (ISO 8601, UTC), for a mission that records it
    state: str
    stop_reason: str | None
    round: int
    rounds: int | None
    question: str | None  # the question waiting for the user
    tokens: int
    cost: str  # what it cost, as people read it ($0.0123, or "not priced")
    budget_tokens: int | None
    budget_cost_usd: float | None
    driver: str | None  # who runs it now: THIS_SERVER, ANOTHER_PROCESS, or nobody
    active_at: float  # when a process last drove it (seconds since the epoch; 0 if never)
    lineage: str | None = None  # "forked from m-... at round N", for a fork (cabal fork)


@dataclass(frozen=True)
class MissionGroup:
    """A heading of the missions list (None: no heading) and its missions."""

    title: str | None
    rows: tuple[MissionRow, ...]


def group_missions(rows: Sequence[MissionRow], batches: Sequence[BatchMembers] = ()) -> tuple[MissionGroup, ...]:
    """The missions list's groups, in the order shown: a group per batch that has a mission in
    ``rows`` (titled with the batch), then the missions of no batch (no title). Each group keeps
    the order of ``rows`` (most recently active first), and the groups come in the order of
    their first row. A mission is in one batch (its id is made from the batch's); were it named
    by two, the batch run longest ago keeps it."""
    batch_of: dict[str, BatchMembers] = {}
    for batch in batches:
        for mission_id in batch.mission_ids:
            batch_of.setdefault(mission_id, batch)
    grouped: dict[str | None, list[MissionRow]] = {}
    for row in rows:
        row_batch = batch_of.get(row.id)
        grouped.setdefault(row_batch.title if row_batch else None, []).append(row)
    groups = [MissionGroup(title, tuple(members)) for title, members in grouped.items() if title is not None]
    if None in grouped:
        groups.append(MissionGroup(None, tuple(grouped[None])))
    return tuple(groups)


@dataclass(frozen=True)
class MissionView:
    """Everything a mission's page shows."""

    report: MissionReport
    status: MissionResult
    driver: str | None

    @property
    def question(self) -> dict | None:
        """The pending question (the halt node): what the answer box answers."""
        return self.status.pending_halt


class WorkspaceReader:
    """Reads missions from one workspace over one connection to its graph server.

    ``driven_here(mission_id)`` says whether this server's runner drives a mission (the lock
    alone cannot tell this server from another process)."""

    def __init__(self, workspace: Workspace, driven_here: Callable[[str], bool]) -> None:
        self.workspace = workspace
        self._driven_here = driven_here
        self._server: ContextGraph | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            if self._server is not None:
                self._server.close()
                self._server = None

    def _graph(self, name: str) -> ContextGraph:
        with self._lock:
            if self._server is None:
                self._server = ContextGraph.open(self.workspace.url, name="cabal", home=self.workspace.home)
            return self._server.select(name)

    def _reading(self, read: Callable[[], T]) -> T:
        """``read()``, once more on a fresh connection if the graph server went away meanwhile."""
        try:
            return read()
        except GraphUnavailable:
            self.close()
            return read()

    # ---------------------------------------------------------------------------- missions

    def mission_ids(self) -> list[str]:
        return self._reading(lambda: [name for name in self._graph("cabal").list_graphs()
                                      if name.startswith(MISSION_PREFIX)])

    def known(self, mission_id: str) -> str:
        """``mission_id`` if it is a mission of this workspace; ``ResourceNotFound`` otherwise."""
        if not MISSION_ID.fullmatch(mission_id) or mission_id not in self.mission_ids():
            raise ResourceNotFound("mission", mission_id[:120])
        return mission_id

    def batches(self) -> tuple[BatchMembers, ...]:
        """The workspace's batches and their missions (read from the batches' stores, no graph)."""
        return batch_members(self.workspace.home)

    def driver(self, mission_id: str, status: MissionResult) -> str | None:
        if self._driven_here(mission_id):
            return THIS_SERVER
        return ANOTHER_PROCESS if status.state == "running" else None

    def rows(self) -> list[MissionRow]:
        """Every mission, the most recently active first. A graph named like a mission that does
        not read as one (another program's, on a shared server) is left out, with a warning."""
        rows = []
        for mission_id in self.mission_ids():
            try:
                rows.append(self._reading(partial(self._row, mission_id)))
            except (KeyError, ValueError) as error:
                log.warning("graph %s does not read as a mission (%s): left out of the list", mission_id, error)
        return sorted(rows, key=lambda row: (-row.active_at, row.id))

    def _row(self, mission_id: str) -> MissionRow:
        graph = self._graph(mission_id)
        status = status_of(self.workspace, graph, mission_id)
        node = graph.get(mission_id) or {}
        return MissionRow(
            id=mission_id, name=str(node.get("name") or mission_id),
            request=next((line.strip() for line in str(node.get("request") or "").splitlines() if line.strip()), ""),
            model=short_model(node["model"]) if node.get("model") else None, started_at=node.get("started_at") or None, state=str(status.state),
            stop_reason=str(status.stop_reason) if status.stop_reason else None, round=status.round,
            rounds=node.get("rounds"),
            question=str(status.pending_halt.get("message")) if status.pending_halt else None,
            tokens=status.usage.total_tokens, cost=status.cost, budget_tokens=node.get("budget_tokens"),
            budget_cost_usd=node.get("budget_cost_usd"), driver=self.driver(mission_id, status),
            active_at=self.workspace.active_at(mission_id), lineage=status.lineage,
        )

    def status(self, mission_id: str) -> MissionResult:
        return self._reading(lambda: status_of(self.workspace, self._graph(mission_id), mission_id))

    def view(self, mission_id: str) -> MissionView:
        def read() -> MissionView:
            graph = self._graph(mission_id)
            status = status_of(self.workspace, graph, mission_id)
            return MissionView(read_report(graph, mission_id), status, self.driver(mission_id, status))

        return self._reading(read)

    def product_ids(self, mission_id: str) -> set[str]:
        return self._reading(lambda: {p["id"] for p in self._graph(mission_id).find("product")})

    def fingerprints(self, mission_ids: set[str] | None) -> dict[str, Hashable]:
        """A value per mission that changes whenever the mission does: its mission node, the
        size of its graph (every turn, note, question and answer adds nodes), and whether a
        process drives it. ``None``: every mission of the workspace."""
        def read() -> dict[str, Hashable]:
            known = self.mission_ids()
            chosen = known if mission_ids is None else [m for m in mission_ids if m in known]
            found: dict[str, Hashable] = {}
            for mission_id in chosen:
                graph = self._graph(mission_id)
                node = graph.get(mission_id) or {}
                counts = graph.counts()
                found[mission_id] = (tuple(sorted((key, repr(value)) for key, value in node.items())),
                                     counts["nodes"], counts["links"], self.workspace.is_driven(mission_id))
            return found

        return self._reading(read)
