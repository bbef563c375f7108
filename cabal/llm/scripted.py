"""Chat models that answer without a provider: replayed scripts and Python functions.

Both reply with tool calls (or, asked without tools, with the same answers written as JSON
text, as a model in ``output: json`` mode does), estimate usage (about four characters per token) so budgets
work offline, record every call for assertions, and are safe to call from many threads.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from pydantic import PrivateAttr

from cabal.errors import ModelError, ProtocolLoadError
from cabal.llm.json_answers import as_text
from cabal.llm.keys import FACTS_KEY, TURN_KEY, CallKey
from cabal.llm.usage import estimate_tokens
from cabal.yaml_reader import read_text_file, read_yaml

Wildcard = Literal["*"]
_ENTRY_FIELDS = {"round", "step", "agent", "tool", "args", "repeat"}
_HALT_TOOL = "halt"  # the envelope that ends a turn and starts the next after the user answers


@dataclass(frozen=True)
class ModelCall:
    """One call a fake model received, as the provider would have seen it."""

    key: CallKey
    attempt: int  # 1 for the first call with this key, 2 for its first retry, ...
    tools: tuple[str, ...]  # names of the tools offered
    tool_choice: Any
    messages: tuple[BaseMessage, ...]
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ScriptEntry:
    """One scripted answer: the tool call to make when a call's key matches."""

    tool: str
    args: dict[str, Any]
    round: int | Wildcard = "*"
    step: str = "*"
    agent: str = "*"
    repeat: bool = False  # answers every matching call once reached, instead of once

    def matches(self, key: CallKey) -> bool:
        return (
            (self.round == "*" or self.round == key.round)
            and (self.step == "*" or self.step == key.step)
            and (self.agent == "*" or self.agent == key.agent)
        )

    @property
    def specificity(self) -> int:
        return sum(value != "*" for value in (self.round, self.step, self.agent))

    @classmethod
    def parse(cls, raw: Any, *, where: str) -> ScriptEntry:
        if not isinstance(raw, Mapping):
            raise ModelError(f"{where}: a script entry must be a mapping, got {type(raw).__name__}")
        unknown = set(raw) - _ENTRY_FIELDS
        if unknown:
            raise ModelError(
                f"{where}: unknown field(s) {sorted(unknown)}; allowed: {sorted(_ENTRY_FIELDS)}"
            )
        tool = raw.get("tool")
        if not isinstance(tool, str) or not tool:
            raise ModelError(f"{where}: 'tool' must be a non-empty string")
        args = raw.get("args", {})
        if not isinstance(args, Mapping):
            raise ModelError(f"{where}: 'args' must be a mapping")
        round_ = raw.get("round", "*")
        if round_ != "*" and (isinstance(round_, bool) or not isinstance(round_, int)):
            raise ModelError(f"{where}: 'round' must be an integer or '*', got {round_!r}")
        for name in ("step", "agent"):
            if not isinstance(raw.get(name, "*"), str):
                raise ModelError(f"{where}: {name!r} must be a string or '*'")
        return cls(
            tool=tool,
            args=dict(args),
            round=round_,
            step=raw.get("step", "*"),
            agent=raw.get("agent", "*"),
            repeat=bool(raw.get("repeat", False)),
        )


