"""A local stand-in for the Anthropic Messages API: canned replies, recorded requests.

Point ``ANTHROPIC_BASE_URL`` at ``server.url``; queue replies with ``reply_tool_use`` or
``reply_error``; read what the client sent from ``server.requests``.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


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
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def tool_use_message(
    name: str,
    tool_input: dict[str, Any],
    *,
    tool_id: str = "toolu_01A",
    model: str = "claude-sonnet-4-5",
    text: str | None = None,
    input_tokens: int = 10,
    output_tokens: int = 5,
    cache_read_input_tokens: int = 0,
    cache_creation_input_tokens: int = 0,
) -> dict[str, Any]:
    """A Messages API response body whose answer is one tool call."""
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "text", "text": text})
    content.append({"type": "tool_use", "id": tool_id, "name": name, "input": tool_input})
    return {
        "id": "msg_01FAKE",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_read_input_tokens": cache_read_input_tokens,
            "cache_creation_input_tokens": cache_creation_input_tokens,
        },
    }


def error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}


class FakeAnthropic:
    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._replies: deque[CannedResponse] = deque()
        self._lock = threading.Lock()
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
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def reply(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        with self._lock:
            self._replies.append(CannedResponse(status, body, dict(headers or {})))

    def reply_tool_use(self, name: str, tool_input: dict[str, Any], **options: Any) -> None:
        self.reply(200, tool_use_message(name, tool_input, **options))

    def reply_error(
        self, status: int, error_type: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        self.reply(status, error_body(error_type, message), headers)

    def _answer(self, request: RecordedRequest) -> CannedResponse:
        with self._lock:
            self.requests.append(request)
            if request.method != "POST" or request.path != "/v1/messages":
                return CannedResponse(404, error_body("not_found_error", f"no route {request.path}"))
            if not self._replies:
                return CannedResponse(
                    500, error_body("api_error", "fake server: no canned response left"), {"x-should-retry": "false"}
                )
            return self._replies.popleft()


def _handler_for(fake: FakeAnthropic) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the SDK's connection pool expects

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body = {"_unparsed": raw.decode("utf-8", "replace")}
            request = RecordedRequest(
                method="POST",
                path=self.path.split("?", 1)[0],
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
            )
            self._send(fake._answer(request))

        def _send(self, response: CannedResponse) -> None:
            payload = json.dumps(response.body).encode()
            self.send_response(response.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.send_header("request-id", f"req_fake_{len(fake.requests)}")
            for name, value in response.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence stderr
            pass

    return Handler


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    server = FakeAnthropic().start()
    try:
        yield server
    finally:
        server.stop()
