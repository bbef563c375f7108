"""Each failure the fake Messages API can script, as the real clients see it.

Two views per failure: the ``anthropic`` SDK on its own (which exception, how many requests,
how it retried) and Cabal's one model call, ``call_model`` over ``ChatAnthropic`` (what
``ModelError`` or reply the engine gets).
"""

from __future__ import annotations

import json
import threading
import time

import anthropic
import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from cabal.errors import ModelError
from cabal.llm import RetryPolicy, call_metadata, call_model, make_model

from .fake_anthropic import (
    CannedResponse,
    FakeAnthropic,
    server_tool_use_block,
    text_block,
    thinking_block,
    tool_use_block,
    tool_use_message,
    web_search_result_block,
)

MODEL = "claude-sonnet-4-6"
TOOL = {
    "name": "write_answer",
    "description": "Submit the Write step's answer.",
    "input_schema": {"type": "object", "properties": {"versions": {"type": "array", "items": {"type": "object"}}},
                     "required": ["versions"]},
}
ARGS = {"versions": [{"productId": "p1", "content": "A first version."}]}
METADATA = call_metadata(round=1, step="write", agent="operative-1")


def sdk(fake: FakeAnthropic, **options) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=fake.url, api_key="sk-ant-test-sdk", **options)


def create(client: anthropic.Anthropic) -> anthropic.types.Message:
    return client.messages.create(model=MODEL, max_tokens=256, messages=[{"role": "user", "content": "Hello"}])


def ask(max_retries: int = 0, **options):
    """One call through Cabal's client path; Cabal (not the SDK) retries, ``max_retries`` times."""
    model = make_model(MODEL, **options)
    return call_model(model, [SystemMessage("You write."), HumanMessage("Write p1.")], [TOOL], metadata=METADATA,
                      retry=RetryPolicy(max_retries=max_retries))


def request_id_suffix(fake: FakeAnthropic) -> str:
    return f"(request id req_fake_{len(fake.requests)})"


# ----------------------------------------------------------------------------- status codes


