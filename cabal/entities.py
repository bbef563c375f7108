"""Pydantic models of every Cabal mechanism: the vocabulary agents answer in.

Model-facing JSON is camelCase everywhere (the spec's names); Python attributes are
snake_case. Limits live in Field constraints so they reach both validation and the JSON
schema a model sees. Checks here are pure; the engine decides what to do with a violation.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from cabal.vocabulary import BLOCKING_IMPORTANCE, CHAIR_ID, OPERATIVE_PATTERN, Step

# ---------------------------------------------------------------------------------- limits

IMPORTANCE_MIN = 1
IMPORTANCE_MAX = 10
SEVERITY_MIN = 1
SEVERITY_MAX = 10
BLOCKING_SEVERITY = 8
"""A finding at or above this severity makes an inspection ``blocked``."""
REVISION_SEVERITY = 5
"""A finding at or above this severity rules out ``approved``."""

NAME_MAX_CHARS = 200
DOD_MAX_CHARS = 1000
TITLE_MAX_CHARS = 200
VERSION_CONTENT_MIN_CHARS = 50
COMMENT_MAX_CHARS = 5000
SHORTEST_SUMMARY_MAX_CHARS = 120
REMARK_MAX_CHARS = 2000
HALT_MESSAGE_MAX_CHARS = 2000
MISSION_MAX_CHARS = 2000
CONTEXT_REASON_MAX_CHARS = 500
REASONING_MAX_CHARS = 2000
MESSAGE_MAX_CHARS = 600
MESSAGE_MAX_SENTENCES = 2
MIN_MESSAGES = 1
MAX_MESSAGES = 10
MAX_CONTEXT_REQUESTS = 5
"""Context requests allowed in one ``request_context`` answer."""
MAX_CONTEXT_ITERATIONS = 3
"""``request_context`` answers allowed within one step."""

NEW_ID_PATTERN = r"^new-\d+$"
DECISION_ID_PATTERN = r"^d[1-9][0-9]*$"  # d1, d2, ...: a decision's id, the same for the whole mission
DECISION_MAX_CHARS = 600  # one decision: a term, a period, a name, an owner, a number

# A rule the step prompts state in prose is stated here too, in the field's description: the
# schema is what a model reads most closely, and the engine checks it (tests/test_entities.py).
Importance = Annotated[int, Field(ge=IMPORTANCE_MIN, le=IMPORTANCE_MAX)]
Severity = Annotated[int, Field(ge=SEVERITY_MIN, le=SEVERITY_MAX)]
ProductName = Annotated[str, Field(min_length=1, max_length=NAME_MAX_CHARS)]
DefinitionOfDone = Annotated[str, Field(
    min_length=1, max_length=DOD_MAX_CHARS,
    description="The definition of done: criteria a reviewer can check in one reading (never 'high quality')")]


class Entity(BaseModel):
    """Base of every mechanism model: frozen, camelCase outside, no unknown keys."""

    model_config = ConfigDict(
        frozen=True, populate_by_name=True, alias_generator=to_camel, extra="forbid"
    )


# ---------------------------------------------------------------------------------- product


class ProductType(StrEnum):
    """What a product is, and so what it may contain."""

    CONTENT = "Content"
    DECISION = "Decision"
    COLLECTION = "Collection"
    ORCHESTRATION = "Orchestration"

    def can_contain(self, child: ProductType) -> bool:
        """Whether a product of this type may hold a child of type ``child``."""
        return child in ALLOWED_CHILDREN[self]


ALLOWED_CHILDREN: dict[ProductType, frozenset[ProductType]] = {
    ProductType.CONTENT: frozenset(),
    ProductType.DECISION: frozenset(ProductType),
    ProductType.COLLECTION: frozenset({ProductType.CONTENT}),
    ProductType.ORCHESTRATION: frozenset(ProductType),
}

ProductStatus = Literal["open", "accepted", "removed"]


class Product(Entity):
    """The primary unit of work: what needs to be created, with its Definition of Done."""

    id: str
    name: ProductName
    type: ProductType
    parent_id: str | None = None
    owner: str | None = None
    dod: DefinitionOfDone
    description: str | None = None
    status: ProductStatus = "open"


# ---------------------------------------------------------------------------------- version


class Version(Entity):
    """An immutable snapshot of a product's content at a point in time."""

    id: str
    product_id: str
    author: str
    title: str | None = Field(default=None, max_length=TITLE_MAX_CHARS)
    content: str = Field(min_length=1)
    change_summary: str
    number: int = Field(ge=1)


