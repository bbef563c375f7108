"""Which names each step of a protocol can read: the answers and results of the steps before it.

A template or condition reads a name that comes from one of four places: an earlier step (an
ask step's answer, a query's results, a file's text, a set step's values, a called protocol's
answers), a loop variable (``item``, ``index``, ``position`` inside ``for_each``; ``answer`` in
an ask step's moment), a built-in (``timestamp``), or the context the protocol starts with.

``flow`` computes, for every step, the names some path from the start may have provided before
it (a forward "may" analysis over the step graph, loops included). ``unprovided`` then lists
each read of a name none of those places provides, with where it is read, so
``cabal protocols check`` reports a misspelt ``{notez}`` before anything runs. The context is
what the protocol declares under ``context:``; one that declares nothing reads every name no
step provides from its context (``implicit_context``), which is what the runtime does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cabal.membrane.protocol import (
    COMPLETE,
    AskStep,
    BranchStep,
    CallStep,
    EachStep,
    QueryStep,
    ReadFileStep,
    SetStep,
    Step,
)

LOOP = frozenset({"item", "index", "position"})  # inside for_each: the item, 0-based and 1-based
INNER = LOOP | {"inner_item", "inner_index"}  # inside for_each_inner as well
ANSWER = frozenset({"answer"})  # an ask step's moment (about, prose): the answer just given
BUILTINS = frozenset({"timestamp"})
ALWAYS = frozenset({"actor_id"})  # who speaks: every session that records a moment has one
ANYTHING = "*"  # a called protocol whose names are unknown (it does not load): anything may follow


@dataclass(frozen=True)
class Read:
    """One name read by a template or condition, and where."""

    name: str
    step: str | None  # None: protocol level (dependencies before the start, summary after the end)
    field: str
    line: int | None
    locals: frozenset[str] = frozenset()
    whole: bool = False  # the value is exactly this reference (it keeps its type: an id, a list)
    after: bool = False  # read once the step has run (an ask step's moment: its answer counts)


def provided_by(step: Step, callee_names: Callable[[str], frozenset[str] | None] | None = None) -> set[str]:
    """The names a step puts into the context when it runs."""
    if isinstance(step, AskStep):
        names = {step.target}
        if step.flatten:
            names |= {question.name for question in step.questions}
        return names
    if isinstance(step, (QueryStep, ReadFileStep)):
        return {step.store_as}
    if isinstance(step, SetStep):
        return set(step.values)
    if isinstance(step, EachStep):
        return {step.as_name}
    if isinstance(step, CallStep):
        names = set(step.context) | ({step.store_created_as} if step.store_created_as else set())
        if callee_names is not None:
            called = callee_names(step.protocol)
            names |= {ANYTHING} if called is None else set(called)
        return names
    return set()


def targets(step: Step) -> list[tuple[str, str]]:
    """(field, step id) for every place a step can go next."""
    if isinstance(step, BranchStep):
        if step.checks is not None:
            return [(f"checks.{i}", target) for i, (_, target) in enumerate(step.checks)]
        if step.cases is not None:
            found = [(f"cases.{key}", target) for key, target in step.cases.items()]
            return found + ([("default", step.default)] if step.default else [])
        return [(field, target) for field, target in (("then", step.then), ("else", step.otherwise)) if target is not None]
    if isinstance(step, CallStep):
        return [("on_complete", step.on_complete)]
    if isinstance(step, EachStep):
        return [("do", step.body), ("next", step.next)]
    if step.type == "complete":
        return []
    return [("next", step.next)]


def flow(first: str, steps: Mapping[str, Step], start: Iterable[str] = (),
         callee_names: Callable[[str], frozenset[str] | None] | None = None) -> dict[str, frozenset[str]]:  # fmt: skip
    """For each step reachable from ``first``: the names some path may have provided before it."""
    if first not in steps:  # the first step could not be read: no path is known
        return {}
    given = {step_id: provided_by(step, callee_names) for step_id, step in steps.items()}
    before: dict[str, set[str]] = {first: set(start)}
    pending = [first]
    while pending:
        step_id = pending.pop()
        after = before[step_id] | given[step_id]
        for _, target in targets(steps[step_id]):
            if target == COMPLETE or target not in steps:
                continue
            if target not in before:
                before[target] = set(after)
                pending.append(target)
            elif not after <= before[target]:  # a new path brings names: look again downstream
                before[target] |= after
                pending.append(target)
    return {step_id: frozenset(names) for step_id, names in before.items()}


def all_provided(steps: Mapping[str, Step]) -> frozenset[str]:
    """Every name some step of the protocol answers or computes (what a call passes on aside:
    that is the callee's context, not one of this protocol's answers)."""
    names: set[str] = set()
    for step in steps.values():
        names |= set() if isinstance(step, CallStep) else provided_by(step)
    return frozenset(names)


def implicit_context(protocol: Any) -> frozenset[str]:
    """The names a protocol reads where no earlier step provides them: what its context must hold."""
    if protocol.first not in protocol.steps:
        return frozenset()
    return frozenset(read.name for read in unprovided(protocol.reads, protocol.steps, protocol.first, ()))


def unprovided(
    reads: Iterable[Read],
    steps: Mapping[str, Step],
    first: str,
    context: Iterable[str],
    *,
    start: Iterable[str] = (),
    callee_names: Callable[[str], frozenset[str] | None] | None = None,
) -> list[Read]:
    """Each read of a name that nothing provides where it is read."""
    declared = frozenset(context) | ALWAYS | BUILTINS
    before = flow(first, steps, start, callee_names)
    everything = frozenset().union(*before.values(), *(provided_by(s, callee_names) for s in steps.values()))
    found = []
    for read in reads:
        if read.name in declared or read.name in read.locals:
            continue
        if read.step is None:  # protocol level: dependencies run before any step, the summary after all
            available = frozenset(start) if read.field.startswith("dependencies") else everything
        elif read.step in before:
            available = before[read.step]
            if read.after:
                available = available | provided_by(steps[read.step], callee_names)
        else:
            # A step no path reaches (yet): only a name no step provides at all is certain to be
            # wrong there; whether the others come early enough depends on how it will be reached.
            available = everything
        if ANYTHING in available or read.name in available:
            continue
        found.append(read)
    return found
