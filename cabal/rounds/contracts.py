"""How the engine calls each round protocol: one entry per protocol, and nowhere else.

A role card says which part of a step's answer a protocol writes and which rule checks it
(``agents/*.yaml``); the protocol says what it writes (``protocols/*.yaml``). This table says
the rest: the answer key the item goes under, and the values the protocol needs that the
answer cannot carry: deterministic ids, version numbers, owners. A protocol missing from the
table takes the item under ``item`` and the turn's common context only.

Every function here is pure: it reads the already-checked item (a pydantic value) and the
``WriteScope`` of the turn.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from cabal.entities import AddProduct, MoveProduct, RemoveProduct, UpdateProduct
from cabal.refs import parse_refs
from cabal.rounds.rules import Roster
from cabal.rounds.snapshot import Snapshot
from cabal.vocabulary import CHAIR_ID


@dataclass(frozen=True)
class WriteScope:
    """What a protocol's extra context is computed from: the view of the turn, its team, the
    real ids this answer's ADD operations receive (``new-N`` -> id) and the ids its new
    decisions receive (topic -> ``dN``)."""

    snapshot: Snapshot
    team: Roster
    new_ids: Mapping[str, str] = field(default_factory=dict)
    new_decisions: Mapping[str, str] = field(default_factory=dict)


ContextOf = Callable[[Any, WriteScope], dict[str, Any]]


def _nothing(item: Any, scope: WriteScope) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class RoundProtocol:
    context: ContextOf = _nothing
    answer_key: Callable[[BaseModel], str] = lambda item: "item"


def _version(item: Any, scope: WriteScope) -> dict[str, Any]:
    """write_version, chair_version: the next number, the version it supersedes, the products it
    references and the sources it cites (``[[s:...]]``, already mapped to the versions cited)."""
    latest = scope.snapshot.latest_version(item.product_id)
    number = latest["number"] + 1 if latest else 1
    content = item.new_version.content if hasattr(item, "new_version") else item.content
    return {"number": number, "previous_version_id": latest["id"] if latest else None, "title": f"Version {number}",
            "references": sorted({r.id for r in parse_refs(content)
                                  if r.kind == "p" and r.id in scope.snapshot.products}),
            "cited": sorted({r.id for r in parse_refs(content) if r.kind == "s"})}


def _tree(item: Any, scope: WriteScope) -> dict[str, Any]:
    """tree_operation: the product's real id; an ADD's owner (its assignee, else the parent's owner)."""
    if isinstance(item, AddProduct):
        parent = scope.snapshot.products.get(item.parent_id) or {}
        return {"action": item.action, "product_id": scope.new_ids[item.new_id],
                "owner": item.product.assignee or parent.get("owner") or CHAIR_ID}
    return {"action": item.action, "product_id": item.product_id}


_TREE_KEYS = {AddProduct: "add", RemoveProduct: "remove", MoveProduct: "move", UpdateProduct: "change"}


def _acceptance(item: Any, scope: WriteScope) -> dict[str, Any]:
    """decide_acceptance: the version decided on (the latest unless named) and the decision word."""
    latest = scope.snapshot.latest_version(item.product_id)
    return {"version_id": item.version_id or (latest["id"] if latest else None),
            "decision": "accepted" if item.accepted else "rejected"}


def _remark(item: Any, scope: WriteScope) -> dict[str, Any]:
    """add_remark: the recipients that are agents (the others are ``self`` and users)."""
    return {"agent_recipients": [r for r in item.recipients if r in scope.team.ids()]}


def _reflection(item: Any, scope: WriteScope) -> dict[str, Any]:
    """add_reflection: the collabs its feedback responses address (they stop being open)."""
    return {"addressed": [response.collab_id for response in item.feedback_responses]}


def _response(item: Any, scope: WriteScope) -> dict[str, Any]:
    """answer_feedback: the product of the collab answered (the rule made sure it is open)."""
    collab = next((c for c in scope.snapshot.collabs if c["id"] == item.collab_id), {})
    return {"product_id": collab.get("product_id")}


def _decision(item: Any, scope: WriteScope) -> dict[str, Any]:
    """record_decision: the decision's id (a change keeps the one it names), its revision, the
    revision it supersedes, and what the change is (the moment says it)."""
    previous = scope.snapshot.latest_decision(item.replaces) if item.replaces else None
    retired = previous is not None and item.decision is None
    return {"key": item.replaces or scope.new_decisions[item.topic],
            "revision": int(previous["revision"]) + 1 if previous else 1,
            "previous_id": previous["id"] if previous else None, "retired": retired,
            "change": "retired" if retired else "changed" if previous else "decided"}


ROUND_PROTOCOLS: dict[str, RoundProtocol] = {
    "write_version": RoundProtocol(context=_version),
    "chair_version": RoundProtocol(context=_version),
    # tree_operation asks one question per action; the answer goes under that question's key.
    "tree_operation": RoundProtocol(context=_tree, answer_key=lambda item: _TREE_KEYS[type(item)]),
    "decide_acceptance": RoundProtocol(context=_acceptance),
    "add_remark": RoundProtocol(context=_remark),
    "add_reflection": RoundProtocol(context=_reflection),
    "answer_feedback": RoundProtocol(context=_response),
    "record_decision": RoundProtocol(context=_decision),
}


def round_protocol(name: str) -> RoundProtocol:
    return ROUND_PROTOCOLS.get(name) or RoundProtocol()
