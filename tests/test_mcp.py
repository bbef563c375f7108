"""``cabal mcp`` over stdio, driven by the official MCP SDK client (stdio_client + ClientSession)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import mcp_types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

REPO = Path(__file__).resolve().parents[1]
TOOLS = {
    "membrane_list", "membrane_start", "membrane_continue", "membrane_abort",
    "procedure_start", "procedure_record", "procedure_continue", "procedure_end",
    "library_list", "library_search", "memory_list",
}  # fmt: skip


def said(answer):
    return {"answer": answer, "description": "I read the module first", "reasoning": "the rule guards this behavior"}


def serve(graph, graph_server, tmp_path, scenario, wire=None, home=None):
    """Start ``cabal mcp`` for the test graph and run ``scenario(session)`` against it (``wire``
    wraps the client's write stream; ``home``: another workspace on the same server)."""
    where = ["--home", str(home), "--url", f"unix://{graph_server.socket_path}"] if home else [
        "--home", str(graph_server.home)]
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "cabal.cli", "mcp", "--graph", graph.name, *where],
        env={"CABAL_HOME": str(graph_server.home), "PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "")},
        cwd=str(REPO),
    )
    errors = tmp_path / "server-stderr.txt"

    async def main():
        with errors.open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, wire(write) if wire else write) as session:
                    await session.initialize()
                    with anyio.fail_after(30):
                        await scenario(session)

    try:
        anyio.run(main)
    except BaseException:
        print(errors.read_text(), file=sys.stderr)
        raise


def data(result):
    """A tool result as the dict the runtime returned: structured content, matching its JSON text."""
    assert not result.is_error, result.content
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


def error_text(result):
    assert result.is_error
    return result.content[0].text


@pytest.fixture
def seeded(graph):
    graph.create_cluster(
        [
            {"id": "mod-refunds", "node_type": "space", "type": "module", "name": "refunds"},
            {"id": "obj-refunds", "node_type": "narrative", "type": "objective", "name": "refund settled charges"},
            {"id": "beh-refund", "node_type": "narrative", "type": "behavior", "name": "refund request"},
        ],
        [
            {"type": "contains", "from": "mod-refunds", "to": "obj-refunds"},
            {"type": "contains", "from": "mod-refunds", "to": "beh-refund"},
        ],
    )
    return graph


