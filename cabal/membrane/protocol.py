"""A loaded protocol: frozen values the walker reads, built only by ``loader``.

Every ``next`` is resolved when the protocol loads (a step without one goes to the step after it,
the last to ``$complete``), so the walker never guesses where to go.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cabal.errors import ProtocolRuntimeError
from cabal.membrane.queries import QuerySpec
from cabal.membrane.validation import Expects

COMPLETE = "$complete"
STEP_TYPES = ("ask", "query", "branch", "call_protocol", "create", "update", "set", "each", "complete", "read_file",
              "move_file")  # fmt: skip
FILE_STEP_TYPES = ("read_file", "move_file")  # they need the membrane's file root
AGENT_PROVIDES = ("description", "reasoning")
OUTCOMES = ("complete", "cancelled", "failed")  # failed: stop with the summary as the error


def case_key(value: Any) -> str:
    """How a ``cases:`` key and a condition's value meet: as text, booleans as true/false."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True, kw_only=True)
class MomentSpec:
    """A moment to record when the step is answered (P6): who said what, and why."""

    type: str = "answer"
    agent_provides: tuple[str, ...] = AGENT_PROVIDES
    about: Any = None  # template: an id or a list of ids; default: the step's target
    prose: str | None = None  # template: the prose of steps no agent answers (query, create, update),
    # and of an ask step whose agent_provides is empty (its prose is made of its answers)


@dataclass(frozen=True, kw_only=True)
class Question:
    """One question of an ask step's ``questions:`` list; the step's answer is a mapping."""

    name: str
    ask: str
    expects: Expects
    why_it_matters: str | None = None
    good_answer: str | None = None
    bad_answer: str | None = None
    required: bool = True
    default: Any = None  # the answer when none is given (only for a question that is not required)

    def public(self) -> dict[str, Any]:
        shown = {"name": self.name, "ask": self.ask, "expects": self.expects.public()}
        for key in ("why_it_matters", "good_answer", "bad_answer"):
            if getattr(self, key):
                shown[key] = getattr(self, key)
        return shown


@dataclass(frozen=True, kw_only=True)
class Step:
    id: str
    type: str
    next: str
    line: int | None = None
    moment: MomentSpec | None = None


@dataclass(frozen=True, kw_only=True)
class AskStep(Step):
    question: str
    expects: Expects  # for a ``questions:`` step, the object of all its questions
    questions: tuple[Question, ...] = ()
    for_each: str | None = None  # a template naming a list: the step is answered once per item
    context_enrichment: Mapping[str, Any] | None = None
    store_as: str | None = None  # where the answer lands in the context (default: the step id)
    flatten: bool = False  # each question's answer is also stored under its own name
    item_as: str | None = None  # with for_each: each answer (a mapping) also holds its item under this name
    resolves_from: bool = False  # some expects takes ``from:`` (a list in the context to pick from)

    @property
    def target(self) -> str:
        return self.store_as or self.id


@dataclass(frozen=True, kw_only=True)
class QueryStep(Step):
    query: QuerySpec
    store_as: str


@dataclass(frozen=True, kw_only=True)
class BranchStep(Step):
    condition: str | None = None
    then: str | None = None
    otherwise: str | None = None  # ``else:`` in YAML
    cases: Mapping[str, str] | None = None
    default: str | None = None
    checks: tuple[tuple[str, str], ...] | None = None  # (condition, step): the first that holds wins


@dataclass(frozen=True, kw_only=True)
class CallStep(Step):
    protocol: str
    context: Mapping[str, Any]
    on_complete: str
    store_created_as: str | None = None  # the first node the called protocol prepares lands here


@dataclass(frozen=True, kw_only=True)
class NodeSpec:
    fields: Mapping[str, Any]  # id, node_type, type and the node's fields, as templates
    for_each: str | None = None
    condition: str | None = None
    for_each_inner: str | None = None  # a list read in each item's scope: one node per inner item


@dataclass(frozen=True, kw_only=True)
class LinkSpec:
    type: str  # a link type of the schema, or a template whose value must be one
    source: str  # ``from:`` in YAML
    target: str  # ``to:`` in YAML
    properties: Mapping[str, Any]
    for_each: str | None = None
    condition: str | None = None
    for_each_inner: str | None = None


@dataclass(frozen=True, kw_only=True)
class CreateStep(Step):
    nodes: tuple[NodeSpec, ...]
    links: tuple[LinkSpec, ...]


@dataclass(frozen=True, kw_only=True)
class UpdateStep(Step):
    node: str
    fields: Mapping[str, Any]
    for_each: str | None = None  # update each node of a list (``node`` reads ``{item}``)


@dataclass(frozen=True, kw_only=True)
class SetStep(Step):
    """Names given values from templates (an answer renamed, a value derived from answers)."""

    values: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True)
class EachStep(Step):
    """Runs the steps from ``body`` once per item of ``items``, the item named ``as_name``; the
    body's last step goes back to this step, which goes on to ``next`` after the last item."""

    items: str
    as_name: str
    body: str


@dataclass(frozen=True, kw_only=True)
class ReadFileStep(Step):
    """Reads a UTF-8 text file under the membrane's file root into ``store_as`` (a read, like a query)."""

    path: str  # template
    store_as: str


@dataclass(frozen=True, kw_only=True)
class MoveFileStep(Step):
    """Moves a file under the file root, once the protocol's cluster is committed (the disk
    cannot be rolled back with a failed commit, so the move waits for a successful one)."""

    source: str  # template; ``from:`` in YAML
    target: str  # template; ``to:`` in YAML


@dataclass(frozen=True, kw_only=True)
class CompleteStep(Step):
    """The protocol ends here (a called one returns to its caller), with its own summary."""

    summary: str | None = None
    outcome: str = "complete"


@dataclass(frozen=True, kw_only=True)
class Dependency:
    """Something that must exist before the protocol runs, and what to do when it does not."""

    id: str
    query: QuerySpec | None = None
    exists: str | None = None  # an id template: satisfied when that node exists
    action: str = "fail"  # spawn | prompt | fail
    protocol: str | None = None  # for spawn
    message: str | None = None  # for prompt and fail


@dataclass(frozen=True, kw_only=True)
class Protocol:
    name: str
    source: str
    first: str
    steps: Mapping[str, Step]
    version: str = ""
    description: str = ""
    dependencies: tuple[Dependency, ...] = ()
    summary: str | None = None
    output: CreateStep | None = None  # ``output.cluster``: created when the protocol completes
    context: tuple[str, ...] | None = None  # declared: the names it reads from its context
    provides: frozenset[str] = frozenset()  # the names its steps put into the context
    reads: tuple[Any, ...] = ()  # every name its templates and conditions read (``names.Read``)
    docs: Mapping[str, Any] | None = None  # documentation only (the upstream dialect's keys)
    dialect: str = "cabal"  # or "upstream": read through ``dialect``

    def step(self, step_id: str) -> Step:
        """A step by id; a stored session may name one its protocol file no longer has."""
        try:
            return self.steps[step_id]
        except KeyError:
            raise ProtocolRuntimeError(
                f"protocol {self.name!r} has no step {step_id!r} (was it edited while a session ran?)",
                protocol=self.name,
                step=step_id,
            ) from None
