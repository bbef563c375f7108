"""The mission file: what the user asks for, the team, the limits and the model.

A mission file is YAML; its JSON Schema (``MissionSpec.model_json_schema()``, printed by
``cabal schema mission``) documents every field.

```yaml
request: Plan the launch of our note-taking app for students.
team:
  operatives: 2
  names: {operative-1: Ada, operative-2: Brook}
  skills: {operative-1: [module_design]}
  cards: cards/                         # optional: role cards declaring the team's members
rounds: 4
budget: {tokens: 400000, cost_usd: 5}   # default: $2, asking before more; `budget: none`: no budget
model: scripted:launch.script.yaml      # or openai:gpt-4.1-mini, ollama:qwen3:8b, claude-..., simulated, py:module:factory, or a mapping:
                                        # {name: claude-sonnet-4-6, timeout_s: 120, max_retries: 6}
models: {chair: claude-opus-4-1, operative-2: {name: scripted:brook.yaml, output: json}}  # optional
gates: {plan: ask}                      # optional: the user signs the plan off before any work (or auto)
answers: ["Students first; teachers later."]   # optional: replies to the Chair's questions
sources:                                # optional: the user's files (docs/guide/sources.md)
  - docs/                               # a folder, a file or a glob, relative to this file
  - {path: data/prices.csv, note: Competitor prices, checked in May}
  - {mission: m-onboarding-1a2b3c}      # an earlier mission's accepted work (docs/how-to/memory.md)
memory: {library: true, facts: true}    # optional: the workspace's library and standing facts as sources
```
"""

from __future__ import annotations

import os
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (BaseModel, ConfigDict, Field, PrivateAttr, SerializerFunctionWrapHandler, ValidationError,
                      ValidationInfo, field_validator,
                      model_serializer)

from cabal.errors import ConfigError, closest
from cabal.limits import unprintable
from cabal.llm.settings import ModelSettings
from cabal.llm.usage import Budget
from cabal.resources import example_file
from cabal.sources import SourceEntry, SourceLimits, Wanted, mission_wanted
from cabal.tools.spec import DEFAULT_MAX_TOOL_CALLS, DEFAULT_TOOL_TIMEOUT_S, ToolServerSpec, unique_names
from cabal.vocabulary import CHAIR_ID, DEFAULT_OPERATIVES, ENVOY_ID, WATCHDOG_ID, Role, is_agent_id, role_ids
from cabal.yaml_reader import line_at, read_settings_file, read_text_file



class TeamSpec(BaseModel):
    """Who is on the team. The Chair, a Watchdog and the Envoy are always there; the role cards
    (``agents/*.yaml``, or the folder ``cards`` names) may declare more Watchdogs and named
    Operatives."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    operatives: int | None = Field(None, ge=1, le=12, description="how many operatives (operative-1 .. operative-N); "
                                   "default: the operative card's members or count, else 2")
    cards: str | None = Field(None, min_length=1, description="a folder of role cards for this mission, relative to "
                              "the mission file; its cards override the project's and the built-in ones by kind")
    names: dict[str, str] = Field(default_factory=dict, description="display names by agent id")
    skills: dict[str, list[str]] = Field(default_factory=dict, description="skill names by agent id")

    @property
    def counted_operatives(self) -> int:
        """The operatives a reader of the file alone can tell: the count given, else the default
        (role cards that name their operatives decide when the mission runs)."""
        return self.operatives or DEFAULT_OPERATIVES

    @field_validator("names", "skills")
    @classmethod
    def _known_agents(cls, value: dict) -> dict:
        for agent_id in value:
            if not is_agent_id(agent_id):
                raise ValueError(f"unknown agent id {agent_id!r}: use {CHAIR_ID}, {WATCHDOG_ID}, {ENVOY_ID}, "
                                 "operative-N or an id the role cards declare (KIND-NAME)")
        return value


class MemorySpec(BaseModel):
    """What the mission reads of the workspace's memory (docs/how-to/memory.md): nothing unless asked."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    library: bool = Field(False, description="the workspace's library (every accepted product of its missions, as "
                                             "it stands at the start) becomes sources: listed, searched by "
                                             "search_sources and cited like files, each saying where it came from")
    facts: bool = Field(False, description="the standing facts the user keeps (`cabal memory`) become one source, "
                                           "one section a fact")


