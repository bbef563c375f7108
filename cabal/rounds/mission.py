"""The mission file: what the user asks for, the team, the limits and the model.

A mission file is YAML; its JSON Schema (``MissionSpec.model_json_schema()``, printed by
``cabal schema mission``) documents every field.

```yaml
request: Plan the launch of our note-taking app for students.
team:
  operatives: 2
  names: {operative-1: Ada, operative-2: Brook}
  skills: {operative-1: [module_design]}
rounds: 4
budget: {tokens: 400000, cost_usd: 5}
model: scripted:launch.script.yaml      # or a Claude model name, or py:module:factory, or a mapping:
                                        # {name: claude-sonnet-4-6, timeout_s: 120, max_retries: 6}
answers: ["Students first; teachers later."]   # optional: replies to the Chair's questions
sources:                                # optional: the user's files (docs/guide/sources.md)
  - docs/                               # a folder, a file or a glob, relative to this file
  - {path: data/prices.csv, note: Competitor prices, checked in May}
```
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from cabal.errors import ConfigError
from cabal.limits import unprintable
from cabal.llm.settings import ModelSettings
from cabal.llm.usage import Budget
from cabal.sources import SourceEntry, SourceLimits, Wanted, mission_wanted
from cabal.tools.spec import DEFAULT_MAX_TOOL_CALLS, DEFAULT_TOOL_TIMEOUT_S, ToolServerSpec, unique_names
from cabal.vocabulary import CHAIR_ID, ENVOY_ID, WATCHDOG_ID, is_agent_id
from cabal.yaml_reader import line_at, read_settings_file, read_text_file



class TeamSpec(BaseModel):
    """Who is on the team. The Chair, the Watchdog and the Envoy are always there."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    operatives: int = Field(2, ge=1, le=12, description="how many operatives (operative-1 .. operative-N)")
    names: dict[str, str] = Field(default_factory=dict, description="display names by agent id")
    skills: dict[str, list[str]] = Field(default_factory=dict, description="skill names by agent id")

    @field_validator("names", "skills")
    @classmethod
    def _known_agents(cls, value: dict) -> dict:
        for agent_id in value:
            if not is_agent_id(agent_id):
                raise ValueError(f"unknown agent id {agent_id!r}: use {CHAIR_ID}, {WATCHDOG_ID}, {ENVOY_ID} "
                                 "or operative-N")
        return value


class BudgetSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tokens: int | None = Field(None, ge=1, description="input + output tokens for the whole mission")
    cost_usd: float | None = Field(None, gt=0, description="model spend for the whole mission, in US dollars")
    when_spent: Literal["ask", "stop"] = Field(
        "ask", description="when the budget is spent: ask the user whether to go on (the mission pauses), or stop")

    def to_budget(self) -> Budget:
        return Budget(max_tokens=self.tokens, max_cost_usd=self.cost_usd)


class MissionSpec(BaseModel):
    """A mission file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    request: str = Field(min_length=1, max_length=20_000, description="what the user wants the team to do")
    name: str | None = Field(None, max_length=80, description="a short name; default: from the file name")
    team: TeamSpec = Field(default_factory=TeamSpec)
    rounds: int = Field(3, ge=1, le=200, description="round limit after bootstrap")
    budget: BudgetSpec = Field(default_factory=BudgetSpec)
    model: str | ModelSettings | None = Field(
        None, description="model name, scripted:PATH or py:module:factory; or a mapping with name, timeout_s, "
                          "max_retries, max_tokens and temperature")
    answers: list[str] = Field(
        default_factory=list, description="replies to the Chair's questions, used in order (unattended runs)"
    )
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
    # Where the file named each source (its line), for located errors; set by load_mission.
    _source_lines: dict[int, int] = PrivateAttr(default_factory=dict)
    _origin: str = PrivateAttr("<mission>")

    @field_validator("sources", mode="before")
    @classmethod
    def _paths_alone(cls, value: object) -> object:
        """A plain path is an entry without a note."""
        return [{"path": item} if isinstance(item, str) else item for item in value] if isinstance(value, list) \
            else value

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
        """The model settings the mission file gives (defaults for what it leaves out)."""
        if isinstance(self.model, ModelSettings):
            return self.model
        return ModelSettings(name=self.model) if self.model else ModelSettings()

    def wanted_sources(self, base: Path | None) -> list[Wanted]:
        """The ``sources:`` entries to collect, relative to the mission file's folder (``base``)
        and located by its lines."""
        return mission_wanted(self.sources, base or Path.cwd(), self._origin, self._source_lines)


def load_mission(path: str | Path) -> tuple[MissionSpec, Path]:
    """Read a mission file; returns the spec and the file's folder (for relative paths).

    A broken file is one ``ConfigError`` line that says where: ``FILE:LINE: ...``."""
    path = Path(path)
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
        raise ConfigError(located_problems(exc, data, source, "invalid mission")) from None


def located_problems(error: ValidationError, data: dict, source: str, what: str) -> str:
    """One line for every problem of ``data``: ``SOURCE:LINE: WHAT: field: message; ...``, each
    problem after the first with its own line (when ``data`` was read with lines)."""
    parts, first_line = [], None
    for problem in error.errors():
        field = ".".join(str(p) for p in problem["loc"]) or "(top)"
        line = line_at(data, problem["loc"])
        if first_line is None:
            first_line = line or 0
            parts.append(f"{field}: {problem['msg']}")
        else:
            parts.append(f"{field}{f' (line {line})' if line else ''}: {problem['msg']}")
    where = f"{source}:{first_line}" if first_line else source
    return f"{where}: {what}: " + "; ".join(parts)
