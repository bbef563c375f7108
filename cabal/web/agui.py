"""``POST /ag-ui``: the web room speaks AG-UI 1.0 (the ``agui`` extra, ``ag-ui-protocol``), the
protocol CopilotKit and other front ends show an agent's run with.

A ``RunAgentInput`` names a thread; the thread's mission is the thread id itself when it is a
mission id (``m-...``), else ``m-`` and the thread id (``mission_of_thread``). A thread with no
mission yet starts one: its request is the last user message, its settings come from
``forwardedProps.cabal`` (``Settings``: a shipped example, or a mission file's settings, and a
model, with the web room's rule on models). A known thread goes on: a question waiting is
answered (by the input's ``resume`` entry for the interrupt, else by the last user message; a
``cancelled`` entry stops the mission), a paused mission resumes, an ended one continues with
the last user message as its new direction.

The response streams AG-UI events in the protocol's own types and encoder (``agui_events``):
the run started, the state snapshot, the steps, the messages, a delta of the state after each
change, and the run finished or its error. A run is driven by the room's runner, so the pages
show it too, and it goes on if the client goes away (its next input on the thread picks it up).
The guard of the web room stands in front: loopback only, else its token; and a browser's
request from another site's page is refused.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from ag_ui.core import BaseEvent, RunAgentInput, RunErrorEvent, RunStartedEvent, StateDeltaEvent, StateSnapshotEvent
from ag_ui.encoder import EventEncoder
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from cabal.errors import CabalError, ConfigError, MissionError, ResourceNotFound
from cabal.limits import answer_problems
from cabal.rounds import events as ev
from cabal.rounds.control import stop_mission
from cabal.rounds.mission import parse_mission
from cabal.rounds.workspace import MISSION_ID, MISSION_PREFIX, Workspace
from cabal.vocabulary import MissionState
from cabal.web import forms
from cabal.web.agui_events import RunTelling, run_end, touches_tree, tree_delta, tree_state
from cabal.web.runner import Runner
from cabal.web.state import MissionView, WorkspaceReader

START_TIMEOUT_S = 60  # as the room's: how long a run may take to reach its first event
SETTINGS_KEY = "cabal"  # forwardedProps' own key: other keys belong to the client's other agents


class Settings(BaseModel):
    """``forwardedProps.cabal``: how a new thread's mission is made (all optional)."""

    model_config = ConfigDict(extra="forbid")

    example: str | None = None  # a shipped example's team and settings; its questions come to the client
    mission: dict[str, Any] | None = None  # a mission file's settings, as its YAML would hold them
    model: str | None = None  # the model, over the example's or the settings' (never scripted: or py:)


def mission_of_thread(thread_id: str) -> str:
    """The mission of a thread: the thread id if it is a mission id, else ``m-`` and the thread id."""
    for chosen in (thread_id, MISSION_PREFIX + thread_id):
        if MISSION_ID.fullmatch(chosen):
            return chosen
    raise ConfigError(f"the thread id {thread_id[:120]!r} cannot name a mission",
                      hint="use letters, digits, '_' and '-' only, at most 100 of them (a UUID will do)")


def last_user_text(run: RunAgentInput) -> str:
    """The text of the conversation's last user message ("" if there is none)."""
    for message in reversed(run.messages):
        if message.role == "user":
            content = message.content
            if isinstance(content, str):
                return content.strip()
            return "\n".join(str(getattr(part, "text", "")) for part in content if getattr(part, "type", "") == "text"
                             ).strip()
    return ""


