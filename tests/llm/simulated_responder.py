"""A fake-server responder that plays a whole mission: ``SimulatedTeam`` behind the Messages API.

    server.respond_with(simulated_responder(SimulatedTeam(initial_products=4)))
    run_mission(spec, model="claude-sonnet-4-6", home=...)  # ANTHROPIC_BASE_URL -> server.url

This module is the only place that knows how ``SimulatedTeam`` reads its input, so a change
there (it is moving to structured data) changes ``team_input`` alone. Today the team reads
LangChain messages: the system prompt (for the step), the first human message (the round
and the step's sections), tool results that start with ``REQUESTED CONTEXT``; and metadata
(round, step, agent), which the Messages API does not carry, so the agent id is taken from
the system prompt's first line ("You are NAME (AGENT_ID), ...").
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from cabal.llm.keys import AGENT_KEY
from cabal.rounds.simulated import SimulatedTeam

from .fake_anthropic import message_body, tool_use_block

_AGENT_ID = re.compile(r"^You are .*?\(([\w-]+)\)", re.M)


def simulated_responder(team: SimulatedTeam | None = None) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``fn(request_body) -> Message body``: the team's answer as one tool_use block."""
    team = team or SimulatedTeam()
    ids = itertools.count(1)
    lock = threading.Lock()

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        messages, tools, metadata = team_input(body)
        answer = team(messages, tools, metadata)
        with lock:
            number = next(ids)
        return message_body([tool_use_block(answer["tool"], answer["args"], tool_id=f"toolu_sim_{number:05d}")],
                            stop_reason="tool_use")

    return respond


def team_input(body: Mapping[str, Any]) -> tuple[list[BaseMessage], list[Any], dict[str, Any]]:
    """A Messages API request body as ``SimulatedTeam``'s ``(messages, tools, metadata)``."""
    system = _text(body.get("system"))
    messages: list[BaseMessage] = [SystemMessage(system)] if system else []
    for message in body.get("messages") or []:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        if message.get("role") == "assistant":
            messages.append(AIMessage(_text(blocks)))
            continue
        for block in blocks:
            if block.get("type") == "tool_result":
                messages.append(ToolMessage(_text(block.get("content")), tool_call_id=str(block.get("tool_use_id"))))
            elif block.get("type") == "text":
                messages.append(HumanMessage(block.get("text", "")))
    agent = _AGENT_ID.search(system)
    return messages, list(body.get("tools") or []), {AGENT_KEY: agent[1]} if agent else {}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content or [] if isinstance(block, Mapping))
