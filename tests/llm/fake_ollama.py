"""A local stand-in for Ollama's native chat API, for testing the real ``ollama`` client (through
``langchain-ollama``) against it.

Point ``OLLAMA_HOST`` (or a mission's ``model: {base_url: ...}``) at ``server.url``. The server
answers ``POST /api/chat`` as Ollama does when the client streams (``langchain-ollama`` always
does): NDJSON lines, the message (with any tool calls) first, then a ``done`` line with the
token counts (``prompt_eval_count``, ``eval_count``). Errors are ``{"error": "..."}`` with
their status. The queue, responder, hangs and dropped connections are ``FakeAnthropic``'s;
``refuse_tools = True`` answers a request that offers tools with Ollama's 400
"registry.ollama.ai/library/MODEL does not support tools".
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from cabal.llm.json_answers import as_text

from .fake_anthropic import CannedResponse, Disconnect, FakeAnthropic, Hang, RecordedRequest, aim, serving
from .fake_openai import CHARS_PER_TOKEN, NO_TOOLS
from .script_responder import prompt_text, scripted_answers

CREATED_AT = "2026-01-01T00:00:00.000000Z"


def chat_lines(message: Mapping[str, Any], *, done_reason: str = "stop") -> list[dict[str, Any]]:
    """The stream of one answer: the message, then the closing line (counts filled in by the server)."""
    return [{"created_at": CREATED_AT, "message": {"role": "assistant", "content": "", **message}, "done": False},
            {"created_at": CREATED_AT, "message": {"role": "assistant", "content": ""}, "done": True,
             "done_reason": done_reason, "total_duration": 1000, "load_duration": 10, "prompt_eval_count": None,
             "prompt_eval_duration": 100, "eval_count": None, "eval_duration": 100}]


def tool_call_lines(name: str, args: Mapping[str, Any]) -> list[dict[str, Any]]:
    return chat_lines({"tool_calls": [{"function": {"name": name, "arguments": dict(args)}}]})


class FakeOllama(FakeAnthropic):
    """The server (see the module's docstring). A reply's body is the list of its stream's lines."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse_tools = False

    def reply_tool_call(self, name: str, args: Mapping[str, Any]) -> None:
        self.reply(200, tool_call_lines(name, args))

    def reply_text(self, text: str, *, stop_reason: str = "stop") -> None:
        self.reply(200, chat_lines({"content": text}, done_reason=stop_reason))

    def reply_error(self, status: int, message: str, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        self.reply(status, {"error": message})

    def _next_reply(self, request: RecordedRequest) -> CannedResponse | Hang | Disconnect:
        if (request.method, request.path) == ("GET", "/api/version"):  # what `cabal models` asks a server
            return CannedResponse(200, {"version": "0.9.0"})
        if request.method != "POST" or request.path != "/api/chat":
            return CannedResponse(404, {"error": "404 page not found"})
        body = request.body
        if "_unparsed" in body:
            return CannedResponse(400, {"error": "invalid character in request body"})
        if self.refuse_tools and body.get("tools"):
            return CannedResponse(400, {"error": NO_TOOLS.format(model=body.get("model"))})
        with self._lock:
            if self._replies:
                return self._replies.popleft()
            responder = self._responder
        if responder is None:
            return CannedResponse(500, {"error": "fake server: no canned response left"})
        answer = responder(body)
        return answer if isinstance(answer, (CannedResponse, Hang, Disconnect)) else CannedResponse(200, answer)

    def _finish(self, response: CannedResponse, request: RecordedRequest, index: int) -> CannedResponse:
        lines = response.body
        if response.status != 200 or not isinstance(lines, list):
            return response
        lines = json.loads(json.dumps(lines))
        prompt = max(1, math.ceil(len(json.dumps(request.body.get("messages") or [])) / CHARS_PER_TOKEN))
        answer = max(1, math.ceil(len(json.dumps(lines[0].get("message"))) / CHARS_PER_TOKEN))
        for line in lines:
            line["model"] = request.body.get("model")
            if line.get("done"):
                line["prompt_eval_count"] = line.get("prompt_eval_count") or prompt
                line["eval_count"] = line.get("eval_count") or answer
        if not request.body.get("stream", True):
            return CannedResponse(200, {**lines[0], **lines[-1], "message": lines[0]["message"]})
        payload = "".join(json.dumps(line) + "\n" for line in lines).encode()
        return CannedResponse(200, payload, {**response.headers, "x-content": "ndjson"})


def ollama_script_responder(script: Path) -> Callable[[dict[str, Any]], list[dict[str, Any]]]:
    """``fn(request_body) -> stream lines``: the script's answer for the request's key, as a
    tool call; as the answer's JSON in plain text when the request offers no tools (as a model
    asked for json answers writes it: ``{"tool": NAME, "args": {...}}``)."""
    answer = scripted_answers(script)

    def respond(body: dict[str, Any]) -> list[dict[str, Any]]:
        messages = body.get("messages") or []
        system = "\n".join(prompt_text(m.get("content")) for m in messages if m.get("role") == "system")
        user = next(prompt_text(m.get("content")) for m in messages if m.get("role") == "user")
        tools = [t.get("function", t) for t in body.get("tools") or []]
        name, args, _ = answer(system, user, tools)
        return tool_call_lines(name, args) if tools else chat_lines({"content": as_text(name, args)})

    return respond


@contextmanager
def fake_ollama_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOllama]:
    """A fake Ollama server with OLLAMA_HOST aimed at it, stopped at the end."""
    with serving(FakeOllama(), lambda server: aim(monkeypatch, {"OLLAMA_HOST": server.url}, ())) as server:
        yield server

@pytest.fixture
def ollama_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOllama]:
    """A fake Ollama server, OLLAMA_HOST aimed at it."""
    with fake_ollama_api(monkeypatch) as server:
        yield server