class NewVersion(Entity):
    """The content an operative writes for a product in the Write step."""

    content_title: str = Field(min_length=1, max_length=TITLE_MAX_CHARS)
    content: str = Field(min_length=VERSION_CONTENT_MIN_CHARS,
                         description="The real thing, complete, in Markdown as its readers will get it: never a "
                                     "placeholder, an outline of what you will write, or a plan to do it later")
    change_summary: str = Field(min_length=1, description="What changed since the previous version (not just "
                                                          "'updated')")


class VersionWrite(Entity):
    """One new version proposed for one product."""

    product_id: str
    new_version: NewVersion


class ChairVersion(Entity):
    """A version the Chair writes itself during Plan & Assign."""

    product_id: str
    content: str = Field(min_length=1)
    change_summary: str = Field(min_length=1)


# ---------------------------------------------------------------------------------- discourse

CollabType = Literal["feedback", "question", "suggestion", "endorsement", "concern"]
RemarkType = Literal[
    "question", "suggestion", "observation", "note", "missing_detail", "blocker", "comment"
]


class Collab(Entity):
    """Discourse on a product: how agents communicate about specific work."""

    refers_to_product: str
    type: CollabType
    importance: Importance = Field(
        description=f"{IMPORTANCE_MIN}-{IMPORTANCE_MAX}, honestly: {BLOCKING_IMPORTANCE} or more blocks the product's "
                    "acceptance while the collab is open (only for what must block); 4-7 for what the next version "
                    "should fix; 1-3 for nice-to-haves")
    comment: str = Field(min_length=1, max_length=COMMENT_MAX_CHARS)
    shortest_summary: str = Field(min_length=1, max_length=SHORTEST_SUMMARY_MAX_CHARS)
    refers_to_version: str | None = None
    references_product_ids: list[str] = Field(default_factory=list)
    addressee_ids: list[str] = Field(default_factory=list)
    responding_to_collab_ids: list[str] = Field(default_factory=list)

    @property
    def is_blocking(self) -> bool:
        """Whether this collab, while open, blocks acceptance of its product."""
        return self.importance >= BLOCKING_IMPORTANCE


class Remark(Entity):
    """Side communication not targeting a product: the team's channel."""

    recipients: list[str] = Field(min_length=1, description="Agent ids, self, or u:all for the user")
    type: RemarkType
    content: str = Field(min_length=1, max_length=REMARK_MAX_CHARS)
    is_blocker: bool = False


# ---------------------------------------------------------------------------------- planning


class Directive(Entity):
    """The Chair's instructions accompanying an assignment: what success looks like."""

    objective: str = Field(min_length=1, description="What to do, concrete enough to act on alone (not "
                                                     "'improve it')")
    dod: str = Field(min_length=1, description="The definition of done this work must meet, checkable in one reading")
    why: str = Field(min_length=1, description="Why it matters now")
    context: str | None = None
    importance: Importance


class AttachedContext(Entity):
    """Context from a related product the Chair attaches to an assignment."""

    product_id: str
    include: list[Literal["content", "feedback"]] = Field(min_length=1)
    reason: str = Field(min_length=1)


class Assignment(Entity):
    """Work allocation from the Chair to an operative."""

    product_id: str
    assignee: str
    directive: Directive
    attached_context: list[AttachedContext] = Field(default_factory=list)


class ProductDraft(Entity):
    """The product an ADD tree operation creates."""

    name: ProductName
    type: ProductType
    dod: DefinitionOfDone
    description: str | None = None
    assignee: str | None = None


