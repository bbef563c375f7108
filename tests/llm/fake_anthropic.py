"""A local stand-in for the Anthropic Messages API, for testing real client code against it.

Point ``ANTHROPIC_BASE_URL`` at ``server.url`` (it listens on 127.0.0.1 only). The server
answers ``POST /v1/messages``; everything the client sent is in ``server.requests``.

Where an answer comes from, for each request in turn:

1. A request the API itself would refuse (more than 4 cache breakpoints, TTLs out of order,
   a tool_use not answered by a tool_result in the next message, ``stream: true`` (not
   implemented), a body that is not JSON) gets its 400 at once and consumes nothing.
2. Otherwise the oldest queued reply, if any: ``reply_tool_use``, ``reply_error``,
   ``hang``, ``close_connection``, ... (one helper per kind of answer or failure, below).
3. Otherwise the responder set with ``respond_with(fn)``: ``fn(request_body)`` returns a
   Message body (a dict), a ``CannedResponse``, a ``Hang`` or a ``Disconnect``. Queued
   replies go first, so a test can inject a failure in the middle of a responder's mission.
4. Otherwise a 500 with ``x-should-retry: false``, saying nothing is left.

Every request that is answered with a Message also goes through the prompt-cache model
(``prompt_cache.py``): ``server.cache_log`` holds how each one's prompt was paid for, and
``server.cache_totals()`` sums them (share of prompt tokens read from cache, ...). A Message
body whose ``usage`` fields are missing or None gets them from that model; the builders below
leave them None unless told otherwise. ``tool_use_message`` keeps its fixed defaults
(10 input, 5 output tokens) for the tests written before the cache model existed.
"""

from __future__ import annotations

import json
import math
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import pytest

from .prompt_cache import CacheRuleError, CacheUsage, PromptCache, canonical_json, request_parts

DEFAULT_MODEL = "claude-sonnet-4-5"


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: dict[str, Any]

    @property
    def api_key(self) -> str | None:
        """The key the client sent (SDK 2.x sends it as a bearer token, 0.x as x-api-key)."""
        bearer = self.headers.get("authorization", "")
        return bearer.removeprefix("Bearer ") if bearer.startswith("Bearer ") else self.headers.get("x-api-key")


@dataclass(frozen=True)
class CannedResponse:
    """One HTTP answer. ``body``: JSON (a dict or list) or raw ``bytes``/``str`` sent as is."""

    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Hang:
    """Hold the request ``seconds`` (None: until ``release()`` or ``stop()``), so client timeouts fire.

    Then send ``then`` if given (a client that gave up no longer reads it), else close the
    connection without an answer.
    """

    seconds: float | None = None
    then: CannedResponse | None = None


@dataclass(frozen=True)
class Disconnect:
    """Close the connection: before any byte of the answer, or halfway through the body of
    ``response`` (its status line, headers and a full ``content-length`` go out first)."""

    when: Literal["before_response", "mid_body"] = "before_response"
    response: CannedResponse | None = None


Reply = CannedResponse | Hang | Disconnect
Responder = Callable[[dict[str, Any]], "Reply | dict[str, Any]"]


@dataclass(frozen=True)
class CacheRecord:
    """How the prompt of ``server.requests[request_index]`` was paid for."""

    request_index: int
    model: str
    usage: CacheUsage


# ----------------------------------------------------------------------------- bodies


def error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}


def message_body(
    content: Sequence[Mapping[str, Any]],
    *,
    stop_reason: str | None = "end_turn",
    model: str | None = None,
    usage: Mapping[str, Any] | None = None,
    message_id: str | None = None,
) -> dict[str, Any]:
    """A Messages API response body. ``model``, ``id`` and the usage fields left None are
    filled in by the server (the request's model, a fresh id, the prompt-cache model's counts)."""
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [dict(block) for block in content],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": None,
            "output_tokens": None,
            "cache_read_input_tokens": None,
            "cache_creation_input_tokens": None,
            **(usage or {}),
        },
    }


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_use_block(name: str, tool_input: Mapping[str, Any], *, tool_id: str = "toolu_01A") -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": dict(tool_input)}


