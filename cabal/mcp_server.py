"""``cabal mcp``: the membrane and procedure runs as Model Context Protocol tools over stdio.

An outside agent (Claude Code, any MCP client) writes to the context graph the way Cabal's
own agents do: through membrane protocols, one validated step at a time, and through
procedure runs whose work lands in a run space. Tools:

- ``membrane_list``, ``membrane_start``, ``membrane_continue``, ``membrane_abort``;
- ``procedure_start``, ``procedure_record``, ``procedure_continue``, ``procedure_end``;
- ``library_list``, ``library_search``, ``memory_list``: the workspace's memory across missions,
  read only (``rounds/library.py``): the server serves its own workspace's, no other.

Results are the membrane's typed values turned into JSON here (``to_wire``), the one place they
become dicts, sent as structured content (and as JSON text). A rejected answer is not a tool error: the session stays on its step and the result lists every
problem, so the agent fixes them and answers again. Everything the agent cannot fix by
answering differently (an unknown session or protocol, a missing dependency, a closed run)
comes back as a tool error whose text is the one-line message the CLI would print.

The server speaks as one actor (``--actor``, default ``actor-mcp``): moments it records are
expressed by that actor, registered in the graph on the first call that needs it.

Every request gets an answer. Arguments beyond what an answer may be (``cabal.limits``: nesting,
size, NUL, lone surrogates, control characters) are refused like any wrong answer (a tool
error, or the membrane's ``errors`` for ``membrane_continue``); a line the SDK cannot even read
(JSON nested deeper than its parser goes, a lone surrogate escape, no JSON at all) gets a
JSON-RPC error from ``serve_stdio`` instead of the silence the SDK's transport would leave.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError

from cabal.errors import AnswerRejected, CabalError
from cabal.limits import answer_problems
from cabal.vocabulary import MCP_ACTOR, MCP_SERVER_NAME

SERVER_NAME = MCP_SERVER_NAME

INSTRUCTIONS = """Cabal keeps a project's shared context in a graph (modules, objectives, behaviors,
validations, health checks, goals, escalations, decisions). Every write goes through a membrane
protocol: a short, validated dialogue that ends by committing one linked cluster of nodes plus the
moments that record who said what and why.

To write: membrane_list to see the protocols, membrane_start with a protocol name and the context
it needs (ids such as space_id), then answer each ask step with membrane_continue until the status
is "complete". Each step says exactly what it expects in step.answer_schema. A rejected answer
changes nothing: the same step comes back with "errors"; fix those and answer again.

