"""A read of one mission's state, taken once per step and shared by every agent in it.

What the round protocols write (the fields read here), one node type per mechanism:

- mission: name, request, charter, objectives, constraints, status, stop_reason, round, spec
- agent: type = role, name, persona, responsibility, area
- product: type = Content|Decision|Collection|Orchestration, name, dod, description, owner,
  parent_id, status (open, accepted, removed), round
- version: product_id, number, title, content, change_summary, author, round
- collab: type, product_id, version_id, importance, comment, summary, author, round, step
- reflection: ..., addressed (the collab ids its feedback responses answer), responses (JSON)
- response: collab_id, product_id, action (accept, defer, reject), rationale, planned_change, author,
  round, step (an operative's answer to a collab at Write)
- remark: type, recipients, content, is_blocker, author, round, step
- assignment: product_id, assignee, round; directive: assignment_id, objective, dod, why,
  context, importance, attached (JSON)
- reflection: product_id, dod_status, dod_gaps, next_version_delta, blockers, author, round
- review / inspection: product_id, version_id, assessment, round (+ findings: inspection_id,
  category, severity, issue, recommendation)
- acceptance: product_id, version_id, accepted, rejection_reason, round
- halt: type, message, options, status (pending, answered), answer, round, step
- chair_decision: key (d1, d2, ...: the id every prompt shows, the same for the whole mission), revision,
  topic, decision, why, retired, author, round, step (one node per revision; the latest revision
  of a key is the current decision, unless it retired it)
- message: content, as_agent, round, position
- source: source_id (s1, s2, ...), version, name, note, size, format, first_heading, chunk_count
  (one node per version of a user's file; its chunks are read on request, never kept here)
- moment type "turn": round, step, agent, outcome, usage (the marker of a committed turn)

Lifespans are derived from facts, never kept as status fields that could disagree with them:
a collab is open until a reflection's feedback response or a Write's response addresses it
(accept, defer or reject alike: a deferred collab leaves the open feedback and is listed in
``deferred``), and an endorsement is never open (it asks for no answer); an assignment is active
while it is the latest for its product and the product is neither accepted nor removed.

Operatives in one step act in parallel on the same snapshot, so none sees another's writes of
that step: exactly the semantics of a step. A step replayed after a crash that came once some
of its turns had committed reads the mission as of the step's start (``load_snapshot`` with
``step``), so the turns it runs again see exactly what they saw the first time.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cabal.graph import ContextGraph, reads
from cabal.llm.usage import Usage
from cabal.refs import Ref, substitute_refs
from cabal.rounds.ids import creation_key, short_ids, step_place, step_prefix
from cabal.sources import latest_versions

VERDICTS = ("approved", "needs_revision", "blocked")
"""An inspection's assessments, the most lenient first."""
from cabal.vocabulary import BLOCKING_IMPORTANCE, ENDORSEMENT, USER_ID, Step

VERSION_META = ["product_id", "number", "title", "change_summary", "author", "round"]
SOURCE_META = ["source_id", "version", "name", "note", "size", "format", "first_heading", "chunk_count", "round",
               "path", "sha256"]
# Node types kept whole, and those kept for a window of rounds (as load_snapshot reads them).
_KEPT = {"collab": "collabs", "inspection": "inspections", "finding": "findings", "acceptance": "acceptances",
         "halt": "halts", "chair_decision": "decisions"}
# Rows are kept by id, as the graph returns them; the Chair's decisions in the order the steps
# took them (by id a round's "close" sorts before its "plan"): a Plan's rejection, then the
# closing decisions' acceptance of the next version.
_ROW_ORDER: dict[str, Callable[[Mapping[str, Any]], Any]] = {"acceptances": creation_key}
_WINDOWED = {
    "review": ("reviews", lambda r: (r - 1, r)),
    "remark": ("remarks", lambda r: (r - 1, r)),
    "message": ("messages", lambda r: (r,)),
}