class ProductPatch(Entity):
    """The fields an UPDATE tree operation changes (at least one)."""

    name: ProductName | None = None
    type: ProductType | None = None
    dod: DefinitionOfDone | None = None
    description: str | None = None
    assignee: str | None = None

    @model_validator(mode="after")
    def _changes_something(self) -> ProductPatch:
        if all(getattr(self, name) is None for name in type(self).model_fields):
            raise ValueError(
                "an UPDATE must change at least one of: name, type, dod, description, assignee"
            )
        return self


class AddProduct(Entity):
    """Tree operation: create a product under a parent, under a temporary ``new-N`` id."""

    action: Literal["ADD"]
    new_id: str = Field(pattern=NEW_ID_PATTERN)
    parent_id: str
    product: ProductDraft


class RemoveProduct(Entity):
    """Tree operation: delete a product."""

    action: Literal["REMOVE"]
    product_id: str
    reason: str = Field(min_length=1)


class MoveProduct(Entity):
    """Tree operation: give a product a new parent."""

    action: Literal["MOVE"]
    product_id: str
    parent_id: str


class UpdateProduct(Entity):
    """Tree operation: change some fields of a product."""

    action: Literal["UPDATE"]
    product_id: str
    product: ProductPatch


TreeOperation = Annotated[
    Union[AddProduct, RemoveProduct, MoveProduct, UpdateProduct],
    Field(discriminator="action"),
]
"""A structural change to the product tree, tagged by ``action``."""


class Acceptance(Entity):
    """The Chair's decision to accept or reject a product."""

    product_id: str
    accepted: bool  # when to accept is the rule of its step's prompt (prompts/steps/plan.md, close.md)
    version_id: str | None = Field(None, description="The latest version (only it can be accepted)")
    rejection_reason: str | None = Field(None, description="Required to reject: what the next version must change")


class OperativeDomain(Entity):
    """What an operative is responsible for."""

    responsibility: str = Field(min_length=1)
    area: str = Field(min_length=1)


class BootstrapOverride(Entity):
    """Mid-session update of session parameters; an absent field keeps its value."""

    mission: str | None = Field(default=None, max_length=MISSION_MAX_CHARS)
    objectives: list[str] | None = None
    constraints: list[str] | None = None
    personas: dict[str, str] | None = None
    operative_domains: dict[str, OperativeDomain] | None = None


class Decision(Entity):
    """One entry of the Chair's record of the mission's decisions, which every step shows."""

    replaces: str | None = Field(None, pattern=DECISION_ID_PATTERN,
                                 description="The id of the current decision this one changes or retires (d2); "
                                             "leave it out for a new decision")
    topic: str = Field(min_length=1, max_length=NAME_MAX_CHARS, description="What it settles, in a few words")
    decision: str | None = Field(None, min_length=1, max_length=DECISION_MAX_CHARS,
                                 description="What is decided, short and exact; leave it out only to retire the "
                                             "decision named in replaces")
    why: str | None = Field(None, max_length=DECISION_MAX_CHARS)

    @model_validator(mode="after")
    def _decides_or_retires(self) -> Decision:
        if self.decision is None and self.replaces is None:
            raise ValueError("a decision needs its text (decision); only a change that names replaces may retire one")
        return self


class Halt(Entity):
    """Pause the session for user input (``question``) or end it (``done``)."""

    type: Literal["question", "done"] = Field(
        description="done: every product is accepted and the mission is met (say what was delivered); question: "
                    "the team cannot go on without the user's answer")
    to: list[str] = Field(min_length=1)
    message: str = Field(min_length=1, max_length=HALT_MESSAGE_MAX_CHARS)
    options: list[str] = Field(default_factory=list)


# ---------------------------------------------------------------------------------- reflection


FeedbackAction = Literal["accept", "defer", "reject"]
FEEDBACK_ACTIONS: dict[str, str] = {
    "accept": "you take it: say the change (plannedChange) your version makes or will make",
    "defer": "not now: it leaves the open feedback (it no longer blocks acceptance) and stays listed as deferred, "
             "to take up in a later version",
    "reject": "you will not act on it: say why",
}
"""What each answer to a collab means, the same in Reflect and in Write: every one of them takes
the collab out of open feedback; a deferred one stays listed as deferred."""


