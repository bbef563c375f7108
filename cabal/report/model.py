"""A mission as typed values: what the team made, how, and what it cost.

``read_report`` builds one ``MissionReport`` from a mission's graph; every way of showing a
mission (``cabal show``, the Markdown transcript, the JSON and HTML exports, ``cabal status``)
renders from it. The JSON export is ``MissionReport.model_dump(mode="json")`` and its published
schema is ``MissionReport.model_json_schema()``: one definition for both.

Compatibility of the JSON: within a ``format_version``, fields are only ever added; a field
removed, renamed or changed in meaning bumps it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from cabal.errors import ResourceNotFound
from cabal.refs import Ref, substitute_refs
from cabal.vocabulary import USER_ID, cost_phrase

REPORT_FORMAT: Final = "cabal.mission-report"
REPORT_FORMAT_VERSION: Final = 1


def agent_label(agent_id: str, name: str | None) -> str:
    """How people see an agent: ``Dana (operative-1)`` when the team gave it a name of its own
    (``team.names``), else its id. The one rule every terminal line, export and page follows."""
    return f"{name} ({agent_id})" if name and name != agent_id else agent_id


CONTAINER_TYPES = ("Collection", "Orchestration")


def settled_statuses(products: Iterable[tuple[str, str, str, str | None]]) -> dict[str, str]:
    """Each product's status as people read it, from ``(id, type, status, parent_id)`` as the
    graph holds them: a container (a Collection or an Orchestration: it has no versions of its
    own, so the Chair never accepts it) is ``accepted`` once it has a child that is not removed
    and every such child is accepted, by the Chair or, for a container inside it, by this same
    rule. An empty container holds no accepted work, so it stays as the graph holds it (open),
    however the mission ended. Every count and picture of a mission (status, show, the exports,
    the page, the batch report) goes through here."""
    rows = list(products)
    children: dict[str | None, list[str]] = {}
    for product_id, _, _, parent_id in rows:
        children.setdefault(parent_id, []).append(product_id)
    given = {product_id: (kind, status) for product_id, kind, status, _ in rows}
    settled: dict[str, str] = {}

    def status_of(product_id: str, seen: frozenset[str]) -> str:
        if product_id not in settled:
            kind, status = given[product_id]
            live = [c for c in children.get(product_id, ()) if c not in seen and given[c][1] != "removed"]
            if status == "open" and kind in CONTAINER_TYPES and live and all(
                    status_of(child, seen | {product_id}) == "accepted" for child in live):
                status = "accepted"
            settled[product_id] = status
        return settled[product_id]

    for product_id in given:
        status_of(product_id, frozenset())
    return settled


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Spend(_Value):
    """Tokens and dollars spent by some turns."""

    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = Field(0, description="input tokens read from the prompt cache (part of input_tokens)")
    cost_usd: float = 0.0
    unpriced_turns: int = Field(0, description="turns on a model no price is known for: cost_usd leaves them out")

    def __add__(self, other: Spend) -> Spend:
        return Spend(turns=self.turns + other.turns, input_tokens=self.input_tokens + other.input_tokens,
                     output_tokens=self.output_tokens + other.output_tokens,
                     cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
                     cost_usd=round(self.cost_usd + other.cost_usd, 6),
                     unpriced_turns=self.unpriced_turns + other.unpriced_turns)

    @property
    def cost(self) -> str:
        """The cost as people read it (``$0.0123``, or "not priced")."""
        return cost_phrase(self.cost_usd, unpriced=self.unpriced_turns, of=self.turns)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class AgentSpend(_Value):
    agent: str
    spend: Spend


class RoundSpend(_Value):
    round: int
    spend: Spend


class ModelSpend(_Value):
    model: str = Field(description="the provider's name of the model (prices are looked up by it)")
    spend: Spend


class Usage(_Value):
    """The mission's spend, in all and split by agent, by round and by model."""

    total: Spend
    by_agent: tuple[AgentSpend, ...]
    by_round: tuple[RoundSpend, ...]
    by_model: tuple[ModelSpend, ...] = Field((), description="each model's turns (missions run before turns "
                                                             "recorded their model: none)")
    unpriced_models: tuple[str, ...] = Field((), description="the models no price is known for: their turns cost "
                                                             "nothing that is counted")


# ------------------------------------------------------------------------------ the work


class Finding(_Value):
    """One issue the Watchdog found in a version."""

    category: str
    severity: int = Field(description="1-10; 8 or more blocks acceptance")
    issue: str
    recommendation: str | None = None


class Inspection(_Value):
    """The Watchdog's verdict on a version, with its findings."""

    id: str
    round: int
    author: str
    verdict: str = Field(description="approved, needs_revision or blocked")
    findings: tuple[Finding, ...] = ()


