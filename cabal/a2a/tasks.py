"""A mission as an A2A task: its state, its question, its artifacts; and where tasks are kept.

The mission is the source of truth: a task's state is read from it (``task_state``), and a task
that the store no longer holds is built again from it (``task_of_mission``). The store keeps
what the mission does not (the task's context id and its messages) in one private JSON file
per task in the workspace (``<workspace>/a2a/tasks/<mission id>.json``), so a restarted server
finds every task, and a task still waiting for an answer takes one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from a2a.helpers import new_text_artifact, new_text_message
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore, TaskStore
from a2a.types import Artifact, ListTasksRequest, ListTasksResponse, Message, Role, Task, TaskState, TaskStatus
from google.protobuf import json_format

from cabal.errors import CabalError
from cabal.private import private_folder, write_private
from cabal.rounds.control import MissionResult
from cabal.rounds.workspace import MISSION_ID, Workspace
from cabal.vocabulary import MissionState, StopReason

TASKS_FOLDER = ("a2a", "tasks")
FINAL = frozenset({TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED,
                   TaskState.TASK_STATE_REJECTED})


def task_state(result: MissionResult) -> TaskState:
    """The task state of a mission where it stands: one the user stopped is canceled; one that
    paused (interrupted), failed or diverged from its recording is failed, with its detail in the
    status message."""
    if result.state == MissionState.HALTED:
        return TaskState.TASK_STATE_INPUT_REQUIRED
    if result.state == MissionState.RUNNING:
        return TaskState.TASK_STATE_WORKING
    if result.state == MissionState.DONE:
        return TaskState.TASK_STATE_CANCELED if result.stop_reason == StopReason.USER_HALT \
            else TaskState.TASK_STATE_COMPLETED
    return TaskState.TASK_STATE_FAILED


def status_text(result: MissionResult) -> str:
    """What the task's status message says: the question, why it ended, or where it is."""
    if result.state == MissionState.HALTED and result.pending_halt:
        options = result.pending_halt.get("options") or []
        return str(result.pending_halt.get("message")) + (f" (options: {', '.join(map(str, options))})"
                                                           if options else "")
    text = f"mission {result.mission_id}: {result.state}" + (f" ({result.stop_reason})" if result.stop_reason else "")
    return text + (f": {result.detail}" if result.detail else "") + f", round {result.round}"


def agent_message(text: str, task_id: str, context_id: str) -> Message:
    return new_text_message(text, context_id=context_id, task_id=task_id, role=Role.ROLE_AGENT)


@dataclass(frozen=True)
class Product:
    """An accepted product as an artifact: its id, name and accepted text."""

    id: str
    name: str
    text: str

    def artifact(self) -> Artifact:
        return new_text_artifact(self.name, self.text, media_type="text/markdown", artifact_id=self.id)


def task_of_mission(result: MissionResult, request: str, products: list[Product]) -> Task:
    """A task built again from its mission alone (its context id is then the mission's id)."""
    mission_id = result.mission_id
    user = new_text_message(request, context_id=mission_id, task_id=mission_id, role=Role.ROLE_USER)
    state = task_state(result)
    return Task(id=mission_id, context_id=mission_id, history=[user],
                status=TaskStatus(state=state, message=agent_message(status_text(result), mission_id, mission_id)),
                artifacts=[p.artifact() for p in products] if state == TaskState.TASK_STATE_COMPLETED else [])


class WorkspaceTaskStore(TaskStore):
    """The SDK's in-memory store, with every task also kept in a file of the workspace and read
    back after a restart; a task whose file is gone is built again from its mission.

    ``mission``: where a mission stands, its request and its accepted products (None: no such
    mission); ``on_canceled``: told a task's id when it becomes canceled (its mission is stopped)."""

    def __init__(self, workspace: Workspace,
                 mission: Callable[[str], tuple[MissionResult, str, list[Product]] | None],
                 on_canceled: Callable[[str], None]) -> None:
        self.folder = workspace.home.joinpath(*TASKS_FOLDER)
        self.mission = mission
        self.on_canceled = on_canceled
        self.memory = InMemoryTaskStore()
        self._loaded = False

    def _path(self, task_id: str) -> Path | None:
        """A task's file; None for an id that could not be a mission's (never a path)."""
        return self.folder / f"{task_id}.json" if MISSION_ID.fullmatch(task_id) else None

    async def save(self, task: Task, context: ServerCallContext) -> None:
        before = await self.memory.get(task.id, context)
        await self.memory.save(task, context)
        path = self._path(task.id)
        if path is not None:
            await asyncio.to_thread(self._write, path, json_format.MessageToJson(task))
        was_canceled = before is not None and before.status.state == TaskState.TASK_STATE_CANCELED
        if task.status.state == TaskState.TASK_STATE_CANCELED and not was_canceled:
            await asyncio.to_thread(self.on_canceled, task.id)

    def _write(self, path: Path, text: str) -> None:
        for folder in (self.folder.parent, self.folder):
            private_folder(folder)
        write_private(path, text)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        found = await self.memory.get(task_id, context)
        if found is not None:
            return found
        task = await asyncio.to_thread(self._read, task_id)
        if task is not None:
            await self.memory.save(task, context)
        return task

    def _read(self, task_id: str) -> Task | None:
        """The task from its file, its state brought up to its mission's (the server may have
        stopped while it ran); else built again from the mission; else None."""
        path = self._path(task_id)
        if path is None:
            return None
        try:
            found = self.mission(task_id)
        except CabalError:
            found = None
        if not path.is_file():
            return task_of_mission(*found) if found is not None else None
        task = json_format.Parse(path.read_text(encoding="utf-8"), Task())
        if found is not None and task.status.state not in FINAL:
            result = found[0]
            state = task_state(result)
            if state != task.status.state:
                task.status.CopyFrom(TaskStatus(state=state, message=agent_message(status_text(result), task.id,
                                                                                    task.context_id)))
        return task

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        if not self._loaded:  # every task of the workspace, once
            names = await asyncio.to_thread(lambda: sorted(self.folder.glob("*.json")) if self.folder.is_dir() else [])
            for path in names:
                await self.get(path.stem, context)
            self._loaded = True
        return await self.memory.list(params, context)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        await self.memory.delete(task_id, context)
        path = self._path(task_id)
        if path is not None:
            path.unlink(missing_ok=True)
