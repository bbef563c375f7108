"""``Membrane``: runs protocols as sessions, one step at a time or as one form, and commits clusters.

Every public call returns a dict with ``status`` (``active``, ``complete``, ``aborted`` or
``error``) and ``session_id``:

- active: ``step`` (id, type, question, expects, answer_schema, context_enrichment, ...); after
  rejected answers also ``errors`` (``[{path, message}]``) and ``error`` (the same as text),
  with the session still on the step it was on. ``prompt`` when a dependency asked for one.
- complete: ``created`` (``{"nodes": n, "links": m}`` as the graph counted them) and
  ``summary``; with ``run(..., commit=False)`` the prepared ``cluster`` instead of a write.
- error: ``error``, a message (``"... not found"`` for an unknown protocol or session).

Answers are all-or-nothing per call: if any answer of a call is wrong, the session stays
where it was and every problem found comes back at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from cabal.errors import AnswerProblem, AnswerRejected, CabalError, ProtocolRuntimeError, ResourceNotFound
from cabal.membrane import cluster
from cabal.membrane.library import ProtocolLibrary
from cabal.membrane.overlay import SessionView
from cabal.membrane.protocol import Protocol
from cabal.membrane.queries import ENRICHMENT_KINDS, run_enrichment
from cabal.membrane.session import ABORTED, ACTIVE, COMPLETE, Session, SessionStore
from cabal.membrane.steps import MAX_DEPTH, Stop, Walk, current_ask, describe_step, form_schema
from cabal.membrane.templates import Scope, interpolate, to_text
from cabal.membrane.validation import describe


class Membrane:
    def __init__(
        self, graph: Any, protocol_dirs: Iterable[str | Path] = (), *, max_depth: int = MAX_DEPTH
    ) -> None:
        self.graph = graph
        self.library = ProtocolLibrary(protocol_dirs)
        self.sessions = SessionStore(graph)
        self.max_depth = max_depth

    # --------------------------------------------------------------------- protocols

    def list_protocols(self) -> list[dict]:
        return self.library.describe()

    def load_string(self, yaml_text: str, source: str = "<string>") -> Protocol:
        """Add a protocol from YAML text (it overrides a file of the same name)."""
        return self.library.add_string(yaml_text, source)

    # ----------------------------------------------------------------- step by step

    def start(self, protocol: str, context: Mapping[str, Any] | None = None, *, session_id: str | None = None) -> dict:
        """Start a session (or, for a ``session_id`` already stored, report where it is)."""

        def go() -> dict:
            existing = self.sessions.load(session_id) if session_id else None
            if existing is not None:
                return self._state_of(existing)
            session = self._new_session(protocol, context, session_id)
            return self._advance(session, {}, mode="step")

        return self._guarded(go, session_id)

    def continue_session(self, session_id: str, answer: Any) -> dict:
        """Answer the step the session waits on."""

        def go() -> dict:
            session = self._active_session(session_id)
            key, _ = current_ask(session, self.library)
            return self._advance(session, {key: answer}, mode="step")

        return self._guarded(go, session_id)

    def abort(self, session_id: str) -> dict:
        def go() -> dict:
            session = self._active_session(session_id)
            session.status = ABORTED
            self.sessions.save(session)
            return {"status": ABORTED, "session_id": session.id}

        return self._guarded(go, session_id)

    def enrich(self, session_id: str, kind: str, target: str) -> dict:
        """Context enrichment (P5): a query around ``target`` while the agent answers an ask step."""

        def go() -> dict:
            session = self._active_session(session_id)
            key, step = current_ask(session, self.library)
            allowed = step.context_enrichment["allows"] if step.context_enrichment else ENRICHMENT_KINDS
            if kind not in allowed:
                raise ProtocolRuntimeError(f"step {key!r} allows enrichment {', '.join(allowed)}, not {kind!r}")
            result = self._active(session)
            view = SessionView(self.graph, session)  # what the session has prepared is there too
            result["enrichment"] = {"type": kind, "target": target, "results": run_enrichment(kind, target, view)}
            return result

        return self._guarded(go, session_id)

    # ------------------------------------------------------------------ protocol as form

    def form(self, session_id: str) -> dict:
        """The JSON Schema of every answer the session needs up to where the path depends on one.

        ``schema`` is the form; ``steps`` its step keys in order; ``completes`` says whether
        answering all of it finishes the protocol.
        """
        return self._guarded(lambda: self._form(self._active_session(session_id)), session_id)

    def form_for(self, protocol: str, context: Mapping[str, Any] | None = None, *, session_id: str | None = None) -> dict:
        """The form of a protocol not started yet (the tool schema for a ``run`` call)."""
        return self._guarded(lambda: self._form(self._new_session(protocol, context, session_id)), session_id)

    def submit(self, session_id: str, answers: Mapping[str, Any]) -> dict:
        """Answer many steps at once (keys: step keys of the form); every error comes back together."""
        return self._guarded(lambda: self._advance(self._active_session(session_id), answers, mode="submit"), session_id)

    def run(
        self,
        protocol: str,
        context: Mapping[str, Any] | None,
        answers: Mapping[str, Any],
        *,
        session_id: str | None = None,
        commit: bool = True,
        persist: bool = True,
    ) -> dict:
        """Start and answer a whole protocol in one call.

        ``persist=False`` makes it a pure one-shot: no session is read or stored, whatever the
        outcome (the round engine's dry runs; a deterministic ``session_id`` still makes the
        moment ids replayable).

        Completing in one go stores no session node: the cluster is the only write (none with
        ``commit=False``, which returns it as ``cluster`` for ``commit_many``). A missing or
        wrong answer returns status active with every problem; the session is then stored,
        unadvanced, so the same ``session_id`` can be run again or continued.
        """

        def go() -> dict:
            session = self.sessions.load(session_id) if session_id and persist else None
            if session is not None and session.status != ACTIVE:
                return self._state_of(session)
            if session is None:
                session = self._new_session(protocol, context, session_id)

            def restart() -> Session:
                return self._new_session(protocol, context, session_id)

            return self._advance(session, answers, mode="run", commit=commit, persist=persist,
                                 restart=None if persist else restart)

        return self._guarded(go, session_id)

    def commit_many(self, results: Iterable[Mapping[str, Any]]) -> dict:
        """Commit the prepared clusters of several ``run(..., commit=False)`` calls as ONE write."""
        results = list(results)

        def go() -> dict:
            for result in results:
                if result.get("status") != COMPLETE or "cluster" not in result:
                    raise ProtocolRuntimeError(
                        f"commit_many takes completed run(..., commit=False) results; "
                        f"{result.get('session_id')!r} is {result.get('status')!r}"
                    )
            merged = cluster.merge([result["cluster"] for result in results])
            created = self._commit(merged)
            return {"status": COMPLETE, "session_id": None, "created": created,
                    "sessions": [r.get("session_id") for r in results]}  # fmt: skip

        return self._guarded(go, None)

    # --------------------------------------------------------------------- internals

    def _guarded(self, call: Callable[[], dict], session_id: str | None) -> dict:
        """Every failure the caller can act on comes back as a status-error dict, never a raise."""
        try:
            return call()
        except CabalError as exc:
            return {"status": "error", "session_id": session_id, "error": str(exc)}

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
        return Walk(session, self.library, self.graph, max_depth=self.max_depth, **options)

    def _advance(
        self, session: Session, answers: Mapping[str, Any], *, mode: str, commit: bool = True, persist: bool = True,
        restart: Callable[[], Session] | None = None,
    ) -> dict:
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
        walk = self._walk(session, answers=answers)
        stop = walk.run()
        problems = list(walk.problems)
        if stop.reason == "waiting" and stop.key not in answers and (mode == "run" or (problems and mode == "submit")):
            problems.append(AnswerProblem(stop.key, f"no answer given; expected {describe(stop.step.expects)}"))
        if stop.reason == "unresolved" and not problems:  # only a rejected answer is ever PENDING
            raise ProtocolRuntimeError(f"step {stop.key!r} depends on a value the session does not have")
        if problems:
            if before is None:
                before = restart()
                self._walk(before).run()
            elif not before.stored:
                self.sessions.create(before)  # so the same session id can be run again or continued
            return self._active(before, problems)
        if stop.reason == "complete":
            return self._complete(session, commit=commit)
        if session.stored:
            self.sessions.save(session)
        else:
            self.sessions.create(session)
        return self._active(session)

    def _form(self, session: Session) -> dict:
        walk = self._walk(session, form=True)
        stop: Stop = walk.run()
        return {
            "status": ACTIVE,
            "session_id": session.id,
            "schema": form_schema(session.protocol, walk.asked),
            "steps": [entry.key for entry in walk.asked],
            "completes": stop.reason == "complete",
        }

    def _active(self, session: Session, problems: list[AnswerProblem] | None = None) -> dict:
        key, step = current_ask(session, self.library)
        result: dict[str, Any] = {
            "status": ACTIVE,
            "session_id": session.id,
            "protocol": session.frames[-1].protocol,
            "step": describe_step(session, key, step),
        }
        if problems:
            result["errors"] = [{"path": p.path, "message": p.message} for p in problems]
            result["error"] = AnswerRejected(problems).feedback()
        if session.prompt:
            result["prompt"] = session.prompt
        return result

    def _complete(self, session: Session, *, commit: bool) -> dict:
        nodes, links = cluster.build(session.nodes, session.links, session.moments, session.context)
        summary = self._summary(session)
        session.status, session.summary = COMPLETE, summary
        updates = list(session.updates)
        if session.stored:  # "complete" is written in the same round trip as the cluster
            updates.append(self.sessions.update_row(session))
        prepared = {"nodes": nodes, "links": links, "updates": updates}
        result: dict[str, Any] = {"status": COMPLETE, "session_id": session.id, "summary": summary}
        if commit:
            result["created"] = self._commit(prepared)
        else:
            result["created"] = {"nodes": 0, "links": 0}
            result["cluster"] = prepared
        return result

    def _commit(self, prepared: Mapping[str, list]) -> dict:
        if not (prepared["nodes"] or prepared["links"] or prepared["updates"]):
            return {"nodes": 0, "links": 0}
        return self.graph.create_cluster(prepared["nodes"], prepared["links"], updates=prepared["updates"] or None)

    def _summary(self, session: Session) -> str:
        if session.summary is not None:  # the walk's: a complete step's own, or the protocol's
            return session.summary
        template = self.library.get(session.protocol).summary
        return to_text(interpolate(template, Scope(session.context))) if template else ""

    def _state_of(self, session: Session) -> dict:
        """A stored session as a result, without changing it (a replayed start or run)."""
        if session.status == ACTIVE:
            return self._active(session)
        result: dict[str, Any] = {"status": session.status, "session_id": session.id}
        if session.status == COMPLETE:
            result.update(summary=session.summary or "", created={"nodes": 0, "links": 0}, replayed=True)
        return result
