"""Ids: deterministic graph ids, and the short ids a model sees.

Graph ids are derived from where a write happens (round, step, agent, position in the answer),
never from a clock or a random source, so replaying a turn after a crash writes the same ids
and the graph's MERGE turns the replay into a no-op.

A model never sees those ids. It sees short ones that keep their meaning for the whole
mission (``short_ids``): a product is ``p<N>`` by the order products were created, a version
``p<N>.v<number>``, a collab ``c<N>`` by the order collabs were created. The order is read from
the graph ids themselves (round, step, attempt, agent, position), so a replay or a resume
numbers alike, and whatever is created later sorts later and takes the next numbers. A call
maps back any of the mission's ids in id fields and references, and the ids it showed where
they stand as bare words in text (``TempIds``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cabal.errors import AnswerProblem
from cabal.refs import find_malformed, parse_refs, render_ref, replace_refs
from cabal.rounds.sources import cited_node, shown_id
from cabal.vocabulary import USER_ID, Step

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

# The graph id of what a turn wrote (``item_id`` of ``turn_id``), and of a user's note (``leave_note``).
_MADE_ID = re.compile(r"r(\d+)\.([a-z_]+)\.([^.]+)(?:\.after(\d+))?\.[a-z_]+?(\d+)")
_NOTE_ID = re.compile(r"user\.r(\d+)\.note(\d+)")
_STEP_NAMES = frozenset(Step)
# A short id written as a word in text: p3, p3.v2, c4 (not part of a longer token, not v1.0).
_BARE_ID = re.compile(r"(?<![\w.:#/\-])(?:p\d+(?:\.v\d+)?|c\d+)(?![\w\-]|\.\w)")
# Where a bare id stays as written: a reference (mapped on its own) and code.
_KEPT_AS_WRITTEN = re.compile(r"```.*?```|`[^`\n]*`|\[\[[^\[\]]*\]\]", re.DOTALL)
_KIND_NAMES = {"p": "products", "v": "versions", "c": "collabs"}


def step_place(round_number: Any, step: Any) -> tuple[int, int]:
    """Where in the mission a step is: (round, position in the round); unknown steps first."""
    position = Step(str(step)).position if step in _STEP_NAMES else -1
    return (int(round_number or 0), position)


def creation_key(node: Mapping[str, Any]) -> tuple[int, int, int, str, int, str]:
    """Where in the mission a product, collab or decision was created, read from its graph id: (round,
    step's position, the Chair's attempt, agent, position in the answer). A user's note of round
    N is read at the start of round N+1 (``load_snapshot``): before anything that round writes,
    after everything already there. (A note the Chair's Plan reads in its own round keeps its
    number until that round's later steps write collabs, which number before it.) An id of
    another form comes last in its round."""
    node_id = str(node["id"])
    if note := _NOTE_ID.fullmatch(node_id):
        return (int(note[1]) + 1, -2, 0, "", int(note[2]), node_id)
    if made := _MADE_ID.fullmatch(node_id):
        return (*step_place(made[1], made[2]), int(made[4] or 0), made[3], int(made[5]), node_id)
    return (int(node.get("round") or 0), len(_STEP_NAMES), 0, "", 0, node_id)


def short_ids(products: Iterable[Mapping[str, Any]], versions: Iterable[Mapping[str, Any]],
              collabs: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The short id of every product (``p<N>``), version (``p<N>.v<number>``) and collab (``c<N>``)
    of a mission, by graph id: products and collabs numbered in the order they were created."""
    numbered = {product["id"]: f"p{n}" for n, product in enumerate(sorted(products, key=creation_key), 1)}
    numbered |= {version["id"]: f"{numbered[version['product_id']]}.v{int(version['number'])}"
                 for version in versions if version.get("product_id") in numbered}
    numbered |= {collab["id"]: f"c{n}" for n, collab in enumerate(sorted(collabs, key=creation_key), 1)}
    return numbered


def _kind_of(alias: str) -> str | None:
    """The kind a mission's short id names by its form: ``p3`` a product, ``p3.v2`` a version, ``c4`` a collab."""
    if re.fullmatch(r"p\d+\.v\d+", alias):
        return "v"
    return alias[0] if re.fullmatch(r"[pc]\d+", alias) else None


def _in_order(alias: str) -> tuple[int, ...]:
    return tuple(int(number) for number in re.findall(r"\d+", alias))


def _spans(aliases: list[str]) -> str:
    """``p1, p2, p3, p5`` as ``p1-p3, p5``."""
    spans: list[list[str]] = []
    for alias in aliases:
        if spans and re.fullmatch(r"[pc]\d+", alias) and _in_order(alias)[0] == _in_order(spans[-1][-1])[0] + 1:
            spans[-1].append(alias)
        else:
            spans.append([alias])
    return ", ".join(span[0] if len(span) == 1 else f"{span[0]}-{span[-1]}" for span in spans)


@dataclass
class TempIds:
    """The short ids of one model call, both ways. ``mission`` holds every short id of the
    mission by graph id (``short_ids``): any of them maps back, and a bare word in text only when
    the call showed it (a word like "c2" may be no id at all). Agents keep
    their own ids (``operative-2``); ``agents`` (the team's ids) lets ``[[a:...]]`` references be
    checked too. Sources keep their stable ids (``s2``, ``s2#3``); ``sources`` (each source's
    current version by its id) checks ``[[s:...]]`` citations and maps them to the version cited,
    so a later version of the file never changes what a text cited. A tool result is cited by
    its call's id (``tool_call_id``): ``tool_calls`` holds those a text may cite, the mission's
    answered calls and, added as they are made, the turn's own."""

    agents: frozenset[str] = frozenset()
    sources: Mapping[str, dict] = field(default_factory=dict)
    mission: Mapping[str, str] = field(default_factory=dict)
    tool_calls: set[str] = field(default_factory=set)
    _short: dict[str, str] = field(default_factory=dict)
    _real: dict[str, tuple[str, str]] = field(default_factory=dict)  # short id -> (kind, graph id)
    _aliases: dict[str, str] | None = None  # the mission's short ids, both ways, read once

    def short(self, kind: str, real: str) -> str:
        if real not in self._short:
            # A node the mission's numbering lacks (none today: every text names a node of the
            # view) gets an id of this call only, unlike any the mission numbers.
            alias = self.mission.get(real) or f"{kind}x{len(self._short) + 1}"
            self._short[real] = alias
            self._real[alias] = (kind, real)
        return self._short[real]

    def real(self, alias: str, kind: str | None = None) -> str | None:
        """The graph id of a short id of the mission (of ``kind``, if given). Ids mean the same for
        the whole mission, so one this call did not show is as good: a Chair refused for naming
        ``p2.v1``, shown to it a step before, lost a round trip."""
        shown = self._real.get(alias)
        if shown is None and (kind_of := _kind_of(alias)) and (real := self._by_alias().get(alias)):
            self.short(kind_of, real)
            shown = self._real.get(alias)
        return shown[1] if shown and kind in (None, shown[0]) else None

    def _by_alias(self) -> dict[str, str]:
        if self._aliases is None:
            self._aliases = {alias: real for real, alias in self.mission.items()}
        return self._aliases

    def shown(self, kind: str) -> list[str]:
        """The short ids of one kind this call has shown so far, in order (p1, p2, ...)."""
        return sorted((alias for alias, (k, _) in self._real.items() if k == kind), key=_in_order)

    def summary(self) -> str:
        """The ids this call may use, in short: ``products p1-p4, p6 · versions p1.v2, p3.v1 · ...``."""
        parts = [f"{noun} {_spans(self.shown(kind))}" for kind, noun in _KIND_NAMES.items() if self.shown(kind)]
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
        real = self.real(value, kind)
        if real is None:
            shown = ", ".join(self.shown(kind)) or "none in your context"
            problems.append(AnswerProblem(path, f"unknown id {value!r}; known {kind}-ids: {shown}"))
            return value
        return real

    def _map_text(self, text: str, path: str, problems: list[AnswerProblem]) -> str:
        """A text's references checked (a reference to an unknown id is the model's error to
        fix, never a dangling link) and their short ids mapped back; a short id this call showed,
        written as a bare word ("as agreed in c1"), becomes a reference, so it is stored with the
        graph id and every later reader sees it in its own ids."""
        if "[[" in text:
            self._check_refs(text, path, problems)
            text = replace_refs(text, lambda ref: self.real(ref.id, ref.kind) or ref.id if ref.kind in "pvc"
                                else self._cited(ref.id) or ref.id if ref.kind == "s" else ref.id)
        parts, start = [], 0
        for kept in _KEPT_AS_WRITTEN.finditer(text):
            parts += [_BARE_ID.sub(self._bare_to_ref, text[start:kept.start()]), kept[0]]
            start = kept.end()
        return "".join(parts) + _BARE_ID.sub(self._bare_to_ref, text[start:])

    def _bare_to_ref(self, word: re.Match[str]) -> str:
        shown = self._real.get(word[0])
        return render_ref(*shown) if shown else word[0]

    def _check_refs(self, text: str, path: str, problems: list[AnswerProblem]) -> None:
        for bad in find_malformed(text):
            problems.append(AnswerProblem(path, f"{bad} is not a reference; write [[p:id]], [[v:id]], [[c:id]], "
                                                "[[a:agent-id]], [[u:user]] or [[s:source-id]]"))
        for ref in parse_refs(text):
            if ref.kind in "pvc" and self.real(ref.id, ref.kind) is None:
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

    def _cited(self, cited: str) -> str | None:
        """The graph id a citation names: a source's version or section, or a tool call answered."""
        return cited_node(cited, self.sources) or (cited if cited in self.tool_calls else None)
