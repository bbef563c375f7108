"""Where missions live: a workspace's graph server and checkpoint store, and a mission by its id.

Each mission is its own named graph on the workspace's server, named after the mission id
(``m-<name>-<6 hex>``). Light on purpose: reading a mission (``cabal show``, ``cabal export``)
needs this module and the graph, not the engine.
"""

from __future__ import annotations

import fcntl
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from cabal.config import DEFAULT_HOME, ServerAddress, existing_home, resolve_home, resolve_server
from cabal.errors import ConfigError, MissionBusy, MissionError, ResourceNotFound
from cabal.graph import ContextGraph
from cabal.locks import exclusive, is_held
from cabal.rounds.checkpoints import CheckpointStore
from cabal.limits import unprintable
from cabal.private import narrow, open_private, private_file, private_folder, workspace_folder

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

    from cabal.report import MissionReport

MISSION_PREFIX = "m-"
# What a mission id may be (the engine makes m-<name>-<6 hex>; a batch chooses its own): word
# characters and dashes only, since an id names a graph, a folder and a web page's path.
MISSION_ID = re.compile(MISSION_PREFIX + r"[\w-]{1,100}")
CHECKPOINTS = "checkpoints.sqlite"


@dataclass
class Workspace:
    """Where missions live: the graph server and the checkpoint store of one workspace."""

    home: Path
    url: str | None = None
    extra_dirs: dict[str, list[Path]] = field(default_factory=dict)

    @classmethod
    def at(cls, home: str | Path | None = None, url: str | None = None, project: str | Path | None = None, *,
           reading: bool = False) -> Workspace:
        """A workspace: ``home``, else ``CABAL_HOME``, else the nearest ``.cabal`` here or above
        (for a command that writes, ``./.cabal``, created on first use; a command that only
        reads gets a ``ConfigError`` saying where it looked). ``project`` (default: the folder
        holding the workspace, or the current directory) may hold the user's own agents/,
        protocols/, prompts/, skills/ folders, which add to the built-in ones by name."""
        resolved = existing_home(home) if reading else resolve_home(home)
        if project is not None:
            root = Path(project)
        else:
            root = resolved.parent if resolved.name == DEFAULT_HOME else Path.cwd()
        extra = {kind: [root / kind] for kind in ("agents", "protocols", "prompts", "skills") if (root / kind).is_dir()}
        return cls(resolved, url, extra)

    @cached_property
    def server(self) -> ServerAddress:
        """The workspace's graph server, resolved once: every mission's graph is on it, and a
        batch's worker keeps one workspace for all its missions."""
        return resolve_server(self.url, self.home)

    def graph(self, mission_id: str) -> ContextGraph:
        return ContextGraph.at(self.server, name=mission_id)

    @contextmanager
    def checkpointer(self) -> Iterator[BaseCheckpointSaver]:
        store = CheckpointStore.from_environment()  # CABAL_CHECKPOINTS=postgresql://... for a cluster
        if store.shared:
            with store.postgres_saver() as saver:
                yield saver
            return
        from langgraph.checkpoint.sqlite import SqliteSaver  # the engine's, imported with it

        path = private_file(workspace_folder(self.home) / CHECKPOINTS)
        # timeout: wait for another process's write instead of failing with "database is locked".
        connection = sqlite3.connect(path, check_same_thread=False, timeout=30)
        # WAL with synchronous=NORMAL: a commit is a write to the log, not an fsync. A killed
        # process loses nothing (the log is in the OS's hands); a power cut can lose the last
        # checkpoints, and resuming from an earlier one replays turns the graph already holds,
        # which are skipped by their turn-moment ids. Checkpoint writes went from ~35% of the
        # engine's time to a few percent (bench/README.md, issue 14).
        connection.execute("PRAGMA synchronous=NORMAL")
        try:
            saver = SqliteSaver(connection)
            with self.locked("checkpoints.lock"):  # two first starts would race to create the tables
                connection.execute("PRAGMA journal_mode=WAL")  # kept in the file: set once, under the lock
                saver.setup()
                # SQLite gives its journals the database's mode; these are narrowed for a
                # workspace made before it was private.
                for journal in (f"{CHECKPOINTS}-wal", f"{CHECKPOINTS}-shm"):
                    narrow(self.home / journal)
            yield saver
        finally:
            connection.close()

    @contextmanager
    def locked(self, name: str) -> Iterator[None]:
        """One process at a time in what the lock file ``name`` of the workspace guards (it waits)."""
        with open_private(self.home / name) as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _lock_path(self, mission_id: str) -> Path:
        return self.mission_dir(mission_id) / "lock"

    def mission_dir(self, mission_id: str) -> Path:
        return self.home / "missions" / mission_id

    def private_mission_dir(self, mission_id: str) -> Path:
        """The mission's folder, made (with the workspace's) for its owner only."""
        workspace_folder(self.home)
        for folder in (self.home / "missions", self.mission_dir(mission_id)):
            private_folder(folder)
        return self.mission_dir(mission_id)

    @contextmanager
    def driving(self, mission_id: str) -> Iterator[None]:
        """Only one process drives a mission at a time (two would race for the same turns)."""
        self.private_mission_dir(mission_id)
        with exclusive(self._lock_path(mission_id), lambda: MissionError(
                f"mission {mission_id} is being run by another process",
                hint="wait for it to pause or finish, then resume")):
            yield

    def is_driven(self, mission_id: str) -> bool:
        """Whether a live process drives the mission now (it holds the mission's lock)."""
        return is_held(self._lock_path(mission_id))

    def remove(self, mission_id: str) -> None:
        """Remove everything the workspace holds for a mission: its checkpoints, its folder
        (cassette, transcript, error log, tool logs, report) and its graph, the graph last (so a
        removal cut short is found by ``cabal missions`` and done again). Held under the
        mission's lock: a mission that a live process runs is refused (``MissionBusy``)."""
        import shutil

        with exclusive(self._lock_path(mission_id), lambda: MissionBusy(mission_id, "remove")):
            with self.checkpointer() as saver:
                saver.delete_thread(mission_id)
            shutil.rmtree(self.mission_dir(mission_id), ignore_errors=True)
            graph = self.graph(mission_id)
            try:
                graph.delete_graph()
            finally:
                graph.close()

    def transcript_path(self, mission_id: str) -> Path:
        return self.mission_dir(mission_id) / "transcript.md"

    def error_log_path(self, mission_id: str) -> Path:
        """Where the traceback of the engine error that failed a mission is kept."""
        return self.mission_dir(mission_id) / "error.log"

    def active_at(self, mission_id: str) -> float:
        """When a process last drove the mission (seconds since the epoch; 0 if never): the
        newest file of its folder (the lock is opened when a run starts, the transcript written
        when it stops)."""
        try:
            return max((entry.stat().st_mtime for entry in self.mission_dir(mission_id).iterdir()), default=0.0)
        except OSError:
            return 0.0

    def missions(self) -> list[str]:
        with ContextGraph.open(self.url, name="cabal", home=self.home) as graph:
            return [name for name in graph.list_graphs() if name.startswith(MISSION_PREFIX)]


