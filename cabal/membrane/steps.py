"""Walking a session through its steps: one handler per step type.

A ``Walk`` moves a session forward with a set of answers (keyed by step key: the step id, or
``call_step.step_id`` inside a called protocol) until it needs an answer it does not have, the
protocol completes, or the path depends on an answer it cannot use. Two modes:

- apply: check each answer on the path. A valid one is stored (context and answers) and its
  moment prepared; an invalid one is recorded as problems and its value becomes ``PENDING``,
  and the walk goes on, so every answer whose place on the path is certain gets checked in
  one pass. The caller keeps the session only if there were no problems.
- form: answer nothing; collect every ask step on the path with the expects it will be checked
  against, until the path depends on an answer (a branch, a query or a for_each over one).

Create and update steps only prepare: nodes, links and updates accumulate in the session and
are committed in one cluster when the protocol completes (see ``cluster``). Every read the walk
makes (queries, id checks, dependencies) goes through ``SessionView``, which merges what the
session has prepared, so a step sees what earlier steps and called protocols created as if it
were committed (read-your-writes).

File steps need the membrane's file root (``files``): a read_file step reads during the walk,
like a query; a move_file step only plans its move, which the runner does after the commit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from cabal.errors import AnswerProblem, ProtocolProblem, ProtocolRuntimeError, TemplateError
from cabal.membrane import cluster
from cabal.membrane.cluster import BEFORE_FIELD
from cabal.membrane.files import FileRefused, FileRoot
from cabal.membrane.library import ProtocolLibrary
from cabal.membrane.overlay import SessionView
from cabal.membrane.protocol import (
    COMPLETE,
    FILE_STEP_TYPES,
    AskStep,
    BranchStep,
    CallStep,
    CompleteStep,
    CreateStep,
    Dependency,
    EachStep,
    MomentSpec,
    MoveFileStep,
    Protocol,
    QueryStep,
    ReadFileStep,
    SetStep,
    Step,
    UpdateStep,
    case_key,
)
from cabal.membrane.queries import run_query
from cabal.membrane.results import AskView, FileMove
from cabal.membrane.session import Frame, Session
from cabal.membrane.templates import PENDING, Instant, Scope, Unresolved, evaluate, interpolate, to_text
from cabal.membrane.validation import (
    Expects,
    ExpectsField,
    hoist_defs,
    list_of,
    object_of,
    schema_of,
    validate,
    with_choices,
)

MAX_DEPTH = 8  # protocols on the call stack, spawned ones included
MAX_AUTOMATIC_STEPS = 1000  # steps without an answer in one walk: beyond this it is a loop
WAIT = object()  # a handler's "stop here: this step needs an answer"

_MOMENT_TEXT = Expects("string", {"min_length": 1})
_PROVIDED_HELP = {
    "description": "what you did or decided, in your own words (recorded as the moment's prose)",
    "reasoning": "why: the evidence and trade-offs behind the answer",
}


@dataclass(frozen=True)
class Stop:
    reason: str  # waiting | complete | unresolved
    key: str | None = None
    step: Step | None = None


@dataclass(frozen=True)
class FormEntry:
    key: str
    step: AskStep
    expects: Expects
    question: str


def enveloped(step: AskStep) -> bool:
    """Whether the answer comes wrapped with the moment's prose (``{answer, description, ...}``)."""
    return step.moment is not None and bool(step.moment.agent_provides)


def answer_expects(step: AskStep, items: list | None, expects: Expects | None = None) -> Expects:
    """The full answer of an ask step: its expects, in the moment envelope, once per item."""
    expects = expects or step.expects
    if step.moment is not None and enveloped(step):
        provided = [ExpectsField(name, _MOMENT_TEXT, True, _PROVIDED_HELP[name]) for name in step.moment.agent_provides]
        expects = object_of([ExpectsField("answer", expects, True), *provided])
    return list_of(expects, len(items)) if items is not None else expects


def items_of(step: AskStep, scope: Scope) -> list | None:
    return None if step.for_each is None else cluster.items_of(step.for_each, scope)


def choices(step: AskStep, scope: Scope) -> Expects:
    """The step's expects with each ``from:`` list read from the scope (the ids to pick from)."""
    if not step.resolves_from:
        return step.expects

    def ids_of(template: str) -> list[str] | None:
        try:
            value = interpolate(template, scope)
        except (TemplateError, Unresolved):
            return None
        items = [] if value is None else value if isinstance(value, list) else [value]
        return [to_text(item.get("id")) if isinstance(item, Mapping) else to_text(item) for item in items]

    return with_choices(step.expects, ids_of)


