"""A seeded model that answers like a bad real one: the simulated team's valid answer, or one of
the ways real models and APIs get it wrong.

Each call draws its fate from a generator seeded by (seed, round, step, agent, attempt), so a
seed replays the same mission whatever order parallel calls arrive in. About half the answers
are valid, so missions progress and most turns end well within their three attempts; the rest
are the replies the engine must turn into rejected attempts, never into a traceback:

- plain text instead of a tool call; no tool call at all;
- a tool call whose arguments are not valid JSON (LangChain's ``invalid_tool_calls``);
- a tool the step does not offer; several tool calls at once;
- an answer cut off at ``max_tokens``;
- a valid answer wrapped in unexpected content blocks (thinking, server tools): this one must
  be accepted;
- arguments that miss fields, hold wrong types or empty strings, or are not the step's at all;
- ids the call never showed; nesting deeper than any answer should be; a NUL character, a lone
  surrogate or a terminal escape sequence inside a text.
"""

from __future__ import annotations

import copy
import random
import zlib
from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage

from cabal.llm import FunctionChatModel, ModelRequest
from cabal.rounds.simulated import SimulatedTeam

Corruption = Callable[[random.Random, dict[str, Any], str], AIMessage | dict[str, Any]]


def _call(tool: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": tool, "args": args, "id": call_id, "type": "tool_call"}


def _text(rng, answer, call_id):
    return AIMessage(content=rng.choice(["Let me think about this step first.", "", "Done!"]))


def _bad_json(rng, answer, call_id):
    return AIMessage(content="", invalid_tool_calls=[{
        "type": "invalid_tool_call", "name": answer["tool"], "args": '{"reasoning": "half an answer", "x": [',
        "id": call_id, "error": "Expecting value: line 1 column 40"}])


def _unknown_tool(rng, answer, call_id):
    return AIMessage(content="", tool_calls=[_call(rng.choice(["submit", "answer", "final"]), answer["args"], call_id)])


def _several(rng, answer, call_id):
    return AIMessage(content="", tool_calls=[_call(answer["tool"], answer["args"], call_id),
                                             _call(answer["tool"], copy.deepcopy(answer["args"]), call_id + "b")])


def _cut_off(rng, answer, call_id):
    args = {key: value for key, value in list(answer["args"].items())[:1]}
    return AIMessage(content="", tool_calls=[_call(answer["tool"], args, call_id)],
                     response_metadata={"stop_reason": "max_tokens"})


def _wrapped_in_blocks(rng, answer, call_id):  # valid: the blocks around it must not matter
    blocks = [{"type": "thinking", "thinking": "Weighing the options.", "signature": "c2ln"},
              {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x"}},
              {"type": "text", "text": "Here is my answer."}]
    return AIMessage(content=blocks, tool_calls=[_call(answer["tool"], answer["args"], call_id)])


def _leaves(value: Any, path: tuple = ()) -> list[tuple]:
    """Paths to every value inside an answer (dict keys and list indexes)."""
    found = [path] if path else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _leaves(item, (*path, index))
    return found


def _set(value: Any, path: tuple, new: Any, *, delete: bool = False) -> None:
    for key in path[:-1]:
        value = value[key]
    if delete and isinstance(value, dict):
        value.pop(path[-1], None)
    else:
        value[path[-1]] = new


def _mutated(rng, answer, call_id):
    args = copy.deepcopy(answer["args"])
    for _ in range(rng.randint(1, 3)):
        paths = _leaves(args)
        if not paths:
            break
        path = rng.choice(paths)
        change = rng.choice(["delete", "wrong type", "empty", "bad id"])
        if change == "delete":
            _set(args, path, None, delete=True)
        elif change == "wrong type":
            _set(args, path, rng.choice([42, None, True, {"unexpected": "object"}, ["a", "list"]]))
        elif change == "empty":
            _set(args, path, "")
        else:
            _set(args, path, rng.choice(["p999", "v42", "c77", "new-9", "operative-9"]))
    return {"tool": answer["tool"], "args": args}


def _not_the_steps(rng, answer, call_id):
    return {"tool": answer["tool"], "args": rng.choice([{}, {"foo": 1}, {"answer": "yes"}])}


def _deep(rng, answer, call_id):
    nested: Any = "bottom"
    for _ in range(rng.choice([40, 300, 900])):
        nested = {"deeper": nested}
    return {"tool": answer["tool"], "args": {**answer["args"], "reasoning": nested}}


def _bad_characters(rng, answer, call_id):
    bad = rng.choice(["a\x00b", "a\ud800b", "\x1b[2Jcleared", "bell\x07"])
    args = copy.deepcopy(answer["args"])
    args["reasoning"] = f"I weighed it {bad} carefully."
    return {"tool": answer["tool"], "args": args}


CORRUPTIONS: dict[str, Corruption] = {
    "text": _text, "bad_json": _bad_json, "unknown_tool": _unknown_tool, "several": _several, "cut_off": _cut_off,
    "wrapped": _wrapped_in_blocks, "mutated": _mutated, "not_the_steps": _not_the_steps, "deep": _deep,
    "bad_characters": _bad_characters,
}


class ChaosTeam:
    """``fn(request)`` for ``FunctionChatModel``; ``dealt`` counts what each kind of reply was."""

    def __init__(self, seed: int, *, valid_share: float = 0.5, **team: Any) -> None:
        self.seed = seed
        self.valid_share = valid_share
        self.team = SimulatedTeam(**team)
        self.dealt: dict[str, int] = {}

    def __call__(self, request: ModelRequest) -> AIMessage | dict[str, Any]:
        key = f"{self.seed}|{request.key.round}|{request.key.step}|{request.key.agent}|{request.attempt}"
        rng = random.Random(zlib.crc32(key.encode()))
        answer = self.team(request)
        kind = "valid" if rng.random() < self.valid_share else rng.choice(sorted(CORRUPTIONS))
        self.dealt[kind] = self.dealt.get(kind, 0) + 1
        if kind == "valid":
            return answer
        return CORRUPTIONS[kind](rng, answer, f"toolu_chaos_{zlib.crc32(key.encode())}")


def chaos_model(seed: int, **options: Any) -> tuple[FunctionChatModel, ChaosTeam]:
    team = ChaosTeam(seed, **options)
    return FunctionChatModel(team), team