def thinking_block(thinking: str, *, signature: str = "c2lnbmF0dXJl") -> dict[str, Any]:
    return {"type": "thinking", "thinking": thinking, "signature": signature}


def redacted_thinking_block(data: str = "ZW5jcnlwdGVk") -> dict[str, Any]:
    return {"type": "redacted_thinking", "data": data}


def server_tool_use_block(query: str, *, tool_id: str = "srvtoolu_01A") -> dict[str, Any]:
    return {"type": "server_tool_use", "id": tool_id, "name": "web_search", "input": {"query": query}}


def web_search_result_block(tool_use_id: str = "srvtoolu_01A") -> dict[str, Any]:
    return {"type": "web_search_tool_result", "tool_use_id": tool_use_id, "content": [
        {"type": "web_search_result", "url": "https://example.invalid/", "title": "A result",
         "encrypted_content": "ZW5j", "page_age": None}]}


def tool_use_message(
    name: str,
    tool_input: dict[str, Any],
    *,
    tool_id: str = "toolu_01A",
    model: str = DEFAULT_MODEL,
    text: str | None = None,
    input_tokens: int | None = 10,
    output_tokens: int | None = 5,
    cache_read_input_tokens: int | None = 0,
    cache_creation_input_tokens: int | None = 0,
) -> dict[str, Any]:
    """A Messages API response body whose answer is one tool call (usage as given; None: counted)."""
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append(text_block(text))
    content.append(tool_use_block(name, tool_input, tool_id=tool_id))
    body = message_body(content, stop_reason="tool_use", model=model, usage={
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_read_input_tokens": cache_read_input_tokens,
        "cache_creation_input_tokens": cache_creation_input_tokens,
    })
    body["id"] = "msg_01FAKE"
    return body


def failure_headers(retry_after: float | None = None, should_retry: bool | None = None) -> dict[str, str]:
    """``retry-after`` (seconds; the SDK accepts fractions) and ``x-should-retry`` headers."""
    headers = {}
    if retry_after is not None:
        headers["retry-after"] = f"{retry_after:g}"
    if should_retry is not None:
        headers["x-should-retry"] = "true" if should_retry else "false"
    return headers


# ----------------------------------------------------------------------------- the server


