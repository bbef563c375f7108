"""A batch's durable state in the workspace, ``<workspace>/batches/<batch id>/``:

- ``plan.json``: the plan last run (missions, their ids and specs, the batch budget), so
  ``cabal batch resume ID`` needs nothing but the id;
- ``runs.jsonl``: one line per attempt at a mission that ended, appended as it ends (a line
  cut short by a crash is skipped), for durations and what never reached the graph;
- ``lock``: held by the process running the batch; ``limits/``: what its local workers share.

What a mission did lives in its own graph, not here: the store only says which missions make
the batch and how long the batch's workers spent on each.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cabal.batch.events import MissionOutcome
from cabal.batch.plan import BATCH_PREFIX, BatchBudget, BatchPlan, PlannedMission
from cabal.errors import CabalError, ConfigError, ResourceNotFound
from cabal.locks import exclusive, is_held
from cabal.private import open_private, private_folder, workspace_folder, write_private
from cabal.resources import parsed_once
from cabal.rounds.mission import MissionSpec

BATCHES = "batches"
PLAN_VERSION = 1


class BatchBusy(CabalError):
    """Another process is running the batch."""


class BatchStore:
    def __init__(self, home: Path, batch_id: str) -> None:
        self.home = Path(home)
        self.batch_id = batch_id
        self.folder = self.home / BATCHES / batch_id

    @classmethod
    def existing(cls, home: Path, batch_id: str) -> BatchStore:
        """The store of a batch that has run, or ``ResourceNotFound`` naming the known ones."""
        store = cls(home, batch_id)
        if not (store.folder / "plan.json").is_file():
            raise ResourceNotFound("batch", batch_id, known=batch_ids(home))
        return store

    @property
    def limits_folder(self) -> Path:
        return self.folder / "limits"

    def private(self) -> Path:
        """The batch's folder, made (with the workspace's and ``batches/``) for its owner only."""
        private_folder(workspace_folder(self.home) / BATCHES)
        return private_folder(self.folder)

    # ------------------------------------------------------------------------------ plan

    def save_plan(self, plan: BatchPlan) -> None:
        self.private()
        data = {"version": PLAN_VERSION, "batch_id": plan.batch_id, "name": plan.name, "source": plan.source,
                "budget": plan.budget.model_dump(), "missions": [_mission_to_wire(m) for m in plan.missions]}
        temporary = self.folder / "plan.json.tmp"
        write_private(temporary, json.dumps(data, indent=1))
        os.replace(temporary, self.folder / "plan.json")  # a reader never sees half a plan

    def load_plan(self) -> BatchPlan:
        path = self.folder / "plan.json"
        try:
            data = json.loads(path.read_text())
            return BatchPlan(data["batch_id"], data["name"], data["source"],
                             tuple(_mission_from_wire(m) for m in data["missions"]),
                             BatchBudget.model_validate(data["budget"]))
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ConfigError(f"{path}: the batch's plan cannot be read ({type(error).__name__}: {error})") from None

    # ------------------------------------------------------------------------------ runs

    def record(self, outcome: MissionOutcome) -> None:
        self.private()
        with open_private(self.folder / "runs.jsonl", "a") as runs:
            runs.write(json.dumps(outcome.to_wire()) + "\n")
            runs.flush()
            os.fsync(runs.fileno())

    def outcomes(self) -> list[MissionOutcome]:
        try:
            lines = (self.folder / "runs.jsonl").read_text().splitlines()
        except FileNotFoundError:
            return []
        found = []
        for line in lines:
            try:
                found.append(MissionOutcome.from_wire(json.loads(line)))
            except (ValueError, TypeError):
                continue  # the last line of a run that was killed while writing it
        return found

    # ------------------------------------------------------------------------------ lock

    @contextmanager
    def running(self) -> Iterator[None]:
        """Only one process runs a batch at a time (two would start the same missions)."""
        self.private()
        with exclusive(self.folder / "lock", lambda: BatchBusy(
                f"batch {self.batch_id} is being run by another process",
                hint=f"wait for it to finish, or watch it: cabal batch status {self.batch_id}")):
            yield

    def is_running(self) -> bool:
        return is_held(self.folder / "lock")


def batch_ids(home: Path) -> list[str]:
    """The batches of a workspace, the one run longest ago first."""
    folder = Path(home) / BATCHES
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if p.name.startswith(BATCH_PREFIX) and (p / "plan.json").is_file()]
    return [p.name for p in sorted(found, key=lambda p: (p / "plan.json").stat().st_ctime)]


@dataclass(frozen=True)
class BatchMembers:
    """Which missions make a batch: what a list of missions needs to group them by batch."""

    batch_id: str
    name: str
    mission_ids: tuple[str, ...]

    @property
    def title(self) -> str:
        return f"Batch {self.name} ({self.batch_id})"  # as the batch's report is headed


def batch_members(home: Path) -> tuple[BatchMembers, ...]:
    """Every batch of the workspace and its missions, the one run longest ago first. A plan is
    read once per version of its file (a page of missions asks again at each change); one that
    cannot be read is left out, as its batch cannot be shown either."""
    found = []
    for batch_id in batch_ids(home):
        path = Path(home) / BATCHES / batch_id / "plan.json"
        try:
            found.append(parsed_once(path, _members_of, "batch members"))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return tuple(found)


def _members_of(path: Path) -> BatchMembers:
    data = json.loads(path.read_text())  # not load_plan: the specs are not needed, only the ids
    return BatchMembers(str(data["batch_id"]), str(data["name"]), tuple(str(m["mission_id"]) for m in data["missions"]))


def _mission_to_wire(mission: PlannedMission) -> dict:
    return {"key": mission.key, "mission_id": mission.mission_id, "source": mission.source,
            "spec": mission.spec.model_dump(mode="json", exclude_none=True) if mission.spec is not None else None,
            "error": mission.error, "repeat": mission.repeat}


def _mission_from_wire(data: dict) -> PlannedMission:
    spec = MissionSpec.model_validate(data["spec"]) if data.get("spec") is not None else None
    return PlannedMission(key=data["key"], mission_id=data["mission_id"], source=data["source"], spec=spec,
                          error=data.get("error"), repeat=int(data.get("repeat", 1)))