class Review(_Value):
    """A peer operative's assessment of a version."""

    id: str
    round: int
    author: str
    assessment: str
    summary: str | None = None


class Response(_Value):
    """An owner's answer to a collab, at Reflect or at Write: accept, defer (out of the open
    feedback, kept for a later version) or reject."""

    by: str
    round: int
    action: str
    rationale: str | None = None
    planned_change: str | None = None


class Collab(_Value):
    """Discourse on a product: feedback, a question, a suggestion, an endorsement, a concern."""

    id: str
    round: int
    step: str | None = None
    author: str
    type: str
    importance: int = Field(description="1-10; 8 or more blocks acceptance while open")
    comment: str
    summary: str | None = None
    version_id: str | None = None
    addressed: bool = Field(description="its product's owner (at Reflect) or writer (at Write) answered it")
    responses: tuple[Response, ...] = ()


class Version(_Value):
    """One immutable version of a product, with what was said about it."""

    id: str
    number: int
    round: int
    author: str
    title: str | None = None
    content: str
    change_summary: str | None = None
    accepted: bool = Field(description="the Chair accepted this version")
    reviews: tuple[Review, ...] = ()
    inspections: tuple[Inspection, ...] = ()


class Decision(_Value):
    """The Chair's decision on a product's version."""

    id: str
    round: int
    version_id: str | None = None
    accepted: bool
    reason: str | None = Field(None, description="why it was rejected")


class Product(_Value):
    """A node of the product tree with its whole history."""

    id: str
    name: str
    type: str = Field(description="Content, Decision, Collection or Orchestration")
    status: str = Field(description="open, accepted or removed; a Collection or Orchestration is accepted when "
                                    "it has children and every child of it (not removed) is; an empty one stays "
                                    "open (settled_statuses)")
    owner: str | None = None
    parent_id: str | None = None
    depth: int = Field(description="0 for a root of the tree")
    round: int = Field(0, description="the round it was added in")
    dod: str | None = Field(None, description="its definition of done")
    description: str | None = None
    accepted_version_id: str | None = None
    versions: tuple[Version, ...] = Field((), description="oldest first")
    collabs: tuple[Collab, ...] = ()
    decisions: tuple[Decision, ...] = ()

    @property
    def latest(self) -> Version | None:
        return self.versions[-1] if self.versions else None

    @property
    def accepted_version(self) -> Version | None:
        return next((v for v in self.versions if v.id == self.accepted_version_id), None)

    @property
    def shown(self) -> Version | None:
        """The version that stands for the product: the accepted one, else the latest."""
        return self.accepted_version or self.latest

    def version(self, number: int) -> Version:
        found = next((v for v in self.versions if v.number == number), None)
        if found is None:
            raise ResourceNotFound(f"version of {self.name!r}", str(number), known=[str(v.number) for v in self.versions])
        return found


# -------------------------------------------------------------------- the user's channel


class Line(_Value):
    """One line of the conversation with the user."""

    round: int
    speaker: str
    text: str
    kind: Literal["message", "question", "done", "answer", "note", "direction"] = Field(
        description="message: the Envoy speaking as an agent; question / done: a halt; answer: the user's "
                    "answer to a question; note: a message the user left; direction: the new direction of a "
                    "mission the user continued after it ended (what follows is its second part)")
    options: tuple[str, ...] = ()


class Question(_Value):
    """A question put to the user, and the answer."""

    id: str
    round: int
    step: str | None = None
    asker: str
    message: str
    options: tuple[str, ...] = ()
    status: str = Field(description="pending, answered, or withdrawn (the user stopped the mission instead)")
    answer: str | None = None
    answered_round: int | None = None
    gate: str | None = Field(None, description="the engine's gate that asks it: plan (the plan's sign-off) or tool (a "
                                               "tool call's approval); none for the Chair's questions")
    answer_source: str | None = Field(None, description="who answered: user, mission file, or policy (the mission "
                                                        "file's gates policy)")


class Turn(_Value):
    """One agent's turn in one step: its outcome and what it cost."""

    id: str
    round: int
    step: str
    agent: str
    outcome: str = Field(description="final, halt or failed (no valid answer within the retry budget)")
    attempts: int
    calls: int = Field(description="model calls made")
    summary: str
    problems: tuple[str, ...] = Field((), description="the last rejected answer's problems: for a failed turn, why")
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cost_usd: float
    model: str | None = Field(None, description="the model the agent called (a model per role or agent)")
    priced: bool = Field(True, description="whether a price was known for the model: if not, cost_usd is 0 and "
                                           "says nothing")

    @property
    def cost(self) -> str:
        """The turn's cost as people read it (``$0.0123``, or "not priced")."""
        return cost_phrase(self.cost_usd, unpriced=0 if self.priced else 1, of=1)


