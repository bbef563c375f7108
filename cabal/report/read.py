"""Read a mission's graph into a ``MissionReport``: one query per node type, all sent in one
round trip, then plain joins.

The graph is named after the mission id. The node types and fields read here are the ones the
round protocols write (``cabal/rounds/snapshot.py`` lists them); the report adds nothing the
graph does not hold, it only joins it: versions to their product, reviews and inspections to
their version, findings to their inspection, a reflection's responses to the collabs they answer.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable

from cabal.graph import ContextGraph, reads
from cabal.report.model import (
    Agent, AgentSpend, Collab, Decision, DecisionRevision, Finding, Inspection, Line, Mission, MissionReport, ModelSpend, Product,
    Question, Response, Review, RoundSpend, Source, SourceSection, Spend, ToolCall, Turn, Usage, Version,
    settled_statuses,
)
from cabal.refs import parse_refs
from cabal.sources.model import source_node_id
from cabal.vocabulary import CHAIR_ID, USER_DIRECTION_TYPE, USER_ID, Step

TURN_FIELDS = ["round", "step", "agent", "outcome", "attempts", "prose", "problems", "input_tokens", "output_tokens",
               "cache_read_tokens", "cost_usd", "call_input_tokens", "model", "priced"]

TOOL_CALL_FIELDS = ["round", "step", "agent", "server", "tool", "arguments", "why", "outcome", "digest"]


def read_report(graph: ContextGraph, mission_id: str) -> MissionReport:
    """The mission ``mission_id`` as one typed value (its graph must exist: see ``mission_report``)."""
    # A finished mission's report reads a few hundred nodes; sent one by one, the fourteen reads
    # were a third of the time a run spends writing its transcript.
    found = graph.read_many({
        "mission": reads.node_by_id(mission_id),
        "turns": reads.find("moment", {"type": "turn"}, fields=TURN_FIELDS),
        "tool_calls": reads.find("moment", {"type": "tool_call"}, fields=TOOL_CALL_FIELDS),
        "reflection": reads.find("reflection", fields=["author", "round", "responses"]),
        "response": reads.find("response", fields=["author", "round", "collab_id", "action", "rationale",
                                                   "planned_change"]),
        **{kind: reads.find(kind) for kind in ("agent", "product", "version", "review", "inspection", "finding",
                                               "collab", "acceptance", "message", "halt", "source",
                                               "chair_decision")},
    })
    node = found["mission"][0] if found["mission"] else {}
    turns = sorted((_turn(t) for t in found["turns"]), key=lambda t: (t.round, step_position(t.step), t.agent, t.id))
    halts = found["halt"]
    user_notes = [c for c in found["collab"] if c.get("author") == USER_ID]
    return MissionReport(
        mission=_mission(mission_id, node),
        agents=tuple(Agent(id=a["id"], role=str(a.get("type")), name=str(a.get("name") or a["id"]),
                           area=a.get("area"), responsibility=a.get("responsibility"))
                     for a in sorted(found["agent"], key=lambda a: natural_key(a["id"]))),
        products=_products(found),
        conversation=_conversation(found["message"], halts, user_notes),
        questions=tuple(_question(h) for h in sorted(halts, key=lambda h: (h.get("round", 0), natural_key(h["id"])))
                        if h.get("type") == "question"),
        turns=tuple(turns),
        usage=_usage(turns),
        sources=_sources(graph, found["source"], found["version"]),
        tool_calls=tuple(sorted((_tool_call(c) for c in found["tool_calls"]),
                                key=lambda c: (c.round, step_position(c.step), c.agent, natural_key(c.id)))),
        decision_record=_decision_record(found["chair_decision"]),
    )


def _decision_record(nodes: list[dict]) -> tuple[DecisionRevision, ...]:
    """Every revision of the record's decisions, by id then revision; the latest revision of an
    id is its current decision, unless it retired it (then every revision of it reads retired)."""
    ordered = sorted(nodes, key=lambda d: (natural_key(str(d.get("key"))), int(d.get("revision") or 0)))
    latest = {str(d.get("key")): d for d in ordered}
    revisions = []
    for node in ordered:
        last = latest[str(node.get("key"))]
        status = "retired" if last.get("retired") else "current" if node is last else "superseded"
        revisions.append(DecisionRevision(
            id=str(node.get("key")), revision=int(node.get("revision") or 0), topic=str(node.get("topic")),
            decision=node.get("decision") or None, why=node.get("why") or None, author=str(node.get("author")),
            round=int(node.get("round") or 0), step=node.get("step"), status=status))
    return tuple(revisions)


def _sources(graph: ContextGraph, nodes: list[dict], versions: list[dict]) -> tuple[Source, ...]:
    """Every version of every source; with the sections versions cite (read by id: a report holds
    the cited text, never whole files)."""
    if not nodes:
        return ()
    cited = {ref.id for v in versions for ref in parse_refs(str(v.get("content") or "")) if ref.kind == "s"}
    sections = {c["id"]: c for c in graph.get_many(sorted(c for c in cited if "#" in c))}
    superseded = {source_node_id(str(n["source_id"]), int(n["version"]) - 1) for n in nodes
                  if int(n.get("version") or 1) > 1}
    rows = []
    for node in sorted(nodes, key=lambda n: (natural_key(str(n["source_id"])), int(n.get("version") or 1))):
        mine = sorted((c for c in sections.values() if c.get("source_id") == node["id"]), key=lambda c: c["position"])
        rows.append(Source(
            id=node["id"], source_id=str(node["source_id"]), version=int(node.get("version") or 1),
            name=str(node.get("name")), note=node.get("note") or None, format=str(node.get("type")),
            size=int(node.get("size") or 0), sha256=str(node.get("sha256")), round=int(node.get("round") or 0),
            first_heading=node.get("first_heading") or None, origin=node.get("origin") or None, sections=int(node.get("chunk_count") or 0),
            superseded=node["id"] in superseded,
            cited=node["id"] in cited or bool(mine),
            cited_sections=tuple(SourceSection(id=c["id"], position=int(c["position"]), heading=c.get("heading") or None,
                                               text=str(c.get("text") or "")) for c in mine)))
    return tuple(rows)


def natural_key(text: str) -> list:
    """Sort ids the way people count: ``r2`` before ``r10``, ``product2`` before ``product10``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def step_position(step: str | None) -> int:
    """A turn's place in its round; the engine's own turns (a budget question) come last."""
    return Step(step).position if step in tuple(Step) else len(Step)