class FeedbackResponse(Entity):
    """An owner's answer to an open collab on its product (Reflect), or on a product assigned to
    it (Write); it takes the collab out of open feedback. Answering never needs a new collab."""

    collab_id: str = Field(description="An open collab on a product you own or were assigned (c1, c2, ...)")
    action: FeedbackAction = Field(description="; ".join(f"{name}: {meaning}" for name, meaning in
                                                        FEEDBACK_ACTIONS.items()))
    rationale: str = Field(min_length=1, description="Why you answer so")
    planned_change: str | None = Field(None, description="For accept: the concrete change")


class Reflection(Entity):
    """An operative's self-assessment of a product it owns."""

    refers_to_product: str
    dod_status: Literal["met", "partially_met", "not_met"] = Field(
        description="Judged against the DoD as written; the Chair accepts a product only on your met, so never "
                    "claim it before it is true (not while an inspection asks for changes)")
    dod_gaps: list[str] = Field(default_factory=list)
    feedback_responses: list[FeedbackResponse] = Field(description="One answer to every open collab shown on it")
    lessons_from_history: str | None = None
    next_version_delta: str = Field(description="What the next version must change, concretely")
    blockers: list[str] = Field(default_factory=list)


# ---------------------------------------------------------------------------------- review


class Review(Entity):
    """A peer's assessment of another operative's version."""

    product_id: str
    version_id: str
    assessment: Literal["approved", "needs_revision"] = Field(description="Judged against the product's DoD")
    summary: str = Field(min_length=1, description="Why, in a sentence or two")


class Finding(Entity):
    """One problem the Watchdog found in a version."""

    category: Literal["security", "completeness", "coherence", "integration", "quality"]
    severity: Severity  # what each severity makes of the verdict: prompts/steps/inspect.md
    issue: str = Field(min_length=1)
    recommendation: str = Field(min_length=1, description="What to change")
    dod_criterion: str | None = Field(None, description="The DoD criterion it concerns, when one applies")


InspectionAssessment = Literal["approved", "needs_revision", "blocked"]


class Inspection(Entity):
    """The Watchdog's quality assessment of a version before acceptance."""

    product_id: str
    version_id: str
    assessment: InspectionAssessment  # follows the findings, as prompts/steps/inspect.md says (rules.py checks it)
    findings: list[Finding]

    def expected_assessment(self) -> InspectionAssessment:
        """The strictest verdict the findings call for."""
        worst = max((finding.severity for finding in self.findings), default=0)
        if worst >= BLOCKING_SEVERITY:
            return "blocked"
        if worst >= REVISION_SEVERITY:
            return "needs_revision"
        return "approved"

    def verdict_problems(self) -> list[str]:
        """Why the given assessment does not follow the findings (empty when it does).

        ``blocked`` needs a finding of severity >= 8 and is required by one; ``approved`` is
        ruled out by any finding of severity >= 5; ``needs_revision`` without such a finding
        is allowed (stricter than needed, but not wrong).
        """
        expected = self.expected_assessment()
        if self.assessment == expected:
            return []
        highest = max((finding.severity for finding in self.findings), default=None)
        if expected == "blocked":
            return [
                f"assessment {self.assessment!r} is too lenient: a finding has severity "
                f"{highest} (>= {BLOCKING_SEVERITY}), which requires 'blocked'"
            ]
        if self.assessment == "blocked":
            return [
                f"assessment 'blocked' needs a finding of severity >= {BLOCKING_SEVERITY}; "
                f"the highest is {highest if highest is not None else 'none (no findings)'}"
            ]
        if expected == "needs_revision":  # and the assessment is "approved"
            return [
                f"assessment 'approved' is too lenient: a finding has severity "
                f"{highest} ({REVISION_SEVERITY}-{BLOCKING_SEVERITY - 1}), which allows "
                "at most 'needs_revision'"
            ]
        return []  # needs_revision with only minor findings: stricter than needed, allowed


# ---------------------------------------------------------------------------------- presentation

