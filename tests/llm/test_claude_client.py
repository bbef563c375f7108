"""The real Claude client (ChatAnthropic over the anthropic SDK) against the local fake API."""

from __future__ import annotations

import time

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from cabal.errors import ModelError
from cabal.llm import RetryNotice, RetryPolicy, Usage, call_metadata, call_model, make_model

from .conftest import DUMMY_API_KEY
from .fake_anthropic import FakeAnthropic

MODEL = "claude-sonnet-4-6"
SYSTEM = "You are operative-1 of a Cabal team. Answer with the write_answer tool."
TOOL = {
    "name": "write_answer",
    "description": "Submit the Write step's answer.",
    "input_schema": {
        "type": "object",
        "properties": {
            "versions": {"type": "array", "items": {"type": "object"}},
            "remarks": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["versions"],
    },
}
ARGS = {
    "versions": [{"productId": "p1", "newVersion": {"contentTitle": "Plan", "content": "x" * 60, "changeSummary": "first"}}],
    "remarks": ["ready for review"],
}
METADATA = call_metadata(round=2, step="write", agent="operative-1")


def ask(max_retries: int = 4, **options):
    model = make_model(MODEL, **options)
    return call_model(model, [SystemMessage(SYSTEM), HumanMessage("Write p1.")], [TOOL], metadata=METADATA,
                      retry=RetryPolicy(max_retries=max_retries))


def test_tool_use_answer_becomes_tool_calls_with_usage(claude_env: FakeAnthropic) -> None:
    claude_env.reply_tool_use(
        "write_answer",
        ARGS,
        tool_id="toolu_01XYZ",
        text="Here is my answer.",
        input_tokens=120,
        output_tokens=45,
        cache_read_input_tokens=900,
        cache_creation_input_tokens=30,
    )

    reply = ask()

    assert reply.tool_calls == [{"name": "write_answer", "args": ARGS, "id": "toolu_01XYZ"}]
    assert reply.text == "Here is my answer."
    assert reply.usage == Usage(
        input_tokens=1050, output_tokens=45, cache_read_tokens=900, cache_write_tokens=30, calls=1
    )
    assert len(claude_env.requests) == 1


def test_request_carries_tools_tool_choice_and_cached_system_prompt(claude_env: FakeAnthropic) -> None:
    claude_env.reply_tool_use("write_answer", ARGS)

    ask(max_tokens=2048)

    (request,) = claude_env.requests
    assert request.path == "/v1/messages"
    assert request.api_key == DUMMY_API_KEY
    body = request.body
    assert body["model"] == MODEL
    assert body["max_tokens"] == 2048
    assert body["tools"] == [TOOL]
    assert body["tool_choice"] == {"type": "any"}
    assert body["system"] == [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    assert body["messages"] == [{"role": "user", "content": "Write p1."}]


def test_a_round_prompt_carries_a_breakpoint_after_the_house_mission_role_and_agent_blocks(
        claude_env: FakeAnthropic) -> None:
    from cabal.rounds.context import Block, Prompt

    claude_env.reply_tool_use("write_answer", ARGS)
    prompt = Prompt(blocks={Block.HOUSE: "house", Block.MISSION: "mission", Block.ROLE: "role",
                            Block.AGENT: "agent", Block.CALL: "call"})

    call_model(make_model(MODEL), [prompt.system_message(), prompt.first_message()], [TOOL], metadata=METADATA)

    (request,) = claude_env.requests
    cached = {"type": "ephemeral"}
    assert request.body["system"] == [{"type": "text", "text": "house", "cache_control": cached}]
    assert request.body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "mission", "cache_control": cached},
        {"type": "text", "text": "role", "cache_control": cached},
        {"type": "text", "text": "agent", "cache_control": cached},
        {"type": "text", "text": "call"},
    ]}]


def test_overload_is_retried_then_succeeds(claude_env: FakeAnthropic) -> None:
    # retry-after-ms keeps the backoff to a millisecond instead of ~1 s.
    claude_env.reply_error(529, "overloaded_error", "Overloaded", headers={"retry-after-ms": "1"})
    claude_env.reply_tool_use("write_answer", ARGS)

    started = time.monotonic()
    reply = ask(max_retries=2)

    assert reply.tool_calls[0]["args"] == ARGS
    assert len(claude_env.requests) == 2
    # Cabal retries, not the SDK (built with max_retries=0): every request is a first try to it.
    assert [r.headers["x-stainless-retry-count"] for r in claude_env.requests] == ["0", "0"]
    # Without the header the first backoff is at least 0.75 s.
    assert time.monotonic() - started < 0.3