class FakeAnthropic:
    """The server. ``clock`` drives cache expiry (inject one to test TTLs without waiting);
    ``cache_minimum_tokens`` overrides the per-model minimum cacheable prefix."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        cache_minimum_tokens: int | Callable[[str], int] | None = None,
    ) -> None:
        self.requests: list[RecordedRequest] = []
        self.cache = PromptCache(clock=clock, minimum_tokens=cache_minimum_tokens)
        self.cache_log: list[CacheRecord] = []
        self._replies: deque[Reply] = deque()
        self._responder: Responder | None = None
        self._hanging: list[threading.Event] = []
        self._hang_changed = threading.Condition()
        self._lock = threading.Lock()
        self._message_ids = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-anthropic", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeAnthropic:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ queueing answers

    def reply(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        self.enqueue(CannedResponse(status, body, dict(headers or {})))

    def enqueue(self, reply: Reply) -> None:
        with self._lock:
            self._replies.append(reply)

    @property
    def pending_replies(self) -> int:
        with self._lock:
            return len(self._replies)

    def reply_tool_use(self, name: str, tool_input: dict[str, Any], **options: Any) -> None:
        self.reply(200, tool_use_message(name, tool_input, **options))

    def reply_tool_uses(self, calls: Sequence[tuple[str, Mapping[str, Any]]], *, text: str | None = None) -> None:
        """One answer with several tool_use blocks (ids toolu_01, toolu_02, ...)."""
        blocks = [text_block(text)] if text is not None else []
        blocks += [tool_use_block(name, args, tool_id=f"toolu_{n:02d}") for n, (name, args) in enumerate(calls, 1)]
        self.reply(200, message_body(blocks, stop_reason="tool_use"))

    def reply_unknown_tool(self, name: str = "no_such_tool", tool_input: Mapping[str, Any] | None = None) -> None:
        """A tool call to a tool the request did not offer."""
        self.reply(200, message_body([tool_use_block(name, tool_input or {})], stop_reason="tool_use"))

    def reply_text(self, text: str, *, stop_reason: str = "end_turn") -> None:
        """A text-only answer: no tool call at all."""
        self.reply(200, message_body([text_block(text)], stop_reason=stop_reason))

    def reply_max_tokens(self, name: str, partial_input: Mapping[str, Any], *, text: str | None = None) -> None:
        """``stop_reason: max_tokens`` with the tool call cut short (``partial_input``: what got out)."""
        blocks = [text_block(text)] if text is not None else []
        blocks.append(tool_use_block(name, partial_input))
        self.reply(200, message_body(blocks, stop_reason="max_tokens"))

    def reply_content(self, blocks: Sequence[Mapping[str, Any]], *, stop_reason: str = "tool_use") -> None:
        """Any content blocks, e.g. ``thinking_block`` or ``server_tool_use_block`` beside a tool call."""
        self.reply(200, message_body(blocks, stop_reason=stop_reason))

    def reply_error(
        self,
        status: int,
        error_type: str,
        message: str,
        headers: dict[str, str] | None = None,
        *,
        retry_after: float | None = None,
        should_retry: bool | None = None,
    ) -> None:
        self.reply(status, error_body(error_type, message), {**failure_headers(retry_after, should_retry), **(headers or {})})

    def reply_rate_limited(self, *, retry_after: float | None = None, should_retry: bool | None = None) -> None:
        self.reply_error(429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit",
                         retry_after=retry_after, should_retry=should_retry)

    def reply_overloaded(self, *, retry_after: float | None = None, should_retry: bool | None = None) -> None:
        self.reply_error(529, "overloaded_error", "Overloaded", retry_after=retry_after, should_retry=should_retry)

    def reply_server_error(
        self, status: int = 500, *, retry_after: float | None = None, should_retry: bool | None = None
    ) -> None:
        """500 ``api_error``, or another 5xx (503: what a proxy in front of the API sends)."""
        message = "Service unavailable" if status == 503 else "Internal server error"
        self.reply_error(status, "api_error", message, retry_after=retry_after, should_retry=should_retry)

    def reply_not_json(self, text: str = "<html><body>502 Bad Gateway</body></html>", status: int = 200) -> None:
        """A body that is not JSON, though labelled ``application/json``."""
        self.reply(status, text)

    def reply_not_a_message(self, body: Any = None) -> None:
        """A 200 with JSON that is not a Message (default ``{"ok": true}``)."""
        self.reply(200, {"ok": True} if body is None else body)

    def hang(self, seconds: float | None = None, *, then: CannedResponse | None = None) -> None:
        self.enqueue(Hang(seconds, then))

    def close_connection(self, when: Literal["before_response", "mid_body"] = "before_response") -> None:
        response = None
        if when == "mid_body":
            response = CannedResponse(200, tool_use_message("final_output", {"cut": "x" * 200}))
        self.enqueue(Disconnect(when, response))

    # ------------------------------------------------------------------ hangs

    def release(self) -> None:
        """Let every request held by a ``hang`` go."""
        with self._hang_changed:
            for event in self._hanging:
                event.set()
            self._hanging.clear()
            self._hang_changed.notify_all()

    @property
    def hanging(self) -> int:
        with self._hang_changed:
            return len(self._hanging)

    def wait_until_hanging(self, count: int = 1, timeout: float = 5.0) -> bool:
        """Block until ``count`` requests are held (True), or ``timeout`` passes (False)."""
        with self._hang_changed:
            return self._hang_changed.wait_for(lambda: len(self._hanging) >= count, timeout)

    def _hold(self, hang: Hang) -> None:
        event = threading.Event()
        with self._hang_changed:
            self._hanging.append(event)
            self._hang_changed.notify_all()
        event.wait(hang.seconds)
        with self._hang_changed:
            if event in self._hanging:
                self._hanging.remove(event)
            self._hang_changed.notify_all()

    # ------------------------------------------------------------------ responder and cache

    def respond_with(self, responder: Responder | None) -> None:
        """Answer with ``responder(request_body)`` whenever the queue is empty (None: stop)."""
        with self._lock:
            self._responder = responder

    def cache_totals(self) -> dict[str, float]:
        """Sums over ``cache_log``: requests, prompt/read/written/uncached tokens, read share."""
        with self._lock:
            records = list(self.cache_log)
        read = sum(r.usage.cache_read_input_tokens for r in records)
        written = sum(r.usage.cache_creation_input_tokens for r in records)
        uncached = sum(r.usage.input_tokens for r in records)
        prompt = read + written + uncached
        return {"requests": len(records), "prompt_tokens": prompt, "cache_read_tokens": read,
                "cache_creation_tokens": written, "input_tokens": uncached,
                "read_share": read / prompt if prompt else 0.0}

    # ------------------------------------------------------------------ answering

    def _record(self, request: RecordedRequest) -> int:
        with self._lock:
            self.requests.append(request)
            return len(self.requests) - 1

    def _next_reply(self, request: RecordedRequest) -> Reply:
        """What to answer (the queue, then the responder), after the API's own checks."""
        if request.method != "POST" or request.path != "/v1/messages":
            return CannedResponse(404, error_body("not_found_error", f"no route {request.method} {request.path}"))
        body = request.body
        if "_unparsed" in body:
            return CannedResponse(400, error_body("invalid_request_error", "The request body is not valid JSON"))
        if body.get("stream"):
            return CannedResponse(400, error_body("invalid_request_error", "fake server: streaming is not supported"))
        try:
            request_parts(body)
        except CacheRuleError as error:
            return CannedResponse(400, error_body("invalid_request_error", str(error)))
        unanswered = unanswered_tool_use(body)
        if unanswered:
            return CannedResponse(400, error_body("invalid_request_error", unanswered))
        with self._lock:
            if self._replies:
                return self._replies.popleft()
            responder = self._responder
        if responder is None:
            return CannedResponse(
                500, error_body("api_error", "fake server: no canned response left"), {"x-should-retry": "false"}
            )
        answer = responder(body)
        if isinstance(answer, (CannedResponse, Hang, Disconnect)):
            return answer
        return CannedResponse(200, answer)

    def _finish(self, response: CannedResponse, request: RecordedRequest, index: int) -> CannedResponse:
        """``response`` with the server's parts filled in; Messages go through the cache model."""
        body = response.body
        if response.status != 200 or not _is_message(body):
            return response
        model = str(request.body.get("model", ""))
        body = json.loads(json.dumps(body))  # a copy: queued bodies may be shared
        with self._lock:  # cache_log in the order the cache saw the requests
            usage = self.cache.account(request.body)  # its rules were checked before the answer was chosen
            self.cache_log.append(CacheRecord(index, model, usage))
            self._message_ids += 1
            message_number = self._message_ids
        body["id"] = body.get("id") or f"msg_fake_{message_number:04d}"
        body["model"] = body.get("model") or model
        counted = body.setdefault("usage", {})
        for key, value in usage.as_usage().items():
            if counted.get(key) is None:
                counted[key] = value
        if counted.get("output_tokens") is None:
            counted["output_tokens"] = max(1, math.ceil(len(canonical_json(body.get("content") or [])) / 4))
        return CannedResponse(response.status, body, response.headers)