def test_membrane_tools_list_run_a_protocol_and_recover_from_a_validation_error(seeded, graph_server, tmp_path):
    graph = seeded

    async def scenario(session):
        listed = await session.list_tools()
        tools = {tool.name: tool for tool in listed.tools}
        assert set(tools) == TOOLS
        for tool in tools.values():
            assert "Returns" in tool.description and len(tool.description) > 150, tool.name
        continue_schema = tools["membrane_continue"].input_schema
        assert continue_schema["required"] == ["session_id", "answer"]
        assert "answer_schema" in continue_schema["properties"]["answer"]["description"]
        assert "errors" in tools["membrane_continue"].description and "tool error" in tools["membrane_continue"].description

        protocols = data(await session.call_tool("membrane_list", {}))["protocols"]
        assert {"add_invariant", "add_objectives", "record_work"} <= {p["name"] for p in protocols}

        started = data(await session.call_tool("membrane_start", {"protocol": "add_invariant",
                                                                   "context": {"space_id": "mod-refunds"}}))  # fmt: skip
        sid = started["session_id"]
        assert (started["status"], started["step"]["id"]) == ("active", "guarded_behaviors")
        assert "beh-refund" in started["step"]["question"]  # the protocol queried the graph before asking
        assert started["step"]["answer_schema"]["required"] == ["answer", "description", "reasoning"]

        # a wrong answer: not a tool error; same step, every problem listed
        rejected = data(await session.call_tool("membrane_continue", {"session_id": sid, "answer": said(["obj-refunds"])}))
        assert (rejected["status"], rejected["step"]["id"]) == ("active", "guarded_behaviors")
        assert rejected["errors"] == [
            {"path": "guarded_behaviors.answer.0", "message": "node 'obj-refunds' has type='objective', expected type='behavior'"}
        ]
        # recover
        step = data(await session.call_tool("membrane_continue", {"session_id": sid, "answer": said(["beh-refund"])}))
        assert (step["status"], step["step"]["id"], "errors" in step) == ("active", "rule", False)
        assert [q["name"] for q in step["step"]["questions"]] == ["name", "statement", "check"]
        done = data(await session.call_tool("membrane_continue", {"session_id": sid, "answer": said({
            "name": "Refunds never exceed capture",
            "statement": "For every charge, the sum of confirmed refunds never exceeds the captured amount.",
            "check": "A property test over generated refund sequences.",
        })}))  # fmt: skip
        assert done["status"] == "complete" and done["created"] == {"nodes": 3, "links": 6}
        assert done["summary"] == "validation Refunds never exceed capture added to mod-refunds"

        # errors an answer cannot fix are tool errors with a one-line message
        assert "is complete, not active" in error_text(
            await session.call_tool("membrane_continue", {"session_id": sid, "answer": "again"})
        )
        assert "session not found: 'session-nope'" in error_text(
            await session.call_tool("membrane_continue", {"session_id": "session-nope", "answer": "x"})
        )
        assert "space mod-nowhere does not exist" in error_text(
            await session.call_tool("membrane_start", {"protocol": "add_invariant", "context": {"space_id": "mod-nowhere"}})
        )
        assert "protocol not found: 'no_such'" in error_text(await session.call_tool("membrane_start", {"protocol": "no_such"}))

        # abort: nothing the session prepared is written
        other = data(await session.call_tool("membrane_start", {"protocol": "record_work", "context": {"space_id": "mod-refunds"}}))
        aborted = data(await session.call_tool("membrane_abort", {"session_id": other["session_id"]}))
        assert aborted == {"status": "aborted", "session_id": other["session_id"]}

    serve(graph, graph_server, tmp_path, scenario)
    validation = "validation-mod-refunds-refunds-never-exceed-capture"
    assert graph.get(validation)["type"] == "validation"
    assert [link["to"] for link in graph.links_from(validation, "ensures")] == ["beh-refund"]
    assert graph.get("actor-mcp")["node_type"] == "actor"  # the server's actor speaks the moments
    moments = graph.related_to("actor-mcp", "expresses", "from")
    assert sorted(m["type"] for m in moments) == ["invariant", "selection"]


def test_procedure_tools_run_a_procedure_through_its_gate(graph, graph_server, tmp_path):
    async def scenario(session):
        started = data(await session.call_tool("procedure_start", {"procedure": "write_adr", "run_id": "run-adr-1"}))
        assert (started["run_id"], started["step_id"], started["status"]) == ("run-adr-1", "frame", "active")
        assert "Frame the decision" in started["step_content"]

        gated = data(await session.call_tool("procedure_continue", {"run_id": "run-adr-1", "from_step": "frame"}))
        assert (gated["status"], gated["step_id"]) == ("validation_failed", "frame")
        assert "question" in gated["validation_error"]

        recorded = data(await session.call_tool("procedure_record", {"run_id": "run-adr-1", "nodes": [
            {"id": "q-sessions", "node_type": "narrative", "type": "question", "name": "How do we store sessions?",
             "content": "Sessions live in memory and vanish on deploy; we need a store that survives restarts."}
        ]}))  # fmt: skip
        assert recorded["created"]["nodes"] == 2  # the question and the moment saying who wrote it

        moved = data(await session.call_tool("procedure_continue", {"run_id": "run-adr-1", "from_step": "frame"}))
        assert (moved["status"], moved["step_id"]) == ("active", "options")
        ended = data(await session.call_tool("procedure_end", {"run_id": "run-adr-1"}))
        assert ended["status"] == "completed"
        assert "not found" in error_text(await session.call_tool("procedure_continue", {"run_id": "run-nope"}))
        assert "not found: 'no_such'" in error_text(await session.call_tool("procedure_start", {"procedure": "no_such"}))

    serve(graph, graph_server, tmp_path, scenario)
    assert graph.get("run-adr-1")["status"] == "completed"
    assert [n["id"] for n in graph.contents_of("run-adr-1", "narrative")] == ["q-sessions"]


class _Line:
    """A message the transport writes exactly as given."""

    def __init__(self, text: str) -> None:
        self.text = text

    def model_dump_json(self, **_: object) -> str:
        return self.text


