"""A mission file's ``tools:``: the MCP servers whose tools the team may call.

```yaml
tools:
  - name: prices                      # unique in the mission; prefixes its tools: prices__lookup
    command: python                   # stdio: command, args, env (only what is listed, plus PATH)
    args: [tools/prices_server.py]
    env: {PRICES_CSV: docs/competitor-prices.csv}
    allow: [operatives]               # roles or agent ids; default: operatives
    steps: [write, reflect]           # default: write and reflect
  - name: search
    url: http://127.0.0.1:8931/mcp    # streamable HTTP; loopback unless allow_remote: true
    required: true                    # the mission refuses to start without it
    approve: ask                      # each call waits for the user's approval (auto: never; deny: never
                                      # made), or a list of the tools that wait: [book, pay]
    startup_timeout_s: 10             # to start and complete MCP's handshake (default 10)
```

Values only: connecting is ``cabal.tools.host``'s work.
"""

from __future__ import annotations

import re
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cabal.config import is_loopback
from cabal.errors import closest
from cabal.limits import unprintable
from cabal.vocabulary import ROLE_WORDS, Role, Step, is_agent_id

SEPARATOR = "__"
"""Between a server's name and its tool's: ``prices__lookup``. A model's tool name may hold
letters, digits, ``_`` and ``-`` (at most 64), so the server's name is kept to the same."""

OFFERED_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
SERVER_NAME = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,23}")
DEFAULT_ALLOW = ("operatives",)
DEFAULT_STEPS = (Step.WRITE, Step.REFLECT)
TOOL_STEPS = tuple(step for step in Step if step != Step.BOOTSTRAP)  # bootstrap runs before any server is asked
DEFAULT_MAX_TOOL_CALLS = 5
DEFAULT_TOOL_TIMEOUT_S = 30.0
DEFAULT_STARTUP_TIMEOUT_S = 10.0  # an interpreter, its imports and MCP's handshake take a second or two

Approval = Literal["ask", "auto", "deny"]
"""What happens to an agent's call of a tool: the user approves or denies it first (ask), it is
made (auto), or it is refused without asking (deny)."""