Procedures are longer guides: procedure_start returns step 1's guide; do the work, write it with
procedure_record, then procedure_continue to reach the next step (its entry gate checks your work)."""


def _call(produce: Callable[[], dict], arguments: Mapping[str, Any] | None = None) -> dict:
    """Run a tool body once its ``arguments`` are within the limits of an answer; those problems
    and any CabalError become a tool error with a one-line message (and hint)."""
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        problems = answer_problems(dict(arguments or {}))
        if problems:
            raise AnswerRejected(problems)
        return produce()
    except CabalError as exc:
        raise ToolError(str(exc) + (f" (hint: {exc.hint})" if exc.hint else "")) from None


class CabalTools:
    """The tool bodies, over one graph: plain methods, testable without a transport."""

    def __init__(
        self,
        graph: Any,
        *,
        protocol_dirs: Iterable[str | Path] = (),
        procedure_dirs: Iterable[str | Path] = (),
        actor_id: str = MCP_ACTOR,
        workspace: Any = None,
    ) -> None:
        from cabal.membrane import Membrane
        from cabal.procedures import Procedures

        self.graph = graph
        self.workspace = workspace  # whose library the library_* and memory_* tools read (None: none)
        self.membrane = Membrane(graph, protocol_dirs)
        self.procedures = Procedures(graph, procedure_dirs)
        self.actor_id = actor_id
        self._actor_known = False

    def ensure_actor(self) -> None:
        if self._actor_known:
            return
        if not self.graph.exists(self.actor_id):
            self.graph.create_cluster([{"id": self.actor_id, "node_type": "actor", "type": "agent", "name": "MCP client"}])
        self._actor_known = True

    # ----------------------------------------------------------------------- membrane

    def membrane_list(self) -> dict:
        return {"protocols": self.membrane.list_protocols()}

    def membrane_start(self, protocol: str, context: dict[str, Any] | None = None) -> dict:
        def start() -> dict:
            given = dict(context or {})
            if "actor_id" not in given:
                self.ensure_actor()
                given["actor_id"] = self.actor_id
            return self.membrane.start(protocol, given).to_wire()

        return _call(start, {"protocol": protocol, "context": context})

    def membrane_continue(self, session_id: str, answer: Any) -> dict:
        # The answer's limits are the membrane's to check: a problem there is a rejected answer.
        return _call(lambda: self.membrane.continue_session(session_id, answer).to_wire(), {"session_id": session_id})

    def membrane_abort(self, session_id: str) -> dict:
        return _call(lambda: self.membrane.abort(session_id).to_wire(), {"session_id": session_id})

    # --------------------------------------------------------------------- procedures

    def _actor(self, actor_id: str | None) -> str:
        if actor_id:
            return actor_id
        self.ensure_actor()
        return self.actor_id

    def procedure_start(self, procedure: str, actor_id: str | None = None, run_id: str | None = None) -> dict:
        return _call(lambda: self.procedures.start_procedure(procedure, self._actor(actor_id), run_id=run_id).to_wire(),
                     {"procedure": procedure, "actor_id": actor_id, "run_id": run_id})

    def procedure_record(
        self, run_id: str, nodes: list[dict[str, Any]], links: list[dict[str, Any]] | None = None,
        actor_id: str | None = None,
    ) -> dict:  # fmt: skip
        return _call(lambda: self.procedures.record(run_id, self._actor(actor_id), nodes, links or []).to_wire(),
                     {"run_id": run_id, "nodes": nodes, "links": links, "actor_id": actor_id})

    def procedure_continue(self, run_id: str, from_step: str | None = None) -> dict:
        return _call(lambda: self.procedures.continue_procedure(run_id, from_step=from_step).to_wire(),
                     {"run_id": run_id, "from_step": from_step})

    def procedure_end(self, run_id: str) -> dict:
        return _call(lambda: self.procedures.end_procedure(run_id).to_wire(), {"run_id": run_id})

    # ------------------------------------------------------------------------ library

    def _library(self) -> Any:
        from cabal.errors import ConfigError

        if self.workspace is None:
            raise ConfigError("this server has no workspace, so no library", hint="run it with cabal mcp")
        from cabal.rounds import library

        return library

    def library_list(self) -> dict:
        def produce() -> dict:
            return {"products": [_item_wire(item) for item in self._library().library_items(self.workspace)]}

        return _call(produce)

    def library_search(self, words: str) -> dict:
        def produce() -> dict:
            found = self._library().search_library(self.workspace, words)
            return {"products": [_item_wire(item) for item in found.items],
                    "facts": [_fact_wire(fact) for fact in found.facts]}

        return _call(produce, {"words": words})

    def memory_list(self) -> dict:
        return _call(lambda: {"facts": [_fact_wire(fact) for fact in self._library().facts(self.workspace)]})


def _item_wire(item: Any) -> dict:
    return {"mission_id": item.mission_id, "mission_name": item.mission_name, "product_id": item.product_id,
            "name": item.name, "type": item.kind, "version": item.version, "accepted_round": item.round,
            "origin": item.origin, "content": item.content}


def _fact_wire(fact: Any) -> dict:
    return {"id": fact.id, "text": fact.text, "origin": fact.origin}


# ---------------------------------------------------------------------------- descriptions

_STEP_RESULT = (
    "Returns a JSON object with `status` and `session_id`. "
    "status \"active\": the session waits on the ask step in `step` (id, question, expects, answer_schema, "
    "and where present questions, items, moment, context_enrichment); `protocol` names the protocol the step "
    "belongs to (a called sub-protocol's steps have ids like \"call_step.step\"). step.answer_schema is the exact "
    "JSON Schema of the answer to send with membrane_continue. When `step.moment` is present the answer is an "
    "object {\"answer\": <the value>, \"description\": <what you did or decided>, \"reasoning\": <why>}: the prose "
    "is recorded in the graph as a moment. When `step.questions` is present, the value is an object with one "
    "field per question name. When `step.items` is present, send a list with one answer per item. "
    "status \"complete\": nothing is left to ask; the protocol's cluster is committed: `created` "
    "({nodes, links} as the graph counted them) and `summary`."
)

DESCRIPTIONS = {
    "membrane_list": (
        "List the membrane protocols this server can run. Returns {\"protocols\": [{name, description, version, "
        "source}]} (a protocol file that does not load has `error` instead). Read a protocol's description to "
        "learn which context it needs (for example space_id for a module, validation_id, escalation_id, target_id)."
    ),
    "membrane_start": (
        "Start a membrane protocol: a guided, validated write to the Cabal context graph. `protocol` is a name "
        "from membrane_list; `context` holds the values the protocol refers to, such as {\"space_id\": "
        "\"mod-billing\"}. `context.actor_id` says who is speaking (an existing actor node); it defaults to this "
        "server's actor. Automatic steps (graph queries, branches, called sub-protocols) run by themselves; the "
        "call returns at the first question. " + _STEP_RESULT + " Errors that answering cannot fix (unknown "
        "protocol, a missing dependency such as a space that does not exist) are returned as a tool error with "
        "a one-line message."
    ),
    "membrane_continue": (
        "Answer the ask step a membrane session waits on. `answer` must satisfy step.answer_schema from the "
        "previous result (text, a list, or an object, as the schema says). " + _STEP_RESULT + " An invalid "
        "answer changes nothing: the result has status \"active\", the SAME step, `errors` (every problem at "
        "once, as [{path, message}], the path pointing into your answer) and `error` (the same as text); fix "
        "exactly those and call membrane_continue again. An unknown, aborted or completed session_id is a tool "
        "error."
    ),
    "membrane_abort": (
        "Abandon a membrane session that is still active. Nothing it prepared is written: no nodes, no links, "
        "no moments. Returns {\"status\": \"aborted\", \"session_id\"}. An unknown or finished session is a tool error."
    ),
    "procedure_start": (
        "Start a run of a procedure: a step-by-step guide whose work is kept in its own run space in the graph. "
        "`procedure` is a procedure name (e.g. write_adr) or an installed template id; `actor_id` (optional, an "
        "existing actor) defaults to this server's actor; `run_id` (optional) makes a retried start return the "
        "same run. Returns {run_id, step_id, step_content, status: \"active\", validation_error: null}: "
        "step_content is the complete guide of the first step (what, why, how, watch out). Do what it says, "
        "write the result with procedure_record, then call procedure_continue. Unknown procedures or actors are "
        "a tool error."
    ),
    "procedure_record": (
        "Write your work for the current step into the run space: `nodes` (each {\"id\", \"node_type\", "
        "\"type\", \"name\", ...fields}; node_type is one of the graph's node types such as narrative or thing) "
        "and `links` (each {\"type\", \"from\", \"to\"}, from and to being node ids, new or existing). Every new "
        "node is contained by the run space, and a moment records who created what. Returns {run_id, step_id, "
        "moment_id, created: {nodes, links}}. Refused with a tool error, nothing written: writes into the "
        "procedure's template, links of the run's own bookkeeping types, ids that already exist outside this run, "
        "or a completed run."
    ),
    "procedure_continue": (
        "Move a procedure run to its next step once the current step's work is recorded. The next step's entry "
        "gate checks the run space for the nodes and links it requires. Returns {run_id, step_id, step_content, "
        "status, validation_error}: status \"active\" with the next step's full guide; \"validation_failed\" "
        "when the gate is not met: you stay on the current step (its guide is returned again) and "
        "validation_error says exactly what is missing: record it and call again; \"completed\" after the last "
        "step (step_id and step_content null). Pass `from_step` (the step id you believe is current) so a "
        "retried call never advances twice."
    ),
    "library_list": (
        "List the accepted work of this server's Cabal workspace: the accepted version of every product of its "
        "missions, newest mission first. Returns {\"products\": [{mission_id, mission_name, product_id, name, type, "
        "version, accepted_round, origin, content}]}. Read only; another workspace's work is never listed."
    ),
    "library_search": (
        "Search the accepted work and the standing facts of this server's Cabal workspace by `words` (any of "
        "them, by stem: the graph's full-text index). Returns {\"products\": [...as library_list, best first], "
        "\"facts\": [{id, text, origin}]}. Read only."
    ),
    "memory_list": (
        "List the standing facts the user keeps for the next missions of this workspace (what they told a team "
        "and chose to keep: `cabal memory`). Returns {\"facts\": [{id, text, origin}]}, oldest first. Read only: "
        "only the user adds, edits and forgets them."
    ),
    "procedure_end": (
        "Finish a procedure run now, whichever step it is on (a run that passed its last step is already "
        "finished). Returns {run_id, status: \"completed\", step_id: null, step_content: null, "
        "validation_error: null}. An unknown run is a tool error."
    ),
}


def build_server(tools: CabalTools) -> Any:
    """An MCPServer exposing ``tools``; every parameter carries its own description."""
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    server = MCPServer(name=SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")

    def membrane_list() -> dict[str, Any]:
        return tools.membrane_list()

    def membrane_start(
        protocol: Annotated[str, Field(description="protocol name, from membrane_list")],
        context: Annotated[
            dict[str, Any] | None, Field(description="values the protocol refers to, e.g. {\"space_id\": \"mod-x\"}")
        ] = None,
    ) -> dict[str, Any]:
        return tools.membrane_start(protocol, context)

    def membrane_continue(
        session_id: Annotated[str, Field(description="session_id from membrane_start")],
        answer: Annotated[Any, Field(description="the answer to the current step, shaped as step.answer_schema says")],
    ) -> dict[str, Any]:
        return tools.membrane_continue(session_id, answer)

    def membrane_abort(session_id: Annotated[str, Field(description="the session to abandon")]) -> dict[str, Any]:
        return tools.membrane_abort(session_id)

    def procedure_start(
        procedure: Annotated[str, Field(description="procedure name (e.g. write_adr) or installed template id")],
        actor_id: Annotated[str | None, Field(description="an existing actor; default: this server's actor")] = None,
        run_id: Annotated[str | None, Field(description="optional id for the run; a retry with it returns the same run")] = None,
    ) -> dict[str, Any]:
        return tools.procedure_start(procedure, actor_id, run_id)

    def procedure_record(
        run_id: Annotated[str, Field(description="run_id from procedure_start")],
        nodes: Annotated[list[dict[str, Any]], Field(description="new nodes: {id, node_type, type, name, ...}")],
        links: Annotated[
            list[dict[str, Any]] | None, Field(description="links: {type, from, to}; ends are node ids")
        ] = None,
        actor_id: Annotated[str | None, Field(description="who did the work; default: this server's actor")] = None,
    ) -> dict[str, Any]:
        return tools.procedure_record(run_id, nodes, links, actor_id)

    def procedure_continue(
        run_id: Annotated[str, Field(description="run_id from procedure_start")],
        from_step: Annotated[str | None, Field(description="the step id you believe is current (makes retries safe)")] = None,
    ) -> dict[str, Any]:
        return tools.procedure_continue(run_id, from_step)

    def procedure_end(run_id: Annotated[str, Field(description="run_id from procedure_start")]) -> dict[str, Any]:
        return tools.procedure_end(run_id)

    def library_list() -> dict[str, Any]:
        return tools.library_list()

    def library_search(words: Annotated[str, Field(description="the words to look for")]) -> dict[str, Any]:
        return tools.library_search(words)

    def memory_list() -> dict[str, Any]:
        return tools.memory_list()

    read_only = ToolAnnotations(read_only_hint=True)
    reading = (membrane_list, library_list, library_search, memory_list)
    for function in (membrane_list, membrane_start, membrane_continue, membrane_abort,
                     procedure_start, procedure_record, procedure_continue, procedure_end,
                     *(reading[1:] if tools.workspace is not None else ())):  # fmt: skip
        annotations = read_only if function in reading else None
        server.add_tool(function, name=function.__name__, description=DESCRIPTIONS[function.__name__],
                        annotations=annotations)  # fmt: skip
    return server


# ------------------------------------------------------------------------------- transport


async def serve_stdio(server: Any) -> None:
    """Serve ``server`` (an ``MCPServer``) over stdin and stdout, answering every request.

    The SDK's stdio transport hands a line it cannot read to the server as an exception, which
    the server drops: the client would wait for its answer forever. Here each such line is
    answered with a JSON-RPC error (parse error, or invalid request) carrying the request's id
    when the line still shows it. ``MCPServer.run_stdio_async`` has no hook for this, so its
    low-level server is driven directly, as that method does.
    """
    from mcp.server.stdio import stdio_server

    lowlevel = server._lowlevel_server
    async with stdio_server() as (read_stream, write_stream):
        await lowlevel.run(_Answering(read_stream, write_stream), write_stream,
                           lowlevel.create_initialization_options())


class _Answering:
    """The transport's read stream, with every unreadable line answered instead of passed on."""

    def __init__(self, inner: Any, replies: Any) -> None:
        self._inner = inner
        self._replies = replies

    @property
    def last_context(self) -> Any:  # the sender's context, which the SDK's dispatcher reads
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            await self._replies.send(unreadable_reply(item))

    def __aiter__(self) -> _Answering:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Answering:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()


