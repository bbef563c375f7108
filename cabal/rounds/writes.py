"""From a checked answer to membrane runs, and from runs to the clusters a turn commits.

The role card says which protocol writes which part of an answer and which rule checks it;
``contracts`` says what each protocol needs besides the item. The item the membrane receives is
the pydantic value the turn already validated (the membrane takes it as valid: one validation
per answer). Each protocol runs as a dry run (``Membrane.prepare``), so every membrane problem
reaches the model with the engine's own. A turn's clusters plus its turn moment are one unit;
the step commits the units of all its turns as ONE write (``MissionRun.commit_step``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from cabal.errors import AnswerProblem, AnswerRejected
from cabal.membrane import Cluster, Membrane
from cabal.rounds.contracts import WriteScope, round_protocol
from cabal.rounds.ids import NEW_PRODUCT_PREFIX, item_id
from cabal.rounds.rules import ABOUT_RULES, RuleContext, step_problems
from cabal.rounds.snapshot import decision_key
from cabal.rounds.team import WriteRule
from cabal.vocabulary import Step

@dataclass(frozen=True)
class TurnPlace:
    """Where a turn happens: everything a deterministic id is made of."""

    mission_id: str
    round: int
    step: Step | str  # a step of the round, or "budget": the question the engine asks itself
    agent_id: str
    turn_id: str


def _items(answer: BaseModel, rule: WriteRule) -> list[tuple[str, Any]]:
    """(path, item) pairs of the checked answer a rule writes: each item of a list field, a
    single field, or the whole answer (a rule with no field)."""
    if rule.field is None:
        return [("", answer)]
    name = next(n for n, info in type(answer).model_fields.items() if (info.alias or n) == rule.field)
    value = getattr(answer, name)
    if value is None:
        return []
    if isinstance(value, list):
        return [(f"{rule.field}.{index}", item) for index, item in enumerate(value)]
    return [(rule.field, value)]


class TurnWriter:
    """Checks one answer against the rules and the membrane, and makes what the turn commits."""

    def __init__(self, membrane: Membrane, rules: RuleContext, place: TurnPlace, writes: tuple[WriteRule, ...]) -> None:
        self.membrane = membrane
        self.rules = rules
        self.place = place
        self.writes = writes

    # ----------------------------------------------------------------------------- check

    def check(self, answer: BaseModel) -> list[Cluster]:
        """The clusters the answer writes, one per protocol run, or ``AnswerRejected`` with every
        problem of the answer at once (the engine's rules first, then the membrane's)."""
        self.rules.added.clear()
        self.rules.seen.clear()
        self.rules.decided.clear()
        problems: list[AnswerProblem] = []
        for rule in self.writes:
            if rule.about:
                for path, item in _items(answer, rule):
                    problems += [AnswerProblem(path, text) for text in ABOUT_RULES[rule.about](item, self.rules)]
        problems += [AnswerProblem(path, text) for path, text in step_problems(self.place.step, answer, self.rules)]
        if problems:
            raise AnswerRejected(problems)
        first = self.rules.snapshot.next_decision_number()
        scope = WriteScope(self.rules.snapshot, self.rules.team,
                           {new: item_id(self.place.turn_id, "product", index)
                            for index, new in enumerate(self.rules.added)},
                           {topic: decision_key(first + index) for index, topic in enumerate(self.rules.decided)})
        prepared: list[Cluster] = []
        for rule in self.writes:
            contract = round_protocol(rule.protocol)
            for index, (path, item) in enumerate(_items(answer, rule)):
                item = _with_real_ids(item, scope.new_ids)
                try:
                    prepared.append(self.prepare_one(rule.protocol, item, contract.context(item, scope), index=index,
                                                     key=contract.answer_key(item)))
                except AnswerRejected as rejected:
                    problems += [AnswerProblem(_join(path, _strip_key(p.path)), p.message) for p in rejected.problems]
        if problems:
            raise AnswerRejected(problems)
        return prepared

    def prepare_one(self, protocol: str, item: BaseModel, extra: dict[str, Any], *, index: int = 0,
                    key: str = "item") -> Cluster:
        """One protocol run over one checked item, as a prepared cluster (``AnswerRejected`` if
        the membrane refuses it)."""
        context = {"mission_id": self.place.mission_id, "round": self.place.round, "step": self.place.step,
                   "agent_id": self.place.agent_id, "actor_id": self.place.agent_id, "turn_id": self.place.turn_id,
                   "index": index, "item_id": item_id(self.place.turn_id, protocol, index), **extra}
        return self.membrane.prepare(protocol, context, {key: item}, session_id=context["item_id"])

    # ------------------------------------------------------------------------ the commit

    def unit(self, prepared: list[Cluster], turn_record: dict[str, Any]) -> list[Cluster]:
        """The turn's writes and its turn moment: what commits all together or not at all."""
        return [*prepared, self.record(turn_record)]

    def record(self, turn_record: dict[str, Any]) -> Cluster:
        """The turn moment: its id marks the turn as committed (a replay skips it)."""
        context = {"mission_id": self.place.mission_id, "round": self.place.round, "step": self.place.step,
                   "agent_id": self.place.agent_id, "actor_id": self.place.agent_id, "turn_id": self.place.turn_id,
                   **turn_record}
        return self.membrane.prepare("record_turn", context, {}, session_id=f"{self.place.turn_id}.record")


def _join(*parts: str) -> str:
    return ".".join(part for part in parts if part)


def _strip_key(path: str) -> str:
    """Membrane paths start with the ask's key (item, add, ...); the model knows the item path."""
    return path.split(".", 1)[1] if "." in path else ""


def _with_real_ids(value: Any, new_ids: Mapping[str, str]) -> Any:
    """``value`` with the ``new-N`` ids of this answer's ADD operations replaced by their real
    ids, ``newId`` itself excepted. A pydantic value is copied, not validated again."""
    if not new_ids:
        return value
    if isinstance(value, BaseModel):
        changed = {name: new for name, old in value if name != "new_id"
                   and (new := _with_real_ids(old, new_ids)) is not old}
        return value.model_copy(update=changed) if changed else value
    if isinstance(value, list):
        mapped = [_with_real_ids(item, new_ids) for item in value]
        return mapped if any(new is not old for new, old in zip(mapped, value)) else value
    if isinstance(value, str) and value.startswith(NEW_PRODUCT_PREFIX):
        return new_ids.get(value, value)
    return value
