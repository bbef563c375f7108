"""The tool host: a mission run's MCP client sessions, behind a synchronous facade.

The round engine is synchronous (LangGraph nodes, operatives' turns in threads); the MCP SDK's
client is asynchronous, and a session must be opened and closed in one task (its transports
hold anyio task groups). So the host runs one asyncio loop on a thread of its own, holds each
server's session open in a task of that loop, and hands each call to the loop from whichever
turn's thread makes it. The run owns the host and closes it on every way out (``with``).

What can go wrong stays small:
- a server that does not start, or does not complete MCP's handshake within its entry's
  ``startup_timeout_s``, is stopped and is one line (``problems``) and is left out, unless required
  (``ToolServerUnavailable``: the mission refuses to start);
- a call that errors, outlasts its timeout or returns nothing readable is a failed
  ``ToolOutcome`` whose text goes back to the agent, and the turn goes on;
- a server found dead after a call is started again, at most once per round.

A tool's result is data: it leaves here as text made ``printable`` and bounded, framed as the
answer of that one call; nothing here can write the graph.

Every server process ends with the run, however the run ends: the SDK's transport stops it when
its session closes, and each one is started through a launcher that asks the kernel (Linux's
parent-death signal) to kill it when the thread that started it ends: the host's loop thread
at ``close()``, or with the whole process on a crash or a ``kill -9``. Without that a server hung
before its handshake would outlive the run (it never reads the stdin whose end tells it to go).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from cabal.errors import ToolServerUnavailable
from cabal.limits import printable
from cabal.tools.spec import DEFAULT_TOOL_TIMEOUT_S, OFFERED_NAME, SEPARATOR, Approval, ToolServerSpec
from cabal.vocabulary import MCP_SERVER_NAME, Role, Step

RESULT_CHARS = 8_000  # what the model reads of one result
DIGEST_CHARS = 300  # what the moment and the events keep of it
WHY_FIELD = "why"
WHY_SCHEMA = {"type": "string", "description": "why you call this tool now (recorded with the call; not sent to "
                                               "the tool)"}
CLOSE_WAIT_S = 10.0
TEARDOWN_S = 10.0  # what stopping a server that did not start may take: the SDK's close, SIGTERM, SIGKILL
PYTHON_COMMANDS = ("python", "python3")

# The SDK logs each unreadable line a server prints, with a traceback, at ERROR: without a
# handler of the application's, Python would print it on the user's terminal. The problem
# reaches the agent as its call's error instead; an application that configures logging still
# sees the SDK's records.
logging.getLogger("mcp").addHandler(logging.NullHandler())


@dataclass(frozen=True)
class OfferedTool:
    """A server's tool as the team sees it: ``prices__lookup``, with the server's schema plus ``why``."""

    server: str
    tool: str
    description: str
    input_schema: dict[str, Any]
    takes_why: bool = False  # the tool has a ``why`` argument of its own: it is sent on

    @property
    def name(self) -> str:
        return f"{self.server}{SEPARATOR}{self.tool}"

    def definition(self) -> dict[str, Any]:
        """The tool in the form every step's tools take (name, description, input_schema)."""
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


@dataclass(frozen=True)
class ToolOutcome:
    """One call's end: the text the agent reads, whether the tool answered, and a short digest."""

    text: str
    ok: bool
    digest: str
    duration_s: float
    denied: bool = False  # the call was not made: the user (or the mission file's policy) refused it


@dataclass
class _Server:
    """One server's connection: the task that holds its session open, and what it offered."""

    spec: ToolServerSpec
    tools: dict[str, OfferedTool] = field(default_factory=dict)
    session: Any = None
    task: asyncio.Task | None = None
    closing: asyncio.Event | None = None
    dead: str | None = None  # why it is not usable, once it is not
    restarted_in: int | None = None  # the round it was last started again in
    restarting: threading.Lock = field(default_factory=threading.Lock)