@dataclass
class Snapshot:
    round: int
    mission: dict
    agents: dict[str, dict]
    products: dict[str, dict]
    versions: list[dict]  # metadata only, no content
    collabs: list[dict]
    assignments: list[dict]
    reflections: list[dict]
    reviews: list[dict]
    inspections: list[dict]
    findings: list[dict]
    acceptances: list[dict]
    remarks: list[dict]
    halts: list[dict]
    messages: list[dict]
    turns: list[dict]
    addressed: set[str] = field(default_factory=set)  # collab ids answered (Reflect's or Write's responses)
    deferred: set[str] = field(default_factory=set)  # those of them answered "defer"
    sources: list[dict] = field(default_factory=list)  # every version of every source (metadata only)
    # The tool calls a tool answered: the results a text may cite (``ids.tool_call_id``).
    tool_calls: set[str] = field(default_factory=set)
    decisions: list[dict] = field(default_factory=list)  # every revision of every decision of the record
    _latest: dict[str, dict] = field(default_factory=dict, repr=False)
    # The content of each product's latest version, once committed by this process or read:
    # prompts show latest versions, and this saves a read per prompt. Bounded by the products.
    _contents: dict[str, str] = field(default_factory=dict, repr=False)
    # Each source version's text as prompts quote it, read once (a version never changes).
    source_texts: dict[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for version in sorted(self.versions, key=lambda v: v["number"]):
            self._latest[version["product_id"]] = version

    # ------------------------------------------------------------------- keeping current

    def apply(self, nodes: Iterable[Mapping[str, Any]], updates: Iterable[Mapping[str, Any]]) -> None:
        """Bring the snapshot up to date with a committed cluster (the exact nodes and field
        updates written), so the engine does not read the whole mission again every step.

        Tables stay in id order, as a load returns them: parallel turns commit in any order.
        """
        touched: set[str] = set()
        # Directives join their assignment, so assignments go first whatever the cluster's order.
        for node in sorted(nodes, key=lambda n: n.get("node_type") == "directive"):
            kind = node.get("node_type")
            if kind == "product":
                self.products[node["id"]] = dict(node)
                touched.add("products")
            elif kind == "version":
                meta: dict[str, Any] = {k: node.get(k) for k in ("id", *VERSION_META)}
                self.versions.append(meta)
                touched.add("versions")
                latest = self._latest.get(meta["product_id"])
                if latest is None or meta["number"] >= latest["number"]:
                    self._latest[meta["product_id"]] = meta
                    if latest is not None:
                        self._contents.pop(latest["id"], None)
                    self._contents[meta["id"]] = node.get("content") or ""
            elif kind == "assignment":
                self.assignments.append(dict(node))
                touched.add("assignments")
            elif kind == "directive":
                for assignment in self.assignments:
                    if assignment["id"] == node.get("assignment_id"):
                        assignment.update({k: v for k, v in node.items() if k not in ("id", "node_type", "type")})
            elif kind == "response":
                self._answered([{"collabId": node.get("collab_id"), "action": node.get("action")}])
            elif kind == "reflection":
                self.addressed |= set(node.get("addressed") or [])
                self._answered(_responses_of(node))
                if node.get("round") == self.round:
                    self.reflections.append(dict(node))
                    touched.add("reflections")
            elif kind == "moment" and node.get("type") == "tool_call":
                if node.get("outcome") == "ok":
                    self.tool_calls.add(str(node["id"]))
            elif kind == "moment" and node.get("type") == "turn":
                if node.get("round") in (self.round - 1, self.round):
                    self.turns.append({k: node.get(k) for k in ("id", "round", "step", "agent", "outcome")})
                    touched.add("turns")
            elif kind in _WINDOWED and node.get("round") in _WINDOWED[kind][1](self.round):
                getattr(self, _WINDOWED[kind][0]).append(dict(node))
                touched.add(_WINDOWED[kind][0])
            elif kind in _KEPT:
                getattr(self, _KEPT[kind]).append(dict(node))
                touched.add(_KEPT[kind])
        for update in updates:
            for table in (self.products, {self.mission.get("id"): self.mission}):
                if update["id"] in table:
                    table[update["id"]].update(update["fields"])
            for halt in self.halts:
                if halt["id"] == update["id"]:
                    halt.update(update["fields"])
        if "products" in touched:
            self.products = dict(sorted(self.products.items()))
            touched.discard("products")
        for name in touched:
            getattr(self, name).sort(key=_ROW_ORDER.get(name, _row_id))
        if "versions" in touched:
            self._latest.clear()
            self.__post_init__()

    def _answered(self, responses: Iterable[Mapping[str, Any]]) -> None:
        for response in responses:
            if response.get("collabId"):
                self.addressed.add(str(response["collabId"]))
                if response.get("action") == "defer":
                    self.deferred.add(str(response["collabId"]))

    def contents(self, version_ids: list[str], read: Callable[[list[str]], dict[str, str]]) -> dict[str, str]:
        """The content of each version: kept ones from memory, the others through ``read`` (one
        query for all of them); the latest versions read are kept."""
        missing = [v for v in version_ids if v not in self._contents]
        found = read(missing) if missing else {}
        latest = {v["id"] for v in self._latest.values()}
        # Turns of a step read in parallel: one dict update is atomic, and equal values race harmlessly.
        self._contents.update({k: v for k, v in found.items() if k in latest})
        return {v: self._contents[v] if v in self._contents else found.get(v, "") for v in version_ids}

    def advance(self, round_number: int) -> None:
        """Move the view to a later round: the round-scoped tables keep what load_snapshot would."""
        self.round = round_number
        self.reflections = [r for r in self.reflections if r.get("round") == round_number]
        self.turns = [t for t in self.turns if t.get("round") in (round_number - 1, round_number)]
        for kind, (table, window) in _WINDOWED.items():
            setattr(self, table, [row for row in getattr(self, table) if row.get("round") in window(round_number)])

    def refresh(self, mission: dict, user_notes: list[dict]) -> None:
        """What the user may write from another process while the mission runs: the mission
        node (a stop request) and notes. Read at each round start."""
        self.mission = dict(mission)
        known = {c["id"] for c in self.collabs}
        added = [note for note in user_notes if note["id"] not in known]
        if added:
            self.collabs = sorted(self.collabs + added, key=lambda row: row["id"])

    def current_sources(self) -> list[dict]:
        """Each source's latest version, in ingest order (s1, s2, ...)."""
        return latest_versions(self.sources)

    def named(self, text: str) -> str:
        """``text`` for a person, its references written as what they name (a product's name, its
        version's number, a source's file): a Chair's closing message reaches the terminal, the
        mission's status and the report as the user reads it, never as ``[[p:r0.bootstrap...]]``."""
        sources = {s["source_id"]: s for s in self.current_sources()}

        def name(ref: Ref) -> str | None:
            if ref.kind == "p" and ref.id in self.products:
                return str(self.products[ref.id].get("name"))
            version = self.version(ref.id) if ref.kind == "v" else None
            if version is not None:
                product = self.products.get(str(version.get("product_id")), {}).get("name", "a product")
                return f"{product} (version {version.get('number')})"
            if ref.kind == "s" and ref.id.split("#")[0] in sources:
                return str(sources[ref.id.split("#")[0]].get("name") or ref.id)
            if ref.kind == "u":
                return "you" if ref.id == USER_ID else "all users"
            return ref.id if ref.kind == "a" else None
        return substitute_refs(text, name)

    def short_ids(self) -> dict[str, str]:
        """The short id of every product, version and collab in view, by graph id (``ids.short_ids``)."""
        return short_ids(self.products.values(), self.versions, self.collabs)

    def has_turn(self, turn_id: str) -> bool:
        return any(t["id"] == turn_id for t in self.turns)

    # -------------------------------------------------------------------------- products

    def live_products(self) -> list[dict]:
        return [p for p in self.products.values() if p.get("status") != "removed"]

    def children(self, product_id: str) -> list[dict]:
        return [p for p in self.live_products() if p.get("parent_id") == product_id]

    def owned_by(self, agent_id: str) -> list[dict]:
        return [p for p in self.live_products() if p.get("owner") == agent_id]

    def latest_version(self, product_id: str) -> dict | None:
        return self._latest.get(product_id)

    def version(self, version_id: str) -> dict | None:
        return next((v for v in self.versions if v["id"] == version_id), None)

    def versions_of(self, product_id: str) -> list[dict]:
        return sorted((v for v in self.versions if v["product_id"] == product_id), key=lambda v: v["number"])

    def new_versions(self, round_number: int | None = None) -> list[dict]:
        """Versions written in a round (default: this one), latest per product."""
        wanted = self.round if round_number is None else round_number
        # Products in the order of their first version: deterministic whatever order parallel
        # commits arrive in.
        first: dict[str, tuple[int, str]] = {}
        for version in self.versions:
            key = (version["number"], version["id"])
            first[version["product_id"]] = min(first.get(version["product_id"], key), key)
        return sorted((v for v in self._latest.values() if v.get("round") == wanted), key=lambda v: first[v["product_id"]])

    # ---------------------------------------------------------------------------- decisions

    def latest_decision(self, key: str) -> dict | None:
        """The latest revision of a decision of the record (retired or not)."""
        revisions = [d for d in self.decisions if d.get("key") == key]
        return max(revisions, key=lambda d: int(d.get("revision") or 0)) if revisions else None

    def current_decisions(self) -> list[dict]:
        """The record as it stands: each decision's latest revision, unless it retired it, d1 first."""
        latest = [self.latest_decision(key) for key in {str(d.get("key")) for d in self.decisions}]
        return sorted((d for d in latest if d and not d.get("retired")), key=lambda d: decision_number(d["key"]))

    def next_decision_number(self) -> int:
        """The number of the record's next new decision: ids are never reused, a retired one's included."""
        return max((decision_number(d["key"]) for d in self.decisions), default=0) + 1

    # ---------------------------------------------------------------------------- discourse

    def unanswered_collabs(self, product_id: str | None = None) -> list[dict]:
        """Collabs no response has answered yet, endorsements among them."""
        return [c for c in self.collabs if c["id"] not in self.addressed
                and (product_id is None or c.get("product_id") == product_id)]

    def open_collabs(self, product_id: str | None = None) -> list[dict]:
        """The open feedback: unanswered collabs that ask for an answer (an endorsement asks none)."""
        return [c for c in self.unanswered_collabs(product_id) if c.get("type") != ENDORSEMENT]

    def endorsements(self, product_id: str) -> list[dict]:
        """The praise of a product written this round and the last: feedback to keep, not to answer."""
        return [c for c in self.unanswered_collabs(product_id) if c.get("type") == ENDORSEMENT
                and int(c.get("round") or 0) >= self.round - 1]

    def deferred_collabs(self, product_id: str | None = None) -> list[dict]:
        """Collabs their owner deferred: out of the open feedback, kept in view for a later version."""
        return [c for c in self.collabs if c["id"] in self.deferred
                and (product_id is None or c.get("product_id") == product_id)]

    def blocking_collabs(self, product_id: str) -> list[dict]:
        return [c for c in self.open_collabs(product_id) if int(c.get("importance", 0)) >= BLOCKING_IMPORTANCE]

    @staticmethod
    def is_recipient(remark: Mapping[str, Any], agent_id: str) -> bool:
        """Whether a remark is to ``agent_id`` (by name, or to ``self`` by its author)."""
        recipients = remark.get("recipients") or []
        return agent_id in recipients or (remark.get("author") == agent_id and "self" in recipients)

    def remarks_for(self, agent_id: str, step: str) -> list[dict]:
        """The remarks an agent reads in ``step``: those to it written since its previous turn,
        so each reaches it once, in the first step it takes after the remark was written (the
        Chair's note for this round's Write reaches that Write; a Reflect's remark to the Chair,
        the same round's Plan). Remarks and turns are kept for this round and the last."""
        now = step_place(self.round, step)
        before = [step_place(t.get("round"), t.get("step")) for t in self.turns if t.get("agent") == agent_id]
        last = max((place for place in before if place < now), default=(-1, -1))
        # ``<=``: a remark written in a step the agent also took was not in that step's view
        # (its turns run side by side), so it is the agent's to read now.
        return [r for r in self.remarks if self.is_recipient(r, agent_id)
                and last <= step_place(r.get("round"), r.get("step")) < now]

    def remarks_to_users(self) -> list[dict]:
        """This round's remarks addressed to users (``u:all``, ``u:<id>``), for the Envoy."""
        return [r for r in self.remarks if r.get("round") == self.round
                and any(str(to).startswith("u:") for to in r.get("recipients") or [])]

    # ----------------------------------------------------------------------- assignments

    def assignments_in(self, round_number: int | None = None) -> list[dict]:
        wanted = self.round if round_number is None else round_number
        return [a for a in self.assignments if a.get("round") == wanted]

    def active_assignments(self, agent_id: str | None = None) -> list[dict]:
        """The latest assignment of each product not yet accepted (they live until acceptance)."""
        latest: dict[str, dict] = {}
        for assignment in sorted(self.assignments, key=lambda a: a.get("round", 0)):
            latest[assignment["product_id"]] = assignment
        open_products = {p["id"] for p in self.live_products() if p.get("status") == "open"}
        return [a for a in latest.values() if a["product_id"] in open_products
                and (agent_id is None or a.get("assignee") == agent_id)]

    # ------------------------------------------------------------------------ verdicts

    def inspection_of(self, version_id: str, author: str | None = None) -> dict | None:
        """The latest inspection of a version (by ``author``, if given; inspections live until
        the next version)."""
        found = [i for i in self.inspections if i.get("version_id") == version_id
                 and (author is None or i.get("author") == author)]
        return max(found, key=lambda i: i.get("round", 0)) if found else None

    def inspections_of(self, version_id: str, inspectors: Sequence[str] = ()) -> list[dict]:
        """The latest inspection of a version by each of several ``inspectors`` who gave one;
        with one inspector or none named, the latest by anyone."""
        if len(inspectors) <= 1:
            return [found] if (found := self.inspection_of(version_id)) else []
        return [found for who in inspectors if (found := self.inspection_of(version_id, who))]

    def verdict_of(self, version_id: str, inspectors: Sequence[str] = ()) -> str | None:
        """The team's verdict on a version: the strictest of its inspectors' (a version is
        accepted only when every one allows it); None while an approval is still missing."""
        found = self.inspections_of(version_id, inspectors)
        worst = max((i["assessment"] for i in found), key=VERDICTS.index, default=None)
        if worst == "approved" and len(found) < len(inspectors):
            return None
        return worst

    def findings_of(self, inspection_id: str) -> list[dict]:
        return [f for f in self.findings if f.get("inspection_id") == inspection_id]

    def reflections_in(self, round_number: int | None = None) -> list[dict]:
        wanted = self.round if round_number is None else round_number
        return [r for r in self.reflections if r.get("round") == wanted]

    def reviews_of(self, version_id: str) -> list[dict]:
        return [r for r in self.reviews if r.get("version_id") == version_id]

    def collabs_of_review(self, review: Mapping[str, Any]) -> list[dict]:
        """The collabs a peer review's turn wrote on the reviewed product: the review's feedback items."""
        return [c for c in self.collabs if c.get("author") == review.get("author")
                and c.get("product_id") == review.get("product_id") and c.get("round") == review.get("round")
                and c.get("step") == Step.PEER_REVIEW]

    def pending_halt(self) -> dict | None:
        return next((h for h in self.halts if h.get("status") == "pending"), None)


@dataclass(frozen=True)
class Spend:
    """What a mission has spent, summed over its turn moments (the one place usage is recorded),
    and how many of its turns found no valid answer."""

    usage: Usage
    cost_usd: float
    turns: int
    failed_turns: int
    unpriced_turns: int = 0  # turns on a model no price is known for (counted as $0)
    unpriced_models: tuple[str, ...] = ()  # their models


def decision_key(number: int) -> str:
    """A decision's id as every prompt shows it and the Chair names it: ``d1``, ``d2``, ..."""
    return f"d{number}"


def decision_number(key: object) -> int:
    """The number of a decision's id (``d12`` -> 12), by which the record is ordered."""
    return int(str(key)[1:])


def charter_map(mission: dict, key: str) -> dict:
    """A mapping the charter keeps on the mission node as JSON (personas, domains); {} if none."""
    value = mission.get(key)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def mission_spend(graph: ContextGraph) -> Spend:
    usage, cost, turns, failed, unpriced = Usage(), 0.0, 0, 0, []
    for turn in graph.find("moment", {"type": "turn"},
                           fields=["input_tokens", "output_tokens", "cache_read_tokens", "cost_usd", "outcome",
                                   "call_input_tokens", "model", "priced"]):
        usage = usage + Usage(input_tokens=int(turn.get("input_tokens") or 0),
                              output_tokens=int(turn.get("output_tokens") or 0),
                              cache_read_tokens=int(turn.get("cache_read_tokens") or 0),
                              calls=len(turn.get("call_input_tokens") or []))
        cost += float(turn.get("cost_usd") or 0)
        turns += 1
        failed += turn.get("outcome") == "failed"
        if turn.get("priced") is False:  # a turn recorded before turns said so was priced, or $0 by a price
            unpriced.append(str(turn.get("model")))
    return Spend(usage, cost, turns, failed, len(unpriced), tuple(sorted(set(unpriced))))


OUTPUT_SWITCH = "model_output_switch"  # the moment type of a model moved to JSON answers


def model_output_switches(graph: ContextGraph) -> list[dict]:
    """The models a provider refused tools for, moved to JSON answers (``switch_model_output``):
    each with its model spec, the agent and round that met the refusal, and the reason."""
    found = graph.find("moment", {"type": OUTPUT_SWITCH}, fields=["model", "agent", "round", "step", "prose"])
    return sorted(found, key=lambda switch: (switch.get("round") or 0, switch["id"]))


def load_snapshot(graph: ContextGraph, mission_id: str, round_number: int, *, step: str | None = None) -> Snapshot:
    """Read everything a step's agents may need: one query per node type, all in one round trip.

    With ``step``, the mission as of that step's start: what its turns wrote (their ids start
    with ``step_prefix``) is left out, and so are the user's notes of this round, which a run
    takes in at the next round's start. Its turn moments stay: they are the record of which
    turns are done, and no prompt shows them."""
    recent = [round_number - 1, round_number]
    read = graph.read_many({
        "mission": reads.node_by_id(mission_id),
        "directives": reads.find("directive"),
        "assignments": reads.find("assignment"),
        "addressed": reads.find("reflection", fields=["addressed", "responses"]),
        "responses": reads.find("response", fields=["collab_id", "action"]),
        "agents": reads.find("agent"),
        "products": reads.find("product"),
        "versions": reads.find("version", fields=VERSION_META),
        "collabs": reads.find("collab"),
        "reflections": reads.find("reflection", {"round": round_number}),
        "reviews": reads.find("review", {"round": recent}),
        "inspections": reads.find("inspection"),
        "findings": reads.find("finding"),
        "acceptances": reads.find("acceptance"),
        "remarks": reads.find("remark", {"round": recent}),
        "halts": reads.find("halt"),
        "decisions": reads.find("chair_decision"),
        "messages": reads.find("message", {"round": round_number}),
        "turns": reads.find("moment", {"type": "turn", "round": recent}, fields=["round", "step", "agent", "outcome"]),
        "sources": reads.find("source", fields=SOURCE_META),
        "tool_calls": reads.find("moment", {"type": "tool_call", "outcome": "ok"}, fields=["outcome"]),
    })
    if step is not None:
        read = _as_of_start(read, step_prefix(round_number, step), round_number)
    directives = {d["assignment_id"]: d for d in read["directives"]}
    answers = [answer for r in read["addressed"] for answer in _responses_of(r)]
    answers += [{"collabId": r.get("collab_id"), "action": r.get("action")} for r in read["responses"]]
    assignments = [{**{k: v for k, v in directives.get(a["id"], {}).items() if k not in ("id", "node_type", "type")}, **a}
                   for a in read["assignments"]]
    return Snapshot(
        round=round_number,
        mission=read["mission"][0] if read["mission"] else {},
        agents={a["id"]: a for a in read["agents"]},
        products={p["id"]: p for p in read["products"]},
        versions=read["versions"],
        collabs=read["collabs"],
        assignments=assignments,
        reflections=read["reflections"],
        reviews=read["reviews"],
        inspections=read["inspections"],
        findings=read["findings"],
        acceptances=sorted(read["acceptances"], key=_ROW_ORDER["acceptances"]),
        remarks=read["remarks"],
        halts=read["halts"],
        messages=read["messages"],
        turns=read["turns"],
        addressed={collab for r in read["addressed"] for collab in r.get("addressed") or []}
        | {str(a["collabId"]) for a in answers if a.get("collabId")},
        deferred={str(a["collabId"]) for a in answers if a.get("collabId") and a.get("action") == "defer"},
        sources=read["sources"],
        tool_calls={call["id"] for call in read["tool_calls"]},
        decisions=read["decisions"],
    )


def _row_id(row: Mapping[str, Any]) -> str:
    return str(row["id"])


def _responses_of(reflection: Mapping[str, Any]) -> list[dict]:
    """A reflection's feedback responses (kept as JSON on the node; a list in a cluster not yet read back)."""
    responses = reflection.get("responses")
    if isinstance(responses, str):
        try:
            responses = json.loads(responses)
        except ValueError:
            return []
    return [r for r in responses if isinstance(r, dict)] if isinstance(responses, list) else []


def _as_of_start(read: dict[str, list[dict]], written: str, round_number: int) -> dict[str, list[dict]]:
    """What ``load_snapshot`` read, without the nodes a step's turns wrote (ids starting with
    ``written``) and the user's notes of the round; the mission, the agents and the turn
    moments are kept whole."""
    def kept(kind: str, row: dict) -> bool:
        if row["id"].startswith(written):
            return False
        return not (kind == "collabs" and row.get("author") == USER_ID and (row.get("round") or 0) >= round_number)

    whole = ("mission", "agents", "turns", "sources")
    return {kind: rows if kind in whole else [row for row in rows if kept(kind, row)] for kind, rows in read.items()}