class _FakeChatModel(BaseChatModel):
    """What both fake models share: tool binding, call records, latency, usage estimates."""

    latency_s: float = 0.0
    """Seconds each call sleeps, to stand in for a real model's latency."""

    cache: bool | None = False  # a global LLM cache would replay a retry's first answer

    keep_calls: bool = True
    """Keep every call, messages included, for ``calls`` (what tests look at); False keeps none
    (a long simulated run: 3 MiB of prompts at 20 rounds)."""

    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _calls: list[ModelCall] = PrivateAttr(default_factory=list)
    _attempts: Counter[CallKey] = PrivateAttr(default_factory=Counter)

    @property
    def calls(self) -> list[ModelCall]:
        """Every call so far, in the order they arrived."""
        with self._lock:
            return list(self._calls)

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Runnable[Any, AIMessage]:
        return self.bind(tools=list(tools), tool_choice=tool_choice, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        metadata = _caller_metadata(run_manager)
        key = CallKey.from_metadata(metadata)
        tools = list(kwargs.get("tools") or [])
        with self._lock:
            self._attempts[key] += 1
            call = ModelCall(
                key=key,
                attempt=self._attempts[key],
                tools=tuple(_tool_name(tool) for tool in tools),
                tool_choice=kwargs.get("tool_choice"),
                messages=tuple(messages),
                metadata=metadata,
            )
            if self.keep_calls:
                self._calls.append(call)
        if self.latency_s > 0:
            time.sleep(self.latency_s)
        message = self._reply(call, tools)
        if not tools and message.tool_calls:  # asked without tools: the answer as JSON text
            text = "\n\n".join(as_text(c["name"], c["args"]) for c in message.tool_calls)
            message = AIMessage(content=text, usage_metadata=message.usage_metadata)
        if message.usage_metadata is None:
            message = message.model_copy(update={"usage_metadata": _estimate_usage(messages, message)})
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _reply(self, call: ModelCall, tools: list[Any]) -> AIMessage:
        raise NotImplementedError


class ScriptedChatModel(_FakeChatModel):
    """Replays scripted tool calls keyed by (round, step, agent).

    Entries with the same key are used in order, one per call, so a retry gets the next one.
    The most specific entry wins (each exact round, step or agent beats ``"*"``; ties go to
    the earlier entry). A call with no entry left raises ``ModelError``.

    A call whose metadata says it is the key's turn n (``cabal_turn``: the Chair asking again
    after the user's n-th answer) starts after the key's n-th ``halt`` entry, so a mission
    resumed in another process, with a fresh script cursor, does not replay the question.
    """

    source: str = "<entries>"

    _entries: tuple[ScriptEntry, ...] = PrivateAttr(default=())
    _used: list[bool] = PrivateAttr(default_factory=list)

    def __init__(self, entries: Sequence[Mapping[str, Any] | ScriptEntry], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        source = kwargs.get("source", "<entries>")
        self._entries = tuple(
            entry if isinstance(entry, ScriptEntry) else ScriptEntry.parse(entry, where=f"{source} entry {i}")
            for i, entry in enumerate(entries)
        )
        self._used = [False] * len(self._entries)

    @classmethod
    def from_entries(
        cls, entries: Sequence[Mapping[str, Any] | ScriptEntry], **kwargs: Any
    ) -> ScriptedChatModel:
        return cls(entries, **kwargs)

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> ScriptedChatModel:
        """Load a YAML or JSON list of entries."""
        path = Path(path)
        try:
            text = read_text_file(path)
            data = json.loads(text) if path.suffix.lower() == ".json" else read_yaml(text, str(path))
        except ProtocolLoadError as error:
            raise ModelError(f"model script {error}") from None
        except ValueError as error:
            raise ModelError(f"model script {path} is not valid JSON: {error}") from None
        if not isinstance(data, list):
            raise ModelError(f"model script {path} must hold a list of entries")
        return cls(data, source=str(path), **kwargs)

    @property
    def _llm_type(self) -> str:
        return "cabal-scripted"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"source": self.source}

    def _reply(self, call: ModelCall, tools: list[Any]) -> AIMessage:
        entry = self._take(call)
        if call.tools and entry.tool not in call.tools:
            raise ModelError(
                f"scripted answer for {call.key} (attempt {call.attempt}) calls tool "
                f"{entry.tool!r}, which was not offered (offered: {', '.join(call.tools)})",
                provider="scripted",
            )
        return _tool_call_message(entry.tool, copy.deepcopy(entry.args), call)

    def _take(self, call: ModelCall) -> ScriptEntry:
        with self._lock:
            matching = [i for i, entry in enumerate(self._entries) if entry.matches(call.key)]
            self._skip_earlier_turns(matching, int(call.metadata.get(TURN_KEY) or 0))
            self._skip_answered(matching, int(call.metadata.get(TURN_KEY) or 0),
                                [m.tool_calls[0]["name"] for m in call.messages
                                 if isinstance(m, AIMessage) and m.tool_calls])
            available = [i for i in matching if self._entries[i].repeat or not self._used[i]]
            if available:
                chosen = min(available, key=lambda i: (-self._entries[i].specificity, i))
                self._used[chosen] = True
                return self._entries[chosen]
        if matching:
            why = f"all {len(matching)} matching entr{'y' if len(matching) == 1 else 'ies'} used up"
        else:
            why = "no entry matches"
        if not call.key.is_complete:
            why += " (the call's metadata lacks cabal_round, cabal_step or cabal_agent)"
        raise ModelError(
            f"no scripted answer for {call.key} (attempt {call.attempt}) in {self.source}: {why}",
            provider="scripted",
        )

    def _skip_answered(self, matching: list[int], turn: int, said: list[str]) -> None:
        """Mark used the entries of the calls the turn already has in its conversation (``said``:
        the tool each of its replies called): a turn that goes on where it stopped (a tool call
        the user approved), in a process with a fresh cursor, gets the entry after them. Only
        replies that are the script's own count (the same tools, in order): a reply another model
        wrote into the conversation (a test's injected answer) uses no entry."""
        ordered = self._in_order(matching)
        start = self._turn_start(ordered, turn)
        for index, tool in zip(ordered[start:], said):
            if self._entries[index].tool != tool:
                return
            self._used[index] = True

    def _skip_earlier_turns(self, matching: list[int], turn: int) -> None:
        """Mark used the entries of the key's earlier turns: up to its ``turn``-th halt entry."""
        ordered = self._in_order(matching)
        for index in ordered[:self._turn_start(ordered, turn)]:
            self._used[index] = True

    def _in_order(self, matching: list[int]) -> list[int]:
        """The key's entries used one each, in the order they are taken."""
        return [i for i in sorted(matching, key=lambda i: (-self._entries[i].specificity, i))
                if not self._entries[i].repeat]

    def _turn_start(self, ordered: list[int], turn: int) -> int:
        """Where the key's ``turn``-th turn starts in ``ordered``: after its ``turn``-th halt entry.
        A turn after an answer that no halt entry stands for (a plan's sign-off answered with
        changes) starts after the last halt entry there is."""
        halts = [position for position, index in enumerate(ordered) if self._entries[index].tool == _HALT_TOOL]
        return halts[min(turn, len(halts)) - 1] + 1 if turn and halts else 0


@dataclass(frozen=True)
class ModelRequest:
    """One call as a ``FunctionChatModel`` function sees it (cf. pydantic-ai's ``AgentInfo``)."""

    messages: tuple[BaseMessage, ...]
    tools: tuple[Any, ...]  # the tool definitions as offered
    key: CallKey  # which round, step and agent the call serves
    attempt: int  # 1 for the key's first call, 2 for its first retry, ...
    facts: Any = None  # the round engine's TurnFacts: what the turn is about, with its short ids
    metadata: Mapping[str, Any] = field(default_factory=dict)  # everything else the caller passed


class FunctionChatModel(_FakeChatModel):
    """Answers with ``fn(request: ModelRequest)``.

    ``fn`` returns an ``AIMessage`` or ``{"tool": name, "args": {...}}``.
    """

    fn: Callable[[ModelRequest], AIMessage | Mapping[str, Any]]
    model_name: str = "cabal-function"  # how usage, prices and traces name it ("simulated": the simulated team)

    def __init__(self, fn: Callable[[ModelRequest], AIMessage | Mapping[str, Any]], **kwargs: Any) -> None:
        super().__init__(fn=fn, **kwargs)

    @property
    def _llm_type(self) -> str:
        return "cabal-function"

    def _reply(self, call: ModelCall, tools: list[Any]) -> AIMessage:
        metadata = {k: v for k, v in call.metadata.items() if k != FACTS_KEY}
        answer = self.fn(ModelRequest(call.messages, tuple(tools), call.key, call.attempt,
                                      call.metadata.get(FACTS_KEY), metadata))
        if isinstance(answer, AIMessage):
            return answer
        if isinstance(answer, Mapping) and isinstance(answer.get("tool"), str):
            return _tool_call_message(answer["tool"], dict(answer.get("args") or {}), call)
        raise ModelError(
            f"FunctionChatModel function returned {type(answer).__name__}; "
            "expected an AIMessage or {'tool': name, 'args': {...}}",
            provider="function",
        )


def _caller_metadata(run_manager: CallbackManagerForLLMRun | None) -> dict[str, Any]:
    if run_manager is None:
        return {}
    # Drop the tracing keys langchain adds (ls_provider, lc_versions, ...).
    return {k: v for k, v in run_manager.metadata.items() if not k.startswith(("ls_", "lc_"))}


def _tool_name(tool: Any) -> str:
    if isinstance(tool, Mapping):
        if "name" in tool:
            return str(tool["name"])
        if isinstance(tool.get("function"), Mapping):
            return str(tool["function"].get("name"))
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return str(convert_to_openai_tool(tool)["function"]["name"])


def _tool_call_message(tool: str, args: dict[str, Any], call: ModelCall) -> AIMessage:
    # Deterministic per key and attempt, whatever order parallel calls arrive in.
    raw_id = f"toolu_{call.key.round}_{call.key.step}_{call.key.agent}_{call.attempt}"
    call_id = re.sub(r"[^A-Za-z0-9_-]", "-", raw_id)
    tool_call = {"name": tool, "args": args, "id": call_id, "type": "tool_call"}
    return AIMessage(content="", tool_calls=[tool_call])


def _estimate_usage(messages: Sequence[BaseMessage], reply: AIMessage) -> dict[str, Any]:
    prompt = "".join(_content_text(m.content) for m in messages)
    answer = _content_text(reply.content) + "".join(
        json.dumps(tc["args"], ensure_ascii=False, default=str) for tc in reply.tool_calls
    )
    input_tokens = estimate_tokens(len(prompt))
    output_tokens = estimate_tokens(len(answer))
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
    }


def _content_text(content: str | list[Any]) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
            parts.append(block["text"])
        else:
            parts.append(json.dumps(block, ensure_ascii=False, default=str))
    return "".join(parts)