def _mission(mission_id: str, node: dict) -> Mission:
    return Mission(
        id=mission_id, name=str(node.get("name") or mission_id), request=str(node.get("request") or ""),
        charter=node.get("charter") or None, objectives=tuple(node.get("objectives") or ()),
        constraints=tuple(node.get("constraints") or ()), state=str(node.get("status") or "running"),
        stop_reason=node.get("stop_reason") or None, detail=node.get("detail") or None,
        stop_requested=bool(node.get("halt_requested")),
        round=int(node.get("round") or 0), rounds=node.get("rounds"), model=node.get("model") or None,
        budget_tokens=node.get("budget_tokens"), budget_cost_usd=node.get("budget_cost_usd"),
        started_at=node.get("started_at") or None,
        forked_from=node.get("forked_from") or None, forked_round=node.get("forked_round"),
        kind="baseline" if node.get("kind") == "baseline" else "team", file_answers=_file_answers(node),
    )


def _file_answers(node: dict) -> tuple[str, ...]:
    """The ``answers:`` of the mission file as the mission stored it (its spec, JSON)."""
    try:
        answers = json.loads(str(node.get("spec") or "{}")).get("answers") or ()
    except ValueError:
        return ()
    return tuple(str(answer) for answer in answers)


# --------------------------------------------------------------------------- the products


def _products(found: dict[str, list[dict]]) -> tuple[Product, ...]:
    """The product tree, from ``read_report``'s nodes by type."""
    findings = _by(found["finding"], "inspection_id")
    inspections = _by(found["inspection"], "version_id")
    reviews = _by(found["review"], "version_id")
    versions = _by(found["version"], "product_id")
    collabs = _by([c for c in found["collab"] if c.get("product_id")], "product_id")
    decisions = _by(found["acceptance"], "product_id")
    responses = _responses(found["reflection"], found["response"])
    nodes = {p["id"]: p for p in found["product"]}
    statuses = settled_statuses(((n["id"], str(n.get("type")), str(n.get("status")), n.get("parent_id"))
                                 for n in nodes.values()))

    def product(node: dict, depth: int) -> Product:
        accepted = node.get("accepted_version")
        return Product(
            id=node["id"], name=str(node.get("name")), type=str(node.get("type")), status=statuses[node["id"]],
            owner=node.get("owner"), parent_id=node.get("parent_id"), depth=depth, round=int(node.get("round") or 0),
            dod=node.get("dod"), description=node.get("description"), accepted_version_id=accepted,
            versions=tuple(_version(v, accepted, reviews, inspections, findings)
                           for v in sorted(versions[node["id"]], key=lambda v: v["number"])),
            collabs=tuple(_collab(c, responses) for c in _ordered(collabs[node["id"]])),
            decisions=tuple(Decision(id=d["id"], round=int(d.get("round") or 0), version_id=d.get("version_id"),
                                     accepted=bool(d.get("accepted")), reason=d.get("rejection_reason") or None)
                            for d in _in_step_order(decisions[node["id"]])),
        )

    children: dict[str | None, list[dict]] = defaultdict(list)
    for node in nodes.values():  # a product whose parent is unknown is shown as a root
        children[node.get("parent_id") if node.get("parent_id") in nodes else None].append(node)
    rows: list[Product] = []

    def walk(parent: str | None, depth: int) -> None:
        for node in sorted(children[parent], key=lambda n: (int(n.get("round") or 0), natural_key(n["id"]))):
            rows.append(product(node, depth))
            walk(node["id"], depth + 1)

    walk(None, 0)
    return tuple(rows)


