"""Answers from models that call tools badly or not at all (``output: json``).

No tools are sent: the step's tools (their names, descriptions and input schemas) are written
into the prompt as plain instructions, and the reply's first JSON object is the answer, read
back into the tool call the engine expects (``{"name", "args", "id"}``), so the turn's
validation and rejection loop applies unchanged.

One reply names the tool it stands for: ``{"tool": NAME, "args": {...}}``. When the step
offers a single tool, a bare object is also taken as that tool's arguments.

Pure functions only: ``call_model`` holds the one hook that uses them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from cabal.errors import ModelError

OUTPUT_TOOLS = "tools"
OUTPUT_JSON = "json"
JSON_CALL_ID = "json-answer"  # the id of an answer read from text: nothing echoes it to the provider
NO_JSON_OBJECT = "no JSON object in the answer"

# What providers say when a model cannot be offered tools (Ollama: "registry.ollama.ai/library/
# gemma:2b does not support tools"; OpenAI-compatible servers say much the same).
_TOOLS_REFUSED = re.compile(
    r"does not support (?:tools|tool use|tool calling|function calling|functions)"
    r"|(?:tools|tool use|tool calling|function calling) (?:is |are )?not supported",
    re.IGNORECASE)
_FENCED = re.compile(r"```(?:json|JSON)?[ \t]*\n(.*?)```", re.DOTALL)


def refuses_tools(error: ModelError) -> bool:
    """Whether ``error`` is a provider's 400 saying the model cannot be offered tools."""
    return error.status == 400 and _TOOLS_REFUSED.search(str(error)) is not None


def answer_instructions(tools: Sequence[Mapping[str, Any]]) -> str:
    """The step's tools as plain instructions: how to answer with a JSON object instead."""
    names = [str(tool["name"]) for tool in tools]
    lines = [
        "# How to answer",
        "",
        "You have no tools in this conversation: where these instructions say to call a tool, write "
        "one JSON object instead, in a ```json fenced block, and nothing after it. The object names "
        "the tool you would have called and its arguments:",
        "",
        '```json\n{"tool": "NAME", "args": {...}}\n```',
        "",
        f"NAME is one of: {', '.join(names)}. `args` must follow that tool's JSON schema below.",
    ]
    for tool in tools:
        lines += ["", f"## {tool['name']}", "", str(tool.get("description") or ""), "",
                  "```json", json.dumps(tool.get("input_schema") or {}, ensure_ascii=False), "```"]
    return "\n".join(lines)


def first_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text``: inside a fenced block first, else anywhere.

    A balanced-brace scan that skips braces inside strings finds each candidate; one that is
    not valid JSON (prose in braces) is passed over for the next. An object that never closes
    (an answer cut off) ends the search: its inner objects are not the answer."""
    for block in _FENCED.findall(text):
        found = _scan(block)
        if found is not None:
            return found
    return _scan(text)


def _scan(text: str) -> dict[str, Any] | None:
    start = text.find("{")
    while start >= 0:
        end = _closing_brace(text, start)
        if end is None:
            return None
        try:
            value = json.loads(text[start:end + 1])
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def _closing_brace(text: str, start: int) -> int | None:
    """The index of the brace that closes the one at ``start`` (strings and escapes respected)."""
    depth, in_string, escaped = 0, False, False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index
    return None


def answer_of(text: str, tool_names: Sequence[str]) -> tuple[dict[str, Any] | None, str | None]:
    """The tool call a text reply stands for, or why it stands for none.

    Which tool it names is left to the turn to check, as for a real tool call."""
    found = first_json_object(text)
    if found is None:
        return None, (f"{NO_JSON_OBJECT}; answer with one JSON object "
                      f'{{"tool": NAME, "args": {{...}}}} (NAME one of {", ".join(tool_names)})')
    if isinstance(found.get("tool"), str):
        extra = sorted(set(found) - {"tool", "args"})
        if extra:
            return None, f'the JSON object holds "tool" and "args" only; put {", ".join(extra)} inside "args"'
        return {"name": found["tool"], "args": found.get("args", {}), "id": JSON_CALL_ID}, None
    if len(tool_names) == 1:
        return {"name": tool_names[0], "args": found, "id": JSON_CALL_ID}, None
    return None, (f'the JSON object must name its tool: {{"tool": NAME, "args": {{...}}}} with NAME one of '
                  f"{', '.join(tool_names)}; got an object with keys {', '.join(sorted(found)) or '(none)'}")


def as_text(tool: str, args: Mapping[str, Any]) -> str:
    """One answer as a model in json mode writes it (how the fake models answer without tools)."""
    return "```json\n" + json.dumps({"tool": tool, "args": args}, ensure_ascii=False, indent=1, default=str) + "\n```"
