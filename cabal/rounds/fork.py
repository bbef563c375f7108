"""A mission forked from the start of one of its rounds: what the new mission's graph holds.

A mission's graph deletes nothing: each node and link is created once, in order (the server's
internal ids grow with each creation, ``ContextGraph.history``), and the one write that
overwrites, an update, keeps the values it replaced in its moment (``BEFORE_FIELD``). So the
mission as it stood when round N began is every node and link created before the round's
first write (``round_started``), with the updates made since undone, newest first. The
fork is that graph under a new mission id; the original is only read. The round loop's
checkpoint at the same boundary is ``api.fork_mission``'s (LangGraph's state history).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from cabal.errors import ConfigError, MissionError
from cabal.membrane.cluster import BEFORE_FIELD, moment_id
from cabal.rounds.ids import status_session
from cabal.vocabulary import MissionState

FORKED_FROM, FORKED_ROUND = "forked_from", "forked_round"  # the fork's mission node: its original and the round


def round_started(round_number: int) -> str:
    """The id of the first node a round writes: the moment its status turns ``running`` at the
    round's start (``engine.round_start``). What the graph created before it is the mission as
    it stood when the round began."""
    return moment_id(status_session(MissionState.RUNNING, round_number), "set", 1, None)


@dataclass(frozen=True)
class ForkedGraph:
    """The nodes and links a fork starts with, in their order of creation."""

    nodes: list[dict]
    links: list[dict]


def started_rounds(ids: set[str], last: int) -> list[int]:
    """The rounds (1 to ``last``) whose first write is in the graph: the rounds a fork may start from."""
    return [number for number in range(1, last + 1) if round_started(number) in ids]


def graph_at_round(nodes: list[tuple[int, dict]], links: list[tuple[int, dict]], *, original: str, fork: str,
                   round_number: int, is_update: Callable[[dict], bool]) -> ForkedGraph:
    """The original's graph (``ContextGraph.history``) as it stood when round ``round_number``
    began, renamed from mission ``original`` to ``fork``. ``is_update`` tells a moment of an
    update step (one recorded before updates kept what they replaced has no ``before``: such a
    mission cannot be taken back past it, and ``MissionError`` says so).

    A bad round is a ``ConfigError`` naming the rounds there are."""
    ids = {node["id"] for _, node in nodes}
    mission = next((node for _, node in nodes if node["id"] == original), None)
    assert mission is not None, "the caller read the mission's own graph"
    rounds = started_rounds(ids, int(mission.get("round") or 0))
    if round_number not in rounds:
        there = (f"it started rounds {rounds[0]} to {rounds[-1]}" if len(rounds) > 1
                 else f"it started round {rounds[0]} only" if rounds else "it has not started a round yet")
        why = "round 0 is the Chair's bootstrap, before the first round" if round_number < 1 else there
        raise ConfigError(f"cannot fork {original} at round {round_number}: {why}",
                          hint=f"cabal fork {original} --round N, N from {rounds[0]} to {rounds[-1]}" if rounds
                          else None)
    marker = round_started(round_number)
    cut = next(seq for seq, node in nodes if node["id"] == marker)
    link_cut = min((seq for seq, link in links if marker in (link["from"], link["to"])), default=None)
    kept = {node["id"]: dict(node) for seq, node in nodes if seq < cut}
    for seq, node in reversed(nodes):  # the updates made since the round began, undone newest first
        if seq < cut or node.get("node_type") != "moment":
            continue
        if BEFORE_FIELD in node:
            for node_id, fields in json.loads(node[BEFORE_FIELD]).items():
                if node_id in kept:
                    _restore(kept[node_id], fields)
        elif is_update(node):
            raise MissionError(f"cannot fork {original} at round {round_number}: it was recorded before updates "
                               f"kept the values they replace ({node['id']})",
                               hint="fork a mission run with this version of Cabal")
    kept_links = [link for seq, link in links
                  if (link_cut is None or seq < link_cut) and link["from"] in kept and link["to"] in kept]
    head = kept[original]
    head.update({"status": MissionState.INTERRUPTED.value, "round": round_number - 1, "stop_reason": "",
                 "detail": f"forked from {original} at the start of round {round_number}", "halt_requested": False,
                 "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                 FORKED_FROM: original, FORKED_ROUND: round_number})
    renamed = [_renamed(node, original, fork) for node in kept.values()]
    return ForkedGraph(renamed, [_renamed(link, original, fork) for link in kept_links])


def _restore(node: dict, fields: dict[str, Any]) -> None:
    for key, value in fields.items():
        if value is None:
            node.pop(key, None)
        else:
            node[key] = value


def _renamed(value: Any, original: str, fork: str) -> Any:
    """``value`` with every mention of the original's id (its node, the ids and sessions made
    from it, text that names it) naming the fork instead."""
    if isinstance(value, str):
        return value.replace(original, fork)
    if isinstance(value, list):
        return [_renamed(item, original, fork) for item in value]
    if isinstance(value, dict):
        return {key: value[key] if key in (FORKED_FROM,) else _renamed(value[key], original, fork) for key in value}
    return value