@pytest.mark.parametrize(("status", "sdk_error", "error_type", "message"), [
    (429, anthropic.RateLimitError, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
    (529, anthropic.OverloadedError, "overloaded_error", "Overloaded"),
    (500, anthropic.InternalServerError, "api_error", "Internal server error"),
    (503, anthropic.ServiceUnavailableError, "api_error", "Service unavailable"),
])
def test_retryable_status_raises_its_sdk_error_once_retries_run_out(
    fake_anthropic: FakeAnthropic, status: int, sdk_error: type, error_type: str, message: str
) -> None:
    for _ in range(2):
        queue_failure(fake_anthropic, status, retry_after=0.01)

    with pytest.raises(sdk_error) as caught:
        create(sdk(fake_anthropic, max_retries=1))

    assert caught.value.status_code == status
    assert caught.value.body == {"type": "error", "error": {"type": error_type, "message": message}}
    assert len(fake_anthropic.requests) == 2
    assert fake_anthropic.requests[1].headers["x-stainless-retry-count"] == "1"


@pytest.mark.parametrize(("status", "error_type", "message"), [
    (429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
    (529, "overloaded_error", "Overloaded"),
    (500, "api_error", "Internal server error"),
    (503, "api_error", "Service unavailable"),
])
def test_retryable_status_is_a_model_error_with_the_status(
    claude_env: FakeAnthropic, status: int, error_type: str, message: str
) -> None:
    for _ in range(3):
        queue_failure(claude_env, status, retry_after=0.01)

    with pytest.raises(ModelError) as caught:
        ask(max_retries=2)

    assert (caught.value.status, caught.value.provider) == (status, "anthropic")
    assert str(caught.value) == f"anthropic returned {status} {error_type}: {message} (request id req_fake_3)"
    assert len(claude_env.requests) == 3


def queue_failure(fake: FakeAnthropic, status: int, **headers) -> None:
    if status == 429:
        fake.reply_rate_limited(**headers)
    elif status == 529:
        fake.reply_overloaded(**headers)
    else:
        fake.reply_server_error(status, **headers)


def test_retry_after_seconds_sets_the_wait_before_the_retry(claude_env: FakeAnthropic) -> None:
    claude_env.reply_rate_limited(retry_after=1)
    claude_env.reply_tool_use("write_answer", ARGS)

    started = time.monotonic()
    reply = ask(max_retries=1)
    waited = time.monotonic() - started

    assert reply.tool_calls == [{"name": "write_answer", "args": ARGS, "id": "toolu_01A"}]
    assert claude_env.requests[0].body == claude_env.requests[1].body
    # The SDK's own first backoff is 0.375-0.5 s: waiting a second is the header's doing.
    assert claude_env.requests[0].headers.get("x-stainless-retry-count") == "0"
    assert 1.0 <= waited < 5.0


def test_should_retry_false_stops_the_sdk_retrying_an_overload(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.reply_overloaded(should_retry=False)

    with pytest.raises(anthropic.OverloadedError):
        create(sdk(fake_anthropic, max_retries=3))

    assert len(fake_anthropic.requests) == 1


def test_should_retry_true_makes_the_sdk_retry_a_bad_request(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.reply_error(400, "invalid_request_error", "try again", retry_after=0.01, should_retry=True)
    fake_anthropic.reply(200, tool_use_message("write_answer", ARGS))

    message = create(sdk(fake_anthropic, max_retries=1))

    assert [block.type for block in message.content] == ["tool_use"]
    assert len(fake_anthropic.requests) == 2


# ----------------------------------------------------------------------------- hangs


def test_hang_past_the_client_timeout_is_an_sdk_timeout(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.hang()

    started = time.monotonic()
    with pytest.raises(anthropic.APITimeoutError, match="^Request timed out or interrupted"):
        create(sdk(fake_anthropic, max_retries=0, timeout=0.3))

    assert 0.3 <= time.monotonic() - started < 5.0
    assert fake_anthropic.hanging == 1  # still held until released (stop() releases it)


def test_hang_past_the_timeout_is_a_model_error_and_the_retry_gets_the_next_reply(claude_env: FakeAnthropic) -> None:
    claude_env.hang()
    claude_env.reply_tool_use("write_answer", ARGS)

    reply = ask(max_retries=1, timeout=0.3)

    assert reply.tool_calls[0]["args"] == ARGS
    assert len(claude_env.requests) == 2
    claude_env.hang()
    with pytest.raises(ModelError) as caught:
        ask(max_retries=0, timeout=0.3)
    assert (caught.value.status, caught.value.transient) == (None, True)
    assert str(caught.value) == f"anthropic did not answer in time ({claude_env.url}/v1/messages)"


def test_released_hang_sends_its_reply_to_a_waiting_client(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.hang(then=CannedResponse(200, tool_use_message("write_answer", ARGS)))
    outcome: list = []
    caller = threading.Thread(target=lambda: outcome.append(create(sdk(fake_anthropic, max_retries=0, timeout=10))))
    caller.start()

    assert fake_anthropic.wait_until_hanging(1)
    assert outcome == []
    fake_anthropic.release()
    caller.join(timeout=5)

    (message,) = outcome
    assert message.content[0].input == ARGS
    assert fake_anthropic.hanging == 0


def test_timed_hang_answers_after_its_seconds(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.hang(0.3, then=CannedResponse(200, tool_use_message("write_answer", ARGS)))

    started = time.monotonic()
    message = create(sdk(fake_anthropic, max_retries=0, timeout=5))

    assert message.stop_reason == "tool_use"
    assert 0.3 <= time.monotonic() - started < 5.0


# ----------------------------------------------------------------------------- connections


@pytest.mark.parametrize("when", ["before_response", "mid_body"])
def test_closed_connection_is_an_sdk_connection_error(fake_anthropic: FakeAnthropic, when: str) -> None:
    fake_anthropic.close_connection(when)

    with pytest.raises(anthropic.APIConnectionError) as caught:
        create(sdk(fake_anthropic, max_retries=0))

    assert type(caught.value) is anthropic.APIConnectionError  # not a timeout
    assert str(caught.value) == "Connection error."


@pytest.mark.parametrize("when", ["before_response", "mid_body"])
def test_closed_connection_is_a_model_error_unless_a_retry_succeeds(claude_env: FakeAnthropic, when: str) -> None:
    claude_env.close_connection(when)
    with pytest.raises(ModelError) as caught:
        ask(max_retries=0)
    assert str(caught.value) == f"cannot reach anthropic at {claude_env.url}/v1/messages: Connection error."
    assert caught.value.status is None

    claude_env.close_connection(when)
    claude_env.reply_tool_use("write_answer", ARGS)
    reply = ask(max_retries=1)
    assert reply.tool_calls[0]["args"] == ARGS
    assert len(claude_env.requests) == 3


# ----------------------------------------------------------------------------- malformed bodies


def test_body_that_is_not_json_escapes_the_sdk_as_a_json_error(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.reply_not_json()

    with pytest.raises(json.JSONDecodeError):
        create(sdk(fake_anthropic, max_retries=0))


def test_json_that_is_not_a_message_passes_the_sdk_unvalidated(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.reply_not_a_message()

    message = create(sdk(fake_anthropic, max_retries=0))

    assert (message.content, message.stop_reason, message.usage) == (None, None, None)


def test_body_that_is_not_json_is_a_transient_model_error(claude_env: FakeAnthropic) -> None:
    claude_env.reply_not_json()

    with pytest.raises(ModelError, match=r"the model's reply could not be read \(JSONDecodeError") as caught:
        ask(max_retries=0)
    assert caught.value.transient


def test_json_that_is_not_a_message_is_a_transient_model_error(claude_env: FakeAnthropic) -> None:
    claude_env.reply_not_a_message()

    with pytest.raises(ModelError, match=r"the model's reply could not be read \(TypeError") as caught:
        ask(max_retries=0)
    assert caught.value.transient


# ----------------------------------------------------------------------------- unusual answers


def test_max_tokens_cut_tool_call_reaches_the_engine_as_a_normal_tool_call(claude_env: FakeAnthropic) -> None:
    claude_env.reply_max_tokens("write_answer", {"versions": []})

    reply = ask()

    # Nothing in ModelReply says the answer was cut: only the raw message's metadata does.
    assert reply.tool_calls == [{"name": "write_answer", "args": {"versions": []}, "id": "toolu_01A"}]
    assert reply.raw.response_metadata["stop_reason"] == "max_tokens"


def test_text_only_answer_has_no_tool_calls(claude_env: FakeAnthropic) -> None:
    claude_env.reply_text("I would rather explain in prose.")

    reply = ask()

    assert (reply.tool_calls, reply.text) == ([], "I would rather explain in prose.")
    assert reply.raw.response_metadata["stop_reason"] == "end_turn"


def test_several_tool_use_blocks_arrive_in_order(claude_env: FakeAnthropic) -> None:
    claude_env.reply_tool_uses([("write_answer", {"versions": [1]}), ("write_answer", {"versions": [2]})],
                               text="Two answers.")

    reply = ask()

    assert reply.tool_calls == [{"name": "write_answer", "args": {"versions": [1]}, "id": "toolu_01"},
                                {"name": "write_answer", "args": {"versions": [2]}, "id": "toolu_02"}]
    assert reply.text == "Two answers."


def test_thinking_and_server_tool_blocks_are_kept_out_of_tool_calls_and_text(claude_env: FakeAnthropic) -> None:
    claude_env.reply_content([thinking_block("Let me plan."), server_tool_use_block("food bank intake"),
                              web_search_result_block(), text_block("Found it."), tool_use_block("write_answer", ARGS)])

    reply = ask()

    assert reply.tool_calls == [{"name": "write_answer", "args": ARGS, "id": "toolu_01A"}]
    assert reply.text == "Found it."
    assert [block["type"] for block in reply.raw.content] == [
        "thinking", "server_tool_use", "web_search_tool_result", "text", "tool_use"]


def test_unknown_tool_name_is_passed_through_for_the_engine_to_reject(claude_env: FakeAnthropic) -> None:
    claude_env.reply_unknown_tool("delete_everything", {"really": True})

    reply = ask()

    assert reply.tool_calls == [{"name": "delete_everything", "args": {"really": True}, "id": "toolu_01A"}]


def test_tool_use_without_a_tool_result_next_is_refused_like_the_api_does(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.reply_text("unused")
    messages = [
        {"role": "user", "content": "Write p1."},
        {"role": "assistant", "content": [tool_use_block("a", {}, tool_id="toolu_1"), tool_use_block("b", {}, tool_id="toolu_2")]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "rejected"}]},
    ]

    with pytest.raises(anthropic.BadRequestError) as caught:
        sdk(fake_anthropic, max_retries=0).messages.create(model=MODEL, max_tokens=64, messages=messages)

    assert caught.value.body["error"]["message"] == (
        "messages.2: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_2. "
        "Each `tool_use` block must have a corresponding `tool_result` block in the next message.")
    assert fake_anthropic.pending_replies == 1  # a refused request consumes no queued reply


def test_empty_queue_without_a_responder_is_a_500_that_says_so(claude_env: FakeAnthropic) -> None:
    with pytest.raises(ModelError) as caught:
        ask(max_retries=3)

    assert str(caught.value) == "anthropic returned 500 api_error: fake server: no canned response left (request id req_fake_1)"
    assert len(claude_env.requests) == 1  # x-should-retry: false
