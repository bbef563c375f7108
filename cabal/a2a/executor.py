"""The team behind the A2A agent: missions run through the rounds API, told to the SDK.

``ServedTeam`` is what the server was configured with (a workspace, a mission file, a model)
and the few things the protocol asks of it; ``TeamExecutor`` is the SDK's ``AgentExecutor``: a
message starts a mission (the task's id is the mission's id) or answers the one that waits,
the engine runs in a worker thread, and each of its events that a caller would want to see
(a round begins, the Envoy speaks) becomes a ``working`` status update on the task's stream.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2a.helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.id_generator import IDGenerator, IDGeneratorContext
from a2a.server.tasks import TaskUpdater
from a2a.types import TaskState

from cabal import rounds
from cabal.a2a.tasks import Product, agent_message, status_text, task_state
from cabal.errors import CabalError, MissionError, ResourceNotFound
from cabal.rounds.events import MissionEvent, Presented, RoundStarted
from cabal.rounds.workspace import MISSION_PREFIX, Workspace

Listener = Callable[[MissionEvent], None]
A2A_PREFIX = f"{MISSION_PREFIX}a2a-"


class MissionIds(IDGenerator):
    """A new task's id is the id of the mission it starts: ``m-a2a-`` and 12 hex digits."""

    def generate(self, context: IDGeneratorContext) -> str:
        return f"{A2A_PREFIX}{secrets.token_hex(6)}"


@dataclass(frozen=True)
class ServedTeam:
    """The team a server offers: every request runs as a mission of ``mission`` (a mission file,
    its request replaced by the caller's) with ``model`` (None: the file's)."""

    workspace: Workspace
    mission: Path
    model: str | None = None

    def start(self, mission_id: str, request: str, on_event: Listener) -> rounds.MissionResult:
        return rounds.run_mission(self.mission, model=self.model, mission_id=mission_id, request=request,
                                  on_event=on_event, workspace=self.workspace)

    def answer(self, mission_id: str, answer: str, on_event: Listener) -> rounds.MissionResult:
        return rounds.resume_mission(mission_id, answer=answer, on_event=on_event, workspace=self.workspace)

    def stop(self, mission_id: str) -> None:
        """Stop the mission, if it has not ended already."""
        try:
            rounds.stop_mission(mission_id, home=self.workspace.home, url=self.workspace.url)
        except (MissionError, ResourceNotFound):
            pass  # it ended, or never started: nothing runs on

    def exists(self, mission_id: str) -> bool:
        with self.workspace.graph(mission_id) as graph:
            return graph.exists(mission_id)

    def outcome(self, mission_id: str) -> tuple[rounds.MissionResult, str, list[Product]] | None:
        """Where the mission stands, its request and its accepted products; None if there is none."""
        if not self.exists(mission_id):
            return None
        result, report = rounds.mission_overview(mission_id, home=self.workspace.home, url=self.workspace.url)
        accepted = [Product(p.id, p.name, p.shown.content) for p in report.live_products
                    if p.status == "accepted" and p.shown is not None]
        return result, report.mission.request, accepted


class TeamExecutor(AgentExecutor):
    """Runs the served team's missions for the SDK's request handler."""

    def __init__(self, team: ServedTeam) -> None:
        self.team = team

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = str(context.task_id), str(context.context_id)
        updater = TaskUpdater(event_queue, task_id, context_id)
        text = context.get_user_input().strip()
        if context.current_task is None and context.message is not None:
            await event_queue.enqueue_event(new_task_from_user_message(context.message))
        started = await asyncio.to_thread(self.team.exists, task_id)
        await updater.start_work()
        listener = _Teller(asyncio.get_running_loop(), updater)
        try:
            if started:
                result = await asyncio.to_thread(self.team.answer, task_id, text, listener)
            else:
                result = await asyncio.to_thread(self.team.start, task_id, text, listener)
        except CabalError as error:  # refused before anything ran (a bad answer, a bad request)
            found = await asyncio.to_thread(self.team.outcome, task_id) if started else None
            message = agent_message(f"cabal: {error}" + (f"; {error.hint}" if error.hint else ""), task_id, context_id)
            if found is not None and task_state(found[0]) == TaskState.TASK_STATE_INPUT_REQUIRED:
                await updater.requires_input(message)  # the question still waits for a usable answer
            else:
                await updater.failed(message)
            return
        finally:
            listener.done = True
        await self._finish(updater, result)

    async def _finish(self, updater: TaskUpdater, result: rounds.MissionResult) -> None:
        """The task's last word for this run: the question, the products and done, or why it ended."""
        state = task_state(result)
        message = agent_message(status_text(result), updater.task_id, updater.context_id)
        if state == TaskState.TASK_STATE_COMPLETED:
            found = await asyncio.to_thread(self.team.outcome, result.mission_id)
            for product in found[2] if found else []:
                artifact = product.artifact()
                await updater.add_artifact(list(artifact.parts), artifact_id=artifact.artifact_id, name=artifact.name)
            await updater.complete(message)
        elif state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.requires_input(message)
        elif state == TaskState.TASK_STATE_CANCELED:
            await updater.cancel(message)
        else:
            await updater.failed(message)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        # The store stops the mission when the task becomes canceled (WorkspaceTaskStore.on_canceled),
        # whichever way it does: this cancel, or the SDK's for a task no run holds (after a restart).
        updater = TaskUpdater(event_queue, str(context.task_id), str(context.context_id))
        await updater.cancel(agent_message("canceled: the team stops at the start of its next round",
                                           updater.task_id, updater.context_id))


class _Teller:
    """The run's listener, in the engine's threads: a round's start and the Envoy's lines become
    ``working`` updates on the task's stream (each waits until queued, so they keep their order).
    Once the run is over for the task (``done``, or the task canceled), it tells nothing more."""

    def __init__(self, loop: asyncio.AbstractEventLoop, updater: TaskUpdater) -> None:
        self.loop = loop
        self.updater = updater
        self.done = False

    def __call__(self, event: MissionEvent) -> None:
        if self.done:
            return
        if isinstance(event, RoundStarted):
            text = f"round {event.round} begins"
        elif isinstance(event, Presented):
            text = "\n".join(f"{line.speaker}: {line.text}" for line in event.lines)
        else:
            return
        message = agent_message(text, self.updater.task_id, self.updater.context_id)
        sent: Future[Any] = asyncio.run_coroutine_threadsafe(
            self.updater.update_status(TaskState.TASK_STATE_WORKING, message), self.loop)
        try:
            sent.result(timeout=30)
        except Exception:  # noqa: BLE001 - the task's stream closed (canceled): the mission's run goes on
            self.done = True