_TOP_LEVEL_ID = re.compile(r'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')


def unreadable_reply(error: Exception) -> Any:
    """The JSON-RPC error that answers a line the transport could not read (``error`` says why)."""
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    details = error.errors() if isinstance(error, ValidationError) else []
    unparsed = next((d["input"] for d in details if d["type"] == "json_invalid" and isinstance(d["input"], str)), None)
    if unparsed is not None:
        code, request_id = types.PARSE_ERROR, _id_in_text(unparsed)
        why = details[0]["msg"]
    else:
        code = types.INVALID_REQUEST
        request_id = next((d["input"].get("id") for d in details if isinstance(d.get("input"), Mapping)), None)
        why = "not a JSON-RPC message this server knows"
    if not isinstance(request_id, (int, str)) or isinstance(request_id, bool):
        request_id = None
    message = f"cabal mcp cannot read this request ({why}); nothing was done"
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id,
                                             error=types.ErrorData(code=code, message=message)))


def _id_in_text(line: str) -> int | str | None:
    """The id of a request the SDK could not parse: Python's parser takes lone surrogates and
    deeper nesting; a line deeper still is searched for an id before its first nested value."""
    try:
        parsed = json.loads(line)
        return parsed.get("id") if isinstance(parsed, dict) else None
    except (ValueError, RecursionError):
        opening = line.find("{")
        nested = re.search(r"[{\[]", line[opening + 1:]) if opening >= 0 else None
        head = line[: opening + 1 + nested.start()] if nested else line
        found = _TOP_LEVEL_ID.search(head)
        return json.loads(found.group(1)) if found else None
