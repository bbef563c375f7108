"""Where the round loop's checkpoints live: SQLite in the workspace, or a Postgres server.

SQLite (``<workspace>/checkpoints.sqlite``, opened by ``Workspace.checkpointer``) is the
default: every process on one machine reaches it. Workers on several machines need one store
they all reach, so ``CABAL_CHECKPOINTS=postgresql://user:pass@host/db`` keeps checkpoints in
Postgres instead (``langgraph-checkpoint-postgres``, installed with ``cabal-agents[cluster]``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from urllib.parse import urlparse

from cabal.config import redact
from cabal.errors import ConfigError
from cabal.vocabulary import install_command

CHECKPOINTS_ENV = "CABAL_CHECKPOINTS"
POSTGRES_SCHEMES = ("postgresql", "postgres")
# Any fixed number: the key of the advisory lock that serialises the tables' creation when
# several workers start at once (Postgres' CREATE TABLE IF NOT EXISTS races with itself).
_SETUP_LOCK_KEY = 0x43414241


@dataclass(frozen=True)
class CheckpointStore:
    """Where checkpoints go: ``url`` is a Postgres URL, or None for the workspace's SQLite file."""

    url: str | None = None

    @classmethod
    def from_environment(cls) -> CheckpointStore:
        raw = os.environ.get(CHECKPOINTS_ENV, "").strip()
        if not raw or raw == "sqlite":
            return cls(None)
        if urlparse(raw).scheme not in POSTGRES_SCHEMES:
            raise ConfigError(f"{CHECKPOINTS_ENV}={redact(raw)}: expected a postgresql:// URL, or nothing "
                              "(SQLite in the workspace)")
        return cls(raw)

    @property
    def shared(self) -> bool:
        """Whether workers on other machines reach it (a server, not a file)."""
        return self.url is not None

    def describe(self) -> str:
        return f"postgres at {redact(self.url)}" if self.url else "sqlite in the workspace"

    @contextmanager
    def postgres_saver(self) -> Iterator:
        """An open, set-up Postgres checkpointer, closed on exit (for a store with a ``url``)."""
        url = self.url
        assert url is not None, "only a Postgres store has a Postgres saver"
        try:
            from langgraph.checkpoint.postgres import PostgresSaver
            from psycopg import Connection, OperationalError
        except ImportError:
            raise ConfigError(f"{CHECKPOINTS_ENV} names a Postgres server, but its client is not installed",
                              hint=install_command("cluster")) from None
        with ExitStack() as stack:
            try:
                saver = stack.enter_context(PostgresSaver.from_conn_string(url))
            except OperationalError as error:
                reason = " ".join(str(error).split())[:300]
                raise ConfigError(f"cannot reach the checkpoint store {redact(url)}: {reason}",
                                  hint=f"check {CHECKPOINTS_ENV}") from None
            conn = saver.conn
            assert isinstance(conn, Connection), "from_conn_string opens one connection, not a pool"
            conn.execute("SELECT pg_advisory_lock(%s)", (_SETUP_LOCK_KEY,))
            try:
                saver.setup()
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (_SETUP_LOCK_KEY,))
            yield saver