class GatesSpec(BaseModel):
    """Where the engine stops for the user's sign-off (docs/guide/plan-signoff.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    plan: Literal["off", "ask", "auto"] = Field(
        "off", description="after Bootstrap, show the user the charter, the team and the product tree and wait for "
                           "approve, changes or stop (ask); approve by this stated policy, recorded in the graph "
                           "(auto, for unattended runs); or go on without asking (off)")
    every_plan: bool = Field(False, description="ask again at every Plan & Assign that adds or removes products, "
                                                "not only after Bootstrap")


class BudgetSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tokens: int | None = Field(None, ge=1, description="input + output tokens for the whole mission")
    cost_usd: float | None = Field(None, gt=0, description="model spend for the whole mission, in US dollars; "
                                                           "if not given, $2.00 (or CABAL_BUDGET_USD)")
    when_spent: Literal["ask", "stop"] = Field(
        "ask", description="when the budget is spent: ask the user whether to go on (the mission pauses), or stop")

    # `budget: none` in a mission file: no budget at all, knowingly. Kept out of the fields so the
    # mission file has one way to say it; it is dumped back as "none", so a stored spec keeps it.
    _unlimited: bool = PrivateAttr(False)

    @classmethod
    def none(cls) -> BudgetSpec:
        spec = cls()
        spec._unlimited = True
        return spec

    @property
    def unlimited(self) -> bool:
        return self._unlimited

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> Any:
        return NO_BUDGET if self._unlimited else handler(self)

    def to_budget(self) -> Budget:
        return Budget(max_tokens=self.tokens, max_cost_usd=self.cost_usd)


def _budget_schema(schema: dict) -> None:
    """The mission file's JSON Schema says both forms: a mapping of limits, or ``none``."""
    ref = schema.pop("$ref", None) or schema.pop("allOf")[0]["$ref"]
    schema["anyOf"] = [{"$ref": ref}, {"const": NO_BUDGET}]


# Every mission spends at most this much unless told otherwise: a priced model with no budget
# would otherwise run unbounded. A model without prices costs $0, so it is never stopped by it.
DEFAULT_BUDGET_USD = 2.0
BUDGET_USD_VARIABLE = "CABAL_BUDGET_USD"
NO_BUDGET = "none"  # `budget: none` in a mission file, `--budget-usd none`, CABAL_BUDGET_USD=none


@dataclass(frozen=True)
class MissionBudget:
    """The budget a new mission starts with, and where its cost limit came from (said in
    ``cabal run``'s first line): ``default``, ``CABAL_BUDGET_USD``, ``mission file``,
    ``--budget-usd`` or ``none``."""

    budget: Budget
    source: str


def cost_limit(text: str, where: str) -> float | None:
    """A cost limit as written on a command line or in the environment: dollars above 0, or
    ``none`` (returned as None) for no budget."""
    if text.strip().lower() == NO_BUDGET:
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise ConfigError(f"{where}: {text!r} is not a cost budget: write dollars above 0 (2.5) or {NO_BUDGET!r}")
    return value


