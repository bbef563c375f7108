"""Ids: deterministic graph ids, and the short temporary ids a model sees.

Graph ids are derived from where a write happens (round, step, agent, position in the answer),
never from a clock or a random source, so replaying a turn after a crash writes the same ids
and the graph's MERGE turns the replay into a no-op.

A model never sees those ids: each call gets short ones (``p1``, ``v3``, ``c2``) assigned in
the order the context shows things, and its answer is mapped back before anything is checked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cabal.errors import AnswerProblem
from cabal.refs import find_malformed, parse_refs, replace_refs
from cabal.rounds.sources import cited_node, shown_id
from cabal.vocabulary import USER_ID

# Answer keys (camelCase, as the model writes them) that hold ids, and the kind of id.
ID_KEYS: dict[str, str] = {
    "productId": "p",
    "refersToProduct": "p",
    "parentId": "p",
    "referencesProductIds": "p",
    "versionId": "v",
    "refersToVersion": "v",
    "collabId": "c",
    "respondingToCollabIds": "c",
}
NEW_PRODUCT_PREFIX = "new-"


def turn_id(round_number: int, step: str, agent_id: str, attempt: int = 0) -> str:
    """The id of one agent's turn in one step: the marker of a committed turn. ``attempt`` n is
    a Chair's turn after the user's n-th answer in that step."""
    return f"r{round_number}.{step}.{agent_id}" + (f".after{attempt}" if attempt else "")


def step_prefix(round_number: int, step: str) -> str:
    """What every id written by a turn of this step starts with: its turn moments and items."""
    return f"r{round_number}.{step}."


def status_session(status: str, round_number: int) -> str:
    """The session of the engine's write of a mission's status at a round (one per status and round)."""
    return f"status.{status}.r{round_number}"


def item_id(turn: str, kind: str, index: int) -> str:
    return f"{turn}.{kind}{index}"


def halt_id(round_number: int, step: str, attempt: int = 0) -> str:
    """The halt of a Chair turn; ``attempt`` n is the turn after the user's n-th answer."""
    return f"r{round_number}.{step}.halt" + (f".after{attempt}" if attempt else "")


def tool_call_id(turn: str, position: int) -> str:
    """The ``position``-th tool call of a turn: its ``record_tool_call`` moment, and the id a text
    cites its result by (``[[s:r1.write.operative-1.tool2]]``): known when the call is made,
    whichever parallel turn commits first, and the same in every prompt."""
    return f"{turn}.tool{position}"


def approval_id(call_id: str) -> str:
    """The question that asks the user to approve one tool call (``call_id``: the turn's id and
    the call's position, as its ``record_tool_call`` moment is named)."""
    return f"{call_id}.approval"


def plan_gate_id(round_number: int, asked: int) -> str:
    """The ``asked``-th sign-off of the plan in a round (1 at first; again after each change)."""
    return f"r{round_number}.plan.gate{asked}"


def continue_session(mission_id: str, after_round: int, rounds: int) -> str:
    """The session of the ``continue_mission`` write that takes a mission further (its moment
    keeps it, and ``replays.recorded_mission`` reads the round and the limit back from it)."""
    return f"{mission_id}.continue.r{after_round}.{rounds}"


def output_switch_id(model_spec: str) -> str:
    """The record of a model moved to JSON answers: one per model spec (a spec may be a long
    path, so its digest), whichever turn met the refusal first."""
    return f"model-output.{hashlib.sha256(model_spec.encode()).hexdigest()[:12]}"


USER_REFS = frozenset({USER_ID, "all"})  # [[u:user]] the mission's user, [[u:all]] every user


