"""Where Cabal keeps its workspace and which graph server it talks to.

Resolution order, first that is set wins:
- workspace: explicit argument, then ``CABAL_HOME``, then the nearest ``.cabal`` folder in the
  current directory or one of its parents (as git finds a repository), else ``./.cabal``,
  created by the first command that writes; a command that only reads never creates one;
- graph server: explicit URL, then ``FALKORDB_URL``, then ``NGRAM_FALKORDB_HOST`` /
  ``NGRAM_FALKORDB_PORT`` (the seed's variables), else the embedded server of the workspace.
"""

from __future__ import annotations

import ipaddress
import math
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from cabal.errors import ConfigError

DEFAULT_HOME = ".cabal"
URL_SCHEMES = ("redis", "rediss", "unix")


def resolve_home(home: str | os.PathLike[str] | None = None, *, start: Path | None = None) -> Path:
    """The workspace directory (created on demand by whoever writes into it)."""
    chosen = home if home is not None else os.environ.get("CABAL_HOME")
    if chosen:
        return Path(chosen).expanduser().resolve()
    return find_home(start) or (start or Path.cwd()).resolve() / DEFAULT_HOME


def find_home(start: Path | None = None) -> Path | None:
    """The nearest ``.cabal`` folder in ``start`` (default: the current directory) or a parent."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / DEFAULT_HOME
        if candidate.is_dir():
            return candidate
    return None


def existing_home(home: str | os.PathLike[str] | None = None, *, start: Path | None = None) -> Path:
    """The workspace a command that only reads works in: one that exists, or a located error."""
    resolved = resolve_home(home, start=start)
    if resolved.is_dir():
        return resolved
    if home is not None or os.environ.get("CABAL_HOME"):
        raise ConfigError(f"no Cabal workspace at {resolved}",
                          hint="check --home or CABAL_HOME; `cabal run MISSION.yaml` creates a workspace")
    here = (start or Path.cwd()).resolve()
    raise ConfigError(f"no Cabal workspace here: no {DEFAULT_HOME} folder in {here} or any of its parents",
                      hint="run from your project's folder, set CABAL_HOME, or pass --home")


@dataclass(frozen=True)
class ServerAddress:
    """Either an external server URL or the embedded server of a workspace."""

    url: str | None
    home: Path

    @property
    def embedded(self) -> bool:
        return self.url is None

    def describe(self) -> str:
        return f"embedded server in {self.home}" if self.embedded else redact(self.url or "")


def resolve_server(url: str | None = None, home: str | os.PathLike[str] | None = None) -> ServerAddress:
    chosen = url or os.environ.get("FALKORDB_URL")
    if not chosen and os.environ.get("NGRAM_FALKORDB_HOST"):
        host = os.environ["NGRAM_FALKORDB_HOST"]
        port = os.environ.get("NGRAM_FALKORDB_PORT", "6379")
        chosen = f"redis://{host}:{port}"
    if chosen:
        try:
            scheme = urlparse(chosen).scheme
        except ValueError as exc:  # an unclosed [ipv6] bracket, ...
            raise ConfigError(f"invalid graph URL {chosen!r}: {exc}",
                              hint="use redis://host:port, rediss://host:port or unix:///path/to.sock") from None
        if scheme not in URL_SCHEMES:
            raise ConfigError(
                f"unsupported graph URL scheme {scheme!r} in {redact(chosen)}",
                hint="use redis://host:port, rediss://host:port or unix:///path/to.sock",
            )
    return ServerAddress(url=chosen or None, home=resolve_home(home))


def redact(url: str) -> str:
    """A URL safe to print: any password replaced by ***."""
    try:
        parsed = urlparse(url)
    except ValueError:
        return "(an unreadable URL)"
    if parsed.password:
        netloc = parsed.netloc.replace(f":{parsed.password}@", ":***@")
        return parsed._replace(netloc=netloc).geturl()
    return url


def environment_number(variable: str, default: float, *, what: str, whole: bool = False, least: float = 0) -> float:
    """The number ``variable`` holds (a whole one when ``whole``), or ``default`` when it is unset
    or blank. Anything else, or a number below ``least``, is a ``ConfigError`` that names the
    variable and says what to write: one rule for every numeric setting of the environment."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        value: float | None = int(text) if whole else float(text)
    except ValueError:
        value = None
    if value is None or not math.isfinite(value) or value < least:
        raise ConfigError(f"{variable}={text!r}: write {'a whole number' if whole else 'a number'} of {what}, "
                          f"{least:g} or more")
    return value


LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name, IPv6 with or without brackets) is this machine only."""
    name = host.strip().strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
