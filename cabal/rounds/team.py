"""The team as data: role cards from agents/*.yaml, and the roster of one mission.

A role card says which steps a role acts in and, per step, which field of its answer is
written through which membrane protocol and what it may be about (a rule name checked in
``cabal.rounds.rules``). The engine reads nothing about roles from anywhere else.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from cabal.entities import STEP_OUTPUTS
from cabal.errors import ProtocolLoadError, ProtocolProblem, ResourceNotFound
from cabal.resources import files_by_name

ROLES = ("chair", "operative", "watchdog", "envoy")
STEPS = ("bootstrap", "reflect", "plan", "write", "peer_review", "inspect", "presentation")
ROUND_STEPS = STEPS[1:]


@dataclass(frozen=True)
class WriteRule:
    """One part of a step's answer and the protocol that writes it.

    ``field``: a list field of the answer, one protocol run per item; ``fields``: several
    fields written together by one run; ``about``: the rule that says what it may concern.
    """

    protocol: str
    field: str | None = None
    fields: tuple[str, ...] = ()
    about: str | None = None


@dataclass(frozen=True)
class RoleCard:
    role: str
    title: str
    persona: str
    steps: dict[str, tuple[WriteRule, ...]]
    fixed_ids: tuple[str, ...]  # empty for operatives, whose ids come from the team size
    speaks_as: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class Agent:
    id: str
    role: str
    name: str
    skills: tuple[str, ...] = ()


def load_role_cards(extra_dirs: Iterable[str | Path] = ()) -> dict[str, RoleCard]:
    files = files_by_name("agents", (".yaml", ".yml"), extra_dirs)
    problems: list[ProtocolProblem] = []
    cards: dict[str, RoleCard] = {}
    for role in ROLES:
        if role not in files:
            raise ResourceNotFound("role card", role, known=list(files))
        card = _parse_card(files[role], problems)
        if card is not None:
            cards[role] = card
    if problems:
        raise ProtocolLoadError(problems)
    return cards


def _parse_card(path: Path, problems: list[ProtocolProblem]) -> RoleCard | None:
    source = str(path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        problems.append(ProtocolProblem(source, f"not valid YAML: {exc}"))
        return None
    if not isinstance(data, dict) or data.get("role") != path.stem:
        problems.append(ProtocolProblem(source, f"a role card is a mapping whose `role` is {path.stem!r}", field="role"))
        return None
    steps: dict[str, tuple[WriteRule, ...]] = {}
    for step, spec in (data.get("steps") or {}).items():
        if step not in STEPS:
            problems.append(ProtocolProblem(source, f"unknown step (one of {', '.join(STEPS)})", step=step))
            continue
        rules = []
        answer_fields = STEP_OUTPUTS[step].model_fields
        aliases = {info.alias or name for name, info in answer_fields.items()}
        for index, write in enumerate((spec or {}).get("writes") or []):
            named = [write.get("field")] if write.get("field") else list(write.get("fields") or [])
            unknown = [name for name in named if name not in aliases]
            if not write.get("protocol") or not named or unknown:
                problems.append(ProtocolProblem(
                    source,
                    f"writes[{index}] needs `protocol` and `field` or `fields` naming answer fields "
                    f"({', '.join(sorted(aliases))}); unknown: {unknown or 'none'}",
                    step=step, field="writes",
                ))
                continue
            rules.append(WriteRule(protocol=write["protocol"], field=write.get("field"),
                                   fields=tuple(write.get("fields") or ()), about=write.get("about")))
        steps[step] = tuple(rules)
    ids = data.get("ids")
    return RoleCard(
        role=data["role"],
        title=data.get("title", data["role"].title()),
        persona=" ".join(str(data.get("persona", "")).split()),
        steps=steps,
        fixed_ids=tuple(ids) if isinstance(ids, list) else (),
        speaks_as=tuple(data.get("speaks_as") or ()),
        source=source,
    )


@dataclass(frozen=True)
class Team:
    """The roster of one mission: its agents and the role card of each."""

    agents: tuple[Agent, ...]
    cards: dict[str, RoleCard]

    @classmethod
    def build(cls, operatives: int, cards: dict[str, RoleCard], names: dict[str, str] | None = None,
              skills: dict[str, list[str]] | None = None) -> Team:
        names, skills = names or {}, skills or {}
        agents = []
        for role in ROLES:
            card = cards[role]
            ids = card.fixed_ids or tuple(f"operative-{n}" for n in range(1, operatives + 1))
            for agent_id in ids:
                agents.append(Agent(agent_id, role, names.get(agent_id, agent_id), tuple(skills.get(agent_id, ()))))
        return cls(tuple(agents), cards)

    def get(self, agent_id: str) -> Agent | None:
        return next((agent for agent in self.agents if agent.id == agent_id), None)

    def ids(self, role: str | None = None) -> list[str]:
        return [agent.id for agent in self.agents if role is None or agent.role == role]

    def acting(self, step: str) -> list[Agent]:
        """The agents that act in a step, in roster order."""
        return [agent for agent in self.agents if step in self.cards[agent.role].steps]

    def writes(self, agent_id: str, step: str) -> tuple[WriteRule, ...]:
        agent = self.get(agent_id)
        return self.cards[agent.role].steps.get(step, ()) if agent else ()

    def speakers(self, agent_id: str) -> list[str]:
        """Whom an agent may speak as: ``operatives`` in a card stands for every operative."""
        agent = self.get(agent_id)
        allowed: list[str] = []
        for entry in self.cards[agent.role].speaks_as if agent else ():
            allowed += self.ids("operative") if entry == "operatives" else [entry]
        return allowed
