"""The fake Messages API's prompt cache, seen through the real ``anthropic`` SDK and ``call_model``.

Token counts are the fake's deterministic approximation (``prompt_cache.py``): a part's
tokens are ceil(characters / 4) of its canonical JSON. The parts used here:

- system text block of 4,400 "S": ``{"text":"SS..","type":"text"}`` = 4,425 chars -> 1,107
- system text block of 4,000 "S": 4,025 chars -> 1,007 (below Sonnet's 1,024 minimum)
- system text block of 8,200 "S": 8,225 chars -> 2,057
- ``{"role":"user","content":{"text":"Question one?","type":"text"}}`` -> 16 (same for "two")
- the assistant's "Answer one." -> 17; a user "Note 00." block -> 15
- the "lookup" tool with a 4,400-character description -> 1,121; "Be brief." system block -> 9
"""

from __future__ import annotations

import anthropic
import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from cabal.llm import Usage, call_metadata, call_model, make_model

from .fake_anthropic import FakeAnthropic, aim_environment
from .prompt_cache import CacheUsage

SONNET = "claude-sonnet-4-6"
EPHEMERAL = {"type": "ephemeral"}
BIG = "S" * 4400  # 1,107 tokens as a system block
LOOKUP = {"name": "lookup", "description": "D" * 4400, "input_schema": {"type": "object", "properties": {}}}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def api(clock: Clock):
    server = FakeAnthropic(clock=clock).start()
    server.respond_with(lambda body: {"type": "message", "content": [{"type": "text", "text": "ok"}],
                                      "stop_reason": "end_turn", "role": "assistant"})
    try:
        yield server
    finally:
        server.stop()


def send(api: FakeAnthropic, messages, *, system=None, model: str = SONNET, **options) -> tuple[int, int, int]:
    """(input, cache read, cache creation) tokens of one request, as the SDK parsed them."""
    client = anthropic.Anthropic(base_url=api.url, api_key="sk-ant-test-cache", max_retries=0)
    if system is not None:
        options["system"] = system
    message = client.messages.create(model=model, max_tokens=64, messages=messages, **options)
    usage = message.usage
    return usage.input_tokens, usage.cache_read_input_tokens, usage.cache_creation_input_tokens


def cached_system(text: str = BIG, **control) -> list[dict]:
    return [{"type": "text", "text": text, "cache_control": {**EPHEMERAL, **control}}]


def user(text: str, cache: bool = False) -> dict:
    block = {"type": "text", "text": text}
    if cache:
        block["cache_control"] = EPHEMERAL
    return {"role": "user", "content": [block]}


QUESTION_1 = [user("Question one?")]
QUESTION_2 = [user("Question two?")]


# ----------------------------------------------------------------------------- reads and writes


def test_second_request_with_the_same_prefix_reads_it_from_cache(api: FakeAnthropic) -> None:
    assert send(api, QUESTION_1, system=cached_system()) == (16, 0, 1107)
    assert send(api, QUESTION_2, system=cached_system()) == (16, 1107, 0)

    assert [record.usage for record in api.cache_log] == [
        CacheUsage(input_tokens=16, cache_read_input_tokens=0, cache_creation_input_tokens=1107),
        CacheUsage(input_tokens=16, cache_read_input_tokens=1107, cache_creation_input_tokens=0),
    ]
    assert [record.usage.read_share for record in api.cache_log] == [0.0, 1107 / 1123]
    assert api.cache_totals() == {"requests": 2, "prompt_tokens": 2246, "cache_read_tokens": 1107,
                                  "cache_creation_tokens": 1107, "input_tokens": 32, "read_share": 1107 / 2246}


def test_changed_system_prompt_or_model_does_not_read_the_cache(api: FakeAnthropic) -> None:
    assert send(api, QUESTION_1, system=cached_system()) == (16, 0, 1107)

    assert send(api, QUESTION_1, system=cached_system("T" * 4400)) == (16, 0, 1107)
    assert send(api, QUESTION_1, system=cached_system(), model="claude-opus-4-1") == (16, 0, 1107)