def render(template: str, scope: Scope) -> str:
    """Question text: filled where it can be, as written where it cannot (an answer to come)."""
    try:
        return to_text(interpolate(template, scope))
    except (TemplateError, Unresolved):
        return template


class Walk:
    def __init__(
        self,
        session: Session,
        library: ProtocolLibrary,
        graph: Any,
        *,
        answers: Mapping[str, Any] | None = None,
        form: bool = False,
        max_depth: int = MAX_DEPTH,
        files: FileRoot | None = None,
    ) -> None:
        self.session = session
        self.library = library
        self.graph = graph
        self.view = SessionView(graph, session)
        self.answers = answers or {}
        self.form = form
        self.max_depth = max_depth
        self.files = files
        self.problems: list[AnswerProblem] = []
        self.asked: list[FormEntry] = []
        self.consumed: set[str] = set()
        self.now = Instant()  # one instant for the whole call: an id and a link to it never straddle a second

    @property
    def scope(self) -> Scope:
        frames = self.session.frames
        absent = self.library.get(frames[-1].protocol).provides if frames else frozenset()
        return Scope(self.session.context, absent=absent, now=self.now)

    # ------------------------------------------------------------------------ entering

    def enter(self, protocol: Protocol, prefix: str = "", *, collect: str | None = None) -> None:
        """Push a protocol, after checking its dependencies (spawned ones run first)."""
        if len(self.session.frames) >= self.max_depth:
            raise ProtocolRuntimeError(
                f"protocol {protocol.name!r} would be call depth {len(self.session.frames) + 1}; the limit is "
                f"{self.max_depth} (a protocol calling itself?)",
                protocol=protocol.name,
            )
        if self.files is None:  # refused before anything is asked, not halfway through
            file_step = next((step for step in protocol.steps.values() if step.type in FILE_STEP_TYPES), None)
            if file_step is not None:
                self._file_root(protocol, file_step, prefix + file_step.id)
        spawns = [dep for dep in protocol.dependencies if not self._satisfied(dep)]
        for dep in spawns:
            if dep.action == "fail":
                detail = f": {to_text(interpolate(dep.message, self.scope))}" if dep.message else ""
                raise ProtocolRuntimeError(f"missing dependency {dep.id!r}{detail}", protocol=protocol.name)
            if dep.action == "prompt":
                self.session.prompt = to_text(interpolate(dep.message, self.scope))
        self.session.frames.append(Frame(protocol.name, protocol.first, prefix, collect, len(self.session.nodes)))
        # The stack runs last-in first: spawned protocols finish, then this one starts.
        for dep in reversed([d for d in spawns if d.action == "spawn"]):
            assert dep.protocol is not None, "the loader gives every spawn its protocol"
            self.enter(self.library.get(dep.protocol), f"{prefix}{dep.id}.")

    def _satisfied(self, dep: Dependency) -> bool:
        if dep.exists is not None:
            node_id = to_text(interpolate(dep.exists, self.scope, nonempty=True))
            return bool(self.lookup([node_id]))
        assert dep.query is not None, "the loader gives a dependency its exists or its query"
        return bool(run_query(dep.query, self.scope, self.view))

    def lookup(self, ids: list[str]) -> dict[str, dict]:
        """Nodes by id: the graph's, and the ones this session has prepared but not committed."""
        return {node["id"]: node for node in self.view.get_many(ids)}

    # ------------------------------------------------------------------------- walking

    def run(self) -> Stop:
        frames = self.session.frames
        for _ in range(MAX_AUTOMATIC_STEPS):
            frame = frames[-1]
            protocol = self.library.get(frame.protocol)
            if frame.step == COMPLETE:
                try:  # the output and the summary may read an answer this call rejected
                    if protocol.output is not None and not self.form:
                        self._prepare(protocol.output)
                    if len(frames) == 1 and not self.form:
                        self._summarise(protocol)
                except Unresolved:
                    return Stop("unresolved")
                if len(frames) == 1:
                    return Stop("complete")
                frames.pop()
                if frame.collect is not None:  # the caller keeps the first node this protocol prepared
                    nodes = self.session.nodes
                    self.session.context[frame.collect] = nodes[frame.mark] if len(nodes) > frame.mark else None
                continue
            step = protocol.step(frame.step)
            key = frame.prefix + step.id
            try:
                target = getattr(self, f"_{step.type}")(step, key, frame)
            except Unresolved:
                return Stop("unresolved", key, step)
            if target is WAIT:
                return Stop("waiting", key, step)
            if target is not None:
                frame.step = target
        raise ProtocolRuntimeError(
            f"{MAX_AUTOMATIC_STEPS} steps passed without a question or $complete: the protocol loops",
            protocol=self.session.protocol,
        )

    def _summarise(self, protocol: Protocol) -> None:
        """The session's summary: a complete step's, else the protocol's (no answer reads as none)."""
        if self.session.summary is None and protocol.summary:
            self.session.summary = to_text(interpolate(protocol.summary, self.scope))

    # ---------------------------------------------------------------------------- ask

    def _ask(self, step: AskStep, key: str, frame: Frame) -> object:
        scope = self.scope
        items = items_of(step, scope)
        context = self.session.context
        if items == []:  # nothing to answer for: the step's answer is the empty list
            context[step.target] = self.session.answers[key] = []
            return step.next
        expects = answer_expects(step, items, choices(step, scope))
        if self.form:
            if any(entry.key == key for entry in self.asked):
                return WAIT  # a loop back to a step already on the form
            self.asked.append(FormEntry(key, step, expects, render(step.question, scope)))
            context[step.target] = PENDING
            if step.flatten and items is None:
                context.update(dict.fromkeys((q.name for q in step.questions), PENDING))
            return step.next
        if key not in self.answers or key in self.consumed:
            return WAIT
        self.consumed.add(key)
        value, problems = validate(expects, self.answers[key], self.lookup, key)
        if problems:
            self.problems += problems
            context[step.target] = PENDING  # later steps that depend on it stop the walk
            if step.flatten and items is None:
                context.update(dict.fromkeys((q.name for q in step.questions), PENDING))
            return step.next
        self._accept(step, key, frame, value, items)
        return step.next

    def _accept(self, step: AskStep, key: str, frame: Frame, value: Any, items: list | None) -> None:
        session = self.session
        values = value if items is not None else [value]
        accepted = [v["answer"] for v in values] if enveloped(step) else values
        if step.item_as is not None and items is not None:  # each answer keeps the item it answers for
            accepted = [{**one, step.item_as: item} for one, item in zip(accepted, items)]
        answer = accepted if items is not None else accepted[0]
        session.answers[key] = answer
        session.context[step.target] = answer
        if step.flatten and items is None and isinstance(answer, Mapping):
            # Each question's answer also goes by its own name (``{space_id}``, not ``{ask.space_id}``).
            session.context.update({q.name: answer.get(q.name) for q in step.questions})
        if step.moment is None:
            return
        visit = session.visits.get(key, 0) + 1
        session.visits[key] = visit
        for index, envelope in enumerate(values):
            item_index = index if items is not None else None
            one = envelope["answer"] if enveloped(step) else envelope
            targets = one if step.expects.type == "id_list" else [one] if step.expects.type == "id" else None
            locals_ = {"answer": one} | ({"item": items[index], "index": index, "position": index + 1} if items is not None else {})
            prose = envelope.get("description", "") if enveloped(step) else ""
            if not prose and step.moment.prose:  # the moment's prose is made of the answers it names
                prose = render(step.moment.prose, self.scope.with_locals(**locals_))
            fields = {"prose": prose, "reasoning": envelope.get("reasoning") if enveloped(step) else None,
                      "answer": to_text(one)}  # fmt: skip
            self._moment(step.moment, key, frame, visit, item_index, fields, targets, locals_)

    def _moment(self, moment: MomentSpec, key: str, frame: Frame, visit: int, index: int | None,
                fields: dict, about: list[str] | None, locals_: dict) -> None:  # fmt: skip
        session = self.session
        fields = {**fields, "step": key, "protocol": frame.protocol, "session": session.id}
        fields["timestamp"] = to_text(interpolate("{timestamp}", self.scope))
        session.moments.append(
            cluster.moment_record(
                moment,
                node_id=cluster.moment_id(session.id, key, visit, index),
                actor=session.context.get("actor_id"),
                fields=fields,
                about=about,
                locals=locals_,
            )
        )

    def _automatic_moment(self, step: Step, key: str, frame: Frame, default_prose: str, about: list[str] | None,
                          *, extra: dict[str, Any] | None = None) -> None:
        """The moment of a step no agent answers (query, create, update): its prose comes from the protocol."""
        if step.moment is None or self.form:
            return
        prose = render(step.moment.prose, self.scope) if step.moment.prose else default_prose
        visit = self.session.visits.get(key, 0) + 1
        self.session.visits[key] = visit
        self._moment(step.moment, key, frame, visit, None, {"prose": prose, **(extra or {})}, about, {})

    # ------------------------------------------------------------------ automatic steps

    def _query(self, step: QueryStep, key: str, frame: Frame) -> str:
        rows = run_query(step.query, self.scope, self.view)
        self.session.context[step.store_as] = rows
        count = len(rows) if isinstance(rows, list) else int(rows is not None)
        self._automatic_moment(step, key, frame, f"{key} found {count} result(s)", None)
        return step.next

    def _branch(self, step: BranchStep, key: str, frame: Frame) -> str:
        scope = self.scope
        if step.checks is not None:
            for condition, target in step.checks:
                if evaluate(condition, scope):
                    return target
            raise ProtocolRuntimeError(f"branch {key!r}: none of its checks holds", protocol=frame.protocol, step=step.id)
        assert step.condition is not None, "the loader gives a branch without checks its condition"
        value = evaluate(step.condition, scope)
        if step.cases is None:
            chosen = step.then if value else step.otherwise
            assert chosen is not None, "the loader gives a branch without cases its then and else"
            return chosen
        chosen = step.cases.get(case_key(value), step.default)
        if chosen is None:
            raise ProtocolRuntimeError(
                f"branch {key!r}: {step.condition!r} is {value!r}, which no case names, and there is no default",
                protocol=frame.protocol,
                step=step.id,
            )
        return chosen

    def _call_protocol(self, step: CallStep, key: str, frame: Frame) -> None:
        passed = interpolate(dict(step.context), self.scope)
        protocol = self.library.get(step.protocol)
        frame.step = step.on_complete  # where the caller resumes once the callee completes
        self.session.context.update(passed)
        self.enter(protocol, f"{key}.", collect=step.store_created_as)
        return None

    def _create(self, step: CreateStep, key: str, frame: Frame) -> str:
        if self.form:
            return step.next
        before = len(self.session.nodes)
        self._prepare(step)
        made = [n["id"] for n in self.session.nodes[before:] if n.get("node_type") != "moment"]
        made = made or [n["id"] for n in self.session.nodes[before:]]
        self._automatic_moment(step, key, frame, f"{key} created {', '.join(made) or 'links only'}", made or None)
        return step.next

    def _prepare(self, step: CreateStep) -> None:
        nodes, links = cluster.instantiate(step, self.scope)
        self.session.nodes += nodes
        self.session.links += links

    def _update(self, step: UpdateStep, key: str, frame: Frame) -> str:
        if self.form:
            return step.next
        scope = self.scope
        scopes = [scope] if step.for_each is None else list(cluster.each(step.for_each, None, scope))
        updated = []
        before: dict[str, dict[str, Any]] = {}
        for one in scopes:
            node_id = to_text(interpolate(step.node, one, nonempty=True))
            found = self.lookup([node_id]).get(node_id)
            if not found:
                raise ProtocolRuntimeError(f"update step {key!r}: no node {node_id!r} to update", step=step.id)
            # As in a create, a field whose value is None is left out (an optional answer not given),
            # rather than erased from the node.
            values = {k: cluster.storable(interpolate(v, one)) for k, v in step.fields.items()}
            fields = {k: v for k, v in values.items() if v is not None}
            self.session.updates.append({"id": node_id, "fields": fields})
            before.setdefault(node_id, {k: found.get(k) for k in fields})
            updated.append(node_id)
        if updated:
            # The values the update replaces, kept in its moment: an update is the one write that
            # overwrites, and with them the graph still holds every state it went through (a
            # mission forked from an earlier round is that state, rounds/fork.py).
            self._automatic_moment(step, key, frame, f"updated {', '.join(updated)}: {', '.join(step.fields)}", updated,
                                   extra={BEFORE_FIELD: json.dumps(before, sort_keys=True, default=str)})
        return step.next

    def _set(self, step: SetStep, key: str, frame: Frame) -> str:
        scope = self.scope
        values = {}
        for name, template in step.values.items():
            try:
                values[name] = interpolate(template, scope)
            except Unresolved:
                if not self.form:
                    raise
                values[name] = PENDING  # the form goes on: what depends on it will stop it
        self.session.context.update(values)
        return step.next

    def _each(self, step: EachStep, key: str, frame: Frame) -> str:
        items = cluster.items_of(step.items, self.scope)
        done = self.session.loops.get(key, 0)
        if done < len(items):
            self.session.context[step.as_name] = items[done]
            self.session.loops[key] = done + 1
            return step.body
        self.session.loops.pop(key, None)
        return step.next

    # ---------------------------------------------------------------------------- files

    def _read_file(self, step: ReadFileStep, key: str, frame: Frame) -> str:
        """A read, like a query: it runs in every walk (a form's too) and its text feeds templates."""
        protocol = self.library.get(frame.protocol)
        files = self._file_root(protocol, step, key)
        path = to_text(interpolate(step.path, self.scope, nonempty=True))
        try:
            self.session.context[step.store_as] = files.read_text(path, self._planned())
        except FileRefused as exc:
            raise _located(protocol, step, key, "path", str(exc)) from None
        return step.next

    def _move_file(self, step: MoveFileStep, key: str, frame: Frame) -> str:
        """Plans the move (checked now, against the disk and the moves planned before it); the
        runner does it once the cluster is committed, and a dry run never does."""
        if self.form:
            return step.next
        protocol = self.library.get(frame.protocol)
        files = self._file_root(protocol, step, key)
        scope = self.scope
        source, target = (to_text(interpolate(t, scope, nonempty=True)) for t in (step.source, step.target))
        try:
            move = files.plan_move(key, source, target, self._planned())
        except FileRefused as exc:
            raise _located(protocol, step, key, exc.field, str(exc)) from None
        self.session.moves.append(asdict(move))  # plain data: the session is stored as JSON
        return step.next

    def _file_root(self, protocol: Protocol, step: Step, key: str) -> FileRoot:
        if self.files is None:
            raise _located(protocol, step, key, None, f"a {step.type} step needs a file root, and this membrane has "
                           "no file root (Membrane(graph, ..., file_root=FOLDER))")  # fmt: skip
        return self.files

    def _planned(self) -> list[FileMove]:
        return [FileMove(**move) for move in self.session.moves]

    def _complete(self, step: CompleteStep, key: str, frame: Frame) -> str:
        summary = to_text(interpolate(step.summary, self.scope)) if step.summary else None
        if step.outcome == "failed" and not self.form:
            raise ProtocolRuntimeError(summary or f"protocol {frame.protocol!r} stopped at {key!r}",
                                       protocol=frame.protocol, step=step.id)  # fmt: skip
        if self.session.frames[0] is frame and not self.form:
            self.session.outcome = step.outcome
            if summary is not None:
                self.session.summary = summary
        return COMPLETE