class MissionSpec(BaseModel):
    """A mission file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    request: str = Field(min_length=1, max_length=20_000, description="what the user wants the team to do")
    name: str | None = Field(None, max_length=80, description="a short name; default: from the file name")
    team: TeamSpec = Field(default_factory=TeamSpec)
    rounds: int = Field(3, ge=1, le=200, description="round limit after bootstrap")
    budget: BudgetSpec = Field(
        default_factory=BudgetSpec, json_schema_extra=_budget_schema,
        description=f"the mission's limits; without cost_usd, ${DEFAULT_BUDGET_USD:.2f} (or {BUDGET_USD_VARIABLE}); "
                    f"`{NO_BUDGET}`: no budget at all")
    model: str | ModelSettings | None = Field(
        None, description="the default model: its spec (PROVIDER:MODEL, claude-..., simulated, scripted:PATH or "
                          "py:module:factory); or a mapping with name, base_url, price, timeout_s, max_retries, "
                          "max_tokens, temperature and output")
    models: dict[str, str | ModelSettings] | None = Field(
        None, description="a model per role or agent: keys default, chair, watchdog, operative, envoy and agent ids "
                          "(operative-2); an agent's id beats its role, its role beats the default (`models.default` or "
                          "`model`, not both). Each entry is a model spec or a mapping of model settings (those it leaves out come from "
                          "the default)")
    answers: list[str] = Field(
        default_factory=list, description="what the user says before the work starts: every step that writes, "
                                          "judges or decides reads the ones no question has taken; each question "
                                          "of the Chair's takes the next as its answer (unattended runs)"
    )
    chat_answers: list[str] = Field(
        default_factory=list, description="answers the user gave in chat, in order, after the mission file's "
                                          "(a replay feeds them back): never shown before a question asks for them"
    )
    gates: GatesSpec = Field(default_factory=GatesSpec, description="where the engine waits for the user's "
                                                                     "sign-off: gates: {plan: ask}")
    tools: list[ToolServerSpec] = Field(default_factory=list, description="MCP servers whose tools the team may "
                                                                         "call (docs/guide/tools.md)")
    max_tool_calls: int = Field(DEFAULT_MAX_TOOL_CALLS, ge=0, le=50, description="tool calls an agent may make in "
                                                                                "one turn")
    tool_timeout_s: float = Field(DEFAULT_TOOL_TIMEOUT_S, gt=0, le=600, description="how long one tool call may "
                                                                                    "take, in seconds")
    sources: list[SourceEntry] = Field(
        default_factory=list, max_length=200,
        description="the user's files the team reads and cites: files, folders or globs relative to the mission "
                    "file, each a path or a mapping with path and note")
    source_limits: SourceLimits = Field(default_factory=SourceLimits,
                                        description="how much the sources may hold: files, MB per file, MB in all")
    memory: MemorySpec = Field(default_factory=MemorySpec,
                               description="what the team reads of the workspace's memory: memory: {library: true, "
                                           "facts: true}")
    # Where the file named each source (its line), for located errors; set by load_mission.
    _source_lines: dict[int, int] = PrivateAttr(default_factory=dict)
    _origin: str = PrivateAttr("<mission>")

    @field_validator("sources", mode="before")
    @classmethod
    def _paths_alone(cls, value: object) -> object:
        """A plain path is an entry without a note."""
        return [{"path": item} if isinstance(item, str) else item for item in value] if isinstance(value, list) \
            else value

    @field_validator("budget", mode="before")
    @classmethod
    def _budget_form(cls, value: object) -> object:
        # One clear way to say "no budget": anything else that is not a mapping is a mistake.
        if value == NO_BUDGET:
            return BudgetSpec.none()
        if value is None or isinstance(value, str):
            raise ValueError(f"write `budget: {NO_BUDGET}` to run without a budget, or a mapping such as "
                             f"{{cost_usd: 5, tokens: 400000, when_spent: ask}}; got {value!r}")
        return value

    @property
    def when_spent(self) -> Literal["ask", "stop"]:
        return self.budget.when_spent

    def queued_answers(self) -> list[str]:
        """The answers the Chair's questions take, in order: the mission file's, then the chat's."""
        return [*self.answers, *self.chat_answers]

    def starting_budget(self, budget_usd: float | str | None = None) -> MissionBudget:
        """The budget a new mission starts with. The cost limit: ``budget_usd`` (``--budget-usd``:
        dollars, or ``none``), else the mission file's (``budget: none``: no budget at all), else
        ``CABAL_BUDGET_USD``, else $2. The token limit is the mission file's."""
        tokens = self.budget.tokens
        if budget_usd is not None:
            cost = cost_limit(str(budget_usd), "--budget-usd")
            return MissionBudget(Budget(tokens, cost), "--budget-usd" if cost is not None else NO_BUDGET)
        if self.budget.unlimited:
            return MissionBudget(Budget(), NO_BUDGET)
        if self.budget.cost_usd is not None:
            return MissionBudget(Budget(tokens, self.budget.cost_usd), "mission file")
        if os.environ.get(BUDGET_USD_VARIABLE, "").strip():
            cost = cost_limit(os.environ[BUDGET_USD_VARIABLE], BUDGET_USD_VARIABLE)
            return MissionBudget(Budget(tokens, cost), BUDGET_USD_VARIABLE if cost is not None else NO_BUDGET)
        return MissionBudget(Budget(tokens, DEFAULT_BUDGET_USD), "default")

    @field_validator("models")
    @classmethod
    def _known_model_keys(cls, value: dict | None, info: ValidationInfo) -> dict | None:
        if value and info.data.get("model") is not None and DEFAULT_KEY in value:
            raise ValueError("both `model` and `models.default` name the default model: keep one")
        team = info.data.get("team")
        if not value or team is None:
            return value
        # Role cards may name agents the file alone does not know: any agent id passes here,
        # and the team checks it when it is built (``agent_model_settings``).
        known = model_keys(role_ids_of(team.counted_operatives))
        for key in value:
            if key not in known and not is_agent_id(key):
                raise ValueError(f"unknown role or agent {key!r}; closest: {', '.join(closest(key, known)[:3])} "
                                 f"(known: {', '.join(known)})")
        return value

    @field_validator("request", "name", "answers")
    @classmethod
    def _plain_text(cls, value: str | list[str] | None) -> str | list[str] | None:
        # What the team reads and the user sees again: no NUL, no terminal control characters.
        for text in value if isinstance(value, list) else [value]:
            wrong = unprintable(text) if text else None
            if wrong:
                raise ValueError(f"contains {wrong}; write plain text")
        return value

    @field_validator("tools")
    @classmethod
    def _unique_tools(cls, value: list[ToolServerSpec]) -> list[ToolServerSpec]:
        return unique_names(value)

    def model_settings(self) -> ModelSettings:
        """The default model's settings the mission file gives (defaults for what it leaves out)."""
        default = (self.models or {}).get(DEFAULT_KEY, self.model)
        if isinstance(default, ModelSettings):
            return default
        return ModelSettings(name=default) if default else ModelSettings()

    def agent_model_settings(self, roster: Mapping[str, tuple[Role, str | None]] | None = None,
                             ) -> dict[str, ModelSettings]:
        """Each agent's model settings: its own entry in ``models``, else the model its role card
        gives it, else its role's entry, else the default; an entry's settings are the default's
        with those it gives replaced. ``roster``: the team's agents (id: role, card model);
        default: the agents the file alone names (counted operatives, no cards)."""
        if roster is None:
            roster = {agent_id: (role, None) for role in Role
                      for agent_id in role_ids(role, self.team.counted_operatives)}
        default, entries = self.model_settings(), self.models or {}
        strangers = [key for key in entries if key not in model_keys(list(roster))]
        if strangers:
            known = model_keys(list(roster))
            raise ConfigError(f"models: unknown role or agent {strangers[0]!r}; closest: "
                              f"{', '.join(closest(strangers[0], known)[:3])} (known: {', '.join(known)})")
        chosen = {}
        for agent_id, (role, card_model) in roster.items():
            entry = entries.get(agent_id, card_model if card_model else entries.get(role.value))
            if entry is None:
                chosen[agent_id] = default
            elif isinstance(entry, str):
                chosen[agent_id] = default.with_overrides(name=entry)
            else:
                chosen[agent_id] = default.with_overrides(**entry.model_dump(include=entry.model_fields_set))
        return chosen

    def anchored(self, base: Path) -> MissionSpec:
        """This spec with every relative ``scripted:`` path (``model`` and ``models``) made
        absolute against ``base``, so a run anywhere finds the scripts."""
        def anchor(entry: str | ModelSettings | None) -> str | ModelSettings | None:
            if isinstance(entry, ModelSettings):  # a copy keeps which settings the entry gives
                return entry.model_copy(update={"name": anchored_spec(entry.name, base)}) \
                    if "name" in entry.model_fields_set else entry
            return anchored_spec(entry, base) if entry else entry

        models = {key: anchor(entry) for key, entry in self.models.items()} if self.models else self.models
        return self.model_copy(update={"model": anchor(self.model), "models": models})

    def with_model(self, name: str) -> MissionSpec:
        """This spec with ``name`` as the model of every agent (``--model`` of a batch): the
        default's, and every entry of ``models``, which keeps its other settings."""
        def named(entry: str | ModelSettings) -> str | ModelSettings:
            return name if isinstance(entry, str) else entry.model_copy(update={"name": name})

        models = {key: named(entry) for key, entry in self.models.items()} if self.models else self.models
        return self.model_copy(update={"model": name, "models": models})

    @property
    def earlier_missions(self) -> list[tuple[str, str | None, str]]:
        """The earlier missions ``sources:`` names (``- mission: ID``), each with its note and
        where the file names it (``FILE:LINE: sources[i]``)."""
        return [(entry.mission, entry.note, f"{self._origin}:{self._source_lines[index]}: sources[{index}]"
                 if index in self._source_lines else f"{self._origin}: sources[{index}]")
                for index, entry in enumerate(self.sources) if entry.mission is not None]

    def wanted_sources(self, base: Path | None) -> list[Wanted]:
        """The ``sources:`` entries to collect, relative to the mission file's folder (``base``)
        and located by its lines."""
        return mission_wanted(self.sources, base or Path.cwd(), self._origin, self._source_lines)