class ToolHost:
    """The MCP servers of one mission run. ``start()`` connects, ``call()`` calls, ``close()`` ends."""

    def __init__(self, servers: list[ToolServerSpec], *, timeout_s: float = DEFAULT_TOOL_TIMEOUT_S,
                 log_dir: Path | None = None, on_problem: Callable[[str], None] | None = None) -> None:
        self.timeout_s = timeout_s
        self.log_dir = log_dir
        self.on_problem = on_problem or (lambda line: None)
        self.problems: list[str] = []
        self._servers = {spec.name: _Server(spec) for spec in servers}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._logs: dict[str, TextIO] = {}

    # ------------------------------------------------------------------------ lifetime

    def __enter__(self) -> ToolHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> ToolHost:
        """Connect every server at once; a required one that fails raises ``ToolServerUnavailable``
        (after the others are closed again), any other failure is one line in ``problems``."""
        if not self._servers or self._loop is not None:
            return self
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="cabal-tools", daemon=True)
        self._thread.start()
        servers = list(self._servers.values())
        try:
            started = self._run(self._start_all(servers), timeout=max(_startup_s(s) for s in servers) + CLOSE_WAIT_S)
        except FutureTimeout:  # each connection is bounded on the loop; this is the last guard
            started = [None if server.session is not None else "it did not start in time" for server in servers]
        except BaseException:  # an interrupt while waiting: nothing is left running
            self.close()
            raise
        for server, failure in zip(servers, started):
            if failure is None:
                continue
            if server.spec.required:
                self.close()
                raise ToolServerUnavailable(server.spec.name, failure)
            self._report(f"tool server {server.spec.name!r} is left out: {failure}")
        return self

    def close(self) -> None:
        """Close every session (each server process is stopped by its transport) and the loop."""
        loop, self._loop = self._loop, None
        if loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._close_all(), loop).result(timeout=CLOSE_WAIT_S * 2)
        except (FutureTimeout, RuntimeError):
            pass  # a server that will not stop: it dies with the loop's thread (the launcher's parent-death signal)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=CLOSE_WAIT_S)
        for log in self._logs.values():
            log.close()

    # --------------------------------------------------------------------------- offers

    def tools_for(self, agent_id: str, role: Role, step: Step) -> list[OfferedTool]:
        """The tools ``agent_id`` is offered in ``step``, in the order of the mission file."""
        with self._lock:
            return [tool for server in self._servers.values() if server.tools
                    and server.spec.allows(agent_id, role, step) for tool in server.tools.values()]

    def listed(self) -> list[tuple[ToolServerSpec, OfferedTool]]:
        """Every tool of the servers that started, with its server's spec, in the order of the mission file."""
        with self._lock:
            return [(server.spec, tool) for server in self._servers.values() for tool in server.tools.values()]

    @property
    def asks(self) -> bool:
        """Whether any call of the mission's tools may wait for the user's approval."""
        return any(server.spec.approve not in ("auto", "deny") for server in self._servers.values())

    def approval(self, name: str) -> Approval:
        """What the mission file says of a call of the offered tool ``name`` (``server__tool``)."""
        server_name, _, tool = name.partition(SEPARATOR)
        server = self._servers.get(server_name)
        return server.spec.approval(tool) if server is not None else "auto"

    # ---------------------------------------------------------------------------- calls

    def call(self, name: str, arguments: dict[str, Any], *, round_number: int) -> ToolOutcome:
        """Call the offered tool ``name`` (``server__tool``) with ``arguments``; never raises for
        what the server does: every failure is an outcome the agent reads."""
        started = time.monotonic()
        server_name, _, tool = name.partition(SEPARATOR)
        server = self._servers.get(server_name)
        if server is None or tool not in server.tools or self._loop is None:
            return _failed(f"no tool {name!r} is offered", started)
        with server.restarting:  # parallel operatives: one of them starts a dead server again, once
            if server.dead is not None:
                if server.restarted_in == round_number:
                    return _failed(f"tool server {server_name!r} is unavailable: {server.dead}", started)
                failure = self._restart(server, round_number)
                if failure is not None:
                    return _failed(f"tool server {server_name!r} is unavailable: {failure}", started)
        sent = {key: value for key, value in arguments.items() if key != WHY_FIELD or server.tools[tool].takes_why}
        try:
            result = self._run(self._call(server, tool, sent), timeout=self.timeout_s + CLOSE_WAIT_S)
        except FutureTimeout:
            return _failed(f"the tool {name} did not answer within {self.timeout_s:g} s", started)
        if isinstance(result, BaseException):
            return self._call_failed(server, name, result, started)
        return _outcome(name, result, started)

    def _call_failed(self, server: _Server, name: str, error: BaseException, started: float) -> ToolOutcome:
        if isinstance(error, TimeoutError) or "timed out" in str(error).lower():
            return _failed(f"the tool {name} did not answer within {self.timeout_s:g} s", started)
        if self._run(self._alive(server), timeout=CLOSE_WAIT_S) is not True:
            with self._lock:
                server.dead = _one_line(error)
            self._report(f"tool server {server.spec.name!r} stopped ({server.dead}); it is started again at the "
                         "next call, at most once a round")
            return _failed(f"tool server {server.spec.name!r} stopped during the call: {server.dead}", started)
        return _failed(f"the tool {name} failed: {_one_line(error)}", started)

    def _restart(self, server: _Server, round_number: int) -> str | None:
        with self._lock:
            server.restarted_in = round_number
        self._run(self._close(server), timeout=CLOSE_WAIT_S * 2)
        try:
            failure = self._run(self._connect(server), timeout=_startup_s(server) + CLOSE_WAIT_S)
        except FutureTimeout:
            failure = "it did not start in time"
        if failure is None:
            with self._lock:
                server.dead = None
        return failure

    # ------------------------------------------------------------------ on the loop thread

    def _run(self, coroutine: Any, *, timeout: float) -> Any:
        loop = self._loop
        assert loop is not None, "the servers are used between start() and close()"
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(timeout=timeout)

    async def _start_all(self, servers: list[_Server]) -> list[str | None]:
        return list(await asyncio.gather(*(self._connect(server) for server in servers)))

    async def _connect(self, server: _Server) -> str | None:
        """Open ``server``'s session in a task that keeps it open; why it failed, or None."""
        loop = asyncio.get_running_loop()  # the host's own: this runs on it
        ready: asyncio.Future = loop.create_future()
        server.closing = closing = asyncio.Event()
        server.task = loop.create_task(self._hold(server, ready, closing))
        try:
            # The handshake is bounded inside the session's task (_hold), where a timeout unwinds
            # through the transport, which stops the process; this wait only outlasts it.
            listed = await asyncio.wait_for(asyncio.shield(ready), _startup_s(server))
        except TimeoutError:
            await self._close(server)
            return (f"it did not complete MCP's handshake within {server.spec.startup_timeout_s:g} s "
                    "(the entry's startup_timeout_s)")
        except Exception as error:  # noqa: BLE001 - whatever the transport raised, told in one line
            await self._close(server)
            said = self._last_words(server.spec.name)
            return _one_line(error) + (f" (its last words on stderr: {said})" if said else "")
        if not server.tools:
            server.tools = _offered(server.spec.name, listed, self._report)
        return None

    async def _hold(self, server: _Server, ready: asyncio.Future, closing: asyncio.Event) -> None:
        import anyio
        from mcp import ClientSession

        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport(server.spec))
                session = await stack.enter_async_context(ClientSession(read, write))
                # anyio's scope, not asyncio's: the transport's task groups are anyio's, and a
                # timeout raised here leaves through them, which stop the server's process.
                with anyio.fail_after(server.spec.startup_timeout_s):
                    listed = await _handshake(session)
                server.session = session
                ready.set_result(listed)
                await closing.wait()
        except BaseException as error:  # noqa: BLE001 - the failure is the caller's to report
            if not ready.done():
                failure = _leaf(error) if isinstance(error, Exception) else RuntimeError("cancelled")
                # A timeout here is the handshake's (fail_after above): the caller's TimeoutError.
                ready.set_exception(TimeoutError() if isinstance(failure, TimeoutError) else failure)
            if not isinstance(error, Exception):
                raise
        finally:
            server.session = None

    def _transport(self, spec: ToolServerSpec) -> Any:
        if spec.url is not None:
            from mcp.client.streamable_http import streamable_http_client

            return streamable_http_client(spec.url)
        from mcp import StdioServerParameters, stdio_client

        path = os.environ.get("PATH", os.defpath)
        assert spec.command is not None, "a server without a url is started by its command (the spec says so)"
        command: str | None
        if spec.command in PYTHON_COMMANDS:  # the Python that runs Cabal: it has the mcp package
            command = sys.executable
        elif os.sep in spec.command:
            command = str(Path(spec.cwd or ".", spec.command))
        else:
            command = shutil.which(spec.command, path=path)
        if command is None or not os.access(command, os.X_OK):
            raise FileNotFoundError(f"command {spec.command!r} is not found on PATH")
        # The SDK adds HOME, USER, SHELL and friends to whatever env it is given; ``env -i``
        # starts the server with exactly the entry's variables and PATH, nothing of Cabal's.
        variables = [f"{key}={value}" for key, value in {**spec.env, "PATH": path}.items()]
        params = StdioServerParameters(command=sys.executable,
                                       args=[*LAUNCHER, str(os.getpid()), shutil.which("env") or "/usr/bin/env", "-i",
                                             *variables, command, *spec.args], cwd=spec.cwd)
        return stdio_client(params, errlog=self._errlog(spec.name))

    def _errlog(self, name: str) -> TextIO:
        """Where a server's stderr goes: a private file of the mission (never the user's terminal)."""
        log = self._logs.get(name)
        if log is None:
            if self.log_dir is None:
                log = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115 - closed with the host
            else:
                from cabal.private import open_private

                log = open_private(self.log_dir / f"tool-{name}.log", "a")
            self._logs[name] = log
        return log

    def _last_words(self, name: str) -> str:
        """The last line a server wrote on stderr (why a server that would not start did not)."""
        log = self._logs.get(name)
        if log is None:
            return ""
        try:
            log.flush()
            if self.log_dir is None or log.readable():  # without a folder, a temporary file read back
                log.seek(0)
                text = log.read()[-2000:]
            else:
                text = (self.log_dir / f"tool-{name}.log").read_text(encoding="utf-8", errors="replace")[-2000:]
        except (OSError, ValueError):
            return ""
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return printable(lines[-1])[:200] if lines else ""

    async def _call(self, server: _Server, tool: str, arguments: dict[str, Any]) -> Any:
        session = server.session
        if session is None:
            return ConnectionError("the server is not connected")
        try:
            # The SDK's own read timeout bounds the call (an asyncio.wait_for around it would cost
            # a task per call); the caller's thread waits a little longer, whatever happens here.
            return await session.call_tool(tool, arguments, read_timeout_seconds=self.timeout_s)
        except Exception as error:  # noqa: BLE001 - returned, judged by the caller's thread
            return _leaf(error)

    async def _alive(self, server: _Server) -> bool:
        if server.session is None or server.task is None or server.task.done():
            return False
        try:
            await asyncio.wait_for(server.session.send_ping(), 2.0)
            return True
        except Exception:  # noqa: BLE001 - any failure to answer a ping is a dead server
            return False

    async def _close(self, server: _Server) -> None:
        task, server.task = server.task, None
        if task is None:
            return
        if server.closing is not None:  # set with the task, in _connect
            server.closing.set()
        try:
            await asyncio.wait_for(task, CLOSE_WAIT_S)
        except BaseException:  # noqa: BLE001 - closing: nothing left to tell
            task.cancel()

    async def _close_all(self) -> None:
        await asyncio.gather(*(self._close(server) for server in self._servers.values()), return_exceptions=True)

    def _report(self, line: str) -> None:
        self.problems.append(line)
        self.on_problem(line)