def _located(protocol: Protocol, step: Step, key: str, field: str | None, message: str) -> ProtocolRuntimeError:
    """A runtime error told where the step is written (file, line, step key, field)."""
    where = ProtocolProblem(protocol.source, message, step=key, field=field, line=step.line)
    return ProtocolRuntimeError(str(where), protocol=protocol.name, step=step.id)


# ---------------------------------------------------------------------------- describing


def current_ask(session: Session, library: ProtocolLibrary) -> tuple[str, AskStep]:
    frame = session.frames[-1]
    step = library.get(frame.protocol).step(frame.step)
    if not isinstance(step, AskStep):  # sessions are only kept while they wait on a question
        raise ProtocolRuntimeError(f"session {session.id!r} is not waiting on a question", step=frame.step)
    return frame.prefix + step.id, step


def describe_step(session: Session, key: str, step: AskStep) -> AskView:
    """What an agent needs to answer the step: question, expects and the exact answer schema."""
    scope = Scope(session.context)
    items = items_of(step, scope)
    question = render(step.question, scope)
    return AskView(
        id=key,
        question=question,
        expects=step.expects.public(),
        answer_schema=hoist_defs(schema_of(answer_expects(step, items, choices(step, scope)), question or None)),
        context_enrichment=_plain(step.context_enrichment) if step.context_enrichment else None,
        questions=tuple(q.public() for q in step.questions) if step.questions else None,
        items=None if items is None else tuple(
            {"index": i, "item": item,
             "question": render(step.question, scope.with_locals(item=item, index=i, position=i + 1))}
            for i, item in enumerate(items)
        ),
        moment={"type": step.moment.type, "agent_provides": list(step.moment.agent_provides)}
        if step.moment is not None else None,
    )


def _plain(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """JSON-ready: results go to agents and over MCP, so tuples become lists."""
    return {key: list(value) if isinstance(value, tuple) else value for key, value in mapping.items()}


def form_schema(title: str, entries: list[FormEntry]) -> dict[str, Any]:
    """One JSON Schema for every answer on the form, keyed by step key."""
    schema = {
        "type": "object",
        "title": title,
        "properties": {entry.key: schema_of(entry.expects, entry.question or None) for entry in entries},
        "required": [entry.key for entry in entries],
        "additionalProperties": False,
    }
    return hoist_defs(schema)