def _version(node: dict, accepted: str | None, reviews: dict, inspections: dict, findings: dict) -> Version:
    return Version(
        id=node["id"], number=int(node["number"]), round=int(node.get("round") or 0), author=str(node.get("author")),
        title=node.get("title") or None, content=str(node.get("content") or ""),
        change_summary=node.get("change_summary") or None, accepted=node["id"] == accepted,
        reviews=tuple(Review(id=r["id"], round=int(r.get("round") or 0), author=str(r.get("author")),
                             assessment=str(r.get("assessment")), summary=r.get("summary") or None)
                      for r in _ordered(reviews[node["id"]])),
        inspections=tuple(Inspection(
            id=i["id"], round=int(i.get("round") or 0), author=str(i.get("author")), verdict=str(i.get("assessment")),
            findings=tuple(Finding(category=str(f.get("category")), severity=int(f.get("severity") or 0),
                                   issue=str(f.get("issue") or ""), recommendation=f.get("recommendation") or None)
                           for f in _ordered(findings[i["id"]])))
            for i in _ordered(inspections[node["id"]])),
    )


def _responses(reflections: Iterable[dict], answers: Iterable[dict] = ()) -> dict[str, list[Response]]:
    """What owners answered to each collab, by collab id: at Reflect (a reflection keeps them as
    JSON) and at Write (one response node each)."""
    found: list[tuple[tuple, str, Response]] = []
    for reflection in reflections:
        try:
            answered = json.loads(reflection.get("responses") or "[]")
        except (TypeError, ValueError):
            continue
        for item in answered if isinstance(answered, list) else []:
            if isinstance(item, dict) and item.get("collabId"):
                found.append(((reflection.get("round") or 0, natural_key(reflection["id"])), item["collabId"], Response(
                    by=str(reflection.get("author")), round=int(reflection.get("round") or 0),
                    action=str(item.get("action")), rationale=item.get("rationale") or None,
                    planned_change=item.get("plannedChange") or None)))
    for answer in answers:
        found.append(((answer.get("round") or 0, natural_key(answer["id"])), str(answer.get("collab_id")), Response(
            by=str(answer.get("author")), round=int(answer.get("round") or 0), action=str(answer.get("action")),
            rationale=answer.get("rationale") or None, planned_change=answer.get("planned_change") or None)))
    by_collab: dict[str, list[Response]] = defaultdict(list)
    for _, collab, response in sorted(found, key=lambda entry: entry[0]):
        by_collab[collab].append(response)
    return by_collab


def _collab(node: dict, responses: dict[str, list[Response]]) -> Collab:
    answered = tuple(responses.get(node["id"], ()))
    return Collab(
        id=node["id"], round=int(node.get("round") or 0), step=node.get("step"), author=str(node.get("author")),
        type=str(node.get("type")), importance=int(node.get("importance") or 0), comment=str(node.get("comment") or ""),
        summary=node.get("summary") or None, version_id=node.get("version_id"), addressed=bool(answered),
        responses=answered,
    )


# ------------------------------------------------------------------------ the conversation


def _conversation(messages: list[dict], halts: list[dict], notes: list[dict]) -> tuple[Line, ...]:
    """The user's chat, in order: a round's questions and answers, the Envoy's lines, the user's notes."""
    entries: list[tuple[tuple, Line]] = []
    for message in messages:
        entries.append(((message.get("round", 0), 1, message.get("position", 0)), Line(
            round=int(message.get("round") or 0), speaker=str(message.get("as_agent")), text=str(message.get("content")),
            kind="message")))
    for halt in halts:
        kind = "question" if halt.get("type") == "question" else "done"
        # A question opens its round's lines; the mission's end closes them, after the Envoy's
        # lines of that round (the Presentation runs before the mission stops), as live.
        at = (0, 0) if kind == "question" else (1, 1 << 30)
        entries.append(((halt.get("round", 0), *at, natural_key(halt["id"])), Line(
            round=int(halt.get("round") or 0), speaker=str(halt.get("author") or CHAIR_ID), text=str(halt.get("message")),
            kind=kind, options=tuple(halt.get("options") or ()))))
        if halt.get("answer"):
            answered = int(halt.get("answered_round", halt.get("round")) or 0)
            by_policy = halt.get("answer_source") == "policy"  # gates: {plan: auto} approved it, not a person
            entries.append(((answered, 0, 1, natural_key(halt["id"])), Line(
                round=answered, speaker=str(halt.get("author")) if by_policy else "you",
                text=f"{halt['answer']} (by the mission file's policy: gates: {{plan: auto}})" if by_policy
                else str(halt["answer"]), kind="answer")))
    for note in notes:
        kind = "direction" if note.get("type") == USER_DIRECTION_TYPE else "note"
        entries.append(((note.get("round", 0), 2, 0, natural_key(note["id"])), Line(
            round=int(note.get("round") or 0), speaker="you", text=str(note.get("comment")), kind=kind)))
    return tuple(line for _, line in sorted(entries, key=lambda entry: entry[0]))