def test_each_retry_is_announced_with_its_wait_and_reason(claude_env: FakeAnthropic) -> None:
    claude_env.reply_error(429, "rate_limit_error", "Slow down", headers={"retry-after": "0.01"})
    claude_env.reply_error(503, "api_error", "Unavailable", headers={"retry-after-ms": "5"})
    claude_env.reply_tool_use("write_answer", ARGS)
    notices: list[RetryNotice] = []

    reply = call_model(make_model(MODEL), [HumanMessage("Write p1.")], [TOOL], metadata=METADATA,
                       retry=RetryPolicy(max_retries=3), on_retry=notices.append)

    assert reply.tool_calls[0]["args"] == ARGS
    assert [(n.retry, n.max_retries, n.wait_s) for n in notices] == [(1, 3, 0.01), (2, 3, 0.005)]
    assert notices[0].reason.startswith("anthropic returned 429 rate_limit_error: Slow down")


def test_a_refusal_no_retry_can_fix_is_not_retried_and_says_so(claude_env: FakeAnthropic) -> None:
    claude_env.reply_error(429, "rate_limit_error", "Quota exhausted", headers={"x-should-retry": "false"})

    with pytest.raises(ModelError) as caught:
        ask(max_retries=3)

    assert (caught.value.status, caught.value.transient) == (429, False)
    assert len(claude_env.requests) == 1


def test_overload_past_the_retry_limit_is_a_model_error(claude_env: FakeAnthropic) -> None:
    for _ in range(2):
        claude_env.reply_error(529, "overloaded_error", "Overloaded", headers={"retry-after-ms": "1"})

    with pytest.raises(ModelError) as caught:
        ask(max_retries=1)

    assert (caught.value.status, caught.value.transient) == (529, True)
    assert str(caught.value).startswith("anthropic returned 529 overloaded_error: Overloaded")
    assert len(claude_env.requests) == 2


def test_bad_request_is_a_model_error_after_one_request(claude_env: FakeAnthropic) -> None:
    claude_env.reply_error(400, "invalid_request_error", "messages: text content blocks must be non-empty")

    with pytest.raises(ModelError) as caught:
        ask()

    error = caught.value
    assert error.status == 400
    assert error.provider == "anthropic"
    assert str(error).startswith(
        "anthropic returned 400 invalid_request_error: messages: text content blocks must be non-empty"
    )
    assert "\n" not in str(error)
    assert DUMMY_API_KEY not in str(error)
    assert len(claude_env.requests) == 1


def test_api_key_never_appears_in_the_error(claude_env: FakeAnthropic) -> None:
    # A server (or proxy) that echoes the key back must not get it into our message.
    claude_env.reply_error(401, "authentication_error", f"invalid x-api-key: {DUMMY_API_KEY}")

    with pytest.raises(ModelError) as caught:
        ask()

    assert caught.value.status == 401
    assert DUMMY_API_KEY not in str(caught.value)
    assert "invalid x-api-key: [redacted]" in str(caught.value)


def test_base_url_comes_from_anthropic_base_url_only(claude_env: FakeAnthropic, monkeypatch) -> None:
    # ChatAnthropic on its own would prefer ANTHROPIC_API_URL.
    monkeypatch.setenv("ANTHROPIC_API_URL", "http://127.0.0.1:9")
    claude_env.reply_tool_use("write_answer", ARGS)

    reply = ask()

    assert reply.tool_calls[0]["name"] == "write_answer"
    assert len(claude_env.requests) == 1


def test_unreachable_server_is_a_model_error(claude_env: FakeAnthropic, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")

    with pytest.raises(ModelError) as caught:
        ask(max_retries=0, timeout=5)

    assert "cannot reach anthropic at http://127.0.0.1:9" in str(caught.value)
    assert caught.value.status is None


def test_missing_api_key_fails_at_construction(monkeypatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)

    with pytest.raises(ModelError, match="set ANTHROPIC_API_KEY"):
        make_model(MODEL)


def test_top_level_any_of_schema_is_refused_before_any_request(claude_env: FakeAnthropic) -> None:
    envelope_tool = {**TOOL, "input_schema": {"anyOf": [{"type": "object"}, {"type": "object"}]}}

    with pytest.warns(UserWarning, match="anyOf"), pytest.raises(ModelError, match=f"cannot offer tools to {MODEL}"):
        call_model(make_model(MODEL), [HumanMessage("hi")], [envelope_tool], metadata=METADATA)

    assert claude_env.requests == []
