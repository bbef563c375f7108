"""The team as data: role cards from agents/*.yaml, and the roster of one mission.

A role card says which steps a role acts in and, per step, which field of its answer is
written through which membrane protocol and what it may be about (a rule name checked in
``cabal.rounds.rules``). The engine reads nothing about roles from anywhere else. A card may
also declare its role's members (ids, names, persona, domain, skills, model; a watchdog's
focus); without members, the ids come from the vocabulary (``chair-1``, ``operative-1`` ..
``operative-N``, ``watchdog-1``, ``envoy-1``). A project's card (or a mission's, ``team: {cards:
DIR}``) overrides the built-in card of its kind field by field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import get_args

from cabal.entities import STEP_OUTPUTS, Finding
from cabal.errors import ConfigError, ProtocolLoadError, ProtocolProblem, ResourceNotFound, closest
from cabal.limits import unprintable
from cabal.resources import parsed_once, search_path
from cabal.rounds.rules import ABOUT_RULES
from cabal.vocabulary import (AGENT_ID_CHARS, DEFAULT_OPERATIVES, FIXED_IDS, ROLE_WORDS, Role, Step, role_ids,
                              role_of)
from cabal.yaml_reader import Problems, read_text_file, read_yaml

MAX_OPERATIVES = 12


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
class Member:
    """One agent a role card declares. What it leaves out comes from the card (persona) or
    the mission (names, skills); ``model`` is a model spec for this agent, kept as given."""

    id: str
    name: str | None = None
    persona: str | None = None
    domain: str | None = None
    skills: tuple[str, ...] = ()
    model: str | None = None
    focus: tuple[str, ...] = ()  # a watchdog's finding categories (none: every category)


@dataclass(frozen=True)
class RoleCard:
    role: Role
    title: str
    persona: str
    steps: dict[Step, tuple[WriteRule, ...]]
    speaks_as: tuple[str, ...]
    source: str
    members: tuple[Member, ...] = ()  # none: the role's default ids (FIXED_IDS, or counted operatives)
    count: int | None = None  # operatives only: how many, when no members are named
    given: frozenset[str] = frozenset()  # the fields the card's file gives (an override keeps the rest)

    def over(self, base: RoleCard) -> RoleCard:
        """This card laid over an earlier one of its kind: the fields it gives replace base's."""
        return replace(base, source=self.source, given=base.given | self.given,
                       **{name: getattr(self, name) for name in self.given})


@dataclass(frozen=True)
class Agent:
    id: str
    role: Role
    name: str
    skills: tuple[str, ...] = ()
    persona: str | None = None  # its card member's; None: the role card's
    domain: str | None = None
    model: str | None = None
    focus: tuple[str, ...] = ()


def load_role_cards(extra_dirs: Iterable[str | Path] = ()) -> dict[Role, RoleCard]:
    """The team's cards, one per role: the built-in ones, each overridden field by field by a
    card of its kind in a later folder (the project's ``agents/``, then the mission's cards)."""
    problems: list[ProtocolProblem] = []
    cards: dict[Role, RoleCard] = {}
    for folder in search_path("agents", extra_dirs):
        seen: dict[Role, str] = {}
        for path in sorted(folder.iterdir()) if folder.is_dir() else []:
            if not (path.is_file() and path.suffix in CARD_SUFFIXES):
                continue
            card, found = parsed_once(path, _read_card, "role card")
            problems += found
            if card is None:
                continue
            if card.role in seen:
                problems.append(ProtocolProblem(str(path), f"a second {card.role} card in this folder (the first is "
                                                           f"{seen[card.role]}): one card per kind", field="role"))
                continue
            seen[card.role] = path.name
            cards[card.role] = card.over(cards[card.role]) if card.role in cards else card
    missing = [role for role in Role if role not in cards]
    if missing and not problems:
        raise ResourceNotFound("role card", missing[0], known=[card.source for card in cards.values()])
    problems += _team_problems(cards)
    if problems:
        raise ProtocolLoadError(problems)
    return cards


CARD_SUFFIXES = (".yaml", ".yml")
CARD_FIELDS = ("role", "title", "persona", "steps", "speaks_as", "members", "count")
MEMBER_FIELDS = ("id", "name", "persona", "domain", "skills", "model", "focus")
FOCUS_CATEGORIES: tuple[str, ...] = get_args(Finding.model_fields["category"].annotation)


def _read_card(path: Path) -> tuple[RoleCard | None, tuple[ProtocolProblem, ...]]:
    problems = Problems(str(path))
    return _parse_card(path, problems), tuple(problems.found)


def _unknown(problems: Problems, mapping: Mapping, allowed: tuple[str, ...], prefix: str = "") -> None:
    for key in mapping:
        if key not in allowed:
            problems.add(f"unknown field {key!r} (closest: {', '.join(closest(str(key), list(allowed))[:3])})",
                         at=mapping, key=key, field=f"{prefix}{key}")