def _question(halt: dict) -> Question:
    return Question(
        id=halt["id"], round=int(halt.get("round") or 0), step=halt.get("step"), asker=str(halt.get("author") or CHAIR_ID),
        message=str(halt.get("message")), options=tuple(halt.get("options") or ()), status=str(halt.get("status")),
        answer=halt.get("answer"), answered_round=halt.get("answered_round"), gate=halt.get("gate") or None,
        answer_source=halt.get("answer_source") or None,
    )


# ------------------------------------------------------------------------------- the turns


def _turn(node: dict) -> Turn:
    return Turn(
        id=node["id"], round=int(node.get("round") or 0), step=str(node.get("step")), agent=str(node.get("agent")),
        outcome=str(node.get("outcome")), attempts=int(node.get("attempts") or 0),
        calls=len(node.get("call_input_tokens") or ()), summary=str(node.get("prose") or ""),
        problems=tuple(node.get("problems") or ()), input_tokens=int(node.get("input_tokens") or 0),
        output_tokens=int(node.get("output_tokens") or 0), cache_read_tokens=int(node.get("cache_read_tokens") or 0),
        cost_usd=float(node.get("cost_usd") or 0), model=node.get("model") or None,
        priced=node.get("priced") is not False,
    )


def _tool_call(node: dict) -> ToolCall:
    return ToolCall(id=node["id"], round=int(node.get("round") or 0), step=str(node.get("step")),
                    agent=str(node.get("agent")), server=str(node.get("server")), tool=str(node.get("tool")),
                    arguments=str(node.get("arguments") or "{}"), why=str(node.get("why") or ""),
                    outcome=str(node.get("outcome")), digest=str(node.get("digest") or ""))


def _usage(turns: list[Turn]) -> Usage:
    by_agent: dict[str, Spend] = defaultdict(Spend)
    by_round: dict[int, Spend] = defaultdict(Spend)
    by_model: dict[str, Spend] = defaultdict(Spend)
    total = Spend()
    for turn in turns:
        spend = Spend(turns=1, input_tokens=turn.input_tokens, output_tokens=turn.output_tokens,
                      cache_read_tokens=turn.cache_read_tokens, cost_usd=turn.cost_usd,
                      unpriced_turns=0 if turn.priced else 1)
        total, by_agent[turn.agent], by_round[turn.round] = total + spend, by_agent[turn.agent] + spend, by_round[turn.round] + spend
        if turn.model:
            by_model[turn.model] = by_model[turn.model] + spend
    return Usage(total=total,
                 by_agent=tuple(AgentSpend(agent=a, spend=s) for a, s in sorted(by_agent.items(), key=lambda i: natural_key(i[0]))),
                 by_round=tuple(RoundSpend(round=r, spend=s) for r, s in sorted(by_round.items())),
                 by_model=tuple(ModelSpend(model=m, spend=s) for m, s in sorted(by_model.items())),
                 unpriced_models=tuple(sorted({str(turn.model) for turn in turns if not turn.priced})))


# --------------------------------------------------------------------------------- helpers


def _by(nodes: Iterable[dict], key: str) -> dict[str | None, list[dict]]:
    """``nodes`` grouped by their ``key`` (None: the nodes without one)."""
    grouped: dict[str | None, list[dict]] = defaultdict(list)
    for node in nodes:
        grouped[node.get(key)].append(node)
    return grouped


def _ordered(nodes: Iterable[dict]) -> list[dict]:
    return sorted(nodes, key=lambda n: (n.get("round") or 0, natural_key(n["id"])))


def _in_step_order(nodes: Iterable[dict]) -> list[dict]:
    """``nodes`` in the order their steps ran, read from their ids (``r2.plan.chair-1...``): a
    product rejected at a round's Plan and accepted at its closing decisions has both in one round,
    and "close" sorts before "plan" by name."""
    def step_of(node_id: str) -> str | None:
        parts = node_id.split(".")
        return parts[1] if len(parts) > 1 and parts[0].startswith("r") else None
    return sorted(nodes, key=lambda n: (n.get("round") or 0, step_position(step_of(str(n["id"]))), natural_key(n["id"])))