def unanswered_tool_use(body: Mapping[str, Any]) -> str | None:
    """The API's complaint when an assistant turn's tool_use blocks lack tool_result blocks
    in the very next message (every tool_use must be answered there), else None."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
    for index, message in enumerate(messages):
        content = message.get("content")
        if message.get("role") != "assistant" or not isinstance(content, list):
            continue
        asked = [b.get("id") for b in content if isinstance(b, Mapping) and b.get("type") == "tool_use"]
        if not asked:
            continue
        following = messages[index + 1].get("content") if index + 1 < len(messages) else None
        answered = {b.get("tool_use_id") for b in following or [] if isinstance(b, Mapping)
                    and b.get("type") == "tool_result"} if isinstance(following, list) else set()
        missing = [tool_id for tool_id in asked if tool_id not in answered]
        if missing and index + 1 < len(messages):
            return (f"messages.{index + 1}: `tool_use` ids were found without `tool_result` blocks immediately "
                    f"after: {', '.join(map(str, missing))}. Each `tool_use` block must have a corresponding "
                    "`tool_result` block in the next message.")
    return None


def _is_message(body: Any) -> bool:
    return isinstance(body, dict) and body.get("type") == "message" and isinstance(body.get("content"), list)


def _handler_for(fake: FakeAnthropic) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the SDK's connection pool expects

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            self._handle("POST")

        def do_GET(self) -> None:  # noqa: N802
            self._handle("GET")

        def _handle(self, method: str) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body = {"_unparsed": raw.decode("utf-8", "replace")}
            if not isinstance(body, dict):
                body = {"_unparsed": raw.decode("utf-8", "replace")}
            request = RecordedRequest(
                method=method,
                path=self.path.split("?", 1)[0],
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
            )
            index = fake._record(request)
            reply = fake._next_reply(request)
            if isinstance(reply, Hang):
                fake._hold(reply)
                if reply.then is None:
                    self._drop()
                    return
                reply = reply.then
            if isinstance(reply, Disconnect):
                if reply.when == "mid_body" and reply.response is not None:
                    self._send(reply.response, index, cut=True)
                self._drop()
                return
            self._send(fake._finish(reply, request, index), index)

        def _send(self, response: CannedResponse, index: int, *, cut: bool = False) -> None:
            body = response.body
            if isinstance(body, bytes):
                payload = body
            elif isinstance(body, str):
                payload = body.encode()
            else:
                payload = json.dumps(body).encode()
            try:
                self.send_response(response.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.send_header("request-id", f"req_fake_{index + 1}")
                for name, value in response.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload[: len(payload) // 2] if cut else payload)
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout)
                self.close_connection = True

        def _drop(self) -> None:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence stderr
            pass

    return Handler


# Variables that would send a call, or its trace, anywhere but the fake server.
_ELSEWHERE = ("ANTHROPIC_API_URL", "ANTHROPIC_AUTH_TOKEN", "LANGSMITH_GATEWAY", "LANGSMITH_TRACING",
              "LANGCHAIN_TRACING_V2")


def aim_environment(monkeypatch: pytest.MonkeyPatch, url: str, api_key: str) -> None:
    """ANTHROPIC_* aimed at the fake server at ``url``, nothing that could reach a real one."""
    aim(monkeypatch, {"ANTHROPIC_API_KEY": api_key, "ANTHROPIC_BASE_URL": url}, _ELSEWHERE)


def aim(monkeypatch: pytest.MonkeyPatch, variables: Mapping[str, str], elsewhere: Sequence[str]) -> None:
    """``variables`` set and every variable in ``elsewhere`` (another endpoint, a tracer) unset."""
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    for name in elsewhere:
        monkeypatch.delenv(name, raising=False)


@contextmanager
def serving(server: FakeAnthropic, aimed_at: Callable[[Any], None]) -> Iterator[Any]:
    """``server`` started with the environment aimed at it (``aimed_at(server)``), stopped at the end."""
    server.start()
    try:
        aimed_at(server)
        yield server
    finally:
        server.stop()


@contextmanager
def fake_api(monkeypatch: pytest.MonkeyPatch, api_key: str) -> Iterator[FakeAnthropic]:
    """A fake Messages API server with the environment aimed at it, stopped at the end."""
    with serving(FakeAnthropic(), lambda server: aim_environment(monkeypatch, server.url, api_key)) as server:
        yield server


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    server = FakeAnthropic().start()
    try:
        yield server
    finally:
        server.stop()
