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
STEP_TYPES = ("ask", "query", "branch", "call_protocol", "create", "update")
AGENT_PROVIDES = ("description", "reasoning")


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
    prose: str | None = None  # template, for steps no agent answers (query, update)


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


@dataclass(frozen=True, kw_only=True)
class QueryStep(Step):
    query: QuerySpec
    store_as: str


@dataclass(frozen=True, kw_only=True)
class BranchStep(Step):
    condition: str
    then: str | None = None
    otherwise: str | None = None  # ``else:`` in YAML
    cases: Mapping[str, str] | None = None
    default: str | None = None


@dataclass(frozen=True, kw_only=True)
class CallStep(Step):
    protocol: str
    context: Mapping[str, Any]
    on_complete: str


@dataclass(frozen=True, kw_only=True)
class NodeSpec:
    fields: Mapping[str, Any]  # id, node_type, type and the node's fields, as templates
    for_each: str | None = None
    condition: str | None = None


@dataclass(frozen=True, kw_only=True)
class LinkSpec:
    type: str
    source: str  # ``from:`` in YAML
    target: str  # ``to:`` in YAML
    properties: Mapping[str, Any]
    for_each: str | None = None
    condition: str | None = None


@dataclass(frozen=True, kw_only=True)
class CreateStep(Step):
    nodes: tuple[NodeSpec, ...]
    links: tuple[LinkSpec, ...]


@dataclass(frozen=True, kw_only=True)
class UpdateStep(Step):
    node: str
    fields: Mapping[str, Any]


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