def check_mission_id(mission_id: str) -> str:
    """``mission_id`` if it can name a mission, else a ``ConfigError`` saying why it cannot: such
    an id (empty, with spaces or control characters, a path) reaches neither the graph nor the disk."""
    if not mission_id.strip():
        wrong = "it is empty"
    elif unprintable(mission_id):
        wrong = f"it holds {unprintable(mission_id)}"
    elif any(ch.isspace() for ch in mission_id):
        wrong = "it holds a space"
    elif "/" in mission_id or "\\" in mission_id or mission_id in (".", ".."):
        wrong = "it is a path"
    else:
        return mission_id
    raise ConfigError(f"invalid mission id {mission_id!r}: {wrong}",
                      hint=f"a mission id looks like {MISSION_PREFIX}launch-1a2b3c; `cabal missions` lists them")


def mission_graph(workspace: Workspace, mission_id: str) -> ContextGraph:
    """The graph of mission ``mission_id``; "mission not found" lists the workspace's missions,
    the closest ids first."""
    graph = workspace.graph(check_mission_id(mission_id))
    if (graph.get(mission_id) or {}).get("node_type") != "mission":  # a graph of that name need not be a mission
        known = workspace.missions()
        graph.close()
        raise ResourceNotFound("mission", mission_id, known=known, closest_first=True)
    return graph


def mission_node(graph: ContextGraph, mission_id: str) -> dict:
    """The mission's own node, in the graph ``mission_graph`` opened (not found: it went since)."""
    node = graph.get(mission_id)
    if node is None:
        raise ResourceNotFound("mission", mission_id)
    return node


def mission_report(mission_id: str, *, home: str | Path | None = None, url: str | None = None) -> MissionReport:
    """Everything about a mission, read from its graph: request, charter, the product tree with
    every version, reviews, inspections and collabs, the conversation, questions, turns and usage."""
    from cabal.report import read_report

    workspace = Workspace.at(home, url, reading=True)
    with mission_graph(workspace, mission_id) as graph:
        return read_report(graph, mission_id)