class ToolServerSpec(BaseModel):
    """One MCP server of a mission: how to reach it, and who may call its tools when."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="unique in the mission; its tools are offered as NAME__TOOL")
    command: str | None = Field(None, min_length=1, description="stdio: the program that serves MCP on stdin/stdout")
    args: tuple[str, ...] = Field((), description="stdio: the program's arguments")
    env: dict[str, str] = Field(default_factory=dict,
                                description="stdio: the server's whole environment besides PATH (nothing else "
                                            "of Cabal's environment reaches it)")
    cwd: str | None = Field(None, description="stdio: the folder the server runs in; default: the mission file's")
    url: str | None = Field(None, description="streamable HTTP: the server's MCP endpoint")
    allow_remote: bool = Field(False, description="let url name a host that is not this machine")
    allow: tuple[str, ...] = Field(DEFAULT_ALLOW, description="roles, singular or plural (operatives, "
                                                              "chair, watchdogs, envoy), or agent ids that may call "
                                                              "the tools")
    steps: tuple[Step, ...] = Field(DEFAULT_STEPS, description="the steps in which the tools are offered")
    required: bool = Field(False, description="refuse to start (or resume) the mission when the server cannot "
                                              "be reached")
    approve: Approval | tuple[str, ...] = Field(
        "auto", description="each call of the server's tools waits for the user's approval (ask), is made (auto) or "
                            "is refused (deny); or a list of the server's tool names whose calls wait for approval")
    startup_timeout_s: float = Field(DEFAULT_STARTUP_TIMEOUT_S, gt=0, le=300,
                                     description="how long the server has to start and complete MCP's handshake "
                                                 "(initialize, then its list of tools); past it the server is "
                                                 "stopped and left out (or, when required, the mission refuses "
                                                 "to start)")

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data: Any) -> Any:
        # pydantic's "extra inputs are not permitted" names no alternative; a typo deserves one.
        if isinstance(data, dict):
            known = list(cls.model_fields)
            for key in data:
                if isinstance(key, str) and key not in known:
                    raise ValueError(f"unknown field {key!r} (closest: {', '.join(closest(key, known)[:3])})")
        return data

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not SERVER_NAME.fullmatch(value) or SEPARATOR in value:
            raise ValueError(f"{value!r} is not a server name: a letter, then up to 23 letters, digits or "
                             "single hyphens")
        return value

    @field_validator("args", "env", "command", "cwd", "url")
    @classmethod
    def _plain(cls, value: Any) -> Any:
        texts = (list(value) + list(value.values()) if isinstance(value, dict)
                 else list(value) if isinstance(value, tuple) else [value] if value else [])
        for text in texts:
            wrong = unprintable(text)
            if wrong:
                raise ValueError(f"contains {wrong}")
        return value

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                raise ValueError(f"{key!r} is not an environment variable name")
        return value

    @field_validator("allow")
    @classmethod
    def _allow(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for who in value:
            if who not in ROLE_WORDS and not is_agent_id(who):
                known = [*ROLE_WORDS, "operative-N"]
                raise ValueError(f"{who!r} is neither a role nor an agent id (closest: "
                                 f"{', '.join(closest(who, known)[:3])})")
        return value

    @field_validator("steps", mode="before")
    @classmethod
    def _steps(cls, value: Any) -> Any:
        names = [step.value for step in TOOL_STEPS]
        for step in value if isinstance(value, (list, tuple)) else []:
            if step not in names:
                raise ValueError(f"{step!r} is not a step tools can be offered in (closest: "
                                 f"{', '.join(closest(str(step), names)[:3])})")
        return value

    @field_validator("approve", mode="before")
    @classmethod
    def _approve(cls, value: Any) -> Any:
        if isinstance(value, str) and value not in ("ask", "auto", "deny"):
            raise ValueError(f"approve: {value!r} is not a policy; use ask, auto or deny, or a list of tool names "
                             f"(closest: {', '.join(closest(value, ['ask', 'auto', 'deny'])[:3])})")
        if isinstance(value, list):
            for name in value:
                if not isinstance(name, str) or not OFFERED_NAME.fullmatch(name):
                    raise ValueError(f"approve: {name!r} is not a tool name (letters, digits, _ and -)")
            return tuple(value)
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> ToolServerSpec:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (a stdio server) or url (a streamable HTTP server)")
        if self.url is not None:
            if self.args or self.env or self.cwd:
                raise ValueError("args, env and cwd are for a stdio server (command), not for url")
            parts = urlsplit(self.url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"url {self.url!r} is not an http(s) URL")
            if not self.allow_remote and not is_loopback(parts.hostname):
                raise ValueError(f"url {self.url!r} is not on this machine (127.0.0.1, ::1, localhost); "
                                 "add allow_remote: true to use a remote server")
        elif self.allow_remote:
            raise ValueError("allow_remote is for a url, not for a stdio server")
        return self

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "streamable HTTP"

    def approval(self, tool: str) -> Approval:
        """What happens to a call of this server's ``tool`` (its own name, without the server's)."""
        if isinstance(self.approve, tuple):
            return "ask" if tool in self.approve else "auto"
        return self.approve

    def allows(self, agent_id: str, role: Role, step: Step) -> bool:
        """Whether ``agent_id`` (of ``role``) is offered this server's tools in ``step``."""
        return step in self.steps and any(who == agent_id or ROLE_WORDS.get(who) == role for who in self.allow)


def unique_names(servers: list[ToolServerSpec]) -> list[ToolServerSpec]:
    """``servers``, or a ``ValueError`` naming a server given twice."""
    seen: set[str] = set()
    for server in servers:
        if server.name in seen:
            raise ValueError(f"two servers are named {server.name!r}; each name must be unique")
        seen.add(server.name)
    return servers