# Tokens ending in a period that do not end a sentence: "e.g.", "U.S." and friends.
_ABBREVIATIONS = frozenset({"e.g.", "i.e.", "etc.", "vs.", "cf.", "approx.", "mr.", "mrs.",
                            "ms.", "dr.", "incl.", "excl.", "no.", "nos.", "min.", "max.", "est.", "dept.",
                            "fig.", "sec.", "st.", "p.", "pp.", "jr.", "sr."})
_INITIALISM = re.compile(r"^(?:[a-z]\.){2,}$")
_SENTENCE_END = re.compile(r"[.!?]+[\"')\]]*$")
_OPENING_PUNCTUATION = "\"'(["
_CLOSING_PUNCTUATION = "\"')]"


def count_sentences(text: str) -> int:
    """Number of sentences in ``text``; a period inside a token (3.5, v1.2) ends nothing."""
    tokens = text.split()
    if not tokens:
        return 0
    boundaries = 0
    for token in tokens[:-1]:  # a boundary on the last token opens no new sentence
        if not _SENTENCE_END.search(token):
            continue
        bare = token.lstrip(_OPENING_PUNCTUATION).rstrip(_CLOSING_PUNCTUATION).lower()
        if bare in _ABBREVIATIONS or _INITIALISM.match(bare):
            continue
        boundaries += 1
    return boundaries + 1


class Message(Entity):
    """One line of team conversation the Envoy presents to the user."""

    content: str = Field(min_length=1, max_length=MESSAGE_MAX_CHARS,
                         description=f"1 to {MESSAGE_MAX_SENTENCES} sentences (a third is rejected)")
    as_agent: str = Field(pattern=rf"^({CHAIR_ID}|{OPERATIVE_PATTERN})$",
                          description=f"Who speaks: {CHAIR_ID} or an operative who did it; never the Watchdog "
                                      "or the Envoy")

    @field_validator("content")
    @classmethod
    def _one_or_two_sentences(cls, content: str) -> str:
        if not content.strip():
            raise ValueError("a message must say something")
        sentences = count_sentences(content)
        if sentences > MESSAGE_MAX_SENTENCES:
            raise ValueError(
                f"a message is 1-{MESSAGE_MAX_SENTENCES} sentences; this one has {sentences}"
            )
        return content


# ---------------------------------------------------------------------------------- the user


class UserNote(Entity):
    """A message the user leaves between rounds; about a product, or about nothing in particular."""

    content: str = Field(min_length=1, max_length=COMMENT_MAX_CHARS)
    product_id: str | None = None


class HaltAnswer(Entity):
    """The user's answer to the Chair's question."""

    answer: str = Field(min_length=1, max_length=COMMENT_MAX_CHARS)


# ---------------------------------------------------------------------------------- context

ContextNeed = Literal["full_content", "version_history", "all_feedback", "inspections", "reflections", "peer_content",
                      "source", "search_sources", "remarks"]
SOURCE_NEEDS = {"source": "sourceId", "search_sources": "query"}
"""The needs that read the user's sources, and the field each one needs instead of a product."""
UNADDRESSED_NEEDS = frozenset({"remarks"})
"""The needs about the asking agent itself: no product, source or query."""
SEARCH_QUERY_MAX_CHARS = 200


class ContextRequest(Entity):
    """A request for more, made mid-step: about a product (``productId``), one of the user's
    sources or its section (``source``: ``sourceId`` s2 or s2#3), a search of the sources
    (``search_sources``: ``query``), or the remarks to you (``remarks``)."""

    product_id: str | None = Field(None, description="the product (p1) for full_content, version_history, "
                                                     "all_feedback, inspections, reflections and peer_content")
    need: ContextNeed = Field(description=(
        "full_content: a product's latest version, whole; version_history: its versions; all_feedback: every "
        "collab on it, open and answered; inspections: every inspection of its versions, with findings; "
        "reflections: this round's reflections on it; peer_content: its siblings' latest versions; source: a "
        "source or section; search_sources: the sections that match a query; remarks: every remark to you, "
        "this round and the last"))
    source_id: str | None = Field(None, max_length=40, description="source (s2) or section (s2#3), for need source")
    query: str | None = Field(None, min_length=1, max_length=SEARCH_QUERY_MAX_CHARS,
                              description="words to look for in the sources, for need search_sources")
    reason: str = Field(min_length=1, max_length=CONTEXT_REASON_MAX_CHARS)

    @model_validator(mode="after")
    def _subject_of_need(self) -> ContextRequest:
        if self.need in UNADDRESSED_NEEDS:
            return self
        wanted = SOURCE_NEEDS.get(self.need, "productId")
        given = {"productId": self.product_id, "sourceId": self.source_id, "query": self.query}
        if not given[wanted]:
            raise ValueError(f"need {self.need} names its subject in {wanted}")
        return self


