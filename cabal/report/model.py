"""A mission as typed values: what the team made, how, and what it cost.

``read_report`` builds one ``MissionReport`` from a mission's graph; every way of showing a
mission (``cabal show``, the Markdown transcript, the JSON and HTML exports, ``cabal status``)
renders from it. The JSON export is ``MissionReport.model_dump(mode="json")`` and its published
schema is ``MissionReport.model_json_schema()``: one definition for both.

Compatibility of the JSON: within a ``format_version``, fields are only ever added; a field
removed, renamed or changed in meaning bumps it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cabal.errors import ResourceNotFound
from cabal.refs import Ref, substitute_refs
from cabal.vocabulary import USER_ID

REPORT_FORMAT = "cabal.mission-report"
REPORT_FORMAT_VERSION = 1


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Spend(_Value):
    """Tokens and dollars spent by some turns."""

    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = Field(0, description="input tokens read from the prompt cache (part of input_tokens)")
    cost_usd: float = 0.0

    def __add__(self, other: Spend) -> Spend:
        return Spend(turns=self.turns + other.turns, input_tokens=self.input_tokens + other.input_tokens,
                     output_tokens=self.output_tokens + other.output_tokens,
                     cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
                     cost_usd=round(self.cost_usd + other.cost_usd, 6))

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
    """An owner's answer to a collab, in a reflection: accept, defer or reject."""

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
    addressed: bool = Field(description="a reflection of the product's owner answered it")
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
    status: str = Field(description="open, accepted or removed")
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
    kind: Literal["message", "question", "done", "answer", "note"] = Field(
        description="message: the Envoy speaking as an agent; question / done: a halt; answer: the user's "
                    "answer to a question; note: a message the user left")
    options: tuple[str, ...] = ()


class Question(_Value):
    """A question put to the user, and the answer."""

    id: str
    round: int
    step: str | None = None
    asker: str
    message: str
    options: tuple[str, ...] = ()
    status: str = Field(description="pending or answered")
    answer: str | None = None
    answered_round: int | None = None


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
    state: str = Field(description="running, halted, done or failed")
    stop_reason: str | None = None
    detail: str | None = None
    stop_requested: bool = Field(False, description="the user asked the team to stop at its next round")
    round: int
    rounds: int | None = Field(None, description="the round limit")
    model: str | None = None
    budget_tokens: int | None = None
    budget_cost_usd: float | None = None


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

    @property
    def live_products(self) -> tuple[Product, ...]:
        return tuple(p for p in self.products if p.status != "removed")

    @property
    def failed_turns(self) -> tuple[Turn, ...]:
        return tuple(t for t in self.turns if t.outcome == "failed")

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

    def readable(self, text: str | None, link: Callable[[Product, str], str] | None = None) -> str:
        """``text`` with its references written as names: ``[[p:id]]`` the product's name,
        ``[[v:id]]`` the product's name and version number, ``[[u:user]]`` "you". ``link(product,
        label)`` may wrap what names a product (the HTML report links it to the product's section)."""
        if not text or "[[" not in text:
            return text or ""
        products = {p.id: p for p in self.products}
        versions = {v.id: (p, v) for p in self.products for v in p.versions}

        def name(ref: Ref) -> str | None:
            if ref.kind == "p" and ref.id in products:
                product, label = products[ref.id], products[ref.id].name
            elif ref.kind == "v" and ref.id in versions:
                product, version = versions[ref.id]
                label = f"{product.name} v{version.number}"
            elif ref.kind == "a":
                return ref.id
            elif ref.kind == "u":
                return "you" if ref.id == USER_ID else "all users"
            else:
                return None
            return link(product, label) if link is not None else label

        return substitute_refs(text, name)

    def subtree(self, product: Product) -> tuple[Product, ...]:
        """``product`` and every product below it, in tree order."""
        below, rows = {product.id}, [product]
        for candidate in self.products[self.products.index(product) + 1:]:
            if candidate.parent_id in below:
                below.add(candidate.id)
                rows.append(candidate)
        return tuple(rows)
