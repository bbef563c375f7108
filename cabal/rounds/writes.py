"""From a checked answer to membrane runs, and from runs to one atomic commit per turn.

The role card says which protocol writes which part of an answer; this module computes the
values a protocol cannot know (deterministic ids, version numbers, ``new-N`` products), runs
each protocol as a dry run (``commit=False``) so every membrane problem reaches the model
with the engine's own, and commits a turn's runs plus its turn moment as ONE cluster.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from cabal.errors import AnswerProblem, AnswerRejected, CabalError
from cabal.membrane import Membrane
from cabal.refs import parse_refs
from cabal.rounds.ids import NEW_PRODUCT_PREFIX, item_id
from cabal.rounds.rules import ABOUT_RULES, RuleContext, step_problems
from cabal.rounds.team import WriteRule

@dataclass(frozen=True)
class TurnPlace:
    """Where a turn happens: everything a deterministic id is made of."""

    mission_id: str
    round: int
    step: str
    agent_id: str
    turn_id: str


class GroupCommitter:
    """Commits turns; the turns that finish while a commit is in flight go together in the next.

    The graph has one writer, so parallel operatives that finish at once would queue for it a
    round trip each; grouped, they share one. A turn is never split across groups and a group
    is one atomic query, so each turn still commits whole or not at all. A turn alone (the
    usual case with a real model's latency) commits at once, exactly as without grouping.
    """

    def __init__(self, membrane: Membrane) -> None:
        self._membrane = membrane
        self._changed = threading.Condition()
        self._waiting: list[_Waiting] = []
        self._writing = False

    def commit(self, runs: list[dict], *, what: str) -> None:
        mine = _Waiting(runs)
        with self._changed:
            self._waiting.append(mine)
            while self._writing and not mine.done:
                self._changed.wait()
            if mine.done:  # another thread wrote it in its group
                if mine.error is not None:
                    raise mine.error
                return
            self._writing = True
            group, self._waiting = self._waiting, []
        error: BaseException | None = None
        try:
            result = self._membrane.commit_many([run for waiting in group for run in waiting.runs])
            if result["status"] != "complete":
                error = CabalError(f"commit of {what} (with {len(group) - 1} other turn(s)) failed: {result.get('error')}")
        except BaseException as exc:  # noqa: BLE001 - handed to every waiting turn, then raised
            error = exc
        with self._changed:
            for waiting in group:
                waiting.done, waiting.error = True, error
            self._writing = False
            self._changed.notify_all()
        if error is not None:
            raise error


@dataclass
class _Waiting:
    runs: list[dict]
    done: bool = False
    error: BaseException | None = None


@dataclass
class Prepared:
    """A turn's checked writes, ready to commit."""

    runs: list[dict]  # membrane run results with status complete and a cluster


def _parsed_items(answer: BaseModel, rule: WriteRule) -> list[tuple[str, Any]]:
    """(path, parsed item) pairs of a field, or the whole field group as one item."""
    if rule.field:
        name = next(n for n, info in type(answer).model_fields.items() if (info.alias or n) == rule.field)
        value = getattr(answer, name)
        if value is None:
            return []
        if isinstance(value, list):
            return [(f"{rule.field}.{index}", item) for index, item in enumerate(value)]
        return [(rule.field, value)]
    return [("", answer)]


def _raw_items(raw: dict, rule: WriteRule) -> list[Any]:
    if rule.field:
        value = raw.get(rule.field)
        if value is None:
            return []
        return value if isinstance(value, list) else [value]
    return [{name: raw[name] for name in rule.fields if name in raw}]


class TurnWriter:
    """Checks one answer against the rules and the membrane, and commits it."""

    def __init__(self, membrane: Membrane, rules: RuleContext, place: TurnPlace, writes: tuple[WriteRule, ...],
                 committer: GroupCommitter | None = None) -> None:
        self.membrane = membrane
        self.committer = committer
        self.rules = rules
        self.place = place
        self.writes = writes

    # ----------------------------------------------------------------------------- check

    def check(self, answer: BaseModel, raw: dict) -> Prepared:
        """Every problem of the answer, all at once (AnswerRejected), or the prepared runs."""
        self.rules.added.clear()
        self.rules.seen.clear()
        problems: list[AnswerProblem] = []
        for rule in self.writes:
            for path, item in _parsed_items(answer, rule):
                if rule.about:
                    problems += [AnswerProblem(path, text) for text in ABOUT_RULES[rule.about](item, self.rules)]
        problems += [AnswerProblem(path, text) for path, text in step_problems(self.place.step, answer, self.rules)]
        if problems:
            raise AnswerRejected(problems)
        new_ids = {new: item_id(self.place.turn_id, "product", index)
                   for index, new in enumerate(self.rules.added)}
        raw = _resolve_new_ids(raw, new_ids)
        runs: list[dict] = []
        for rule in self.writes:
            for index, item in enumerate(_raw_items(raw, rule)):
                path = f"{rule.field}.{index}" if rule.field else ""
                context = self._context(rule, index, item, new_ids)
                session = item_id(self.place.turn_id, rule.protocol, index)
                result = self.membrane.run(rule.protocol, context, {"item" if rule.protocol != "tree_operation"
                                                                   else _tree_key(item): item},
                                           session_id=session, commit=False, persist=False)
                if result["status"] == "complete":
                    runs.append(result)
                elif result.get("errors"):
                    problems += [AnswerProblem(".".join(p for p in (path, _strip_key(e["path"])) if p), e["message"])
                                 for e in result["errors"]]
                else:
                    raise CabalError(f"protocol {rule.protocol} failed: {result.get('error')}")
        if problems:
            raise AnswerRejected(problems)
        return Prepared(runs)

    def _context(self, rule: WriteRule, index: int, item: Any, new_ids: dict[str, str]) -> dict:
        place, snapshot = self.place, self.rules.snapshot
        context: dict[str, Any] = {
            "mission_id": place.mission_id, "round": place.round, "step": place.step, "agent_id": place.agent_id,
            "actor_id": place.agent_id, "turn_id": place.turn_id, "index": index,
            "item_id": item_id(place.turn_id, rule.protocol, index),
        }
        if rule.protocol in ("write_version", "chair_version"):
            latest = snapshot.latest_version(item["productId"])
            number = (latest["number"] + 1) if latest else 1
            content = item.get("newVersion", {}).get("content") or item.get("content") or ""
            context.update(number=number, previous_version_id=latest["id"] if latest else None,
                           title=f"Version {number}",
                           references=sorted({r.id for r in parse_refs(content)
                                              if r.kind == "p" and r.id in snapshot.products}))
        elif rule.protocol == "tree_operation":
            action = item["action"]
            context["action"] = action
            if action == "ADD":
                context["product_id"] = new_ids[item["newId"]]
                parent = snapshot.products.get(item["parentId"]) or {}
                context["owner"] = item["product"].get("assignee") or parent.get("owner") or "chair-1"
            else:
                context["product_id"] = item["productId"]
        elif rule.protocol == "decide_acceptance":
            latest = snapshot.latest_version(item["productId"])
            context["version_id"] = item.get("versionId") or (latest["id"] if latest else None)
            context["decision"] = "accepted" if item["accepted"] else "rejected"
        elif rule.protocol == "add_remark":
            context["agent_recipients"] = [r for r in item.get("recipients", []) if r in self.rules.team.ids()]
        elif rule.protocol == "add_reflection":
            context["addressed"] = [r["collabId"] for r in item.get("feedbackResponses", [])]
        return context

    # ---------------------------------------------------------------------------- commit

    def commit(self, prepared: Prepared | None, turn_record: dict, *, extra: list[dict] = ()) -> list[dict]:
        """The turn's writes, any extra prepared runs and its turn moment, as one cluster (all
        or nothing). Returns the committed clusters, for the engine's in-memory view."""
        runs = [*(prepared.runs if prepared else []), *extra, self.record(turn_record)]
        if self.committer is not None:
            self.committer.commit(runs, what=self.place.turn_id)
        else:
            result = self.membrane.commit_many(runs)
            if result["status"] != "complete":
                raise CabalError(f"commit of {self.place.turn_id} failed: {result.get('error')}")
        return [run["cluster"] for run in runs]

    def record(self, turn_record: dict) -> dict:
        context = {"mission_id": self.place.mission_id, "round": self.place.round, "step": self.place.step,
                   "agent_id": self.place.agent_id, "actor_id": self.place.agent_id, "turn_id": self.place.turn_id,
                   **turn_record}
        result = self.membrane.run("record_turn", context, {}, session_id=f"{self.place.turn_id}.record",
                                   commit=False, persist=False)
        if result["status"] != "complete":
            raise CabalError(f"cannot record turn {self.place.turn_id}: {result.get('error')}")
        return result

    def run_protocol(self, protocol: str, item: Any, extra: dict | None = None, *, index: int = 0) -> dict:
        """A single engine-side write (a halt) as a prepared run; raises on any problem."""
        context = {"mission_id": self.place.mission_id, "round": self.place.round, "step": self.place.step,
                   "agent_id": self.place.agent_id, "actor_id": self.place.agent_id, "turn_id": self.place.turn_id,
                   "index": index,
                   "item_id": item_id(self.place.turn_id, protocol, index), **(extra or {})}
        result = self.membrane.run(protocol, context, {"item": item}, session_id=context["item_id"],
                                   commit=False, persist=False)
        if result["status"] != "complete":
            raise AnswerRejected([AnswerProblem(e["path"], e["message"]) for e in result.get("errors", [])]
                                 or [AnswerProblem("", str(result.get("error")))])
        return result


def _tree_key(item: dict) -> str:
    """tree_operation asks per action (add / remove / move / change): the answer's key."""
    return {"ADD": "add", "REMOVE": "remove", "MOVE": "move", "UPDATE": "change"}[item["action"]]


def _strip_key(path: str) -> str:
    """Membrane paths start with the ask's key (item, add, ...); the model knows the item path."""
    return path.split(".", 1)[1] if "." in path else ""


def _resolve_new_ids(raw: Any, new_ids: dict[str, str]) -> Any:
    """Replace ``new-N`` ids of this answer's ADD operations by their real ids, except newId."""
    if not new_ids:
        return raw
    if isinstance(raw, dict):
        return {k: v if k == "newId" else _resolve_new_ids(v, new_ids) for k, v in raw.items()}
    if isinstance(raw, list):
        return [_resolve_new_ids(v, new_ids) for v in raw]
    if isinstance(raw, str) and raw.startswith(NEW_PRODUCT_PREFIX):
        return new_ids.get(raw, raw)
    return raw