def _startup_s(server: _Server) -> float:
    """How long a connection may take in all: the entry's handshake bound, then stopping the server."""
    return server.spec.startup_timeout_s + TEARDOWN_S


async def _handshake(session: Any) -> list[Any]:
    """MCP's handshake: ``initialize``, then every page of the server's tools."""
    from mcp.types import PaginatedRequestParams

    info = await session.initialize()
    if info.server_info.name == MCP_SERVER_NAME:
        raise ValueError("it is Cabal's own MCP server, whose protocols are never offered to the team")
    listed: list[Any] = []
    cursor = None
    while True:
        page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        listed += page.tools
        cursor = page.next_cursor
        if not cursor:
            return listed


# A stdio server is started through this launcher (``python -I -S -c``, a few milliseconds): it asks
# the kernel to SIGKILL the server when the thread that started it ends, then becomes ``env -i`` and
# the server (exec keeps the request). If that thread is already gone (the parent changed), it stops.
# Where there is no prctl (not Linux), it only execs: the transport's close still stops the server.
_LAUNCH = """import os, sys
try:
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, 9, 0, 0, 0)
except (OSError, AttributeError):
    pass
if os.getppid() != int(sys.argv[1]):
    sys.exit("cabal: the run that started this tool server has ended")
os.execv(sys.argv[2], sys.argv[2:])
"""
LAUNCHER = ("-I", "-S", "-c", _LAUNCH)