# ---------------------------------------------------------------------------------- step outputs


class BootstrapThinking(Entity):
    """The Chair's reasoning behind the bootstrap."""

    interpretation: str
    scope_decisions: str


class InitialProduct(Entity):
    """A product the Chair creates at bootstrap."""

    name: ProductName
    type: ProductType
    dod: DefinitionOfDone
    owner: str = Field(description="An operative of the team")


class MissionCharter(Entity):
    """The charter the Chair writes at bootstrap: mission, objectives, constraints, team."""

    thinking: BootstrapThinking
    mission: str = Field(min_length=1, max_length=MISSION_MAX_CHARS)
    objectives: list[str]
    constraints: list[str]
    personas: dict[str, str] = Field(
        description="A persona per agent id that fits what the agent does, except agents the user's cards give "
                    "one: the Envoy only reports to the user (it never reviews); the Watchdog inspects; operatives "
                    "write and review")
    operative_domains: dict[str, OperativeDomain]
    missing_details: list[str] = Field(default_factory=list)


class BootstrapOutput(MissionCharter):
    """Bootstrap answer: the mission charter, the team and the first products (at least one:
    later products are added under an existing one)."""

    initial_products: list[InitialProduct] = Field(min_length=1)
    decisions: list[Decision] = Field(default_factory=list)


Reasoning = Annotated[str, Field(
    min_length=1, max_length=REASONING_MAX_CHARS,
    description="Why you answer as you do, in a few sentences: what you weighed and decided. It is kept "
                "with your turn in the mission's record.")]


class ReflectOutput(Entity):
    """Reflect answer: an operative's reflections on its products."""

    reasoning: Reasoning
    reflections: list[Reflection]
    collabs: list[Collab] = Field(default_factory=list)
    remarks: list[Remark] = Field(default_factory=list)


class PlanThinking(Entity):
    """The Chair's reasoning behind a plan."""

    round_strategy: str
    acceptance_rationale: str


class PlanOutput(Entity):
    """Plan & Assign answer: tree changes, assignments and acceptance decisions."""

    thinking: PlanThinking
    tree_operations: list[TreeOperation]
    assignments: list[Assignment]
    acceptance: list[Acceptance]
    chair_versions: list[ChairVersion] = Field(default_factory=list)
    remarks: list[Remark] = Field(default_factory=list)
    bootstrap_overrides: BootstrapOverride | None = None
    decisions: list[Decision] = Field(default_factory=list)


class WriteOutput(Entity):
    """Write answer: new versions of the operative's assigned products, and its answers to their
    open collabs."""

    reasoning: Reasoning
    versions: list[VersionWrite] = Field(description="One new version of every product assigned to you this "
                                                     "round; none of any other")
    feedback_responses: list[FeedbackResponse] = Field(
        default_factory=list, description="Your answers to open collabs on the products you write (accept, defer "
                                          "or reject): each takes its collab out of open feedback; never answer a "
                                          "collab with a new collab")
    collabs: list[Collab] = Field(default_factory=list)
    remarks: list[Remark] = Field(default_factory=list)


class PeerReviewOutput(Entity):
    """Peer Review answer: an operative's reviews of other operatives' versions."""

    reasoning: Reasoning
    reviews: list[Review] = Field(min_length=1)
    collabs: list[Collab] = Field(default_factory=list)
    remarks: list[Remark] = Field(default_factory=list)


