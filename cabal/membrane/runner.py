"""``Membrane``: runs protocols as sessions, one step at a time or as one form, and commits clusters.

Every call returns a typed value (``MembraneResult``, ``Form``, ``Cluster``, ``Created``; see
``results``) or raises a ``CabalError``: an unknown protocol or session (``ResourceNotFound``),
a session that is not active, a missing dependency, a cluster the graph refuses.

A rejected answer is not an error. Answers are all-or-nothing per call: if any answer of a call
is wrong, the session stays where it was and the result's ``problems`` list every problem at
once, so the agent fixes only what was wrong.

Files: a membrane made with a ``file_root`` runs ``read_file`` and ``move_file`` steps on the
files under it (``files``); without one, a protocol with such a step is refused when it starts.
Moves wait for the cluster: a commit checks them again, writes the graph, and only then moves
the files; a move that fails after the write is reported in ``Created.file_errors``. A dry run
(``commit=False``, ``prepare``) moves nothing: its ``Cluster`` carries the planned moves, and
``commit`` of that cluster does them after writing it, as ``run`` would have.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from cabal.errors import AnswerProblem, AnswerRejected, ProtocolRuntimeError, ResourceNotFound
from cabal.limits import answer_problems
from cabal.membrane import cluster
from cabal.membrane.files import FileRefused, FileRoot
from cabal.membrane.library import ProtocolLibrary
from cabal.membrane.overlay import SessionView
from cabal.membrane.protocol import AskStep, Protocol
from cabal.membrane.queries import ENRICHMENT_KINDS, run_enrichment
from cabal.membrane.results import Cluster, Created, FileMove, Form, MembraneResult
from cabal.membrane.session import ABORTED, ACTIVE, COMPLETE, Session, SessionStore
from cabal.membrane.steps import MAX_DEPTH, Stop, Walk, current_ask, describe_step, form_schema
from cabal.membrane.templates import Scope, interpolate, to_text
from cabal.membrane.validation import describe


class Membrane:
    def __init__(
        self, graph: Any, protocol_dirs: Iterable[str | Path] = (), *, max_depth: int = MAX_DEPTH,
        file_root: str | Path | None = None,
    ) -> None:
        self.graph = graph
        self.library = ProtocolLibrary(protocol_dirs)
        self.sessions = SessionStore(graph)
        self.max_depth = max_depth
        self.files = FileRoot(file_root) if file_root is not None else None

    # --------------------------------------------------------------------- protocols

    def list_protocols(self) -> list[dict]:
        return self.library.describe()

    def load_string(self, yaml_text: str, source: str = "<string>") -> Protocol:
        """Add a protocol from YAML text (it overrides a file of the same name)."""
        return self.library.add_string(yaml_text, source)

    # ----------------------------------------------------------------- step by step

    def start(self, protocol: str, context: Mapping[str, Any] | None = None, *,
              session_id: str | None = None) -> MembraneResult:
        """Start a session (or, for a ``session_id`` already stored, report where it is)."""
        existing = self.sessions.load(session_id) if session_id else None
        if existing is not None:
            return self._state_of(existing)
        session = self._new_session(protocol, context, session_id)
        return self._advance(session, {}, mode="step")

    def continue_session(self, session_id: str, answer: Any) -> MembraneResult:
        """Answer the step the session waits on."""
        session = self._active_session(session_id)
        key, _ = current_ask(session, self.library)
        return self._advance(session, {key: answer}, mode="step")

    def abort(self, session_id: str) -> MembraneResult:
        """Abandon a session: nothing it prepared is written."""
        session = self._active_session(session_id)
        session.status = ABORTED
        self.sessions.save(session)
        return MembraneResult(status=ABORTED, session_id=session.id)

    def enrich(self, session_id: str, kind: str, target: str) -> MembraneResult:
        """Context enrichment (P5): a query around ``target`` while the agent answers an ask step."""
        session = self._active_session(session_id)
        key, step = current_ask(session, self.library)
        allowed = step.context_enrichment["allows"] if step.context_enrichment else ENRICHMENT_KINDS
        if kind not in allowed:
            raise ProtocolRuntimeError(f"step {key!r} allows enrichment {', '.join(allowed)}, not {kind!r}")
        view = SessionView(self.graph, session)  # what the session has prepared is there too
        enrichment = {"type": kind, "target": target, "results": run_enrichment(kind, target, view)}
        return self._active(session, enrichment=enrichment)

    # ------------------------------------------------------------------ protocol as form

    def form(self, session_id: str) -> Form:
        """The JSON Schema of every answer the session needs up to where the path depends on one."""
        return self._form(self._active_session(session_id))

    def form_for(self, protocol: str, context: Mapping[str, Any] | None = None, *,
                 session_id: str | None = None) -> Form:
        """The form of a protocol not started yet (the tool schema for a ``run`` call)."""
        return self._form(self._new_session(protocol, context, session_id))

    def submit(self, session_id: str, answers: Mapping[str, Any]) -> MembraneResult:
        """Answer many steps at once (keys: step keys of the form); every problem comes back together."""
        return self._advance(self._active_session(session_id), answers, mode="submit")

    def run(
        self,
        protocol: str,
        context: Mapping[str, Any] | None,
        answers: Mapping[str, Any],
        *,
        session_id: str | None = None,
        commit: bool = True,
        persist: bool = True,
    ) -> MembraneResult:
        """Start and answer a whole protocol in one call.

        ``persist=False`` makes it a pure one-shot: no session is read or stored, whatever the
        outcome (a deterministic ``session_id`` still makes the moment ids replayable).

        Completing in one go stores no session node: the cluster is the only write (none with
        ``commit=False``, which returns it as ``cluster`` for ``commit``). A missing or wrong
        answer returns an active result with every problem; the session is then stored,
        unadvanced, so the same ``session_id`` can be run again or continued.
        """
        session = self.sessions.load(session_id) if session_id and persist else None
        if session is not None and session.status != ACTIVE:
            return self._state_of(session)
        if session is None:
            session = self._new_session(protocol, context, session_id)

        def restart() -> Session:
            return self._new_session(protocol, context, session_id)

        return self._advance(session, answers, mode="run", commit=commit, persist=persist,
                             restart=None if persist else restart)

    def prepare(self, protocol: str, context: Mapping[str, Any] | None, answers: Mapping[str, Any], *,
                session_id: str) -> Cluster:
        """A pure dry run: the cluster the protocol would write with these answers.

        Reads and stores no session. Raises ``AnswerRejected`` with every problem when an
        answer is wrong or missing, so the caller can hand them to whoever answered.
        """
        result = self.run(protocol, context, answers, session_id=session_id, commit=False, persist=False)
        if result.problems:
            raise AnswerRejected(list(result.problems))
        assert result.cluster is not None  # a complete dry run always carries its cluster
        return result.cluster

    def commit(self, clusters: Iterable[Cluster]) -> Created:
        """Commit prepared clusters as ONE write: all of them or nothing; then their file moves,
        in order (``Created.file_errors`` lists those that failed)."""
        return self._commit(cluster.merge(clusters))

    # --------------------------------------------------------------------- internals

    def _new_session(self, protocol_name: str, context: Mapping[str, Any] | None, session_id: str | None) -> Session:
        protocol = self.library.get(protocol_name)
        session = Session.new(protocol.name, dict(context or {}), session_id)
        self._walk(session).enter(protocol)
        return session

    def _active_session(self, session_id: str) -> Session:
        session = self.sessions.load(session_id)
        if session is None:
            raise ResourceNotFound("session", str(session_id))
        if session.status != ACTIVE:
            raise ProtocolRuntimeError(f"session {session_id!r} is {session.status}, not active", protocol=session.protocol)
        return session

    def _walk(self, session: Session, **options: Any) -> Walk:
        return Walk(session, self.library, self.graph, max_depth=self.max_depth, files=self.files, **options)

    def _advance(
        self, session: Session, answers: Mapping[str, Any], *, mode: str, commit: bool = True, persist: bool = True,
        restart: Callable[[], Session] | None = None,
    ) -> MembraneResult:
        """Walk with the answers; keep the result only if every answer was right.

        mode ``step``/``submit``: advance as far as the answers go. ``run``: the answers must
        reach the end; a question left unanswered is one more problem.
        """
        if not isinstance(answers, Mapping):
            raise ProtocolRuntimeError(f"answers must be a mapping of step key to answer, got {type(answers).__name__}")
        # A new session first runs its automatic steps up to its first question, so the state
        # kept when answers are rejected always waits on a question (a stored one already does).
        if self._walk(session).run().reason == "complete":
            return self._complete(session, commit=commit)
        # The state to keep if an answer is rejected. A one-shot run that stores nothing can
        # rebuild it on that (rare) path instead of copying the session on every run.
        before = session.copy() if restart is None else None
        # Answers come from outside (a model, an MCP client, a user): depth, size and characters
        # are checked before anything walks them, and a problem there is a problem like any other.
        problems = answer_problems(answers)
        if not problems:
            walk = self._walk(session, answers=answers)
            stop = walk.run()
            problems = list(walk.problems)
            if stop.reason == "waiting" and stop.key not in answers and (mode == "run" or (problems and mode == "submit")):
                assert stop.key is not None and isinstance(stop.step, AskStep), "only a question waits"
                problems.append(AnswerProblem(stop.key, f"no answer given; expected {describe(stop.step.expects)}"))
            if stop.reason == "unresolved" and not problems:  # only a rejected answer is ever PENDING
                raise ProtocolRuntimeError(f"step {stop.key!r} depends on a value the session does not have")
        if problems:
            if before is None:
                assert restart is not None, "the state before is left out only when it can be rebuilt"
                before = restart()
                self._walk(before).run()
            elif not before.stored:
                self.sessions.create(before)  # so the same session id can be run again or continued
            return self._active(before, problems=problems)
        if stop.reason == "complete":
            return self._complete(session, commit=commit)
        if session.stored:
            self.sessions.save(session)
        else:
            self.sessions.create(session)
        return self._active(session)

    def _form(self, session: Session) -> Form:
        walk = self._walk(session, form=True)
        stop: Stop = walk.run()
        return Form(session_id=session.id, schema=form_schema(session.protocol, walk.asked),
                    steps=tuple(entry.key for entry in walk.asked), completes=stop.reason == "complete")

    def _active(self, session: Session, *, problems: list[AnswerProblem] | None = None,
                enrichment: Mapping[str, Any] | None = None) -> MembraneResult:
        key, step = current_ask(session, self.library)
        return MembraneResult(status=ACTIVE, session_id=session.id, protocol=session.frames[-1].protocol,
                              step=describe_step(session, key, step), problems=tuple(problems or ()),
                              prompt=session.prompt, enrichment=enrichment)

    def _complete(self, session: Session, *, commit: bool) -> MembraneResult:
        nodes, links = cluster.build(session.nodes, session.links, session.moments, session.context)
        summary = self._summary(session)
        session.status, session.summary = COMPLETE, summary
        updates = list(session.updates)
        if session.stored:  # "complete" is written in the same round trip as the cluster
            updates.append(self.sessions.update_row(session))
        prepared = Cluster(tuple(nodes), tuple(links), tuple(updates), tuple(FileMove(**m) for m in session.moves))
        if commit:
            return MembraneResult(status=COMPLETE, session_id=session.id, summary=summary,
                                  created=self._commit(prepared))
        return MembraneResult(status=COMPLETE, session_id=session.id, summary=summary, cluster=prepared)

    def _commit(self, prepared: Cluster) -> Created:
        if prepared.moves:
            self._check_moves(prepared.moves)
        counts = {"nodes": 0, "links": 0}
        if prepared.writes_graph:
            counts = self.graph.create_cluster(list(prepared.nodes), list(prepared.links),
                                               updates=list(prepared.updates) or None)
        # Only now, the commit done: a move the graph never heard of would be work nobody recorded.
        # _check_moves refused moves without a file root above.
        moved, errors = self.files.apply(prepared.moves) if prepared.moves and self.files is not None else ((), ())
        return Created(nodes=counts["nodes"], links=counts["links"], moved=moved, file_errors=errors)

    def _check_moves(self, moves: tuple[FileMove, ...]) -> None:
        """Before anything is written: a move that cannot be done stops the commit."""
        if self.files is None:
            raise ProtocolRuntimeError(f"the cluster moves files (step {moves[0].step!r}), and this membrane has no "
                                       "file root (Membrane(graph, ..., file_root=FOLDER)); nothing was written")
        try:
            self.files.check_moves(moves)
        except FileRefused as exc:
            raise ProtocolRuntimeError(f"{exc}; nothing was written") from None

    def _summary(self, session: Session) -> str:
        if session.summary is not None:  # the walk's: a complete step's own, or the protocol's
            return session.summary
        template = self.library.get(session.protocol).summary
        return to_text(interpolate(template, Scope(session.context))) if template else ""

    def _state_of(self, session: Session) -> MembraneResult:
        """A stored session as a result, without changing it (a replayed start or run)."""
        if session.status == ACTIVE:
            return self._active(session)
        if session.status == COMPLETE:
            return MembraneResult(status=COMPLETE, session_id=session.id, summary=session.summary or "", replayed=True)
        return MembraneResult(status=session.status, session_id=session.id)
