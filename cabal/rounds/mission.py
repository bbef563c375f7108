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
model: scripted:launch.script.yaml      # or openai:gpt-4.1-mini, ollama:qwen3:8b, claude-..., simulated, py:module:factory, or a mapping:
                                        # {name: claude-sonnet-4-6, timeout_s: 120, max_retries: 6}
answers: ["Students first; teachers later."]   # optional: replies to the Chair's questions
```
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from cabal.errors import ConfigError
from cabal.limits import unprintable
from cabal.llm.settings import ModelSettings
from cabal.llm.usage import Budget
from cabal.vocabulary import CHAIR_ID, ENVOY_ID, WATCHDOG_ID, is_agent_id
from cabal.yaml_reader import line_at, read_settings_file



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
        None, description="model spec (PROVIDER:MODEL, claude-..., simulated, scripted:PATH or py:module:factory); or a mapping with name, base_url, price, timeout_s, "
                          "max_retries, max_tokens and temperature")
    answers: list[str] = Field(
        default_factory=list, description="replies to the Chair's questions, used in order (unattended runs)"
    )

    @field_validator("request", "name", "answers")
    @classmethod
    def _plain_text(cls, value: str | list[str] | None) -> str | list[str] | None:
        # What the team reads and the user sees again: no NUL, no terminal control characters.
        for text in value if isinstance(value, list) else [value]:
            wrong = unprintable(text) if text else None
            if wrong:
                raise ValueError(f"contains {wrong}; write plain text")
        return value

    def model_settings(self) -> ModelSettings:
        """The model settings the mission file gives (defaults for what it leaves out)."""
        if isinstance(self.model, ModelSettings):
            return self.model
        return ModelSettings(name=self.model) if self.model else ModelSettings()


def load_mission(path: str | Path) -> tuple[MissionSpec, Path]:
    """Read a mission file; returns the spec and the file's folder (for relative paths).

    A broken file is one ``ConfigError`` line that says where: ``FILE:LINE: ...``."""
    path = Path(path)
    data = read_settings_file(path, "mission file", "request")
    data.setdefault("name", path.stem.removesuffix(".mission"))
    return parse_mission(data, source=str(path)), path.parent.resolve()


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