class ToolCall(_Value):
    """One call an agent made to a tool of the mission's MCP servers, as its moment records it."""

    id: str
    round: int
    step: str
    agent: str
    server: str
    tool: str = Field(description="the server's own name of the tool (the team calls it SERVER__TOOL)")
    arguments: str = Field(description="the call's arguments, as JSON")
    why: str = ""
    outcome: str = Field(description="ok, or error: the agent was given the error instead of a result")
    digest: str = Field(description="the start of the result (or of the error), printable")

    @property
    def name(self) -> str:
        return f"{self.server}__{self.tool}"

    @property
    def label(self) -> str:
        """How a citation of its result reads for the document's reader: ``rules.lookup(topic=belay)``
        (arguments cut short at record, no longer JSON, are shown as kept). No round and no ``why``:
        a blind judge counted "answered in round 1" and a caller's working notes against a hand-out."""
        try:
            sent = json.loads(self.arguments)
        except ValueError:
            sent = None
        shown = (", ".join(f"{key}={value if isinstance(value, str) else json.dumps(value)}"
                           for key, value in sent.items() if key != "why") if isinstance(sent, dict) else self.arguments)
        return f"{self.server}.{self.tool}({shown})"


class DecisionRevision(_Value):
    """One revision of an entry of the Chair's record of the mission's decisions."""

    id: str = Field(description="the decision's id, the same in every revision: d2")
    revision: int = Field(description="1 when decided, then one more for each change")
    topic: str
    decision: str | None = Field(None, description="what was decided (none: the revision retired it)")
    why: str | None = None
    author: str
    round: int
    step: str | None = None
    status: Literal["current", "superseded", "retired"] = Field(
        description="current: the record's decision now; superseded: a later revision changed it; retired: this "
                    "revision, or a later one, took it out of the record")


# ------------------------------------------------------------------------- the user's sources


class SourceSection(_Value):
    """A section of a source that a version cites, with its text."""

    id: str = Field(description="its graph id: s2#3, or s2.v2#3 for the second version of s2")
    position: int
    heading: str | None = None
    text: str


class Source(_Value):
    """One version of one of the user's files, read into the mission."""

    id: str = Field(description="its graph id: s2, or s2.v2 for the second version of the file")
    source_id: str = Field(description="the stable id the team cites: s2")
    version: int
    name: str
    note: str | None = None
    format: str
    size: int
    sha256: str
    round: int = Field(0, description="the round it was read in (0: at the start; later: a changed file on resume)")
    first_heading: str | None = None
    origin: str | None = Field(None, description="where text that is not a file came from: an earlier mission's "
                                                 "product and version, or the standing facts")
    sections: int
    superseded: bool = Field(False, description="a later version of the file replaced it")
    cited: bool = Field(False, description="a version cites it or one of its sections")
    cited_sections: tuple[SourceSection, ...] = Field((), description="the sections versions cite, in order")


# ---------------------------------------------------------------------------- the mission


class Agent(_Value):
    id: str
    role: str
    name: str
    area: str | None = None
    responsibility: str | None = None


class Mission(_Value):
    """The request, the charter the Chair made of it, and where the mission stands."""

    id: str
    name: str
    request: str
    charter: str | None = None
    objectives: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    state: str = Field(description="running, halted, interrupted, done, failed or diverged (a replay met a call "
                                   "its recording does not answer)")
    stop_reason: str | None = None
    detail: str | None = None
    stop_requested: bool = Field(False, description="the user asked the team to stop at its next round")
    round: int
    rounds: int | None = Field(None, description="the round limit")
    model: str | None = None
    budget_tokens: int | None = None
    budget_cost_usd: float | None = None
    started_at: str | None = Field(None, description="when it started (ISO 8601), for a mission that records it")
    forked_from: str | None = Field(None, description="the mission this one was forked from (cabal fork)")
    forked_round: int | None = Field(None, description="the round of that mission this one started from")
    kind: Literal["team", "baseline"] = Field("team", description="team: a team in rounds; baseline: one call of "
                                                                   "the model wrote every document (cabal baseline)")
    file_answers: tuple[str, ...] = Field((), description="the answers the mission file gave in advance (answers:)")

    @property
    def lineage(self) -> str | None:
        """``forked from m-... at round N``, for a fork; ``a baseline ...`` for a baseline."""
        if self.kind == "baseline":
            return "a baseline: one call of the model wrote every document"
        return f"forked from {self.forked_from} at round {self.forked_round}" if self.forked_from else None