@dataclass
class TempIds:
    """Short ids for one model call, both ways. Agents keep their own ids (``operative-2``);
    ``agents`` (the team's ids) lets ``[[a:...]]`` references be checked too. Sources keep their
    stable ids (``s2``, ``s2#3``); ``sources`` (each source's current version by its id) checks
    ``[[s:...]]`` citations and maps them to the version cited, so a later version of the file
    never changes what a text cited. A tool result is cited by its call's id (``tool_call_id``):
    ``tool_calls`` holds those a text may cite, the mission's answered calls and, added as they
    are made, the turn's own."""

    agents: frozenset[str] = frozenset()
    sources: Mapping[str, dict] = field(default_factory=dict)
    tool_calls: set[str] = field(default_factory=set)
    _short: dict[str, str] = field(default_factory=dict)
    _real: dict[str, str] = field(default_factory=dict)
    _counts: dict[str, int] = field(default_factory=dict)

    def short(self, kind: str, real: str) -> str:
        if real not in self._short:
            self._counts[kind] = self._counts.get(kind, 0) + 1
            alias = f"{kind}{self._counts[kind]}"
            self._short[real] = alias
            self._real[alias] = real
        return self._short[real]

    def real(self, alias: str) -> str | None:
        return self._real.get(alias)

    def shown(self, kind: str) -> list[str]:
        """The short ids of one kind this call has shown so far, in order (p1, p2, ...)."""
        return [f"{kind}{n}" for n in range(1, self._counts.get(kind, 0) + 1)]

    def summary(self) -> str:
        """The ids this call may use, in short: ``products p1-p4 · versions v1-v2 · ...``."""
        parts = [f"{noun} {kind}1" + (f"-{kind}{self._counts[kind]}" if self._counts[kind] > 1 else "")
                 for kind, noun in (("p", "products"), ("v", "versions"), ("c", "collabs")) if self._counts.get(kind)]
        if self.agents:
            parts.append("agents " + ", ".join(sorted(self.agents)))
        return " · ".join(parts)

    def text_to_model(self, text: str) -> str:
        """Stored text (real ids in its references) as this call shows it."""
        return replace_refs(text, lambda ref: self.short(ref.kind, ref.id) if ref.kind in "pvc"
                            else shown_id(ref.id) if ref.kind == "s" else ref.id)

    def answer_to_graph(self, answer: Any, path: str = "") -> tuple[Any, list[AnswerProblem]]:
        """The model's raw answer with every short id mapped back; unknown ids are problems.

        The walk recurses: an answer reaches it only once ``cabal.limits`` found it at most 32
        levels deep (``Turn.run`` checks every tool call first)."""
        problems: list[AnswerProblem] = []
        return self._map(answer, path, None, problems), problems

    def _map(self, value: Any, path: str, kind: str | None, problems: list[AnswerProblem]) -> Any:
        if isinstance(value, dict):
            return {key: self._map(item, f"{path}.{key}" if path else key, ID_KEYS.get(key), problems)
                    for key, item in value.items()}
        if isinstance(value, list):
            return [self._map(item, f"{path}.{index}", kind, problems) for index, item in enumerate(value)]
        if isinstance(value, str) and kind is not None:
            return self._map_id(value, kind, path, problems)
        if isinstance(value, str):
            return self._map_text(value, path, problems)
        return value

    def _map_id(self, value: str, kind: str, path: str, problems: list[AnswerProblem]) -> str:
        if kind == "p" and value.startswith(NEW_PRODUCT_PREFIX):
            return value  # a product added in this same answer; the plan step resolves it
        real = self._real.get(value)
        if real is None or not value.startswith(kind):
            shown = ", ".join(a for a in self._real if a.startswith(kind)) or "none in your context"
            problems.append(AnswerProblem(path, f"unknown id {value!r}; known {kind}-ids: {shown}"))
            return value
        return real

    def _map_text(self, text: str, path: str, problems: list[AnswerProblem]) -> str:
        """A text's references checked (a reference to an unknown id is the model's error to
        fix, never a dangling link) and their short ids mapped back."""
        if "[[" not in text:
            return text
        for bad in find_malformed(text):
            problems.append(AnswerProblem(path, f"{bad} is not a reference; write [[p:id]], [[v:id]], [[c:id]], "
                                                "[[a:agent-id]], [[u:user]] or [[s:source-id]]"))
        for ref in parse_refs(text):
            if ref.kind in "pvc" and self.real(ref.id) is None:
                problems.append(AnswerProblem(path, f"reference {ref.render()} names no {ref.kind_name} in your context"))
            elif ref.kind == "a" and self.agents and ref.id not in self.agents:
                problems.append(AnswerProblem(path, f"reference {ref.render()} names no agent of this team "
                                                    f"({', '.join(sorted(self.agents))})"))
            elif ref.kind == "u" and ref.id not in USER_REFS:
                problems.append(AnswerProblem(path, f"reference {ref.render()} names no user; use [[u:user]] or [[u:all]]"))
            elif ref.kind == "s" and self._cited(ref.id) is None:
                known = ", ".join(self.sources) or "none in this mission"
                problems.append(AnswerProblem(path, f"citation {ref.render()} names no source, section or tool result "
                                                    f"(sources: {known}; a section is [[s:s2#3]]; a tool result is "
                                                    "cited by the id its result gave)"))
        return replace_refs(text, lambda ref: self._real.get(ref.id, ref.id) if ref.kind in "pvc"
                            else self._cited(ref.id) or ref.id if ref.kind == "s" else ref.id)

    def _cited(self, cited: str) -> str | None:
        """The graph id a citation names: a source's version or section, or a tool call answered."""
        return cited_node(cited, self.sources) or (cited if cited in self.tool_calls else None)