def test_prefix_below_the_minimum_is_never_cached(api: FakeAnthropic) -> None:
    short = cached_system("S" * 4000)  # 1,007 tokens; with the question 1,023 < 1,024

    assert send(api, QUESTION_1, system=short) == (1023, 0, 0)
    assert send(api, QUESTION_1, system=short) == (1023, 0, 0)
    assert api.cache.entries == 0


def test_haiku_needs_2048_tokens(api: FakeAnthropic) -> None:
    haiku = "claude-3-haiku-20240307"

    assert send(api, QUESTION_1, system=cached_system(), model=haiku) == (1123, 0, 0)  # 1,107 < 2,048
    assert send(api, QUESTION_1, system=cached_system("S" * 8200), model=haiku) == (16, 0, 2057)
    assert send(api, QUESTION_2, system=cached_system("S" * 8200), model=haiku) == (16, 2057, 0)


def test_tools_come_first_in_the_prefix(api: FakeAnthropic) -> None:
    tool = {**LOOKUP, "cache_control": EPHEMERAL}

    assert send(api, QUESTION_1, tools=[tool], system=cached_system("Be brief.")) == (16, 0, 1130)
    # A new system prompt still reads the tools, written at their own breakpoint.
    assert send(api, QUESTION_1, tools=[tool], system=cached_system("Be terse.")) == (16, 1121, 9)
    # A changed tool changes everything after it.
    changed = {**tool, "description": "E" * 4400}
    assert send(api, QUESTION_1, tools=[changed], system=cached_system("Be terse.")) == (16, 0, 1130)


def test_changed_tool_choice_keeps_tools_and_system_but_not_messages(api: FakeAnthropic) -> None:
    request = {"tools": [LOOKUP], "system": cached_system("Be brief."), "messages": [user("Question one?", cache=True)]}

    assert send(api, tool_choice={"type": "auto"}, **request) == (0, 0, 1146)
    assert send(api, tool_choice={"type": "auto"}, **request) == (0, 1146, 0)
    assert send(api, tool_choice={"type": "any"}, **request) == (0, 1130, 16)


# ----------------------------------------------------------------------------- breakpoints


def test_five_breakpoints_are_a_400_and_four_are_fine(api: FakeAnthropic) -> None:
    system = [{"type": "text", "text": f"Part {n}.", "cache_control": EPHEMERAL} for n in range(4)]

    send(api, [user("Hello")], system=system)
    with pytest.raises(anthropic.BadRequestError) as caught:
        send(api, [user("Hello", cache=True)], system=system)

    assert caught.value.status_code == 400
    assert caught.value.body == {"type": "error", "error": {
        "type": "invalid_request_error",
        "message": "A maximum of 4 blocks with cache_control may be provided. Found 5."}}
    assert len(api.cache_log) == 1  # the refused request was never accounted


def test_later_breakpoint_finds_an_earlier_write_within_20_blocks(api: FakeAnthropic) -> None:
    system = [{"type": "text", "text": BIG}]
    first = [user("Question one?", cache=True)]
    assert send(api, first, system=system) == (0, 0, 1123)

    grown = [user("Question one?"), {"role": "assistant", "content": "Answer one."}, user("Question two?", cache=True)]
    assert send(api, grown, system=system) == (0, 1123, 33)

    # 19 more blocks put the breakpoint 20 blocks after the first write: still found.
    notes = [{"type": "text", "text": f"Note {n:02d}."} for n in range(20)]
    within = [user("Question one?"), {"role": "assistant", "content": "Answer one."},
              {"role": "user", "content": [*notes[:18], {**notes[18], "cache_control": EPHEMERAL}]}]
    assert send(api, within, system=system) == (0, 1123, 17 + 19 * 15)

    api.cache.clear()
    assert send(api, first, system=system) == (0, 0, 1123)
    beyond = [user("Question one?"), {"role": "assistant", "content": "Answer one."},
              {"role": "user", "content": [*notes[:19], {**notes[19], "cache_control": EPHEMERAL}]}]
    assert send(api, beyond, system=system) == (0, 0, 1123 + 17 + 20 * 15)


