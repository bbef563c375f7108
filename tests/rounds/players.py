"""Fake players for round-engine tests: a model that follows a script except where a test deviates.

``ScriptPlayer`` answers each call from a parsed model script by its (round, step, agent)
key, one entry per call in order (a per-key cursor), like ``ScriptedChatModel``. A test may
inject answers for a key; they are given first, in order, and the script resumes after them.
Every call is recorded with its messages, so a test can read the exact prompts and the
feedback a retry received.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage

from cabal.llm import FunctionChatModel, ModelRequest

REPO = Path(__file__).resolve().parents[2]
LAUNCH_DIR = REPO / "examples" / "launch"
LAUNCH_MISSION = LAUNCH_DIR / "launch.mission.yaml"
LAUNCH_SCRIPT = LAUNCH_DIR / "launch.script.yaml"

Key = tuple[int, str, str]  # (round, step, agent)
# An injected answer: a {"tool", "args"} mapping, or a function of the call's messages.
Answer = Mapping[str, Any] | Callable[[list[BaseMessage]], Mapping[str, Any]]


def load_script(path: Path = LAUNCH_SCRIPT) -> list[dict]:
    return yaml.safe_load(path.read_text())


@dataclass(frozen=True)
class PlayedCall:
    key: Key
    messages: tuple[BaseMessage, ...]
    tools: tuple[str, ...]

    @property
    def system(self) -> str:
        return _text(next(m for m in self.messages if isinstance(m, SystemMessage)).content)

    @property
    def prompt(self) -> str:
        """The user prompt of the turn (the first human message)."""
        return _text(next(m for m in self.messages if isinstance(m, HumanMessage)).content)

    @property
    def last(self) -> BaseMessage:
        return self.messages[-1]


class ScriptPlayer:
    """A model function for ``FunctionChatModel``: script answers with injected deviations."""

    def __init__(self, script: list[dict] | None = None, inject: Mapping[Key, list[Answer]] | None = None) -> None:
        self.exact: dict[Key, list[dict]] = {}
        self.wildcards: list[dict] = []
        for entry in script if script is not None else load_script():
            if "*" in (entry.get("round"), entry.get("step"), entry.get("agent")):
                self.wildcards.append(entry)
            else:
                self.exact.setdefault((entry["round"], entry["step"], entry["agent"]), []).append(entry)
        self.inject: dict[Key, list[Answer]] = {key: list(answers) for key, answers in (inject or {}).items()}
        self.cursor: Counter[Key] = Counter()
        self.calls: list[PlayedCall] = []
        self._lock = threading.Lock()

    def model(self) -> FunctionChatModel:
        return FunctionChatModel(self)

    def __call__(self, request: ModelRequest) -> Mapping[str, Any]:
        key: Key = (request.key.round, request.key.step, request.key.agent)
        with self._lock:
            self.calls.append(PlayedCall(key, request.messages, tuple(t["name"] for t in request.tools)))
            injected = self.inject.get(key)
            if injected:
                answer = injected.pop(0)
                return answer(list(request.messages)) if callable(answer) else answer
            return self._scripted(key)

    def _scripted(self, key: Key) -> dict:
        entries = self.exact.get(key, [])
        if self.cursor[key] < len(entries):
            entry = entries[self.cursor[key]]
            self.cursor[key] += 1
            return {"tool": entry["tool"], "args": entry["args"]}
        for entry in self.wildcards:
            if all(want in ("*", got) for want, got in zip((entry["round"], entry["step"], entry["agent"]), key)):
                return {"tool": entry["tool"], "args": entry["args"]}
        raise AssertionError(f"the script has no answer left for {key}")

    # -------------------------------------------------------------------------- reading

    def script_answer(self, key: Key, index: int = 0) -> dict:
        """The args of the script's index-th answer for a key (a deep copy to modify)."""
        return yaml.safe_load(yaml.safe_dump(self.exact[key][index]["args"]))

    def calls_of(self, round_number: int | None = None, step: str | None = None,
                 agent: str | None = None) -> list[PlayedCall]:
        return [c for c in self.calls
                if (round_number is None or c.key[0] == round_number) and (step is None or c.key[1] == step)
                and (agent is None or c.key[2] == agent)]

    def prompts_of(self, agent: str, round_number: int) -> dict[str, str]:
        """An agent's user prompt per step in one round (the first call of each step)."""
        prompts: dict[str, str] = {}
        for call in self.calls_of(round_number, agent=agent):
            prompts.setdefault(call.key[1], call.prompt)
        return prompts


def tool_feedback(message: BaseMessage) -> str:
    assert isinstance(message, ToolMessage), f"expected a ToolMessage, got {type(message).__name__}"
    return _text(message.content)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    # A prompt's blocks apart, as a model reads them (rounds/context.py, PROMPT_BLOCKS).
    return "\n\n".join(block.get("text", "") if isinstance(block, dict) else str(block) for block in content)
