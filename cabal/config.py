"""Where Cabal keeps its workspace and which graph server it talks to.

Resolution order, first that is set wins:
- workspace: explicit argument, then ``CABAL_HOME``, then ``./.cabal``;
- graph server: explicit URL, then ``FALKORDB_URL``, then ``NGRAM_FALKORDB_HOST`` /
  ``NGRAM_FALKORDB_PORT`` (the seed's variables), else the embedded server of the workspace.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from cabal.errors import ConfigError

DEFAULT_HOME = ".cabal"
URL_SCHEMES = ("redis", "rediss", "unix")


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """The workspace directory (created on demand by whoever writes into it)."""
    chosen = home if home is not None else os.environ.get("CABAL_HOME") or DEFAULT_HOME
    return Path(chosen).expanduser().resolve()


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
        scheme = urlparse(chosen).scheme
        if scheme not in URL_SCHEMES:
            raise ConfigError(
                f"unsupported graph URL scheme {scheme!r} in {redact(chosen)}",
                hint="use redis://host:port, rediss://host:port or unix:///path/to.sock",
            )
    return ServerAddress(url=chosen or None, home=resolve_home(home))


def redact(url: str) -> str:
    """A URL safe to print: any password replaced by ***."""
    parsed = urlparse(url)
    if parsed.password:
        netloc = parsed.netloc.replace(f":{parsed.password}@", ":***@")
        return parsed._replace(netloc=netloc).geturl()
    return url