# ----------------------------------------------------------------------------- results


def _offered(server: str, listed: list[Any], report: Callable[[str], None]) -> dict[str, OfferedTool]:
    tools = {}
    for tool in listed:
        name = f"{server}{SEPARATOR}{tool.name}"
        if not OFFERED_NAME.fullmatch(name):
            report(f"tool {tool.name!r} of server {server!r} is left out: {name!r} is not a name a model can call "
                   "(letters, digits, _ and -, at most 64)")
            continue
        schema = dict(tool.input_schema) if isinstance(tool.input_schema, dict) else {}
        properties = dict(schema.get("properties") or {})
        own = WHY_FIELD in properties
        properties.setdefault(WHY_FIELD, WHY_SCHEMA)
        schema = {**schema, "type": "object", "properties": properties}
        description = printable(tool.description or tool.title or tool.name)[:1000]
        tools[tool.name] = OfferedTool(server, tool.name, f"{description} (tool of the {server!r} server)", schema,
                                       takes_why=own)
    return tools


def _outcome(name: str, result: Any, started: float) -> ToolOutcome:
    """What a ``CallToolResult`` says, as text the agent may read: each text block, other
    blocks named, else the structured content as JSON; made printable and bounded."""
    parts = []
    for block in getattr(result, "content", None) or ():
        text = getattr(block, "text", None)
        parts.append(text if isinstance(text, str) else f"[{getattr(block, 'type', 'content')} block]")
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, default=str))
    text = printable("\n".join(parts)).strip()
    if not text:
        return _failed(f"the tool {name} returned nothing readable", started)
    if getattr(result, "is_error", False):
        return _failed(f"the tool {name} reported an error: {text[:RESULT_CHARS]}", started)
    return ToolOutcome(text=text[:RESULT_CHARS], ok=True, digest=_digest(text), duration_s=time.monotonic() - started)


def kept_outcome(text: str, *, ok: bool, denied: bool = False) -> ToolOutcome:
    """An outcome the run did not get from a server just now: an approved call's result the graph
    kept, a refusal, a call whose result a crash lost."""
    text = printable(text)[:RESULT_CHARS]
    return ToolOutcome(text=text, ok=ok, digest=_digest(text), duration_s=0.0, denied=denied)


def _failed(why: str, started: float) -> ToolOutcome:
    why = printable(why)
    return ToolOutcome(text=why, ok=False, digest=_digest(why), duration_s=time.monotonic() - started)


def _digest(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= DIGEST_CHARS else flat[:DIGEST_CHARS - 1] + "…"


def _leaf(error: BaseException) -> BaseException:
    """The first error inside an exception group (anyio wraps a transport's failure in them)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def _one_line(error: BaseException) -> str:
    error = _leaf(error)
    text = " ".join(str(error).split()) or type(error).__name__
    return printable(f"{text}" if type(error).__name__ in text else f"{type(error).__name__}: {text}")[:300]
