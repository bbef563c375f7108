"""The routes of ``cabal serve``: thin handlers over the runner, the reader and the views.

    GET  /                              the missions, live
    GET  /missions/new                  start a mission: an example, the form, a mission file
    POST /missions                      start from the form
    POST /missions/example              start a shipped example
    POST /missions/upload               start from an uploaded mission file
    GET  /missions/{id}                 a mission's page, live
    POST /missions/{id}/answer          answer its pending question; the mission resumes here
    POST /missions/{id}/say             leave the team a message
    POST /missions/{id}/stop            ask the team to stop at its next round
    POST /missions/{id}/resume          go on after an interruption (a kill, a model outage)
    POST /missions/{id}/continue        take a mission that ended further, with a new direction
    POST /missions/{id}/fork            a new mission from the start of one of its rounds
    GET  /missions/{id}/report.{fmt}    the export: a mission format of ``cabal.exports``
    GET  /diff?a=ID&b=ID                two missions of the list compared (``cabal diff``)
    GET  /live, /live/missions/{id}     the event streams of the two pages
    POST /ag-ui                         a run of AG-UI 1.0: a mission started or taken on, streamed
                                        (``cabal.web.agui``, the ``agui`` extra)
    GET  /static/{name}                 the stylesheets and the script

Every POST of the pages goes through ``state_changing`` (the CSRF token), every request through
``security.Guard`` (which also refuses another site's browser request to ``/ag-ui``, whose
clients are no page of this server and hold no CSRF token). A request that cannot be done gets a 4xx page (or JSON, for the page's
script) that says why; anything unexpected a 500 page, its traceback only in the server's log.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from cabal.limits import printable
from cabal.errors import CabalError, GraphUnavailable, MissionError, ResourceNotFound
from cabal.limits import answer_problems
from cabal.exports import export_format, names, render_mission
from cabal.rounds.control import say, stop_mission
from cabal.rounds.workspace import Workspace
from cabal.vocabulary import install_command
from cabal.web import forms, views
from cabal.web.live import EVERY_MISSION, Hub, Parts, Poller, updates
from cabal.web.runner import Busy, Runner
from cabal.web.security import CSRF_FIELD, CSRF_HEADER, Guard, Security
from cabal.web.state import WorkspaceReader, group_missions

STATIC = {  # every file the server hands out, by name: nothing else on the disk is reachable
    "web.css": Path(__file__).resolve().parent / "static" / "web.css",
    "live.js": Path(__file__).resolve().parent / "static" / "live.js",
    "report.css": Path(__file__).resolve().parents[1] / "report" / "templates" / "report.css",
}
# Any request: the new-mission form with its uploaded sources is the largest; each upload is
# checked again against its own bound (forms.MAX_UPLOAD, forms.MAX_SOURCE_BYTES).
MAX_BODY = 256 * 1024 + forms.MAX_SOURCE_BYTES
MAX_TEXT = 20_000  # an answer or a message, as the mission file's request
MAX_MORE_ROUNDS = 50  # how many more rounds the page's "continue" may ask for
START_TIMEOUT_S = 60  # how long a start or an answer may take to reach the mission's first event
AG_UI_PATH = "/ag-ui"


@dataclass
class Room:
    """What the handlers share: the workspace, its reader, the runner and the live hub."""

    workspace: Workspace
    security: Security
    reader: WorkspaceReader
    runner: Runner
    hub: Hub

    def list_parts(self) -> tuple[dict, Parts]:
        groups = group_missions(self.reader.rows(), self.reader.batches())
        context = views.missions_context(groups, csrf=self.security.csrf, workspace=self.workspace.home)
        return context, views.render_parts("missions.html.j2", views.LIST_PARTS, **context)

    def mission_parts(self, mission_id: str) -> tuple[dict, Parts]:
        context = views.mission_context(self.reader.view(mission_id), self.runner.activity(mission_id),
                                        csrf=self.security.csrf, workspace=self.workspace.home)
        return context, views.render_parts("mission.html.j2", views.MISSION_PARTS, **context)


def create_app(workspace: Workspace, security: Security, *, max_runs: int = 4, poll_s: float = 1.0) -> Starlette:
    """The application; its lifespan starts the poller (and the runner, which needs the loop)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        hub = Hub(asyncio.get_running_loop())
        runner = Runner(workspace, hub.changed, max_runs=max_runs)
        reader = WorkspaceReader(workspace, runner.drives)
        app.state.room = Room(workspace, security, reader, runner, hub)
        poller = asyncio.create_task(Poller(hub, reader.fingerprints, interval=poll_s).run())
        try:
            yield
        finally:
            poller.cancel()
            reader.close()

    routes = [
        Route("/", missions_page),
        Route("/missions/new", new_page),
        Route("/missions", start_from_form, methods=["POST"]),
        Route("/missions/example", start_example, methods=["POST"]),
        Route("/missions/upload", start_upload, methods=["POST"]),
        Route("/missions/{mission_id}", mission_page),
        Route("/missions/{mission_id}/answer", answer, methods=["POST"]),
        Route("/missions/{mission_id}/say", leave_message, methods=["POST"]),
        Route("/missions/{mission_id}/stop", stop, methods=["POST"]),
        Route("/missions/{mission_id}/resume", resume, methods=["POST"]),
        Route("/missions/{mission_id}/continue", continue_further, methods=["POST"]),
        Route("/missions/{mission_id}/fork", fork, methods=["POST"]),
        Route("/missions/{mission_id}/report.{fmt}", export),
        Route("/diff", diff_page),
        Route("/library", library_page),
        Route("/live", live_missions),
        Route("/live/missions/{mission_id}", live_mission),
        Route("/static/{name}", static),
        Route(AG_UI_PATH, ag_ui, methods=["POST"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan, middleware=[Middleware(Guard, security=security)],
                     # Starlette calls each handler with its own class only; its Mapping type cannot say so.
                     exception_handlers={HTTPException: http_error, CabalError: cabal_error,  # type: ignore[dict-item]
                                         Exception: server_error},
                     max_body_size=MAX_BODY)


def _room(request: Request) -> Room:
    return request.app.state.room


async def _known(request: Request) -> str:
    return await run_in_threadpool(_room(request).reader.known, request.path_params["mission_id"])


# ------------------------------------------------------------------------------ pages


async def missions_page(request: Request) -> Response:
    def build() -> str:
        context, parts = _room(request).list_parts()
        return views.render("missions.html.j2", key=parts.key, **context)

    return _html(await run_in_threadpool(build))


async def mission_page(request: Request) -> Response:
    mission_id = await _known(request)

    def build() -> str:
        context, parts = _room(request).mission_parts(mission_id)
        return views.render("mission.html.j2", key=parts.key, **context)

    return _html(await run_in_threadpool(build))


async def new_page(request: Request) -> Response:
    return _new_page(request)


def _new_page(request: Request, *, status: int = 200, **context: Any) -> Response:
    room = _room(request)
    return _html(views.render("new.html.j2", **views.new_context(csrf=room.security.csrf, workspace=room.workspace.home,
                                                                  **context)), status)


async def export(request: Request) -> Response:
    mission_id = await _known(request)
    chosen = request.path_params["fmt"]
    if chosen not in names("mission"):
        raise HTTPException(404, "There is no such export: the report comes as "
                                 + ", ".join(f"report.{name}" for name in names("mission")) + ".")
    text = await run_in_threadpool(lambda: render_mission(_room(request).reader.view(mission_id).report, chosen))
    return Response(text, media_type=export_format(chosen, "mission").media_type,
                    headers={"content-disposition": f'attachment; filename="{mission_id}.{chosen}"'})


async def diff_page(request: Request) -> Response:
    """Two missions of the workspace side by side: the page of ``cabal diff --format html``."""
    room = _room(request)
    chosen = [request.query_params.get(side, "") for side in ("a", "b")]
    if not all(chosen):
        raise HTTPException(400, "Choose two missions to compare: /diff?a=MISSION_ID&b=MISSION_ID.")

    def build() -> str:
        a, b = (room.reader.view(room.reader.known(mission_id)).report for mission_id in chosen)
        return views.render("diff.html.j2", **views.diff_context(a, b, workspace=room.workspace.home,
                                                                 csrf=room.security.csrf))

    return _html(await run_in_threadpool(build))


async def library_page(request: Request) -> Response:
    """The workspace's library (``cabal library``), or what ``?q=WORDS`` finds in it, and the
    standing facts: behind the same guard as every page, and only this workspace's."""
    room = _room(request)
    query = " ".join(request.query_params.get("q", "").split())[:500]

    def build() -> str:
        from cabal.rounds.library import facts, library_items, search_library

        if query:
            found = search_library(room.workspace, query)
            items, kept = list(found.items), list(found.facts)
        else:
            items, kept = library_items(room.workspace), facts(room.workspace)
        return printable(views.render("library.html.j2", items=items, facts=kept, query=query,
                                      workspace=room.workspace.home, csrf=room.security.csrf))

    return _html(await run_in_threadpool(build))


async def static(request: Request) -> Response:
    path = STATIC.get(request.path_params["name"])
    if path is None:
        raise HTTPException(404, "There is no such file.")
    return FileResponse(path, headers={"cache-control": "no-cache"})


def _html(text: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status, headers={"cache-control": "no-store"})


# -------------------------------------------------------------------------- live streams


def _since(request: Request) -> str | None:
    return request.headers.get("last-event-id") or request.query_params.get("since")


async def live_missions(request: Request) -> Response:
    room = _room(request)

    async def render() -> Parts:
        return (await run_in_threadpool(room.list_parts))[1]

    return _stream(lambda closing: updates(room.hub, EVERY_MISSION, render, _since(request), closing))


async def live_mission(request: Request) -> Response:
    room, mission_id = _room(request), await _known(request)

    async def render() -> Parts:
        return (await run_in_threadpool(room.mission_parts, mission_id))[1]

    return _stream(lambda closing: updates(room.hub, mission_id, render, _since(request), closing))


def _stream(events: Callable[[anyio.Event], AsyncIterator[ServerSentEvent]]) -> EventSourceResponse:
    # A ping every 15 s keeps proxies from closing a quiet stream; a page that stops reading for
    # 30 s is let go. (The response is never cached: sse-starlette says so.) When the server
    # stops, sse-starlette sets ``closing`` and the stream ends on its own within the grace,
    # under uvicorn's own (2 s): a stream cancelled mid-response is logged as an ASGI error.
    closing = anyio.Event()
    return EventSourceResponse(events(closing), ping=15, send_timeout=30, shutdown_event=closing,
                               shutdown_grace_period=1.0)


async def ag_ui(request: Request) -> Response:
    """An AG-UI run (``cabal.web.agui``), imported at the first one: its package is an extra."""
    try:
        from cabal.web.agui import run_agent
    except ImportError:  # ag-ui-protocol (jsonpatch, the other, comes with langchain-core)
        raise HTTPException(501, "This server speaks AG-UI once the ag-ui-protocol package is installed: "
                                 f"{install_command('agui')}, then start it again.") from None
    room = _room(request)
    return await run_agent(request, room.reader, room.runner, room.workspace)


# ---------------------------------------------------------------------- changing things


Handler = Callable[[Request, FormData], Awaitable[Response]]


def state_changing(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """A POST handler that runs only with the server's CSRF token (in the form's ``csrf`` field
    or the ``X-CSRF-Token`` header); it receives the parsed form."""
    @functools.wraps(handler)
    async def checked(request: Request) -> Response:
        form = await request.form(max_files=forms.MAX_SOURCE_FILES + 1, max_fields=20, max_part_size=forms.MAX_UPLOAD)
        offered = request.headers.get(CSRF_HEADER) or form.get(CSRF_FIELD)
        if not _room(request).security.csrf_matches(offered if isinstance(offered, str) else None):
            raise HTTPException(403, "This request did not come from a page of this server (its CSRF token is "
                                     "missing or wrong). Reload the page and try again.")
        return await handler(request, form)

    return checked


def _text(form: FormData, name: str) -> str:
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


def _posted(text: str, what: str, empty: str) -> str:
    """``text``, an answer or a message from the page, if the team may take it: not empty, not
    longer than ``MAX_TEXT``, and within the limits of any answer (``cabal.limits``: no NUL, no
    lone surrogate, no terminal control character), checked before anything starts; else a 400
    that says why."""
    if not text:
        raise HTTPException(400, empty)
    if len(text) > MAX_TEXT:
        raise HTTPException(400, f"The {what} is {len(text):,} characters long; at most {MAX_TEXT:,} are taken.")
    problems = answer_problems(text)
    if problems:
        raise HTTPException(400, f"The {what} cannot be used: " + "; ".join(map(str, problems)) + ".")
    return text


def _done(request: Request, mission_id: str, message: str) -> Response:
    """A change went through: JSON for the page's script, else back to the mission's page."""
    if _wants_json(request):
        return JSONResponse({"ok": True, "message": message, "mission": mission_id})
    return RedirectResponse(f"/missions/{mission_id}", status_code=303)


async def _went_on(started: Future[str]) -> str:
    """The mission id once a run of the runner has begun (its first event), or its error."""
    try:
        return await asyncio.wait_for(asyncio.wrap_future(started), timeout=START_TIMEOUT_S)
    except TimeoutError:
        raise HTTPException(504, f"The mission did not start within {START_TIMEOUT_S} s; "
                                 "see the server's output.") from None


@state_changing
async def start_from_form(request: Request, form: FormData) -> Response:
    fields = {key: value for key, value in form.items() if isinstance(value, str) and key != CSRF_FIELD}
    uploads = [(upload.filename or "", await upload.read(forms.MAX_SOURCE_BYTES + 1))
               for upload in form.getlist("sources") if isinstance(upload, UploadFile)]
    home = _room(request).workspace.home

    def launch() -> forms.Launch:
        chosen = forms.form_launch(fields)  # the form is checked before any file is kept
        return replace(chosen, sources=forms.saved_sources(home, uploads))

    return await _start(request, launch, values=fields, where="form")


@state_changing
async def start_example(request: Request, form: FormData) -> Response:
    return await _start(request, lambda: forms.example_launch(_text(form, "example"),
                                                              answer_myself=bool(_text(form, "answer_myself"))),
                        where="example")


@state_changing
async def start_upload(request: Request, form: FormData) -> Response:
    upload = form.get("mission")
    if not isinstance(upload, UploadFile):
        return _new_page(request, status=400, error="Choose a mission file to upload.", where="upload")
    data = await upload.read(forms.MAX_UPLOAD + 1)
    return await _start(request, lambda: forms.upload_launch(upload.filename or "mission.yaml", data), where="upload")


async def _start(request: Request, launch: Callable[[], forms.Launch], **shown: Any) -> Response:
    """Start what ``launch`` makes; a refusal comes back on the new-mission page, with the form refilled."""
    try:
        chosen = await run_in_threadpool(launch)
        mission_id = await _went_on(_room(request).runner.start(chosen.mission, model=chosen.model,
                                                                sources=chosen.sources))
    except Busy:
        raise
    except CabalError as error:
        return _new_page(request, status=400, error=_said(error), **shown)
    return RedirectResponse(f"/missions/{mission_id}", status_code=303)


@state_changing
async def answer(request: Request, form: FormData) -> Response:
    mission_id = await _known(request)
    text = _posted(_text(form, "option") or _text(form, "answer"), "answer",
                   "Write an answer (or pick an option) first.")
    if (await run_in_threadpool(_room(request).reader.status, mission_id)).pending_halt is None:
        # Checked here: resuming a mission that has ended returns quietly, with nothing answered.
        raise MissionError(f"mission {mission_id} has no pending question to answer")
    await _went_on(_room(request).runner.resume(mission_id, answer=text))
    return _done(request, mission_id, "Answered: the team goes on.")


@state_changing
async def leave_message(request: Request, form: FormData) -> Response:
    room, mission_id = _room(request), await _known(request)
    text, product = _posted(_text(form, "text"), "message", "Write a message first."), _text(form, "product") or None
    if product is not None and product not in await run_in_threadpool(room.reader.product_ids, mission_id):
        raise HTTPException(400, "That product is not in this mission's tree.")
    await run_in_threadpool(lambda: say(mission_id, text, product=product, home=room.workspace.home,
                                        url=room.workspace.url))
    room.hub.changed(mission_id)
    return _done(request, mission_id, "Message left: the team reads it at the start of its next round.")


@state_changing
async def stop(request: Request, form: FormData) -> Response:
    room, mission_id = _room(request), await _known(request)
    result = await run_in_threadpool(lambda: stop_mission(mission_id, home=room.workspace.home,
                                                          url=room.workspace.url))
    room.hub.changed(mission_id)
    if result.state == "done":  # nothing ran it (a question waited, or it was paused): it ended now
        return _done(request, mission_id, "Stopped: the mission ends here; resume it to go on.")
    return _done(request, mission_id, "Stop requested: the team stops at the start of its next round.")


@state_changing
async def resume(request: Request, form: FormData) -> Response:
    room, mission_id = _room(request), await _known(request)
    if (await run_in_threadpool(room.reader.status, mission_id)).state != "interrupted":
        raise MissionError(f"mission {mission_id} is not interrupted: there is nothing to resume")
    await _went_on(room.runner.resume(mission_id))
    return _done(request, mission_id, "The team goes on.")


@state_changing
async def continue_further(request: Request, form: FormData) -> Response:
    room, mission_id = _room(request), await _known(request)
    direction = _posted(_text(form, "direction"), "direction", "Write the new direction first.")
    rounds = _text(form, "rounds")
    if rounds and not (rounds.isdigit() and 1 <= int(rounds) <= MAX_MORE_ROUNDS):
        raise HTTPException(400, f"More rounds is a whole number from 1 to {MAX_MORE_ROUNDS}.")
    await _went_on(room.runner.go_further(mission_id, direction, rounds=int(rounds) if rounds else None))
    return _done(request, mission_id, "The mission continues with your new direction.")


@state_changing
async def fork(request: Request, form: FormData) -> Response:
    room, mission_id = _room(request), await _known(request)
    reached = (await run_in_threadpool(room.reader.status, mission_id)).round
    chosen = _text(form, "round")
    if not (chosen.isdigit() and 1 <= int(chosen) <= reached):
        raise HTTPException(400, f"Fork from a round from 1 to {reached}." if reached else
                                 "The mission has no round to fork from yet.")
    direction = _text(form, "direction").strip() or None
    forked = await _went_on(room.runner.fork(mission_id, round_number=int(chosen), direction=direction))
    return _done(request, forked, f"Forked from {mission_id} at the start of round {chosen}: a new mission runs on "
                                  "from there; the original is unchanged.")


# ------------------------------------------------------------------------------- errors


def _wants_json(request: Request) -> bool:
    return request.headers.get("accept", "").startswith("application/json") or request.url.path == AG_UI_PATH


def _said(error: CabalError) -> str:
    return str(error) + (f" ({error.hint})" if error.hint else "")


def _error(request: Request, status: int, title: str, message: str, hint: str | None = None) -> Response:
    if _wants_json(request):
        return JSONResponse({"ok": False, "error": message + (f" ({hint})" if hint else "")}, status)
    room = getattr(request.app.state, "room", None)
    page = views.render("error.html.j2", title=title, message=message, hint=hint, back=None,
                        csrf=room.security.csrf if room else "", workspace=room.workspace.home if room else "")
    return _html(page, status)


async def http_error(request: Request, error: HTTPException) -> Response:
    titles = {400: "Bad request", 403: "Refused", 404: "Not found", 405: "Not allowed", 413: "Too large",
              415: "Not JSON", 501: "Not installed", 504: "Too slow"}
    return _error(request, error.status_code, titles.get(error.status_code, "Cannot do that"), str(error.detail))


async def cabal_error(request: Request, error: CabalError) -> Response:
    status = (404 if isinstance(error, ResourceNotFound) else 429 if isinstance(error, Busy)
              else 409 if isinstance(error, MissionError) else 503 if isinstance(error, GraphUnavailable)
              else 400)
    titles = {404: "Not found", 409: "Not now", 429: "Busy", 503: "The graph is unavailable", 400: "Cannot do that"}
    return _error(request, status, titles[status], str(error), error.hint)


async def server_error(request: Request, error: Exception) -> Response:
    # The traceback goes to the server's output (Starlette raises the error again for the server
    # to log once this page is sent), never to the browser.
    return _error(request, 500, "Something went wrong", "The server could not do that; its output has the details.")