class MissionReport(_Value):
    """Everything about one mission, read from its graph (``cabal export --format json``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", title="Cabal mission report")

    format: Literal["cabal.mission-report"] = REPORT_FORMAT
    format_version: Literal[1] = REPORT_FORMAT_VERSION
    mission: Mission
    agents: tuple[Agent, ...]
    products: tuple[Product, ...] = Field(description="in tree order (parents before children); removed ones included")
    conversation: tuple[Line, ...] = Field(description="by round, in the order the user saw it")
    questions: tuple[Question, ...]
    turns: tuple[Turn, ...] = Field(description="by round, then in step order")
    usage: Usage
    tool_calls: tuple[ToolCall, ...] = Field((), description="calls to the mission's MCP tools, in the order "
                                                             "of the turns that made them")
    sources: tuple[Source, ...] = Field((), description="the user's files, every version, in ingest order")
    decision_record: tuple[DecisionRevision, ...] = Field((), description="the Chair's record of the mission's "
                                                                          "decisions, every revision: by id, then "
                                                                          "revision")

    @property
    def current_decisions(self) -> tuple[DecisionRevision, ...]:
        return tuple(d for d in self.decision_record if d.status == "current")

    @property
    def live_products(self) -> tuple[Product, ...]:
        return tuple(p for p in self.products if p.status != "removed")

    @property
    def failed_turns(self) -> tuple[Turn, ...]:
        return tuple(t for t in self.turns if t.outcome == "failed")

    def who(self, agent_id: str | None) -> str:
        """An agent as people see it (``agent_label``); a speaker that is no agent (``you``) as it is."""
        if agent_id is None:
            return "nobody"
        name = next((a.name for a in self.agents if a.id == agent_id), None)
        return agent_label(agent_id, name)

    def product(self, reference: str) -> Product:
        """A product by id, by name (any case) or by the start of its name; ``ResourceNotFound``
        lists the products otherwise."""
        wanted = reference.strip().casefold()
        exact = [p for p in self.products if p.id == reference or p.name.casefold() == wanted]
        if exact:
            return exact[0]
        starting = [p for p in self.products if wanted and p.name.casefold().startswith(wanted)]
        if len(starting) == 1:
            return starting[0]
        raise ResourceNotFound("product", reference, known=[p.name for p in starting or self.live_products],
                               closest_first=True)

    def readable(self, text: str | None, link: Callable[[Product, str], str] | None = None,
                 cite: Callable[[str, str], str] | None = None) -> str:
        """``text`` with its references written as names: ``[[p:id]]`` the product's name,
        ``[[v:id]]`` the product's name and version number, ``[[c:id]]`` whose collab on which
        product, ``[[u:user]]`` "you", ``[[s:id]]`` the
        source's name (and section). ``link(product, label)`` may wrap what names a product (the
        HTML report links it to the product's section); ``cite(cited_id, label)`` what names a
        source (the HTML report links it to the cited text in its appendix)."""
        if not text or "[[" not in text:
            return text or ""
        products = {p.id: p for p in self.products}
        versions = {v.id: (p, v) for p in self.products for v in p.versions}
        collabs = {c.id: (p, c) for p in self.products for c in p.collabs}

        def name(ref: Ref) -> str | None:
            if ref.kind == "s":
                label = self.citation_label(ref.id)
                return None if label is None else cite(ref.id, label) if cite is not None else f"[{label}]"
            if ref.kind == "p" and ref.id in products:
                product, label = products[ref.id], products[ref.id].name
            elif ref.kind == "v" and ref.id in versions:
                product, version = versions[ref.id]
                label = f"{product.name} v{version.number}"
            elif ref.kind == "c" and ref.id in collabs:
                product, collab = collabs[ref.id]
                label = f"{self.who(collab.author)}'s {collab.type} on {product.name}"
            elif ref.kind in "pvc":  # a graph id is never shown: what it named is gone from this report
                return "(an item no longer in the mission)"
            elif ref.kind == "a":
                return ref.id
            elif ref.kind == "u":
                return "you" if ref.id == USER_ID else "all users"
            else:
                return None
            return link(product, label) if link is not None else label

        return substitute_refs(text, name)

    def citation_label(self, cited: str) -> str | None:
        """How a citation reads for a reader: the file's name and the section's title
        (``interview-notes.md: What hurts``); the name alone for a whole file or a section
        without a title (never a bare section number); a tool's result as its call
        (``ToolCall.label``); None for an unknown id."""
        call = next((c for c in self.tool_calls if c.id == cited), None)
        if call is not None:
            return call.label
        node_id, _, section = cited.partition("#")
        source = next((s for s in self.sources if s.id == node_id), None)
        if source is None:
            return None
        label = source.name + (f" (version {source.version})" if source.version > 1 else "")
        part = next((c for c in source.cited_sections if c.id == cited), None) if section else None
        return f"{label}: {part.heading}" if part is not None and part.heading else label

    def subtree(self, product: Product) -> tuple[Product, ...]:
        """``product`` and every product below it, in tree order."""
        below, rows = {product.id}, [product]
        for candidate in self.products[self.products.index(product) + 1:]:
            if candidate.parent_id in below:
                below.add(candidate.id)
                rows.append(candidate)
        return tuple(rows)
