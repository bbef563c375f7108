"""A local stand-in for OpenAI's Chat Completions API, for testing the real ``openai`` client
(through ``langchain-openai``) against it.

Point ``OPENAI_BASE_URL`` (or a mission's ``model: {base_url: ...}``) at ``server.base_url``
(``http://127.0.0.1:PORT/v1``). The server answers ``POST /v1/chat/completions``; everything
the client sent is in ``server.requests``. It is ``FakeAnthropic``'s server (queue, responder,
hangs, dropped connections) speaking another API:

- a queued reply first (``reply_tool_call``, ``reply_bad_arguments``, ``reply_error``,
  ``reply_rate_limited``, ...), then the responder (``respond_with``; ``openai_script_responder``
  plays a whole mission from a model script), else a 500 saying nothing is left;
- ``refuse_tools = True`` answers every request that offers tools with the 400 a server whose
  model cannot call tools sends (Ollama's ``/v1``: "... does not support tools");
- usage follows OpenAI's automatic prompt cache: a request whose leading 1,024+ tokens repeat
  an earlier request's reports them as ``prompt_tokens_details.cached_tokens`` (128-token steps).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from .fake_anthropic import CannedResponse, Disconnect, FakeAnthropic, Hang, RecordedRequest, aim, serving
from cabal.llm.json_answers import as_text

from .script_responder import prompt_text, scripted_answers

CHARS_PER_TOKEN = 4
MIN_CACHED_TOKENS = 1024  # OpenAI caches prompts of 1,024 tokens and more
CACHE_STEP_TOKENS = 128  # ... in steps of 128 tokens
NO_TOOLS = "registry.ollama.ai/library/{model} does not support tools"


def error_body(message: str, error_type: str = "invalid_request_error", code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": None, "code": code}}


def completion(message: Mapping[str, Any], *, finish_reason: str = "stop",
               usage: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A ``chat.completion`` body; id, model and usage are filled in by the server."""
    return {"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", **message},
                                                       "finish_reason": finish_reason, "logprobs": None}],
            "usage": dict(usage) if usage else None}