class RawArguments:
    """The client's write stream, with a marker in a request replaced by raw JSON text: what a
    client in another language may send and the Python SDK cannot even serialise (a lone
    surrogate escape, nesting beyond its serialiser's depth)."""

    def __init__(self, inner, raw: dict[str, str]) -> None:
        self.inner = inner
        self.raw = raw

    async def send(self, message) -> None:
        text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
        for marker, raw in self.raw.items():
            if json.dumps(marker) in text:
                message = SessionMessage(_Line(text.replace(json.dumps(marker), raw)))
        await self.inner.send(message)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.inner.__aexit__(*exc_info)


def nested(levels: int, bottom: object = "bottom") -> object:
    for _ in range(levels):
        bottom = {"d": bottom}
    return bottom


def test_every_request_gets_an_answer_however_hostile_its_arguments(seeded, graph, graph_server, tmp_path):
    raw = {"@deep@": json.dumps(nested(900)), "@surrogate@": '"refunds \\ud800 and more"'}
    before = graph.counts()

    async def scenario(session):
        # Lines the SDK cannot read: a JSON-RPC error for the request, not silence.
        for marker, why in (("@deep@", "recursion limit exceeded at line 1 column 1325"),
                            ("@surrogate@", "unexpected end of hex escape at line 1 column 158")):
            with pytest.raises(MCPError) as unreadable:
                await session.call_tool("membrane_start", {"protocol": "add_invariant", "context": {"space_id": marker}})
            assert unreadable.value.code == mcp_types.PARSE_ERROR
            assert unreadable.value.message == f"cabal mcp cannot read this request (Invalid JSON: {why}); nothing was done"

        # Arguments it reads but no answer may be: a tool error, or the membrane's errors.
        deep = await session.call_tool("membrane_start", {"protocol": "add_invariant", "context": nested(40)})
        assert error_text(deep) == ("Error executing tool membrane_start: context." + ".".join(["d"] * 31)
                                    + ": nested more than 32 levels deep")
        nul = await session.call_tool("procedure_record", {"run_id": "run-x", "nodes": [{"id": "a\x00b"}]})
        assert error_text(nul) == ("Error executing tool procedure_record: nodes.0.id: contains a NUL character at "
                                   "position 1; write plain text")
        started = data(await session.call_tool("membrane_start", {"protocol": "add_invariant",
                                                                   "context": {"space_id": "mod-refunds"}}))
        escaped = data(await session.call_tool("membrane_continue", {"session_id": started["session_id"],
                                                                      "answer": said(["beh-refund\x1b[2J"])}))
        assert (escaped["status"], escaped["step"]["id"]) == ("active", "guarded_behaviors")
        assert escaped["errors"] == [{"path": "guarded_behaviors.answer.0",
                                      "message": "contains an escape character (ESC) at position 10; write plain text"}]

        # And the server goes on answering.
        assert "add_invariant" in {p["name"] for p in data(await session.call_tool("membrane_list", {}))["protocols"]}

    serve(graph, graph_server, tmp_path, scenario, wire=lambda write: RawArguments(write, raw))
    assert graph.counts()["nodes"] == before["nodes"] + 2  # the server's actor and the one session started


def test_the_library_tools_read_the_servers_own_workspace_and_no_other(graph, graph_server, tmp_path):
    from cabal.rounds.library import keep_facts
    from cabal.rounds.workspace import Workspace

    kept = keep_facts(Workspace.at(graph_server.home), [("Quetzal rules: Priya signs off every plan", "typed", "")])
    seen = {}

    async def look(session):
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert listed["library_search"].annotations.read_only_hint is True
        seen["facts"] = data(await session.call_tool("memory_list", {}))["facts"]
        seen["found"] = data(await session.call_tool("library_search", {"words": "quetzal"}))
        seen["products"] = data(await session.call_tool("library_list", {}))["products"]

    serve(graph, graph_server, tmp_path, look)
    assert seen["found"] == {"products": [], "facts": [{"id": kept[0].id, "text": kept[0].text, "origin": "typed"}]}
    assert kept[0].id in [fact["id"] for fact in seen["facts"]]

    serve(graph, graph_server, tmp_path, look, home=tmp_path / "elsewhere" / ".cabal")
    assert (seen["facts"], seen["found"], seen["products"]) == ([], {"products": [], "facts": []}, [])