DEFAULT_KEY = "default"


def model_keys(agent_ids: list[str]) -> list[str]:
    """The keys a mission file's ``models`` may use: default, the roles, the agents' ids."""
    return [DEFAULT_KEY, *(role.value for role in Role), *agent_ids]


def role_ids_of(operatives: int) -> list[str]:
    """The agents' ids of a team of ``operatives`` counted operatives and no cards."""
    return [agent_id for role in Role for agent_id in role_ids(role, operatives)]


def anchored_spec(spec: str, base: Path) -> str:
    """``spec`` with what it names next to the mission file made absolute: a relative
    ``scripted:`` path, a ``py:`` module that is a file there (``near_mission``)."""
    from cabal.llm.providers.local import near_mission

    return near_mission(spec, base)


def load_mission(path: str | Path) -> tuple[MissionSpec, Path]:
    """Read a mission file; returns the spec and the file's folder (for relative paths).

    A broken file is one ``ConfigError`` line that says where: ``FILE:LINE: ...``. A path
    under ``examples/`` that is not here is the example Cabal ships, if there is one."""
    path = example_file(path)
    data = read_settings_file(path, "mission file", "request")
    data.setdefault("name", path.stem.removesuffix(".mission"))
    spec = parse_mission(data, source=str(path))
    spec._origin = str(path)
    if spec.sources:
        spec._source_lines = _source_item_lines(path) or {
            index: line for index in range(len(spec.sources)) if (line := line_at(data, ("sources", index)))}
    return with_tool_folders(spec, path.parent.resolve()), path.parent.resolve()