def test_top_level_cache_control_caches_up_to_the_last_block(api: FakeAnthropic) -> None:
    system = [{"type": "text", "text": BIG}]

    assert send(api, QUESTION_1, system=system, cache_control=EPHEMERAL) == (0, 0, 1123)
    grown = [*QUESTION_1, {"role": "assistant", "content": "Answer one."}, *QUESTION_2]
    assert send(api, grown, system=system, cache_control=EPHEMERAL) == (0, 1123, 33)


# ----------------------------------------------------------------------------- lifetime


def test_five_minute_entry_expires_unless_read(api: FakeAnthropic, clock: Clock) -> None:
    assert send(api, QUESTION_1, system=cached_system()) == (16, 0, 1107)
    clock.now += 299
    assert send(api, QUESTION_1, system=cached_system()) == (16, 1107, 0)  # a read refreshes the entry
    clock.now += 299
    assert send(api, QUESTION_1, system=cached_system()) == (16, 1107, 0)
    clock.now += 300
    assert send(api, QUESTION_1, system=cached_system()) == (16, 0, 1107)


def test_one_hour_entry_outlives_five_minutes(api: FakeAnthropic, clock: Clock) -> None:
    assert send(api, QUESTION_1, system=cached_system(ttl="1h")) == (16, 0, 1107)
    clock.now += 3599
    assert send(api, QUESTION_1, system=cached_system(ttl="1h")) == (16, 1107, 0)
    clock.now += 3600
    assert send(api, QUESTION_1, system=cached_system(ttl="1h")) == (16, 0, 1107)


def test_longer_ttl_after_a_shorter_one_is_a_400(api: FakeAnthropic) -> None:
    system = [{"type": "text", "text": BIG, "cache_control": {"type": "ephemeral", "ttl": "5m"}}]

    hello = {"role": "user", "content": [{"type": "text", "text": "Hello",
                                          "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}

    with pytest.raises(anthropic.BadRequestError) as caught:
        send(api, [hello], system=system)

    assert caught.value.body["error"]["message"] == (
        "a ttl='1h' cache_control block must not come after a ttl='5m' cache_control block")


# ----------------------------------------------------------------------------- Cabal's call


def test_cabal_call_reads_its_system_prompt_from_cache_on_the_second_call(monkeypatch, api: FakeAnthropic) -> None:
    aim_environment(monkeypatch, api.url, "sk-ant-test-cache")
    tool = {"name": "write_answer", "description": "Submit the answer.",
            "input_schema": {"type": "object", "properties": {"versions": {"type": "array", "items": {"type": "object"}}},
                             "required": ["versions"]}}  # 46 tokens
    api.respond_with(lambda body: {"type": "message", "role": "assistant", "stop_reason": "tool_use", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "write_answer", "input": {"versions": []}}]})
    model = make_model(SONNET)
    metadata = call_metadata(round=1, step="write", agent="operative-1")

    def ask(question: str) -> Usage:
        reply = call_model(model, [SystemMessage(BIG), HumanMessage(question)], [tool], metadata=metadata)
        return reply.usage

    # 46 (tool) + 1,107 (system, where call_model puts the breakpoint) + 15 ("Write p1.")
    first, second = ask("Write p1."), ask("Write p1.")

    # LangChain's input_tokens count the whole prompt, cached or not.
    assert first == Usage(input_tokens=1168, output_tokens=first.output_tokens, cache_read_tokens=0,
                          cache_write_tokens=1153, calls=1)
    assert second == Usage(input_tokens=1168, output_tokens=second.output_tokens, cache_read_tokens=1153,
                           cache_write_tokens=0, calls=1)
    assert [r.usage.read_share for r in api.cache_log] == [0.0, 1153 / 1168]
