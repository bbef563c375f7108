"""A fake-server responder that plays a whole mission from a model script, behind the Messages API.

    server.respond_with(script_responder(LAUNCH_SCRIPT))
    run_mission(spec, model="claude-sonnet-4-6", home=...)  # ANTHROPIC_BASE_URL -> server.url

A request over HTTP carries only text, as it would to a real model, so the responder reads
from it what a script is keyed by: the round (the call's own ``# Round N`` line), the step
(the role's block's ``Your step now:`` line, matched against the steps' headings) and the
agent (``You are NAME (AGENT_ID).``, in the agent's own block). The answer is
the script's next entry for that key, as ``ScriptedChatModel`` picks it, sent back as one
tool_use block.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

from cabal.llm import ScriptedChatModel, call_metadata
from cabal.vocabulary import Step

from .fake_anthropic import message_body, tool_use_block

_AGENT = re.compile(r"^You are [^\n]*?\(([\w-]+)\)\.$", re.M)
_STEP = re.compile(r"^Your step now: (.+)$", re.M)
_ROUND = re.compile(r"^# Round (\d+)", re.M)
_STEPS = {step.heading: step for step in Step}


def script_responder(script: Path) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``fn(request_body) -> Message body``: the script's answer for the request's key."""
    answer = scripted_answers(script)

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        system = prompt_text(body.get("system"))
        user = prompt_text((body.get("messages") or [{}])[0].get("content"))
        name, args, number = answer(system, user, list(body.get("tools") or []))
        return message_body([tool_use_block(name, args, tool_id=f"toolu_script_{number:05d}")], stop_reason="tool_use")

    return respond


def scripted_answers(script: Path) -> Callable[..., tuple[str, dict[str, Any], int]]:
    """``fn(system_text, first_user_text, tools, turn=0) -> (tool, args, n)``: the script's
    answer for the key the prompts name, whatever API carried them (``turn``: the user's answers
    the turn follows, as ``call_metadata`` counts them); ``n`` numbers the answers (for ids)."""
    model = ScriptedChatModel.from_file(script)
    ids = itertools.count(1)
    lock = threading.Lock()

    def answer(system: str, user: str, tools: list[Any], turn: int = 0) -> tuple[str, dict[str, Any], int]:
        round_number, step, agent = key_of(system, user)
        reply = model.bind_tools(tools).invoke([HumanMessage("answer")],
                                               config={"metadata": call_metadata(round=round_number, step=step,
                                                                                 agent=agent, turn=turn)})
        if reply.tool_calls:
            (call,) = reply.tool_calls
            name, args = call["name"], call["args"]
        else:  # asked without tools, the scripted model writes its answer as JSON text (json mode)
            name, args = first_json_answer(reply.text)
        with lock:
            return name, args, next(ids)

    return answer


def first_json_answer(text: str) -> tuple[str, dict[str, Any]]:
    """The tool and arguments of an answer written as JSON text (``json_answers.as_text``)."""
    from cabal.llm.json_answers import first_json_object

    answer = first_json_object(text)
    assert answer is not None, f"no JSON answer in {text!r}"
    return answer["tool"], answer["args"]


def call_key(body: Mapping[str, Any]) -> tuple[int, Step, str]:
    """(round, step, agent) of a Messages API request, read from its prompts."""
    first = (body.get("messages") or [{}])[0]
    return key_of(prompt_text(body.get("system")), prompt_text(first.get("content")))


def key_of(system: str, user: str) -> tuple[int, Step, str]:
    """(round, step, agent) a system prompt and the first user message name (the role's and
    the agent's blocks are in the user message; a project's own prompts may put them anywhere)."""
    both = f"{system}\n{user}"
    return int(_ROUND.search(user)[1]), _STEPS[_STEP.search(both)[1].strip()], _AGENT.search(both)[1]


def prompt_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(block.get("text", "") for block in content or [] if isinstance(block, Mapping))