def with_tool_folders(spec: MissionSpec, base: Path) -> MissionSpec:
    """``spec`` with each stdio server's folder made absolute from the mission file's (its
    relative ``args`` then mean what they say in the file, and a resume finds them again)."""
    if not any(server.command for server in spec.tools):
        return spec
    servers = [server.model_copy(update={"cwd": str(base / (server.cwd or "."))}) if server.command else server
               for server in spec.tools]
    return spec.model_copy(update={"tools": servers})


def _source_item_lines(path: Path) -> dict[int, int]:
    """The line of each ``sources:`` item, plain paths included (the file's lines record mappings
    only): from the YAML's node tree, which names every item's line. Composing expands no alias."""
    try:
        root = yaml.compose(read_text_file(path), Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return {}
    if not isinstance(root, yaml.MappingNode):
        return {}
    for key, value in root.value:
        if getattr(key, "value", None) == "sources" and isinstance(value, yaml.SequenceNode):
            return {index: item.start_mark.line + 1 for index, item in enumerate(value.value)}
    return {}


def parse_mission(data: dict, *, source: str = "<mission>") -> MissionSpec:
    try:
        return MissionSpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(located_problems(exc, data, source, "invalid mission", MissionSpec)) from None


def located_problems(error: ValidationError, data: dict, source: str, what: str, model: type[BaseModel]) -> str:
    """One line for every problem of ``data`` (read as ``model``): ``SOURCE:LINE: WHAT: field:
    message; ...``, each problem after the first with its own line (when ``data`` was read with
    lines). A field the file may not have is named with the closest ones it may."""
    parts, first_line = [], None
    located = [(line_at(data, problem["loc"]), problem) for problem in error.errors()]
    for line, problem in sorted(located, key=lambda item: item[0] or 1 << 30):  # the file's order
        field = ".".join(str(p) for p in problem["loc"]) or "(top)"
        message = problem["msg"]
        if problem["type"] == "extra_forbidden":
            field, message = _unknown_field(model, problem["loc"])
        if first_line is None:
            first_line = line or 0
            parts.append(f"{field}: {message}" if field else message)
        else:
            parts.append(f"{field}{f' (line {line})' if line else ''}: {message}" if field
                         else message + (f" (line {line})" if line else ""))
    where = f"{source}:{first_line}" if first_line else source
    return f"{where}: {what}: " + "; ".join(parts)


def _unknown_field(model: type[BaseModel], loc: Sequence[str | int]) -> tuple[str, str]:
    """Where an unknown field sits and what to say of it: ``unknown field `round`; did you mean
    `rounds`?``, with the names allowed there, closest first."""
    allowed = _fields_at(model, tuple(loc[:-1]))
    where = ".".join(str(part) for part in loc[:-1])
    message = f"unknown field `{loc[-1]}`"
    if allowed:
        names = closest(str(loc[-1]), sorted(allowed))
        message += f"; did you mean `{names[0]}`?"
        if len(names) > 1:
            message += " (allowed: " + ", ".join(names) + ")"
    return where, message


def _fields_at(annotation: Any, path: tuple[str | int, ...]) -> list[str]:
    """The field names of the model at ``path`` inside ``annotation``, or none when no model sits
    there. Steps through unions (pydantic names the member: ``model.ModelSettings.x``), lists
    and dicts (an index or a key in the path)."""
    models = _models_in(annotation)
    if not path:
        return [name for model in models for name in model.model_fields]
    head, rest = path[0], path[1:]
    for model in models:
        if head == model.__name__:
            return _fields_at(model, rest)
        if isinstance(head, str) and head in model.model_fields:
            return _fields_at(model.model_fields[head].annotation, rest)
    for inner in _contained(annotation):
        found = _fields_at(inner, rest)
        if found:
            return found
    return []


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models ``annotation`` is, or is a union of."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if typing.get_origin(annotation) in (list, dict, tuple, set, frozenset):
        return []
    return [model for arg in typing.get_args(annotation) for model in _models_in(arg)]


def _contained(annotation: Any) -> list[Any]:
    """What a list's items or a dict's values are (through a union of them)."""
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, set, frozenset):
        return list(typing.get_args(annotation)[:1])
    if origin is dict:
        return list(typing.get_args(annotation)[1:])
    return [inner for arg in typing.get_args(annotation) for inner in _contained(arg)]
