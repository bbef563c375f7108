"""What the membrane gives back to Python callers: typed values, never status dicts.

A call either returns one of these or raises a ``CabalError`` (an unknown protocol or session,
a missing dependency, a cluster the graph refuses). A rejected answer is not an error: it is a
``MembraneResult`` whose ``problems`` list every problem, with the session still on its step.

``to_wire()`` turns a value into the JSON an outside agent reads (the MCP server's results);
that is the only place these become dicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from cabal.errors import AnswerProblem, AnswerRejected

SessionStatus = Literal["active", "complete", "aborted"]


@dataclass(frozen=True)
class FileMove:
    """A ``move_file`` step's move, waiting for the commit: paths relative to the file root."""

    step: str  # the step key that asked for it
    source: str
    target: str

    def to_wire(self) -> dict[str, str]:
        return {"step": self.step, "from": self.source, "to": self.target}


@dataclass(frozen=True)
class FileError:
    """A move that failed after its cluster was committed: the graph has the cluster, the file
    is still where it was (or wherever the failure left it); ``message`` says why."""

    move: FileMove
    message: str

    def to_wire(self) -> dict[str, str]:
        return {**self.move.to_wire(), "error": self.message}


@dataclass(frozen=True)
class Cluster:
    """What a protocol writes when it completes: nodes, links and field updates of existing
    nodes (``{"id", "fields"}``), committed together in one round trip, all or nothing; then
    the files its ``move_file`` steps move (``moves``, in order), only once that commit succeeded.

    Nodes and links are the graph layer's plain records (``cabal.graph`` checks them against
    the schema when they are written)."""

    nodes: tuple[Mapping[str, Any], ...] = ()
    links: tuple[Mapping[str, Any], ...] = ()
    updates: tuple[Mapping[str, Any], ...] = ()
    moves: tuple[FileMove, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.nodes or self.links or self.updates or self.moves)

    @property
    def writes_graph(self) -> bool:
        return bool(self.nodes or self.links or self.updates)

    def to_wire(self) -> dict[str, list]:
        wire = {"nodes": [dict(n) for n in self.nodes], "links": [dict(l) for l in self.links],
                "updates": [dict(u) for u in self.updates]}  # fmt: skip
        if self.moves:
            wire["moves"] = [move.to_wire() for move in self.moves]
        return wire


@dataclass(frozen=True)
class Created:
    """What a commit did: the nodes and links it created, as the graph counted them (an
    idempotent replay creates nothing), then the files it moved and the moves that failed."""

    nodes: int = 0
    links: int = 0
    moved: tuple[FileMove, ...] = ()
    file_errors: tuple[FileError, ...] = ()

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"nodes": self.nodes, "links": self.links}
        if self.moved:
            wire["moved"] = [move.to_wire() for move in self.moved]
        if self.file_errors:
            wire["file_errors"] = [error.to_wire() for error in self.file_errors]
        return wire


@dataclass(frozen=True)
class AskView:
    """The ask step a session waits on, as an agent needs it to answer."""

    id: str  # the step key: the step id, or ``call_step.step_id`` inside a called protocol
    question: str
    expects: Mapping[str, Any]  # as the protocol author wrote it
    answer_schema: Mapping[str, Any]  # the exact JSON Schema the answer is checked against
    context_enrichment: Mapping[str, Any] | None = None
    questions: tuple[Mapping[str, Any], ...] | None = None  # a ``questions:`` step's questions
    items: tuple[Mapping[str, Any], ...] | None = None  # a ``for_each`` step's items
    moment: Mapping[str, Any] | None = None  # what the agent provides besides the answer (P6)

    def to_wire(self) -> dict[str, Any]:
        shown: dict[str, Any] = {
            "id": self.id, "type": "ask", "question": self.question, "expects": self.expects,
            "answer_schema": self.answer_schema, "context_enrichment": self.context_enrichment,
        }
        for name in ("questions", "items"):
            if getattr(self, name) is not None:
                shown[name] = list(getattr(self, name))
        if self.moment is not None:
            shown["moment"] = self.moment
        return shown


@dataclass(frozen=True)
class MembraneResult:
    """Where a session is after a call.

    - ``active``: waiting on ``step`` (of ``protocol``); ``problems`` when the call's answers
      were rejected (nothing was kept), ``prompt`` when a dependency asks the agent for one.
    - ``complete``: ``summary`` and ``created`` (with the files moved after the commit, and
      ``file_errors`` for those that could not be); a dry run (``commit=False``) carries the
      prepared ``cluster`` instead of writing it, and moves nothing. ``replayed`` when the
      session had already completed before this call.
    - ``aborted``: the session was abandoned; it wrote nothing.
    """

    status: SessionStatus
    session_id: str
    protocol: str | None = None
    step: AskView | None = None
    problems: tuple[AnswerProblem, ...] = ()
    prompt: str | None = None
    summary: str = ""
    created: Created = field(default_factory=Created)
    cluster: Cluster | None = None
    replayed: bool = False
    enrichment: Mapping[str, Any] | None = None

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    @property
    def rejected(self) -> bool:
        return bool(self.problems)

    @property
    def file_errors(self) -> tuple[FileError, ...]:
        """The moves that failed after the commit (the cluster itself is written)."""
        return self.created.file_errors

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"status": self.status, "session_id": self.session_id}
        if self.status == "active":
            wire.update(protocol=self.protocol, step=self.step.to_wire() if self.step else None)
            if self.problems:
                wire["errors"] = [{"path": p.path, "message": p.message} for p in self.problems]
                wire["error"] = AnswerRejected(list(self.problems)).feedback()
            if self.prompt:
                wire["prompt"] = self.prompt
            if self.enrichment is not None:
                wire["enrichment"] = dict(self.enrichment)
        elif self.status == "complete":
            wire.update(summary=self.summary, created=self.created.to_wire())
            if self.cluster is not None:
                wire["cluster"] = self.cluster.to_wire()
            if self.replayed:
                wire["replayed"] = True
        return wire


@dataclass(frozen=True)
class Form:
    """Every answer a session needs up to where its path depends on one, as ONE JSON Schema
    (keyed by step key); ``completes`` says whether answering all of it finishes the protocol."""

    session_id: str
    schema: Mapping[str, Any]
    steps: tuple[str, ...]
    completes: bool

    def to_wire(self) -> dict[str, Any]:
        return {"status": "active", "session_id": self.session_id, "schema": self.schema,
                "steps": list(self.steps), "completes": self.completes}

