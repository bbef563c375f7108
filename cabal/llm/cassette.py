"""Cassettes: every model call a mission makes, kept so it can be replayed, compared and scripted.

A cassette is a JSON-lines file in the mission's folder (``cassette.jsonl``, private). Each call
is one ``call`` line: where it was made (round, step, agent, turn, attempt), the sha256 of the
canonical JSON of its messages and of its tools, and the provider's whole reply (text, tool
calls, usage, stop reason, model). The texts of the messages and of the tool schemas are kept
too, so a strict replay that misses can say which message changed and how; each distinct text
is written once (a ``text`` line named by its hash), since the system prompt and the tools repeat
in every call of a step. A line is written and flushed before ``call_model`` hands the reply to
its caller: a crash loses nothing the mission used.

The file is bounded (``CABAL_CASSETTE_MAX_BYTES``, 64 MiB by default): a call that would pass the
bound ends the recording with a ``full`` line saying so, and the replay of a later call says why
it is missing.

Recording is scoped like the call listener of ``llm/observe.py``: ``recording_to(cassette)``
around the run, and ``call_model`` hands each reply to ``record_call``.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from cabal.config import environment_number
from cabal.errors import ConfigError
from cabal.llm.keys import AGENT_KEY, ROUND_KEY, STEP_KEY, TURN_KEY

CASSETTE_FILE = "cassette.jsonl"
FORMAT_VERSION = 1
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
MAX_BYTES_ENV = "CABAL_CASSETTE_MAX_BYTES"


@dataclass(frozen=True, order=True)
class CallPlace:
    """Where a call was made: the call key, the agent's turn in the step, and the call's place in
    the turn (``attempt``: 1 for its first call, 2 after one answer went back, ...)."""

    round: int
    step: str
    agent: str
    turn: int = 0
    attempt: int = 1

    def __str__(self) -> str:
        turn = f", turn {self.turn}" if self.turn else ""
        return f"round {self.round}, step {self.step!r}, agent {self.agent!r}{turn}, call {self.attempt}"

    def to_json(self) -> dict[str, Any]:
        return {"round": self.round, "step": self.step, "agent": self.agent, "turn": self.turn,
                "attempt": self.attempt}

    @classmethod
    def of_call(cls, metadata: Mapping[str, Any], messages: Sequence[Any]) -> CallPlace:
        """The place of a call from its run metadata and its conversation so far: each earlier
        call of the turn left one assistant message in it."""
        answered = sum(1 for message in messages if getattr(message, "type", None) == "ai")
        round_ = metadata.get(ROUND_KEY)
        return cls(round=int(round_) if round_ is not None else -1, step=str(metadata.get(STEP_KEY) or ""),
                   agent=str(metadata.get(AGENT_KEY) or ""), turn=int(metadata.get(TURN_KEY) or 0),
                   attempt=answered + 1)


# ------------------------------------------------------------------------ canonical forms


def canonical_message(message: Any) -> dict[str, Any]:
    """A message as the provider reads it, without what differs between two identical calls
    (LangChain's ids) or what only steers caching (``cache_control`` marks)."""
    form: dict[str, Any] = {"role": message.type, "content": _content(message.content)}
    tool_calls = getattr(message, "tool_calls", None)
    if tool_calls:
        form["tool_calls"] = [{"name": c["name"], "args": c["args"], "id": c.get("id")} for c in tool_calls]
    if getattr(message, "tool_call_id", None):
        form["tool_call_id"] = message.tool_call_id
        form["status"] = getattr(message, "status", "success")
    return form


def _content(content: Any) -> Any:
    if isinstance(content, str):
        return content
    blocks = [{k: v for k, v in block.items() if k != "cache_control"} if isinstance(block, Mapping) else block
              for block in content]
    # The same text as a string or as text blocks (how cache breakpoints split it) reads the same.
    if all(isinstance(b, str) or (isinstance(b, Mapping) and set(b) == {"type", "text"} and b["type"] == "text")
           for b in blocks):
        return "\n\n".join(b if isinstance(b, str) else b["text"] for b in blocks)
    return blocks


def canonical_json(value: Any) -> str:
    """One text per value: keys sorted, no spaces, ASCII only (a model's reply may hold a lone
    surrogate, which no UTF-8 file or hash input can take; escaped, it is kept as it was)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=True, separators=(",", ":"), default=str)


def sha256_of(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def readable(value: Any) -> str:
    """A canonical message or tool as lines a diff can point into."""
    if isinstance(value, Mapping) and set(value) <= {"role", "content"} and isinstance(value.get("content"), str):
        return value["content"]
    return json.dumps(value, sort_keys=True, ensure_ascii=False, indent=1, default=str)


# ---------------------------------------------------------------------------- the records


@dataclass(frozen=True)
class RecordedCall:
    """One call of a cassette: where, the hashes of what was asked, and the whole reply."""

    place: CallPlace
    messages_sha256: str
    tools_sha256: str
    message_hashes: tuple[str, ...]
    tool_hashes: tuple[str, ...]
    model: str
    content: Any  # the reply's content: a text, or the provider's blocks
    tool_calls: tuple[dict[str, Any], ...]
    invalid_tool_calls: tuple[dict[str, Any], ...]
    usage: dict[str, Any]
    stop_reason: str | None
    response_metadata: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"v": FORMAT_VERSION, "kind": "call", "key": self.place.to_json(),
                "messages_sha256": self.messages_sha256, "tools_sha256": self.tools_sha256,
                "messages": list(self.message_hashes), "tools": list(self.tool_hashes),
                "response": {"model": self.model, "content": self.content, "tool_calls": list(self.tool_calls),
                             "invalid_tool_calls": list(self.invalid_tool_calls), "usage": self.usage,
                             "stop_reason": self.stop_reason, "response_metadata": self.response_metadata}}

    @classmethod
    def from_json(cls, line: Mapping[str, Any]) -> RecordedCall:
        response = line["response"]
        return cls(place=CallPlace(**line["key"]), messages_sha256=line["messages_sha256"],
                   tools_sha256=line["tools_sha256"], message_hashes=tuple(line["messages"]),
                   tool_hashes=tuple(line["tools"]), model=response["model"], content=response["content"],
                   tool_calls=tuple(response["tool_calls"]), invalid_tool_calls=tuple(response["invalid_tool_calls"]),
                   usage=dict(response["usage"] or {}), stop_reason=response["stop_reason"],
                   response_metadata=dict(response.get("response_metadata") or {}))


@dataclass
class Cassette:
    """A cassette read whole: its calls in order, the texts they name, whether it filled up."""

    path: Path
    calls: list[RecordedCall]
    texts: dict[str, Any]
    full_at: int | None = None  # the bound, when the recording stopped at it

    @classmethod
    def read(cls, path: str | Path) -> Cassette:
        path = Path(path)
        try:
            raw = path.read_text(encoding="utf-8")
        except OSError as error:
            raise ConfigError(f"cannot read cassette {path}: {error.strerror}",
                              hint="a mission records one in its folder unless run with --no-record") from None
        calls: list[RecordedCall] = []
        texts: dict[str, Any] = {}
        full_at = None
        for number, line in enumerate(raw.splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if record["v"] != FORMAT_VERSION:
                    raise ConfigError(f"{path}, line {number}: a cassette of format {record['v']!r}; this Cabal "
                                      f"reads format {FORMAT_VERSION}", hint="record the mission again")
                kind = record["kind"]
                if kind == "text":
                    texts[record["sha256"]] = record["value"]
                elif kind == "call":
                    calls.append(RecordedCall.from_json(record))
                elif kind == "full":
                    full_at = int(record["limit"])
            except (ValueError, KeyError, TypeError) as error:
                if number == len(raw.splitlines()) and not raw.endswith("\n"):
                    break  # the last line of a run killed while writing it: that call was never used
                raise ConfigError(f"{path}, line {number}: not a cassette record ({type(error).__name__}: {error})") \
                    from None
        return cls(path, calls, texts, full_at)

    def text(self, sha: str) -> Any:
        return self.texts.get(sha)

    @property
    def model(self) -> str:
        """The model most of the calls were made to (what a replay's usage is priced as)."""
        names = [call.model for call in self.calls]
        return max(set(names), key=names.count) if names else "cabal-replay"


# ------------------------------------------------------------------------------ recording


def max_bytes() -> int:
    """The bound of one cassette: ``CABAL_CASSETTE_MAX_BYTES``, else 64 MiB."""
    return int(environment_number(MAX_BYTES_ENV, DEFAULT_MAX_BYTES, what="bytes", whole=True, least=1))


class CassetteWriter:
    """Appends calls to a cassette file, each text once, within ``limit`` bytes; thread-safe."""

    def __init__(self, path: Path, handle: IO[str], *, limit: int, known: set[str], size: int,
                 full: bool, on_full: Callable[[str], None] | None = None) -> None:
        self.path = path
        self.limit = limit
        self.on_full = on_full  # told once, when the bound ends the recording
        self._handle = handle
        self._known = known
        self._size = size
        self._full = full
        self._lock = threading.Lock()
        self._encodings: dict[Hashable, tuple[str, str]] = {}  # a kept form's key -> (sha256, canonical JSON)

    @property
    def full(self) -> bool:
        return self._full

    def record(self, place: CallPlace, messages: Sequence[Any], tools: Sequence[Mapping[str, Any]],
               model: str, raw: Any) -> None:
        # A step's system prompts and tools repeat in its calls: kept encoded; the rest is each call's own.
        forms = [self._encoded(canonical_message(m), keep=getattr(m, "type", None) == "system") for m in messages]
        tool_forms = [self._encoded(dict(tool), keep=True) for tool in tools]
        texts = dict(forms + tool_forms)  # sha256 -> canonical JSON
        call = RecordedCall(
            place=place, messages_sha256=_list_sha256(forms), tools_sha256=_list_sha256(tool_forms),
            message_hashes=tuple(sha for sha, _ in forms), tool_hashes=tuple(sha for sha, _ in tool_forms),
            model=str((raw.response_metadata or {}).get("model_name") or model), content=raw.content,
            tool_calls=tuple({"name": c["name"], "args": c["args"], "id": c["id"]} for c in raw.tool_calls),
            invalid_tool_calls=tuple({k: c.get(k) for k in ("name", "args", "id", "error")}
                                     for c in raw.invalid_tool_calls),
            usage=json.loads(canonical_json(raw.usage_metadata or {})),
            stop_reason=(raw.response_metadata or {}).get("stop_reason")
            or (raw.response_metadata or {}).get("finish_reason"),
            response_metadata=json.loads(canonical_json(raw.response_metadata or {})))
        with self._lock:
            if self._full:
                return
            lines = [_text_line(sha, text) for sha, text in texts.items() if sha not in self._known]
            lines.append(canonical_json(call.to_json()))
            chunk = "".join(line + "\n" for line in lines)
            size = len(chunk.encode("utf-8"))
            filled = self._size + size > self.limit
            if filled:
                self._full = True
                chunk = canonical_json({"v": FORMAT_VERSION, "kind": "full", "limit": self.limit,
                                        "at": place.to_json()}) + "\n"
                size = len(chunk.encode("utf-8"))
            else:
                self._known.update(texts)
            self._handle.write(chunk)
            self._handle.flush()  # in the OS's hands before the reply is used: a kill loses nothing
            self._size += size
        if filled and self.on_full is not None:
            self.on_full(f"the cassette {self.path} reached its bound of {self.limit:,} bytes at {place}: later "
                         f"model calls are not recorded, so a replay stops there ({MAX_BYTES_ENV} raises it)")

    def _encoded(self, form: Any, *, keep: bool) -> tuple[str, str]:
        """The sha256 of ``form``'s canonical JSON, and that JSON: encoded once per writer for a
        form it is told to ``keep`` (a step's system prompt and tools are in every call of the
        step: encoding them again per call was most of a call's recording). The key is a text
        message's role and text, else the form's ``repr``: exact for the JSON values messages
        and tool schemas are made of, and several times cheaper than the encoding it saves."""
        key: Hashable = None
        if keep:
            key = ((form["role"], form["content"]) if len(form) == 2 and isinstance(form.get("content"), str)
                   and isinstance(form.get("role"), str) else repr(form))
            found = self._encodings.get(key)
            if found is not None:
                return found
        text = canonical_json(form)
        found = (hashlib.sha256(text.encode("utf-8")).hexdigest(), text)
        if keep:
            if len(self._encodings) >= _ENCODINGS_KEPT:
                self._encodings.clear()  # a bound, not an LRU: a mission's prompts and tools are a few dozen
            self._encodings[key] = found
        return found

    def close(self) -> None:
        self._handle.close()


_ENCODINGS_KEPT = 128


def _list_sha256(encoded: Sequence[tuple[str, str]]) -> str:
    """``sha256_of`` the list of the forms, from their canonical texts: the canonical JSON of a
    list is its items' canonical JSON joined by commas in brackets, so nothing is encoded twice."""
    return hashlib.sha256(("[" + ",".join(text for _, text in encoded) + "]").encode("utf-8")).hexdigest()


def _text_line(sha: str, text: str) -> str:
    """``canonical_json`` of a text record whose value's canonical JSON is ``text`` (its keys in
    sorted order: kind, sha256, v, value), without encoding the value again."""
    return f'{{"kind":"text","sha256":"{sha}","v":{FORMAT_VERSION},"value":{text}}}'


@contextmanager
def open_cassette(path: Path, *, limit: int | None = None,
                  on_full: Callable[[str], None] | None = None) -> Iterator[CassetteWriter]:
    """A writer appending to ``path`` (a resumed mission goes on with its own cassette)."""
    from cabal.private import open_private

    known: set[str] = set()
    full = False
    if path.exists():
        _drop_partial_line(path)
        existing = Cassette.read(path)
        known, full = set(existing.texts), existing.full_at is not None
    handle = open_private(path, "a")
    os.fchmod(handle.fileno(), 0o600)  # one a workspace made before it was private
    writer = CassetteWriter(path, handle, limit=limit or max_bytes(), known=known,
                            size=path.stat().st_size, full=full, on_full=on_full)
    try:
        yield writer
    finally:
        writer.close()


def _drop_partial_line(path: Path) -> None:
    """A run killed while writing a line left it without its newline: that call was never used,
    and the next line must not be appended to it."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as handle:
            handle.truncate(data.rfind(b"\n") + 1)


_RECORDER: ContextVar[CassetteWriter | None] = ContextVar("cabal_cassette", default=None)


@contextmanager
def recording_to(writer: CassetteWriter | None) -> Iterator[None]:
    """Within the block (and the threads it starts with a copy of its context), every call
    ``call_model`` completes is recorded by ``writer`` (None: not recorded)."""
    token = _RECORDER.set(writer)
    try:
        yield
    finally:
        _RECORDER.reset(token)


def record_call(model: str, messages: Sequence[Any], tools: Sequence[Mapping[str, Any]],
                metadata: Mapping[str, Any], raw: Any) -> None:
    """Record one call that returned, if a cassette is being recorded here."""
    writer = _RECORDER.get()
    if writer is not None:
        writer.record(CallPlace.of_call(metadata, messages), messages, tools, model, raw)


@contextmanager
def recording(path: Path, enabled: bool = True, *,
              on_full: Callable[[str], None] | None = None) -> Iterator[CassetteWriter | None]:
    """Record the block's calls to the cassette at ``path`` (nothing, when not ``enabled``);
    ``on_full`` hears, once, that the bound ended the recording."""
    if not enabled:
        with recording_to(None):
            yield None
        return
    with open_cassette(path, on_full=on_full) as writer, recording_to(writer):
        yield writer


# ------------------------------------------------------------------------------- scripts


@dataclass(frozen=True)
class Script:
    """A cassette as entries of the scripted model's file (``llm/scripted.py``), and the calls
    that format cannot hold (a text answer, several tool calls at once)."""

    entries: list[dict[str, Any]]
    unscriptable: list[CallPlace]


def script_of(cassette: Cassette) -> Script:
    """One entry per call, in the order each key's calls were made; a call made again by a
    resumed mission counts once (its last recording)."""
    latest = {call.place: call for call in cassette.calls}
    entries, unscriptable = [], []
    for place in sorted(latest):
        call = latest[place]
        if len(call.tool_calls) != 1 or call.invalid_tool_calls:
            unscriptable.append(place)
            continue
        tool_call = call.tool_calls[0]
        entries.append({"round": place.round, "step": place.step, "agent": place.agent,
                        "tool": tool_call["name"], "args": tool_call["args"]})
    return Script(entries, unscriptable)