def launch_of(run: RunAgentInput, request: str) -> forms.Launch:
    """A new thread's mission: ``forwardedProps.cabal``'s settings, with ``request`` as its request."""
    props = run.forwarded_props if isinstance(run.forwarded_props, dict) else {}
    try:
        settings = Settings.model_validate(props.get(SETTINGS_KEY) or {})
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, problem['loc']))}: {problem['msg']}" for problem in error.errors())
        raise ConfigError(f"forwardedProps.{SETTINGS_KEY}: {problems}",
                          hint="it may hold example, mission and model") from None
    if settings.example is not None and settings.mission is not None:
        raise ConfigError(f"forwardedProps.{SETTINGS_KEY} names an example and a mission's settings: choose one")
    if settings.example is not None:
        chosen = forms.example_launch(settings.example, answer_myself=True)
        data, model = dict(chosen.mission if isinstance(chosen.mission, dict) else {}), chosen.model
        sources = chosen.sources
    else:
        data, model, sources = dict(settings.mission or {}), None, ()
    if request:
        data["request"] = request
    elif not data.get("request"):
        raise ConfigError("the run has no user message: its last one is the new mission's request")
    spec = parse_mission(data, source=f"forwardedProps.{SETTINGS_KEY}.mission")
    if settings.example is None and spec.team.cards:  # as for an upload: a client may not make the server read a folder
        raise ConfigError("a mission started over AG-UI cannot name a folder of role cards (team.cards)",
                          hint="run it with `cabal run`, or put the cards in the project's agents/ folder")
    if settings.model is not None:
        model = forms.checked_model(settings.model)
    elif settings.example is None:
        forms.checked_model(spec.model_settings().name)
    return forms.Launch(spec.model_dump(exclude_none=True), model, sources)


def answer_of(run: RunAgentInput, halt: dict) -> str | None:
    """The answer to the question ``halt``: its resume entry's payload (text, or ``{"answer":
    text}``), else the last user message; None when the entry cancels it."""
    for entry in run.resume or []:
        if entry.interrupt_id != str(halt["id"]):
            raise MissionError(f"the interrupt {entry.interrupt_id[:80]!r} is not the question that waits",
                               hint=f"the question that waits is {halt['id']}: {halt.get('message')}")
        if entry.status == "cancelled":
            return None
        payload = entry.payload.get("answer") if isinstance(entry.payload, dict) else entry.payload
        if isinstance(payload, str) and payload.strip():
            return payload.strip()
    text = last_user_text(run)
    if not text:
        raise MissionError("the team waits for an answer: send it as a user message or as the interrupt's resume "
                           f"entry (its question: {halt.get('message')})")
    return text


class Relay:
    """The runner's watcher of one run: its events, handed to the stream's loop in order."""

    ENDED = object()

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[Any] = asyncio.Queue()

    def heard(self, event: ev.MissionEvent) -> None:
        self._put(event)

    def ended(self, error: BaseException | None) -> None:
        self._put(self.ENDED)

    def _put(self, item: object) -> None:
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:  # the server stopped: nobody reads any more
            pass


@dataclass
class Run:
    """One POST's run: the room's reader, runner and workspace, and the input it was asked with."""

    reader: WorkspaceReader
    runner: Runner
    workspace: Workspace
    input: RunAgentInput

    def view(self, mission_id: str) -> MissionView:
        return self.reader.view(mission_id)

    def known(self, mission_id: str) -> bool:
        try:
            self.reader.known(mission_id)
        except ResourceNotFound:
            return False
        return True

    def begin(self, mission_id: str, known: bool, relay: Relay) -> Future[str] | None:
        """Start the thread's mission (``known``: it has one already) or take it on; None when the
        input only stopped it."""
        runner = self.runner
        if not known:
            launch = launch_of(self.input, last_user_text(self.input))
            return runner.start(launch.mission, model=launch.model, sources=launch.sources, mission_id=mission_id,
                                watcher=relay)
        status = self.reader.status(mission_id)
        if runner.drives(mission_id) or status.state == MissionState.RUNNING:
            raise MissionError(f"mission {mission_id} is running already",
                               hint="wait for its run to end; the web room shows it as it goes")
        if status.state == MissionState.HALTED and status.pending_halt:
            answer = answer_of(self.input, status.pending_halt)
            if answer is None:
                stop_mission(mission_id, home=self.workspace.home, url=self.workspace.url)
                return None
            return runner.resume(mission_id, answer=usable_answer(answer), watcher=relay)
        if status.state == MissionState.INTERRUPTED:
            return runner.resume(mission_id, watcher=relay)
        if status.state == MissionState.DONE:
            direction = last_user_text(self.input)
            if not direction:
                raise MissionError(f"mission {mission_id} has ended: a user message takes it further, as its "
                                   "new direction")
            return runner.go_further(mission_id, direction, watcher=relay)
        raise MissionError(f"mission {mission_id} is {status.state} and cannot go on"
                           + (f": {status.detail}" if status.detail else ""))