def _parse_card(path: Path, problems: Problems) -> RoleCard | None:
    source = str(path)
    try:
        data = read_yaml(read_text_file(path), source)
    except ProtocolLoadError as exc:
        problems.found.extend(exc.problems)
        return None
    if not isinstance(data, dict):
        problems.add("a role card is a mapping with `role:` (one of chair, operative, watchdog, envoy)", field="role")
        return None
    if "role" not in data:
        problems.add("a role card needs `role:`, its kind (one of chair, operative, watchdog, envoy)", at=data,
                     field="role")
        return None
    kind = str(data.get("role"))
    if kind not in tuple(Role):
        problems.add(f"unknown kind {kind!r} (closest: {', '.join(closest(kind, list(Role))[:3])})",
                     at=data, field="role")
        return None
    role = Role(kind)
    _unknown(problems, data, CARD_FIELDS)
    steps = _parse_steps(data.get("steps") or {}, source, problems)
    members = tuple(member for index, entry in enumerate(_listed(data, "members", problems))
                    if (member := _parse_member(role, entry, index, problems)) is not None)
    count = data.get("count")
    if count is not None and (role is not Role.OPERATIVE or not isinstance(count, int) or isinstance(count, bool)
                              or not 1 <= count <= MAX_OPERATIVES or members):
        problems.add(f"`count` is for an operative card without members: a number from 1 to {MAX_OPERATIVES}",
                     at=data, field="count")
        count = None
    return RoleCard(
        role=role,
        title=str(data.get("title", kind.title())),
        persona=" ".join(str(data.get("persona", "")).split()),
        steps=steps,
        speaks_as=_speakers(data, problems),
        source=source,
        members=members,
        count=count,
        given=frozenset(key for key in CARD_FIELDS if key in data and key != "role"),
    )


def _speakers(data: dict, problems: Problems) -> tuple[str, ...]:
    """Whom the role may speak as: agent ids, or a role (``operatives``: every operative)."""
    speakers = tuple(str(entry) for entry in _listed(data, "speaks_as", problems))
    for entry in speakers:
        if entry not in ROLE_WORDS and role_of(entry) is None:
            problems.add(f"speaks_as names {entry!r}: an agent id ({AGENT_ID_CHARS} characters at most) or "
                         "a role (`operatives`)", at=data, field="speaks_as")
    return speakers


def _listed(data: dict, key: str, problems: Problems) -> list:
    value = data.get(key) or []
    if not isinstance(value, list):
        problems.add(f"`{key}` is a list", at=data, field=key)
        return []
    return value


def _parse_steps(spec: dict, source: str, problems: Problems) -> dict[Step, tuple[WriteRule, ...]]:
    steps: dict[Step, tuple[WriteRule, ...]] = {}
    for name, step_spec in spec.items():
        try:
            step = Step(name)
        except ValueError:
            problems.add(f"unknown step (closest: {', '.join(closest(str(name), list(Step))[:3])})", step=name)
            continue
        rules = []
        answer_fields = STEP_OUTPUTS[step].model_fields
        aliases = {info.alias or name for name, info in answer_fields.items()}
        for index, write in enumerate((step_spec or {}).get("writes") or []):
            field = write.get("field")
            if not write.get("protocol") or (field is not None and field not in aliases):
                problems.add(f"writes[{index}] needs `protocol`, and a `field` naming an answer field "
                             f"({', '.join(sorted(aliases))}) or none for the whole answer; got field {field!r}",
                             step=step.value, field="writes")
                continue
            about = write.get("about")
            if about is not None and about not in ABOUT_RULES:
                problems.add(f"writes[{index}]: unknown rule {about!r} in `about` (closest: "
                             f"{', '.join(closest(str(about), list(ABOUT_RULES))[:3])})", step=step.value, field="writes")
                continue
            rules.append(WriteRule(protocol=write["protocol"], field=field, about=about))
        steps[step] = tuple(rules)
    return steps


def _parse_member(role: Role, entry: object, index: int, problems: Problems) -> Member | None:
    where = f"members[{index}]"
    if not isinstance(entry, dict):
        problems.add("a member is a mapping with at least `id`", field=where)
        return None
    _unknown(problems, entry, MEMBER_FIELDS, prefix=f"{where}.")
    member_id = str(entry.get("id", ""))
    if role_of(member_id) is not role:
        problems.add(f"id {member_id!r} is not a {role} id: {role}- then lowercase letters, digits and single "
                     f"hyphens, at most {AGENT_ID_CHARS} characters", at=entry, key="id", field=f"{where}.id")
        return None
    texts: dict[str, str | None] = {}
    for key in ("name", "persona", "domain", "model"):
        value = entry.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip() or unprintable(value)):
            problems.add(f"`{key}` is a non-empty line of plain text", at=entry, key=key, field=f"{where}.{key}")
            value = None
        texts[key] = " ".join(value.split()) if value else None
    skills = _names(entry, "skills", where, problems)
    focus = _names(entry, "focus", where, problems)
    if focus and role is not Role.WATCHDOG:
        problems.add("only a watchdog has a focus", at=entry, key="focus", field=f"{where}.focus")
    for category in focus:
        if category not in FOCUS_CATEGORIES:
            problems.add(f"unknown finding category {category!r} (closest: "
                         f"{', '.join(closest(category, list(FOCUS_CATEGORIES))[:3])})", at=entry, key="focus",
                         field=f"{where}.focus")
    return Member(member_id, skills=skills, focus=focus, **texts)


