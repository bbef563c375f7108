"""How a mission calls its model: which model, how long to wait, how often to retry, how long an
answer may be. Set in the mission file (``model: {name: ..., timeout_s: 120}``), overridden by
the environment (``CABAL_MODEL_*``) and then by the command line."""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cabal.errors import ConfigError

DEFAULT_MODEL = "claude-sonnet-4-6"  # 4-5 is deprecated by the SDK (end of life 2026-11-30)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a transient failure is tried again."""

    max_retries: int = 4
    initial_wait_s: float = 1.0
    max_wait_s: float = 60.0

    def wait_s(self, retry: int, retry_after_s: float | None) -> float:
        """The wait before retry number ``retry`` (1-based): the server's ``retry-after`` when it
        gives one (capped), else exponential backoff with jitter."""
        if retry_after_s is not None and retry_after_s >= 0:
            return min(retry_after_s, self.max_wait_s)
        backoff = min(self.initial_wait_s * 2 ** (retry - 1), self.max_wait_s)
        return backoff * (0.75 + random.random() / 4)


class ModelSettings(BaseModel):
    """A mission file's ``model:`` as a mapping (a bare string is just the name)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(DEFAULT_MODEL, min_length=1,
                      description="a Claude model name, scripted:PATH or py:MODULE:FACTORY")
    timeout_s: float = Field(120.0, gt=0, le=3600, description="seconds one request may take before it is retried")
    max_retries: int = Field(4, ge=0, le=20, description="retries of a transient failure (429, 529, 5xx, timeouts) "
                                                        "before the mission pauses as interrupted")
    max_tokens: int = Field(8192, ge=1, le=128_000, description="the longest answer one call may give")
    temperature: float | None = Field(None, ge=0, le=1, description="sampling temperature; default: the provider's")
    output: Literal["tools", "json"] = Field(
        "tools", description="how the model answers: by calling a tool (tools), or with a JSON object in its text, "
                             "the answer's schema written into the prompt (json: for models that call tools badly)")

    @property
    def retry(self) -> RetryPolicy:
        return RetryPolicy(max_retries=self.max_retries)

    def with_overrides(self, **values: Any) -> ModelSettings:
        """These settings with every given value that is not None replaced (checked again)."""
        merged = {**self.model_dump(), **{k: v for k, v in values.items() if v is not None}}
        try:
            return ModelSettings.model_validate(merged)
        except ValidationError as error:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
            raise ConfigError(f"model settings: {problems}") from None

    def from_environment(self) -> ModelSettings:
        """These settings with the ``CABAL_MODEL`` and ``CABAL_MODEL_<SETTING>`` variables that are set."""
        try:
            return self.with_overrides(**environment_overrides())
        except ConfigError as error:
            raise ConfigError(f"{error} (from the CABAL_MODEL* environment variables)") from None


def environment_overrides() -> dict[str, str]:
    """The model settings the ``CABAL_MODEL`` and ``CABAL_MODEL_<SETTING>`` variables set, as
    text (pydantic converts and checks them: "120" -> 120.0)."""
    values: dict[str, str] = {}
    for name in ModelSettings.model_fields:
        variable = "CABAL_MODEL" if name == "name" else f"CABAL_MODEL_{name.upper()}"
        raw = os.environ.get(variable, "").strip()
        if raw:
            values[name] = raw
    return values