def usable_answer(text: str) -> str:
    """An answer the team may take (the room's checks of a posted answer), else a ``MissionError``."""
    problems = answer_problems(text)
    if problems:
        raise MissionError("the answer cannot be used: " + "; ".join(map(str, problems)))
    return text


async def events_of(run: Run) -> AsyncIterator[BaseEvent]:
    """The AG-UI events of one run, from its start to its end (or its error). A known thread's
    snapshot is where its mission stands before the input touches it; a new thread's is its
    mission just written."""
    thread_id, run_id = run.input.thread_id, run.input.run_id
    yield RunStartedEvent(thread_id=thread_id, run_id=run_id)
    relay = Relay(asyncio.get_running_loop())
    state: dict[str, Any] | None = None
    try:
        mission_id = mission_of_thread(thread_id)
        if await run_in_threadpool(run.known, mission_id):
            state = tree_state(await run_in_threadpool(run.view, mission_id))
            yield StateSnapshotEvent(snapshot=state)
        started = await run_in_threadpool(run.begin, mission_id, state is not None, relay)
        if started is not None:
            await asyncio.wait_for(asyncio.wrap_future(started), timeout=START_TIMEOUT_S)
    except CabalError as error:
        yield RunErrorEvent(message=str(error) + (f" ({error.hint})" if error.hint else ""),
                            code=type(error).__name__)
        return
    except TimeoutError:
        yield RunErrorEvent(message=f"the mission did not start within {START_TIMEOUT_S} s; see the server's output",
                            code="timeout")
        return
    if state is None:
        state = tree_state(await run_in_threadpool(run.view, mission_id))
        yield StateSnapshotEvent(snapshot=state)
    telling = RunTelling(run_id)
    while started is not None:
        item = await relay.queue.get()
        if item is Relay.ENDED:
            break
        for told in telling.told(item):
            yield told
        if touches_tree(item):
            view = await run_in_threadpool(run.view, mission_id)
            now = tree_state(view)
            delta = tree_delta(state, now)
            if delta:
                yield StateDeltaEvent(delta=delta)
            state = now
    for told in telling.close_step():
        yield told
    view = await run_in_threadpool(run.view, mission_id)
    delta = tree_delta(state, tree_state(view))
    if delta:
        yield StateDeltaEvent(delta=delta)
    yield run_end(thread_id, run_id, view)


def read_input(body: bytes) -> RunAgentInput:
    """The POST's ``RunAgentInput``; a 400 that names each problem's field otherwise."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise HTTPException(400, f"The body is not JSON: {error}.") from None
    try:
        return RunAgentInput.model_validate(data)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, problem['loc'])) or 'the body'}: {problem['msg']}"
                             for problem in error.errors()[:10])
        raise HTTPException(400, f"The body is not an AG-UI RunAgentInput: {problems}.") from None


async def run_agent(request: Request, reader: WorkspaceReader, runner: Runner, workspace: Workspace) -> Response:
    """The endpoint, for the room of ``reader``, ``runner`` and ``workspace``: the input read,
    then the run's events as the client's ``Accept`` asks them."""
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        raise HTTPException(415, "An AG-UI run is a POST of a RunAgentInput as application/json.")
    run = Run(reader, runner, workspace, read_input(await request.body()))
    encoder = EventEncoder(accept=request.headers.get("accept") or "")

    async def encoded() -> AsyncIterator[str]:
        async for event in events_of(run):
            yield encoder.encode(event)

    return StreamingResponse(encoded(), media_type=encoder.get_content_type(),
                             headers={"cache-control": "no-store", "x-accel-buffering": "no"})
