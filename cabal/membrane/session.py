"""A membrane session, and its home in the graph: one ``session`` node per session.

The node (node_type ``session``, type ``membrane``) holds the protocol, the status and the whole
state as JSON text, so any process continues a session by its id: nothing lives only in memory.
Saves between steps are small separate writes; the final state rides in the same
``create_cluster`` call as the protocol's cluster (``updates=``), so "complete" and the nodes it
claims are committed together or not at all.

What the session accumulates (nodes, links, updates, moments) is written only at completion,
and the files its ``move_file`` steps move are moved only after that write succeeded. An
aborted session therefore leaves nothing behind but its own node: no half cluster, no moments
for reasoning that led nowhere, no file moved.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field, fields
from typing import Any, Final

from cabal.errors import ProtocolRuntimeError
from cabal.membrane.results import SessionStatus

NODE_TYPE = "session"
SESSION_TYPE = "membrane"
ACTIVE: Final = "active"
COMPLETE: Final = "complete"
ABORTED: Final = "aborted"


@dataclass
class Frame:
    """One protocol on the call stack: where it is, and the prefix of its step keys."""

    protocol: str
    step: str
    prefix: str = ""  # "" for the top protocol, "call_step." inside a called one
    collect: str | None = None  # the caller's name for the first node this protocol prepares
    mark: int = 0  # how many nodes the session had prepared when this protocol was entered


@dataclass
class Session:
    id: str
    protocol: str
    context: dict[str, Any]
    frames: list[Frame] = field(default_factory=list)
    status: SessionStatus = ACTIVE
    answers: dict[str, Any] = field(default_factory=dict)  # step key -> accepted answer
    nodes: list[dict] = field(default_factory=list)  # prepared by create steps
    links: list[dict] = field(default_factory=list)
    updates: list[dict] = field(default_factory=list)  # prepared by update steps
    moments: list[dict] = field(default_factory=list)  # {node, actor, about, about_template, locals}
    moves: list[dict] = field(default_factory=list)  # move_file steps: {step, source, target}, done after the commit
    visits: dict[str, int] = field(default_factory=dict)  # step key -> times answered (loops)
    loops: dict[str, int] = field(default_factory=dict)  # each step key -> items it has gone through
    outcome: str = "complete"  # or "cancelled": how a complete step ended the protocol
    prompt: str | None = None  # a pending prompt from a dependency (on_missing: prompt)
    summary: str | None = None
    stored: bool = field(default=False, compare=False)  # a session node exists in the graph

    @classmethod
    def new(cls, protocol: str, context: dict[str, Any] | None, session_id: str | None = None) -> Session:
        return cls(id=session_id or f"session-{uuid.uuid4().hex[:16]}", protocol=protocol, context=dict(context or {}))

    @property
    def current_step(self) -> str:
        return self.frames[-1].step

    @property
    def call_stack(self) -> list[Frame]:
        return self.frames[:-1]

    def to_state(self) -> str:
        # json.dumps reads the state as it is: copying it first (dataclasses.asdict) cost most
        # of a step's time. Frames are flat; everything else is plain data already.
        state = {name: getattr(self, name) for name in _STATE_FIELDS}
        state["frames"] = [dict(frame.__dict__) for frame in self.frames]
        try:
            return json.dumps(state, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise ProtocolRuntimeError(
                f"session {self.id!r} holds a value that is not JSON ({exc}); context values must be plain data",
                protocol=self.protocol,
            ) from None

    @classmethod
    def from_state(cls, text: str, *, stored: bool) -> Session:
        state = json.loads(text)
        state["frames"] = [Frame(**frame) for frame in state["frames"]]
        return cls(**state, stored=stored)

    def copy(self) -> Session:
        return Session.from_state(self.to_state(), stored=self.stored)


_STATE_FIELDS = tuple(f.name for f in fields(Session) if f.name != "stored")


class SessionStore:
    """Sessions as graph nodes. Every method is one round trip."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph

    def load(self, session_id: str) -> Session | None:
        node = self.graph.get(session_id) if isinstance(session_id, str) and session_id else None
        if node is None or node.get("node_type") != NODE_TYPE or node.get("type") != SESSION_TYPE:
            return None
        return Session.from_state(node["state"], stored=True)

    def create(self, session: Session) -> None:
        node = {"id": session.id, "node_type": NODE_TYPE, "type": SESSION_TYPE, **self.fields(session)}
        self.graph.create_cluster([node])
        session.stored = True

    def save(self, session: Session) -> None:
        self.graph.create_cluster([], [], updates=[self.update_row(session)])

    def update_row(self, session: Session) -> dict:
        """The session's state as an ``updates=`` row, to ride along with another write."""
        return {"id": session.id, "fields": self.fields(session)}

    @staticmethod
    def fields(session: Session) -> dict[str, Any]:
        return {"protocol": session.protocol, "status": session.status, "state": session.to_state()}
