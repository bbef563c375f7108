"""A chat model that answers each call from a recorded mission's cassette (``replay:ID_OR_PATH``).

Strict by default: a call must find a recorded call at its place (round, step, agent, turn,
call) whose messages and tools hash the same; anything else stops the run with a
``ReplayMismatch`` that says which message or which tool schema changed, as a short unified
diff. Lenient replay (``?mode=lenient``) matches by place alone, and a fallback model
(``&fallback=SPEC``) answers the calls the cassette lacks.

The spec's options travel in the spec itself, so a mission that stores its model spec resumes
with the same replay:
``replay:m-study-1a2b3c``, ``replay:/path/cassette.jsonl?mode=lenient&fallback=scripted:s.yaml``.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from pydantic import PrivateAttr

from cabal.errors import ConfigError, ModelError, ReplayMismatch
from cabal.llm.cassette import (CASSETTE_FILE, CallPlace, Cassette, RecordedCall, canonical_message, readable,
                                sha256_of)
from cabal.llm.scripted import _caller_metadata

ReplayMode = Literal["strict", "lenient"]
REPLAY_MODES: tuple[str, ...] = ("strict", "lenient")
_SPEC_OPTIONS = ("mode", "fallback")
DIFF_LINES = 12  # a mismatch shows this many lines of its diff


def parse_replay_spec(rest: str) -> tuple[str, ReplayMode, str | None]:
    """``REF[?mode=strict|lenient][&fallback=SPEC]`` as (reference, mode, fallback spec)."""
    ref, _, query = rest.partition("?")
    options = parse_qs(query, keep_blank_values=True) if query else {}
    unknown = sorted(set(options) - set(_SPEC_OPTIONS))
    if unknown:
        raise ModelError(f"model spec 'replay:{rest}': unknown option(s) {unknown}; allowed: {list(_SPEC_OPTIONS)}")
    mode = (options.get("mode") or ["strict"])[-1]
    if mode not in REPLAY_MODES:
        raise ModelError(f"model spec 'replay:{rest}': mode {mode!r} is not one of {', '.join(REPLAY_MODES)}")
    fallback = (options["fallback"][-1] or None) if options.get("fallback") else None
    if not ref.strip():
        raise ModelError("model spec 'replay:' needs a mission id or a cassette path")
    return ref.strip(), mode, fallback  # type: ignore[return-value]


def replay_spec(ref: str, mode: str = "strict", fallback: str | None = None) -> str:
    """The model spec of a replay (what ``--replay`` and ``--fallback-model`` build)."""
    options = [f"mode={mode}"] if mode != "strict" else []
    if fallback:
        options.append(f"fallback={fallback}")
    return f"replay:{ref}" + (f"?{'&'.join(options)}" if options else "")


def cassette_path(ref: str, home: str | Path | None = None) -> Path:
    """The cassette a reference names: a cassette file, a mission's folder, or a mission id of
    the workspace (``home``, else ``CABAL_HOME`` or the nearest ``.cabal``)."""
    from cabal.config import resolve_home

    candidate = Path(ref).expanduser()
    if candidate.is_file():
        return candidate.resolve()
    if (candidate / CASSETTE_FILE).is_file():
        return (candidate / CASSETTE_FILE).resolve()
    if "/" not in ref:
        recorded = resolve_home(home) / "missions" / ref / CASSETTE_FILE
        if recorded.is_file():
            return recorded
        raise ConfigError(f"no cassette for mission {ref!r}: {recorded} does not exist",
                          hint="a mission records its calls unless run with --no-record; `cabal missions` lists them")
    raise ConfigError(f"no cassette at {ref}: it is neither a cassette file nor a mission folder holding one")


class ReplayChatModel(BaseChatModel):
    """Answers from a cassette; see the module's docstring."""

    source: str
    model: str  # the recorded model's name: what the replayed usage is priced as
    mode: ReplayMode = "strict"
    fallback: Any = None  # a chat model for the calls the cassette lacks (lenient replay)
    cache: bool | None = False

    _cassette: Cassette = PrivateAttr()
    _by_place: dict[CallPlace, list[RecordedCall]] = PrivateAttr(default_factory=dict)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _missed: int = PrivateAttr(default=0)

    @property
    def missed(self) -> int:
        """How many calls the cassette lacked and the fallback model answered."""
        return self._missed

    @classmethod
    def from_cassette(cls, path: str | Path, *, mode: ReplayMode = "strict", fallback: Any = None) -> ReplayChatModel:
        cassette = Cassette.read(path)
        model = cls(source=str(path), model=cassette.model, mode=mode, fallback=fallback)
        model._cassette = cassette
        for call in cassette.calls:  # a resumed mission may have made a call twice: the later one last
            model._by_place.setdefault(call.place, []).append(call)
        return model

    @property
    def _llm_type(self) -> str:
        return "cabal-replay"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"source": self.source, "mode": self.mode}

    def bind_tools(self, tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool], *,
                   tool_choice: str | dict[str, Any] | None = None, **kwargs: Any) -> Runnable[Any, AIMessage]:
        return self.bind(tools=list(tools), tool_choice=tool_choice, **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        metadata = _caller_metadata(run_manager)
        tools = [dict(tool) for tool in kwargs.get("tools") or [] if isinstance(tool, Mapping)]
        place = CallPlace.of_call(metadata, messages)
        forms = [canonical_message(m) for m in messages]
        candidates = self._by_place.get(place, [])
        if self.mode == "strict":
            hashes = (sha256_of(forms), sha256_of(tools))
            found = next((c for c in reversed(candidates) if (c.messages_sha256, c.tools_sha256) == hashes), None)
            if found is None:
                raise self._mismatch(place, forms, tools, candidates[-1] if candidates else None)
        else:
            found = candidates[-1] if candidates else None
            if found is None:
                if self.fallback is None:
                    raise self._mismatch(place, forms, tools, None)
                return self._from_fallback(messages, metadata, kwargs)
        return ChatResult(generations=[ChatGeneration(message=_message_of(found))])

    def _from_fallback(self, messages: list[BaseMessage], metadata: dict[str, Any],
                       kwargs: dict[str, Any]) -> ChatResult:
        with self._lock:
            self._missed += 1
        runnable = self.fallback
        if kwargs.get("tools"):
            runnable = self.fallback.bind_tools(list(kwargs["tools"]), tool_choice=kwargs.get("tool_choice"))
        answer = runnable.invoke(messages, config={"metadata": metadata})
        return ChatResult(generations=[ChatGeneration(message=answer)])

    def _mismatch(self, place: CallPlace, forms: list[dict[str, Any]], tools: list[dict[str, Any]],
                  recorded: RecordedCall | None) -> ReplayMismatch:
        if recorded is None:
            why = "was recorded there"
            if self._cassette.full_at is not None:
                why += f" (the recording stopped at the size bound of {self._cassette.full_at} bytes)"
            return ReplayMismatch(place=str(place), source=self.source, what="no call", why=why)
        what, diff = located_change(self._cassette, recorded, forms, tools)
        return ReplayMismatch(place=str(place), source=self.source, what=what, why="differs from the recording",
                              diff=diff)


def located_change(cassette: Cassette, recorded: RecordedCall, forms: list[dict[str, Any]],
                   tools: list[dict[str, Any]]) -> tuple[str, str]:
    """What changed between a recorded call and a new one: the first message or tool schema
    that differs, named, and a short unified diff of its text."""
    for index in range(max(len(forms), len(recorded.message_hashes))):
        new = forms[index] if index < len(forms) else None
        old_sha = recorded.message_hashes[index] if index < len(recorded.message_hashes) else None
        if new is not None and sha256_of(new) == old_sha:
            continue
        old = cassette.text(old_sha) if old_sha else None
        role = (new or old or {}).get("role", "?")
        return f"message {index + 1} ({role})", _diff(old, new, "recorded", "now")
    recorded_tools = {(cassette.text(sha) or {}).get("name", sha): cassette.text(sha) for sha in recorded.tool_hashes}
    current_tools = {tool.get("name", "?"): tool for tool in tools}
    for name in sorted(set(recorded_tools) | set(current_tools)):
        if recorded_tools.get(name) != current_tools.get(name):
            return f"tool schema {name!r}", _diff(recorded_tools.get(name), current_tools.get(name), "recorded", "now")
    return "the call (same messages and tools, another order)", ""


def _diff(old: Any, new: Any, old_name: str, new_name: str) -> str:
    old_lines = readable(old).splitlines() if old is not None else []
    new_lines = readable(new).splitlines() if new is not None else []
    lines = list(difflib.unified_diff(old_lines, new_lines, old_name, new_name, n=1, lineterm=""))
    shown = [line if len(line) <= 200 else line[:200] + "..." for line in lines[:DIFF_LINES]]
    if len(lines) > DIFF_LINES:
        shown.append(f"... ({len(lines) - DIFF_LINES} more diff lines)")
    return "\n".join(shown)


def _message_of(call: RecordedCall) -> AIMessage:
    tool_calls = [{**c, "type": "tool_call"} for c in call.tool_calls]
    invalid = [{**c, "type": "invalid_tool_call"} for c in call.invalid_tool_calls]
    metadata = dict(call.response_metadata)
    if call.stop_reason is not None:
        metadata.setdefault("stop_reason", call.stop_reason)
    return AIMessage(content=call.content, tool_calls=tool_calls, invalid_tool_calls=invalid,
                     usage_metadata=call.usage or None, response_metadata=metadata)


def replay_model(rest: str, build_fallback: Callable[[str], Any]) -> ReplayChatModel:
    """The model of a spec ``replay:REST``; ``build_fallback`` makes the fallback model of its spec."""
    ref, mode, fallback = parse_replay_spec(rest)
    if fallback is not None and mode == "strict":
        raise ModelError(f"model spec 'replay:{rest}': a fallback model answers only in lenient replay "
                         "(add mode=lenient, or --replay lenient)")
    return ReplayChatModel.from_cassette(cassette_path(ref), mode=mode,
                                         fallback=build_fallback(fallback) if fallback else None)


def resolved_replay_spec(spec: str, home: str | Path | None) -> str:
    """``spec`` with its mission id or folder made the cassette's absolute path (a mission id is
    looked up in the workspace ``home``): what a mission stores to resume with the same replay."""
    ref, mode, fallback = parse_replay_spec(spec.removeprefix("replay:"))
    return replay_spec(str(cassette_path(ref, home)), mode, fallback)