def _names(entry: dict, key: str, where: str, problems: Problems) -> tuple[str, ...]:
    value = entry.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        problems.add(f"`{key}` is a list of names", at=entry, key=key, field=f"{where}.{key}")
        return ()
    return tuple(value)


def _team_problems(cards: dict[Role, RoleCard]) -> list[ProtocolProblem]:
    """What no single card shows: a member no step can use, one id twice, a second Chair."""
    problems: list[ProtocolProblem] = []
    owners: dict[str, str] = {}
    for role, card in cards.items():
        if card.members and not card.steps:
            problems.append(ProtocolProblem(card.source, f"the {role} card names members but no step they act in: "
                                                         "no step can use them", field="steps"))
        if role in (Role.CHAIR, Role.ENVOY) and card.members and [m.id for m in card.members] != [FIXED_IDS[role]]:
            problems.append(ProtocolProblem(card.source, f"a team has one {role}, {FIXED_IDS[role]}; its card may name "
                                                         f"it, not others", field="members"))
        for member in card.members:
            if member.id in owners:
                problems.append(ProtocolProblem(card.source, f"duplicate id {member.id!r} (also in {owners[member.id]})",
                                                field="members"))
            owners[member.id] = card.source
    return problems


@dataclass(frozen=True)
class Team:
    """The roster of one mission: its agents and the role card of each."""

    agents: tuple[Agent, ...]
    cards: dict[Role, RoleCard]

    @classmethod
    def build(cls, operatives: int | None, cards: dict[Role, RoleCard], names: dict[str, str] | None = None,
              skills: dict[str, list[str]] | None = None) -> Team:
        """The roster: each card's members (or its role's default ids: ``operatives`` counted
        operatives, else the card's ``count``, else ``DEFAULT_OPERATIVES``), with the mission's
        ``names`` and ``skills`` (by agent id) over the cards'."""
        names, skills = names or {}, skills or {}
        operative_card = cards[Role.OPERATIVE]
        if operatives is not None and operative_card.members:
            raise ConfigError(f"team.operatives: the operative card {operative_card.source} names the operatives "
                              f"({', '.join(m.id for m in operative_card.members)}); leave the count out")
        count = operatives or operative_card.count or DEFAULT_OPERATIVES
        agents = []
        for role in Role:
            members = cards[role].members or tuple(Member(agent_id) for agent_id in role_ids(role, count))
            agents += [Agent(m.id, role, names.get(m.id) or m.name or m.id, tuple(skills.get(m.id, m.skills)),
                             persona=m.persona, domain=m.domain, model=m.model, focus=m.focus) for m in members]
        team = cls(tuple(agents), cards)
        for field, given in (("names", names), ("skills", skills)):
            for agent_id in given:
                if team.get(agent_id) is None:
                    raise ConfigError(f"team.{field}: no agent {agent_id!r} on this team (closest: "
                                      f"{', '.join(closest(agent_id, team.ids())[:3])})")
        return team

    def get(self, agent_id: str) -> Agent | None:
        return next((agent for agent in self.agents if agent.id == agent_id), None)

    def persona(self, agent_id: str, written: Mapping[str, object]) -> str:
        """An agent's own persona: the one the user's card gives it, else the one the Chair
        ``written`` (the charter's personas); "" for neither (the role card's persona stands)."""
        agent = self.get(agent_id)
        return str((agent.persona if agent else None) or written.get(agent_id) or "")

    def to_write(self) -> list[str]:
        """The agents whose persona the Chair writes: those the user's cards give none."""
        return [agent.id for agent in self.agents if not agent.persona]

    def ids(self, role: Role | None = None) -> list[str]:
        return [agent.id for agent in self.agents if role is None or agent.role == role]

    def acting(self, step: Step) -> list[Agent]:
        """The agents that act in a step, in roster order."""
        return [agent for agent in self.agents if step in self.cards[agent.role].steps]

    def writes(self, agent_id: str, step: Step) -> tuple[WriteRule, ...]:
        agent = self.get(agent_id)
        return self.cards[agent.role].steps.get(step, ()) if agent else ()

    def speakers(self, agent_id: str) -> list[str]:
        """Whom an agent may speak as: a role in a card (``operatives``) stands for its every agent."""
        agent = self.get(agent_id)
        allowed: list[str] = []
        for entry in self.cards[agent.role].speaks_as if agent else ():
            allowed += self.ids(ROLE_WORDS[entry]) if entry in ROLE_WORDS else [entry]
        return allowed