class InspectOutput(Entity):
    """Inspect answer: the Watchdog's inspections of this round's versions."""

    reasoning: Reasoning
    inspections: list[Inspection] = Field(description="One per new version of this round; none skipped")
    collabs: list[Collab] = Field(default_factory=list)
    remarks: list[Remark] = Field(default_factory=list)


class PresentationOutput(Entity):
    """Presentation answer: the team's conversation for the user."""

    reasoning: Reasoning
    messages: list[Message] = Field(min_length=MIN_MESSAGES, max_length=MAX_MESSAGES,
                                    description=f"{MIN_MESSAGES} to {MAX_MESSAGES} short messages; the same news "
                                                "once")


class CloseOutput(Entity):
    """Closing decisions (after Inspect, in a round whose versions passed every inspection, and in
    the last round): the Chair accepts or rejects the versions awaiting them, and may end the
    mission in the same answer once everything is accepted."""

    reasoning: Reasoning
    acceptance: list[Acceptance] = Field(description="A decision on each version awaiting one")
    remarks: list[Remark] = Field(default_factory=list)
    done: str | None = Field(None, max_length=HALT_MESSAGE_MAX_CHARS,
                             description="Only when these decisions leave every product accepted and the mission "
                                         "is met: what was delivered. It ends the mission here, as a halt done would")

    def ending(self) -> Halt | None:
        """The halt ``done`` the answer ends the mission with, if it does."""
        return Halt(type="done", to=["u:all"], message=self.done) if self.done else None


# ---------------------------------------------------------------------------------- envelopes


class RequestContextEnvelope(Entity):
    """Envelope: "show me more first" before giving the step's final output."""

    requests: list[ContextRequest] = Field(min_length=1, max_length=MAX_CONTEXT_REQUESTS)


HaltEnvelope = Halt
"""Envelope: pause for the user or end the mission."""

FINAL_OUTPUT = "final_output"
REQUEST_CONTEXT = "request_context"
HALT = "halt"

STEP_OUTPUTS: dict[Step, type[Entity]] = {
    Step.BOOTSTRAP: BootstrapOutput,
    Step.REFLECT: ReflectOutput,
    Step.PLAN: PlanOutput,
    Step.WRITE: WriteOutput,
    Step.PEER_REVIEW: PeerReviewOutput,
    Step.INSPECT: InspectOutput,
    Step.CLOSE: CloseOutput,
    Step.PRESENTATION: PresentationOutput,
}

ALLOWED_ENVELOPES: dict[Step, frozenset[str]] = {
    Step.BOOTSTRAP: frozenset({FINAL_OUTPUT, HALT}),
    Step.REFLECT: frozenset({FINAL_OUTPUT, REQUEST_CONTEXT}),
    Step.PLAN: frozenset({FINAL_OUTPUT, REQUEST_CONTEXT, HALT}),
    Step.WRITE: frozenset({FINAL_OUTPUT, REQUEST_CONTEXT}),
    Step.PEER_REVIEW: frozenset({FINAL_OUTPUT, REQUEST_CONTEXT}),
    Step.INSPECT: frozenset({FINAL_OUTPUT, REQUEST_CONTEXT}),
    Step.CLOSE: frozenset({FINAL_OUTPUT, REQUEST_CONTEXT, HALT}),
    Step.PRESENTATION: frozenset({FINAL_OUTPUT, REQUEST_CONTEXT}),
}


def envelope_models(step: Step, offered: frozenset[str] = frozenset()) -> dict[str, type[Entity]]:
    """The model of each envelope ``step`` may answer with, keyed by envelope name; ``offered``
    adds envelopes a prompt offers beyond the step's own (request_context at a bootstrap whose
    sources do not fit inline)."""
    models: dict[str, type[Entity]] = {
        FINAL_OUTPUT: STEP_OUTPUTS[step],
        REQUEST_CONTEXT: RequestContextEnvelope,
        HALT: HaltEnvelope,
    }
    return {name: model for name, model in models.items() if name in ALLOWED_ENVELOPES[step] | offered}