def tool_call_completion(calls: list[tuple[str, Any]], *, call_ids: list[str] | None = None) -> dict[str, Any]:
    """One answer calling each ``(name, arguments)``: a dict is sent as JSON, a str as it is."""
    ids = call_ids or [f"call_{n:02d}" for n in range(1, len(calls) + 1)]
    tool_calls = [{"id": ids[n], "type": "function",
                   "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
                  for n, (name, args) in enumerate(calls)]
    return completion({"content": None, "tool_calls": tool_calls}, finish_reason="tool_calls")


class FakeOpenAI(FakeAnthropic):
    """The server (see the module's docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse_tools = False
        self._prefixes: set[str] = set()
        self._completions = 0

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    # ------------------------------------------------------------------ queueing answers

    def reply_tool_call(self, name: str, args: Mapping[str, Any] | str) -> None:
        self.reply(200, tool_call_completion([(name, args)]))

    def reply_bad_arguments(self, name: str, arguments: str = '{"versions": [{"productId": "p1",') -> None:
        """A tool call whose arguments are not valid JSON (a model cut short, or a weak one)."""
        self.reply(200, tool_call_completion([(name, arguments)]))

    def reply_text(self, text: str, *, stop_reason: str = "stop") -> None:
        self.reply(200, completion({"content": text}, finish_reason=stop_reason))

    def reply_error(self, status: int, message: str, error_type: str = "invalid_request_error", *,  # type: ignore[override]
                    retry_after: float | None = None, code: str | None = None) -> None:
        headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
        self.reply(status, error_body(message, error_type, code), headers)

    def reply_rate_limited(self, *, retry_after: float | None = None) -> None:  # type: ignore[override]
        self.reply_error(429, "Rate limit reached for requests", "requests", retry_after=retry_after,
                         code="rate_limit_exceeded")

    def reply_server_error(self, status: int = 500, *, retry_after: float | None = None) -> None:  # type: ignore[override]
        self.reply_error(status, "The server had an error while processing your request.", "server_error",
                         retry_after=retry_after)

    def reply_bad_key(self) -> None:
        self.reply_error(401, "Incorrect API key provided.", "invalid_request_error", code="invalid_api_key")

    # ------------------------------------------------------------------ answering

    def _next_reply(self, request: RecordedRequest) -> CannedResponse | Hang | Disconnect:
        if request.method != "POST" or request.path != "/v1/chat/completions":
            return CannedResponse(404, error_body(f"Unknown request URL: {request.method} {request.path}"))
        body = request.body
        if "_unparsed" in body:
            return CannedResponse(400, error_body("We could not parse the JSON body of your request."))
        if body.get("stream"):
            return CannedResponse(400, error_body("fake server: streaming is not supported"))
        if self.refuse_tools and body.get("tools"):
            return CannedResponse(400, error_body(NO_TOOLS.format(model=body.get("model")), "api_error"))
        with self._lock:
            if self._replies:
                return self._replies.popleft()
            responder = self._responder
        if responder is None:
            return CannedResponse(500, error_body("fake server: no canned response left", "server_error"))
        answer = responder(body)
        return answer if isinstance(answer, (CannedResponse, Hang, Disconnect)) else CannedResponse(200, answer)

    def _finish(self, response: CannedResponse, request: RecordedRequest, index: int) -> CannedResponse:
        body = response.body
        if response.status != 200 or not isinstance(body, dict) or body.get("object") != "chat.completion":
            return response
        body = json.loads(json.dumps(body))
        prompt = prompt_tokens(request.body)
        with self._lock:
            cached = self._cached_tokens(request.body)
            self._completions += 1
            number = self._completions
        body.update(id=f"chatcmpl-fake{number:04d}", created=int(time.time()), model=request.body.get("model"))
        if body.get("usage") is None:
            output = max(1, math.ceil(len(json.dumps(body["choices"][0]["message"])) / CHARS_PER_TOKEN))
            body["usage"] = {"prompt_tokens": prompt, "completion_tokens": output, "total_tokens": prompt + output,
                             "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
                             "completion_tokens_details": {"reasoning_tokens": 0}}
        return CannedResponse(response.status, body, response.headers)

    def _cached_tokens(self, body: Mapping[str, Any]) -> int:
        """Tokens of the longest earlier-seen prefix (tools, then messages), in cache steps."""
        text = json.dumps([body.get("tools") or [], body.get("messages") or []], sort_keys=True)
        step = CACHE_STEP_TOKENS * CHARS_PER_TOKEN
        cached = 0
        digest = hashlib.sha256()
        for end in range(step, len(text) + 1, step):
            digest.update(text[end - step:end].encode())
            key = digest.copy().hexdigest()
            if key in self._prefixes and end // CHARS_PER_TOKEN >= MIN_CACHED_TOKENS:
                cached = end // CHARS_PER_TOKEN
            self._prefixes.add(key)
        return cached


def prompt_tokens(body: Mapping[str, Any]) -> int:
    return max(1, math.ceil(len(json.dumps([body.get("tools") or [], body.get("messages") or []])) / CHARS_PER_TOKEN))


def openai_script_responder(script: Path) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``fn(request_body) -> completion``: the script's answer for the request's key, as a tool
    call; as the answer's JSON in plain text when the request offers no tools (as a model asked
    for json answers writes it: ``{"tool": NAME, "args": {...}}``)."""
    answer = scripted_answers(script)

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        system, user, tools = openai_prompts(body)
        name, args, number = answer(system, user, tools)
        if not tools:
            return completion({"content": as_text(name, args)})
        return tool_call_completion([(name, args)], call_ids=[f"call_script_{number:05d}"])

    return respond


def openai_prompts(body: Mapping[str, Any]) -> tuple[str, str, list[dict[str, Any]]]:
    """A request's system text, first user message and tools (name, description, parameters)."""
    messages = body.get("messages") or []
    system = "\n".join(prompt_text(m.get("content")) for m in messages if m.get("role") in ("system", "developer"))
    user = next(prompt_text(m.get("content")) for m in messages if m.get("role") == "user")
    return system, user, [t.get("function", t) for t in body.get("tools") or []]


# Variables that would send a call anywhere but the fake server.
_ELSEWHERE = ("OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2")


@contextmanager
def fake_openai_api(monkeypatch: pytest.MonkeyPatch, api_key: str) -> Iterator[FakeOpenAI]:
    """A fake Chat Completions server with OPENAI_* aimed at it, stopped at the end."""
    variables = {"OPENAI_API_KEY": api_key}
    with serving(FakeOpenAI(), lambda server: aim(monkeypatch, {**variables, "OPENAI_BASE_URL": server.base_url},
                                                  _ELSEWHERE)) as server:
        yield server

TEST_KEY = "sk-proj-test-4f1c9a7e2b6d8035"  # what the tests send: it must reach the server and nothing else


@pytest.fixture
def openai_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """A fake Chat Completions server, OPENAI_* aimed at it with ``TEST_KEY``."""
    with fake_openai_api(monkeypatch, TEST_KEY) as server:
        yield server
