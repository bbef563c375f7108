"""The doctor (P8): find gaps in the graph, let each gap's skill choose a protocol, run it through the membrane.

For each gap (``gaps.find_gaps``) the doctor loads the skill of the gap's domain, asks it which
protocol fits (``Skill.select_protocol``: the first protocol of the row tagged with the gap),
and runs that protocol as a membrane session: it shows the answerer the session's form, submits
the answers, and on rejected answers shows the problems and asks again, up to
``max_attempts`` times in a row. A session that cannot finish is aborted, so it writes nothing.
After a protocol completes, the doctor runs the gap's check again: a fix that leaves the gap
open is reported as such, never as a success.

    doctor = Doctor(graph)
    for treatment in doctor.plan():          # what would run, without writing anything
        print(treatment.gap.description, "->", treatment.protocol)
    outcomes = doctor.fix(ModelAnswerer(model))   # or ScriptedAnswers(...), or any function
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cabal.doctor.answerers import Answerer, AnswerRequest
from cabal.doctor.gaps import Gap, find_gaps, is_open
from cabal.errors import AnswerProblem, CabalError
from cabal.membrane import Membrane
from cabal.skills import Skill, load_skill

__all__ = ["DOCTOR_ACTOR", "Doctor", "Outcome", "Treatment"]

DOCTOR_ACTOR = "actor-doctor"
MAX_ATTEMPTS = 3


@dataclass(frozen=True)
class Treatment:
    """A gap, the skill of its domain and the protocol that skill chose (None, with a reason, if none)."""

    gap: Gap
    skill: Skill | None
    protocol: str | None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"gap": self.gap.to_dict(), "skill": self.skill.name if self.skill else None,
                "protocol": self.protocol, "reason": self.reason}  # fmt: skip


@dataclass(frozen=True)
class Outcome:
    """What treating one gap did. ``status``: complete, failed or skipped; ``closed``: the gap query agrees."""

    treatment: Treatment
    status: str
    closed: bool = False
    session_id: str | None = None
    summary: str = ""
    created: Mapping[str, int] = field(default_factory=dict)  # as the graph counted them
    nodes: tuple[dict, ...] = ()  # {id, node_type, type} of each node the protocol wrote, moments too
    error: str | None = None
    attempts: int = 0

    @property
    def gap(self) -> Gap:
        return self.treatment.gap

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.treatment.to_dict(),
            "status": self.status,
            "closed": self.closed,
            "session_id": self.session_id,
            "summary": self.summary,
            "created": dict(self.created),
            "nodes": [dict(n) for n in self.nodes],
            "error": self.error,
            "attempts": self.attempts,
        }


class Doctor:
    """Finds gaps and closes them through the membrane, one protocol session per gap."""

    def __init__(
        self,
        graph: Any,
        *,
        membrane: Membrane | None = None,
        protocol_dirs: Iterable[str | Path] = (),
        skill_dirs: Iterable[str | Path] = (),
        actor_id: str = DOCTOR_ACTOR,
        max_attempts: int = MAX_ATTEMPTS,
    ) -> None:
        self.graph = graph
        self.membrane = membrane or Membrane(graph, protocol_dirs)
        self.skill_dirs = tuple(skill_dirs)
        self.actor_id = actor_id
        self.max_attempts = max_attempts
        self._skills: dict[str, Skill] = {}

    # ---------------------------------------------------------------------------- finding

    def find_gaps(self, kinds: Iterable[str] | None = None) -> list[Gap]:
        return find_gaps(self.graph, kinds)

    def skill(self, domain: str) -> Skill:
        if domain not in self._skills:
            self._skills[domain] = load_skill(domain, self.skill_dirs)
        return self._skills[domain]

    def plan(self, gaps: Iterable[Gap] | None = None) -> list[Treatment]:
        """The treatment of each gap (default: every gap in the graph); writes nothing."""
        return [self.treatment(gap) for gap in (self.find_gaps() if gaps is None else gaps)]

    def treatment(self, gap: Gap) -> Treatment:
        try:
            skill = self.skill(gap.domain)
        except CabalError as exc:
            return Treatment(gap, None, None, f"cannot load skill {gap.domain!r}: {exc}")
        protocol = skill.select_protocol(gap.kind)
        if protocol is None:
            return Treatment(gap, skill, None, f"skill {skill.name!r} has no row tagged gap:{gap.kind}")
        if not self.membrane.library.exists(protocol):
            return Treatment(gap, skill, None, f"skill {skill.name!r} names protocol {protocol!r}, which does not exist")
        return Treatment(gap, skill, protocol)

    # ----------------------------------------------------------------------------- fixing

    def fix(self, answerer: Answerer, gaps: Iterable[Gap] | None = None) -> list[Outcome]:
        """Treat each gap in turn (default: every gap found now); one outcome per gap."""
        treatments = self.plan(gaps)
        if any(t.protocol for t in treatments):
            self.ensure_actor()
        outcomes = []
        for treatment in treatments:
            # An earlier fix may have closed this gap too (a module's first objectives, say).
            if treatment.protocol and not is_open(self.graph, treatment.gap):
                outcomes.append(Outcome(treatment, "skipped", closed=True, error="already closed by an earlier fix"))
                continue
            outcomes.append(self.treat(treatment, answerer))
        return outcomes

    def ensure_actor(self) -> None:
        """The doctor speaks its moments as an actor; the first fix in a graph registers it."""
        if not self.graph.exists(self.actor_id):
            self.graph.create_cluster([{"id": self.actor_id, "node_type": "actor", "type": "agent", "name": "doctor"}])

    def treat(self, treatment: Treatment, answerer: Answerer) -> Outcome:
        """Run the treatment's protocol to completion with ``answerer``, or abort it."""
        if treatment.protocol is None or treatment.skill is None:
            return Outcome(treatment, "skipped", error=treatment.reason)
        protocol = self.membrane.library.get(treatment.protocol)
        context = {**treatment.gap.context, "actor_id": self.actor_id}
        result = self.membrane.start(protocol.name, context)
        session_id = result.session_id
        failures, attempts = 0, 0
        problems: tuple[AnswerProblem, ...] = ()
        while result.status == "active":
            step = result.step
            assert step is not None, "an active session always waits on a step"
            if failures >= self.max_attempts:
                return self._abandon(treatment, session_id, attempts, f"no valid answers after {failures} attempt(s): "
                                     + "; ".join(map(str, problems)))  # fmt: skip
            request = AnswerRequest(
                gap=treatment.gap,
                skill=treatment.skill,
                protocol=protocol.name,
                protocol_description=protocol.description,
                session_id=session_id,
                context=context,
                form=self.membrane.form(session_id),
                step=step,
                problems=problems,
                attempt=failures + 1,
                answered=self._answered(session_id),
            )
            try:
                answers = answerer(request)
            except CabalError as exc:
                return self._abandon(treatment, session_id, attempts + 1, str(exc))
            attempts += 1
            before = step.id
            try:
                result = self.membrane.submit(session_id, answers)
            except CabalError as exc:  # e.g. the cluster refused at completion: the session is unchanged
                problems, failures = (AnswerProblem("", str(exc)),), failures + 1
                result = self.membrane.start(protocol.name, session_id=session_id)
                continue
            if result.problems or (result.status == "active" and result.step is not None and result.step.id == before):
                problems = result.problems or (AnswerProblem(before, "no answer given for this step"),)
                failures += 1
            else:
                problems, failures = (), 0
        if result.status != "complete":
            return Outcome(treatment, "failed", session_id=session_id, attempts=attempts,
                           error=f"session ended {result.status}")  # fmt: skip
        return Outcome(
            treatment,
            "complete",
            closed=not is_open(self.graph, treatment.gap),
            session_id=session_id,
            summary=result.summary,
            created=result.created.to_wire(),
            nodes=self._written(session_id),
            attempts=attempts,
        )

    def _abandon(self, treatment: Treatment, session_id: str | None, attempts: int, error: str) -> Outcome:
        if session_id:
            self.membrane.abort(session_id)
        return Outcome(treatment, "failed", session_id=session_id, attempts=attempts, error=error)

    def _answered(self, session_id: str) -> dict[str, Any]:
        session = self.membrane.sessions.load(session_id)
        return dict(session.answers) if session is not None else {}

    def _written(self, session_id: str) -> tuple[dict, ...]:
        """The nodes the completed session committed, as its stored state lists them."""
        session = self.membrane.sessions.load(session_id)
        if session is None:
            return ()
        nodes = list(session.nodes) + [moment["node"] for moment in session.moments]
        seen: dict[str, dict] = {}
        for node in nodes:
            seen.setdefault(node["id"], {"id": node["id"], "node_type": node["node_type"], "type": node["type"]})
        return tuple(seen.values())
