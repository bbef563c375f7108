"""The team as data: role cards from agents/*.yaml, and the roster of one mission.

A role card says which steps a role acts in and, per step, which field of its answer is
written through which membrane protocol and what it may be about (a rule name checked in
``cabal.rounds.rules``). The engine reads nothing about roles from anywhere else; the agents'
ids come from the vocabulary (``chair-1``, ``operative-1`` .. ``operative-N``, ...).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cabal.entities import STEP_OUTPUTS
from cabal.errors import ProtocolLoadError, ProtocolProblem, ResourceNotFound
from cabal.resources import files_by_name, parsed_once
from cabal.vocabulary import Role, Step, role_ids
from cabal.yaml_reader import read_text_file, read_yaml


@dataclass(frozen=True)
class WriteRule:
    """One part of a step's answer and the protocol that writes it.

    ``field``: a field of the answer, one protocol run per item of a list (no field: the whole
    answer, in one run); ``about``: the rule that says what each item may concern.
    """

    protocol: str
    field: str | None = None
    about: str | None = None


@dataclass(frozen=True)
class RoleCard:
    role: Role
    title: str
    persona: str
    steps: dict[Step, tuple[WriteRule, ...]]
    speaks_as: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class Agent:
    id: str
    role: Role
    name: str
    skills: tuple[str, ...] = ()


def load_role_cards(extra_dirs: Iterable[str | Path] = ()) -> dict[Role, RoleCard]:
    files = files_by_name("agents", (".yaml", ".yml"), extra_dirs)
    problems: list[ProtocolProblem] = []
    cards: dict[Role, RoleCard] = {}
    for role in Role:
        if role not in files:
            raise ResourceNotFound("role card", role, known=list(files))
        card, found = parsed_once(files[role], _read_card, "role card")
        problems += found
        if card is not None:
            cards[role] = card
    if problems:
        raise ProtocolLoadError(problems)
    return cards


def _read_card(path: Path) -> tuple[RoleCard | None, tuple[ProtocolProblem, ...]]:
    problems: list[ProtocolProblem] = []
    return _parse_card(path, problems), tuple(problems)


def _parse_card(path: Path, problems: list[ProtocolProblem]) -> RoleCard | None:
    source = str(path)
    try:
        data = read_yaml(read_text_file(path), source)
    except ProtocolLoadError as exc:
        problems.extend(exc.problems)
        return None
    if not isinstance(data, dict) or data.get("role") != path.stem:
        problems.append(ProtocolProblem(source, f"a role card is a mapping whose `role` is {path.stem!r}", field="role"))
        return None
    steps: dict[Step, tuple[WriteRule, ...]] = {}
    for name, spec in (data.get("steps") or {}).items():
        try:
            step = Step(name)
        except ValueError:
            problems.append(ProtocolProblem(source, f"unknown step (one of {', '.join(Step)})", step=name))
            continue
        rules = []
        answer_fields = STEP_OUTPUTS[step].model_fields
        aliases = {info.alias or name for name, info in answer_fields.items()}
        for index, write in enumerate((spec or {}).get("writes") or []):
            field = write.get("field")
            if not write.get("protocol") or (field is not None and field not in aliases):
                problems.append(ProtocolProblem(
                    source,
                    f"writes[{index}] needs `protocol`, and a `field` naming an answer field "
                    f"({', '.join(sorted(aliases))}) or none for the whole answer; got field {field!r}",
                    step=step, field="writes",
                ))
                continue
            rules.append(WriteRule(protocol=write["protocol"], field=field, about=write.get("about")))
        steps[step] = tuple(rules)
    return RoleCard(
        role=Role(data["role"]),
        title=data.get("title", data["role"].title()),
        persona=" ".join(str(data.get("persona", "")).split()),
        steps=steps,
        speaks_as=tuple(data.get("speaks_as") or ()),
        source=source,
    )


@dataclass(frozen=True)
class Team:
    """The roster of one mission: its agents and the role card of each."""

    agents: tuple[Agent, ...]
    cards: dict[Role, RoleCard]

    @classmethod
    def build(cls, operatives: int, cards: dict[Role, RoleCard], names: dict[str, str] | None = None,
              skills: dict[str, list[str]] | None = None) -> Team:
        names, skills = names or {}, skills or {}
        agents = [Agent(agent_id, role, names.get(agent_id, agent_id), tuple(skills.get(agent_id, ())))
                  for role in Role for agent_id in role_ids(role, operatives)]
        return cls(tuple(agents), cards)

    def get(self, agent_id: str) -> Agent | None:
        return next((agent for agent in self.agents if agent.id == agent_id), None)

    def ids(self, role: Role | None = None) -> list[str]:
        return [agent.id for agent in self.agents if role is None or agent.role == role]

    def acting(self, step: Step) -> list[Agent]:
        """The agents that act in a step, in roster order."""
        return [agent for agent in self.agents if step in self.cards[agent.role].steps]

    def writes(self, agent_id: str, step: Step) -> tuple[WriteRule, ...]:
        agent = self.get(agent_id)
        return self.cards[agent.role].steps.get(step, ()) if agent else ()

    def speakers(self, agent_id: str) -> list[str]:
        """Whom an agent may speak as: ``operatives`` in a card stands for every operative."""
        agent = self.get(agent_id)
        allowed: list[str] = []
        for entry in self.cards[agent.role].speaks_as if agent else ():
            allowed += self.ids(Role.OPERATIVE) if entry == "operatives" else [entry]
        return allowed
