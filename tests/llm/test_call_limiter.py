"""call_model under limits shared with other processes (a batch's workers): each call holds a
slot, a rate limit or an overload makes every sharer hold off, and a refusal is not retried."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from langchain_core.messages import HumanMessage

from cabal.errors import CallRefused
from cabal.llm import RetryPolicy, call_metadata, call_model, make_model

from .fake_anthropic import FakeAnthropic
from .test_claude_client import ARGS, MODEL, TOOL

METADATA = call_metadata(round=1, step="write", agent="operative-1")


class RecordingLimiter:
    def __init__(self, refuse: str | None = None) -> None:
        self.refuse = refuse
        self.slots = 0
        self.hold_offs: list[float] = []

    @contextmanager
    def slot(self):
        if self.refuse:
            raise CallRefused(self.refuse)
        self.slots += 1
        yield

    def hold_off(self, seconds: float) -> None:
        self.hold_offs.append(seconds)


def test_a_rate_limit_or_an_overload_holds_every_sharer_off_and_a_server_error_does_not(claude_env: FakeAnthropic) -> None:
    claude_env.reply_error(429, "rate_limit_error", "Slow down", headers={"retry-after": "0.02"})
    claude_env.reply_error(503, "api_error", "Unavailable", headers={"retry-after-ms": "5"})
    claude_env.reply_error(529, "overloaded_error", "Overloaded", headers={"retry-after-ms": "10"})
    claude_env.reply_tool_use("write_answer", ARGS)
    limiter = RecordingLimiter()

    reply = call_model(make_model(MODEL), [HumanMessage("Write p1.")], [TOOL], metadata=METADATA,
                       retry=RetryPolicy(max_retries=3), limiter=limiter)

    assert reply.tool_calls[0]["args"] == ARGS
    assert limiter.slots == 4  # every request held a slot
    assert limiter.hold_offs == [0.02, 0.01]  # the 429 and the 529, not the 503


def test_a_refused_call_is_not_sent_nor_retried(claude_env: FakeAnthropic) -> None:
    claude_env.reply_tool_use("write_answer", ARGS)

    with pytest.raises(CallRefused) as refused:
        call_model(make_model(MODEL), [HumanMessage("Write p1.")], [TOOL], metadata=METADATA,
                   retry=RetryPolicy(max_retries=3), limiter=RecordingLimiter("the batch's token budget is spent"))

    assert str(refused.value) == "the batch's token budget is spent"
    assert claude_env.requests == []
