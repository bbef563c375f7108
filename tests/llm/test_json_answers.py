"""Answers read from text (``output: json``): the first JSON object, the tool it names, the
instructions that replace the tools, and the call that sends no tools."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from cabal.errors import ModelError
from cabal.llm import FunctionChatModel, ScriptedChatModel, call_metadata, call_model
from cabal.llm.json_answers import answer_instructions, answer_of, as_text, first_json_object, refuses_tools

TOOLS = [
    {"name": "final_output", "description": "Your result.", "input_schema": {"type": "object", "properties": {
        "text": {"type": "string"}}, "required": ["text"]}},
    {"name": "request_context", "description": "Ask for more.", "input_schema": {"type": "object"}},
]


def test_a_fenced_object_is_found_after_prose_with_braces() -> None:
    text = 'I thought about {the brief} first.\n```json\n{"tool": "final_output", "args": {"text": "hi"}}\n```\nDone.'
    assert first_json_object(text) == {"tool": "final_output", "args": {"text": "hi"}}


def test_a_bare_object_is_found_in_prose() -> None:
    assert first_json_object('Here: {"a": 1, "b": [1, 2]} and that is all') == {"a": 1, "b": [1, 2]}


def test_braces_and_quotes_inside_strings_do_not_end_the_object() -> None:
    text = 'x {"text": "a } brace, a { brace and a \\" quote", "n": {"deep": "}}"}} y'
    assert first_json_object(text) == {"text": 'a } brace, a { brace and a " quote', "n": {"deep": "}}"}}


def test_of_two_objects_the_first_is_the_answer() -> None:
    assert first_json_object('{"first": 1} {"second": 2}') == {"first": 1}
    assert first_json_object('```json\n{"first": 1}\n```\n```json\n{"second": 2}\n```') == {"first": 1}


def test_no_object_an_array_or_an_unclosed_object_is_none() -> None:
    assert first_json_object("I cannot answer that.") is None
    assert first_json_object("[1, 2, 3]") is None
    assert first_json_object('{"text": "cut off', ) is None
    assert first_json_object('{"outer": {"inner": 1}') is None  # cut off: its inner object is not the answer


def test_an_object_names_its_tool_or_is_the_only_tools_arguments() -> None:
    names = ["final_output", "request_context"]
    assert answer_of('{"tool": "final_output", "args": {"text": "t"}}', names) == (
        {"name": "final_output", "args": {"text": "t"}, "id": "json-answer"}, None)
    assert answer_of('{"text": "t"}', ["final_output"]) == (
        {"name": "final_output", "args": {"text": "t"}, "id": "json-answer"}, None)
    assert answer_of('{"text": "t"}', names) == (None, (
        'the JSON object must name its tool: {"tool": NAME, "args": {...}} with NAME one of final_output, '
        "request_context; got an object with keys text"))
    assert answer_of('{"tool": "final_output", "text": "t", "args": {}}', names) == (
        None, 'the JSON object holds "tool" and "args" only; put text inside "args"')
    assert answer_of("no idea", names) == (None, (
        'no JSON object in the answer; answer with one JSON object {"tool": NAME, "args": {...}} '
        "(NAME one of final_output, request_context)"))


def test_the_instructions_name_every_tool_with_its_schema() -> None:
    text = answer_instructions(TOOLS)
    assert "NAME is one of: final_output, request_context." in text
    assert '## final_output\n\nYour result.\n\n```json\n{"type": "object", "properties": {"text": {"type": "string"}}, ' \
           '"required": ["text"]}\n```' in text
    assert "## request_context\n\nAsk for more.\n\n```json\n{\"type\": \"object\"}\n```" in text


def test_only_a_400_that_says_so_refuses_tools() -> None:
    said = "registry.ollama.ai/library/gemma:2b does not support tools"
    assert refuses_tools(ModelError(said, status=400, provider="ollama"))
    assert refuses_tools(ModelError("Error: tool calling is not supported by this model", status=400))
    assert not refuses_tools(ModelError(said, status=500))
    assert not refuses_tools(ModelError("prompt is too long", status=400))


def test_json_output_sends_no_tools_and_reads_the_text_answer() -> None:
    model = ScriptedChatModel.from_entries([{"tool": "final_output", "args": {"text": "an answer"}}])
    reply = call_model(model, [SystemMessage("You write."), HumanMessage("Write.")], TOOLS,
                       metadata=call_metadata(round=1, step="write", agent="operative-1"), output="json")
    (call,) = model.calls
    assert call.tools == ()
    assert call.messages[0].content[-1]["text"] == answer_instructions(TOOLS)
    assert reply.text == as_text("final_output", {"text": "an answer"})
    assert reply.tool_calls == [{"name": "final_output", "args": {"text": "an answer"}, "id": "json-answer"}]
    assert (reply.problem, reply.history.content, reply.history.tool_calls) == (None, reply.text, [])


def test_a_text_reply_without_json_is_a_problem_not_a_crash() -> None:
    model = FunctionChatModel(lambda request: AIMessage(content="Sorry, I only chat."))
    reply = call_model(model, [HumanMessage("Write.")], TOOLS, metadata={}, output="json")
    assert reply.tool_calls == []
    assert reply.problem.startswith("no JSON object in the answer")
