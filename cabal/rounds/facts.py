"""What one turn is about, as data: the facts its prompt shows, with the prompt's own short ids.

The context builder records these while it writes the prompt, from the same selections, so the
text a model reads and the facts are two renderings of one thing. Fake models (the simulated
team, a test's ``FunctionChatModel``) read ``ModelRequest.facts`` instead of parsing the
prompt's text, the way pydantic-ai's ``FunctionModel`` receives an ``AgentInfo``.

Ids are the short ones the call uses (``p1``, ``p1.v2``, ``c3``); agents keep their own ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cabal.vocabulary import Role, Step


@dataclass(frozen=True)
class TreeProduct:
    """One line of the product tree as shown (the tree collapses quiet products beyond a budget)."""

    id: str
    name: str
    type: str
    owner: str | None
    status: str
    version: int | None  # the latest version's number
    depth: int


@dataclass(frozen=True)
class VersionRef:
    id: str
    product: str
    number: int
    author: str | None


@dataclass(frozen=True)
class ProductDetail:
    """A product the turn works on: its definition of done, latest version, verdict and open feedback."""

    id: str
    name: str
    type: str
    dod: str
    latest: VersionRef | None
    inspection: str | None  # the latest version's verdict, if inspected
    open_collabs: tuple[str, ...]  # the open collabs shown with it


@dataclass(frozen=True)
class Assignment:
    """This round's assignment of a product to the agent, with the Chair's directive."""

    product: ProductDetail
    objective: str
    importance: int | None
    context: str = ""  # the directive's context, as shown ("Context: ...")


@dataclass(frozen=True)
class Reflection:
    author: str | None  # None: a reflection the graph holds without an author
    product: str
    dod_status: str


@dataclass(frozen=True)
class Candidate:
    """A product whose latest version waits for the Chair's decision."""

    product: str
    name: str
    version: str
    number: int
    verdict: str  # approved, needs_revision, blocked or "not inspected"
    blocking: int  # open collabs of importance >= 8


@dataclass(frozen=True)
class Event:
    """Something that happened this round, for the Envoy: who did it, what kind, and the line shown."""

    agent: str | None  # None: a record the graph holds without an author
    kind: str  # wrote, accepted, rejected, assigned, told_user, asked, concluded
    subject: str | None  # the product's name, or the text (None: a product the graph no longer names)
    text: str


@dataclass(frozen=True)
class Source:
    """One of the user's sources as the turn lists it: the id to request and cite."""

    id: str  # s2
    name: str
    note: str
    sections: int
    first_heading: str


@dataclass(frozen=True)
class UserWord:
    """What the user said, as the turn shows it under "From the user": an answer to a question
    the Chair asked, or a note the user left."""

    text: str
    round: int  # the round it was given in
    question: str | None = None  # the question it answers (None: a note)


@dataclass(frozen=True)
class Decision:
    """A current decision of the Chair's record, as the turn shows it under "Decisions"."""

    id: str  # d2: the same in every prompt of the mission
    topic: str
    decision: str


@dataclass(frozen=True)
class TeamTool:
    """One of the mission's tools as Bootstrap and Plan list it: who may call it, and in which steps."""

    name: str  # as offered: server__tool
    description: str  # its first line
    callers: tuple[str, ...]  # agent ids
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class TurnFacts:
    round: int
    step: Step
    agent: str
    request: str
    team: tuple[tuple[str, Role], ...]  # every agent of the team: (id, role)
    tree: tuple[TreeProduct, ...] = ()
    products: tuple[ProductDetail, ...] = ()  # Reflect: the open products the agent owns
    assignments: tuple[Assignment, ...] = ()  # Write: this round's assignments to the agent
    new_versions: tuple[VersionRef, ...] = ()  # Peer Review, Inspect, Close: this round's versions to judge
    reflections: tuple[Reflection, ...] = ()  # Plan, Close: this round's reflections
    candidates: tuple[Candidate, ...] = ()  # Plan, Close: versions awaiting a decision
    events: tuple[Event, ...] = ()  # Presentation: what happened this round
    speakers: tuple[str, ...] = ()  # Presentation: whom the agent may speak as
    focus: tuple[str, ...] = ()  # a watchdog's finding categories (none: every category)
    sources: tuple[Source, ...] = ()  # Bootstrap, Plan, Write: the user's sources listed
    direction: str | None = None  # Plan: the new direction of a mission the user continued after it ended
    from_user: tuple[UserWord, ...] = ()  # Bootstrap, Plan: the user's answers and notes shown
    in_advance: tuple[str, ...] = ()  # the mission file's answers no question has taken yet, shown as the user's words
    plan_changes: str | None = None  # Plan: the changes the user asked for at the plan's sign-off
    decisions: tuple[Decision, ...] = ()  # every step after Bootstrap: the record's current decisions
    tools: tuple[TeamTool, ...] = ()  # Bootstrap, Plan: the mission's tools
    given_personas: tuple[str, ...] = ()  # Bootstrap: the agents whose persona the user's cards give
    # Not in the prompt: how many of the mission file's ``answers:`` are left for the Chair's
    # questions (set by the run), so a fake Chair asks only a question the run answers by itself.
    answers_waiting: int = 0

    def operatives(self) -> list[str]:
        return [agent for agent, role in self.team if role == Role.OPERATIVE]


@dataclass
class FactsDraft:
    """The facts of a turn, filled in by the sections that show them."""

    tree: list[TreeProduct] = field(default_factory=list)
    products: list[ProductDetail] = field(default_factory=list)
    assignments: list[Assignment] = field(default_factory=list)
    new_versions: list[VersionRef] = field(default_factory=list)
    reflections: list[Reflection] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    speakers: list[str] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    direction: str | None = None
    from_user: list[UserWord] = field(default_factory=list)
    in_advance: list[str] = field(default_factory=list)
    plan_changes: str | None = None
    decisions: list[Decision] = field(default_factory=list)
    tools: list[TeamTool] = field(default_factory=list)
    given_personas: list[str] = field(default_factory=list)

    def freeze(self, *, round: int, step: Step, agent: str, request: str,  # noqa: A002
               team: tuple[tuple[str, Role], ...], focus: tuple[str, ...] = ()) -> TurnFacts:
        drafted: dict[str, Any] = {name: value if name in ("direction", "plan_changes") else tuple(value)
                                   for name, value in vars(self).items()}
        return TurnFacts(round=round, step=step, agent=agent, request=request, team=team, focus=focus, **drafted)


# ------------------------------------------------------------- calls outside the round


@dataclass(frozen=True)
class BaselineFacts:
    """The one call of a baseline (``cabal baseline``): what its prompt shows, as data.

    ``answers``: what the user said before the work started (the mission file's ``answers:``);
    ``sources``: the sources as the prompt quotes them; ``tool_results``: what the tools it
    called answered so far, in order."""

    request: str
    answers: tuple[str, ...]
    sources: tuple[Source, ...]
    tool_results: tuple[str, ...] = ()


@dataclass(frozen=True)
class ComparedDocument:
    """One document of a side, as a comparison's judge reads it (references already written as names)."""

    name: str
    text: str


@dataclass(frozen=True)
class ComparisonFacts:
    """One call of a blind comparison (``cabal judge``): the request and the two sets, in the
    order this call shows them (``first`` is labelled X, ``second`` Y). ``pairs`` lists the
    matched deliverables as (index into ``first`` or None, index into ``second`` or None)."""

    request: str
    first: tuple[ComparedDocument, ...]
    second: tuple[ComparedDocument, ...]
    pairs: tuple[tuple[int | None, int | None], ...]
