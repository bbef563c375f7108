"""``Procedures``: start, continue, record, end and recover procedure runs in the context graph.

Every state change is one ``create_cluster`` call (all or nothing, idempotent on ids and on
(from, type, to) links), so a crash leaves the run either before or after a change, and a
retried call writes nothing twice.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from cabal.errors import ProcedureError, ResourceNotFound, TemplateWriteRefused
from cabal.graph import ContextGraph
from cabal.procedures.loader import load_procedure
from cabal.procedures.model import Procedure, Recorded, RunStatus, RunStep, Validation
from cabal.procedures.state import ACTIVE_STEP, COMPLETED_STEP, INHABITING, OCCUPYING, RunState, read_state
from cabal.procedures.template import Template, install_cluster, is_template_node, read_template
from cabal.procedures.validation import unmet

logger = logging.getLogger(__name__)

# Links that only the runtime writes: an agent's record() may not create them.
RUNTIME_LINKS = ("acts_on", "receives_from", "occupies", "inhabits", "elaborates")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _completed(run_id: str) -> RunStep:
    return RunStep(run_id=run_id, status="completed")


class Procedures:
    """Procedure runs over one context graph; ``dirs`` are user folders searched after the built-in one."""

    def __init__(self, graph: ContextGraph, dirs: Iterable[str | Path] = ()) -> None:
        self.graph = graph
        self.dirs = tuple(dirs)
        self._templates: dict[str, Template] = {}  # safe to cache: a template never changes

    # ------------------------------------------------------------------------ templates

    def install(self, procedure: Procedure | str) -> str:
        """Write a procedure's template (idempotent); returns its id. A name is loaded from the folders."""
        if isinstance(procedure, str):
            procedure = load_procedure(procedure, self.dirs)
        nodes, links = install_cluster(procedure)
        self.graph.create_cluster(nodes, links)
        return nodes[0]["id"]

    def template(self, template_id: str) -> Template:
        if template_id not in self._templates:
            self._templates[template_id] = read_template(self.graph, template_id)
        return self._templates[template_id]

    def _resolve(self, procedure_id: str) -> Template:
        """An installed template id, or a procedure name (installed on first use)."""
        node = self.graph.get(procedure_id)
        if node is not None and node.get("node_type") == "space" and node.get("type") == "procedure":
            return self.template(procedure_id)
        return self.template(self.install(procedure_id))

    # ----------------------------------------------------------------------------- runs

    def state(self, run_id: str) -> RunState:
        run = self.graph.get(run_id)
        if run is None or run.get("node_type") != "space" or run.get("type") != "run":
            raise ResourceNotFound("procedure run", run_id)
        return read_state(run, self.graph.links_from(run_id), self.graph.links_to(run_id, "occupies"))

    def start_procedure(self, procedure_id: str, actor_id: str, *, run_id: str | None = None) -> RunStep:
        """Create a run space at step 1 (B3). ``run_id`` makes a retried start find its first run."""
        template = self._resolve(procedure_id)
        if self.graph.get(actor_id) is None:
            raise ResourceNotFound("actor", actor_id)
        if run_id is not None and self.graph.exists(run_id):
            state = self.state(run_id)
            if state.template_id != template.id:
                raise ProcedureError(f"run {run_id!r} already exists for {state.template_id!r}", run_id=run_id)
            return self._where(state)
        run_id = run_id or f"run:{template.procedure.name}:{uuid.uuid4().hex}"
        run = {
            "id": run_id,
            "node_type": "space",
            "type": "run",
            "name": f"{template.procedure.name} run",
            "procedure": template.procedure.name,
            "status": "active",
            "started_by": actor_id,
            "started_at": _now(),
        }
        links: list[dict] = [
            {"type": "elaborates", "from": run_id, "to": template.id},
            {"type": "acts_on", "from": run_id, "to": template.node_of(0), "properties": dict(ACTIVE_STEP)},
            {"type": "occupies", "from": actor_id, "to": run_id, "properties": dict(OCCUPYING)},
        ]
        self.graph.create_cluster([run], links)
        return self._at(run_id, template, 0)

    def continue_procedure(self, run_id: str, *, from_step: str | None = None) -> RunStep:
        """Check the gate of the next step (B5) and move on in one atomic flip (A2).

        ``from_step``: the step the caller believes is current. If the run has already moved
        past it (the first attempt of a retried call committed), nothing is written and the
        current step is returned, so a retry never advances twice.
        """
        state = self.state(run_id)
        if state.status == "completed":
            self._end(state, self.template(state.template_id), finished=True)
            return _completed(run_id)
        if state.orphaned:
            self.recover(run_id)
            state = self.state(run_id)
            if state.status == "completed":
                return _completed(run_id)
        template = self.template(state.template_id)
        index = template.index_of_node(state.active[0])
        if from_step is not None:
            try:
                asked = template.procedure.index_of(from_step)
            except KeyError:
                raise ProcedureError(f"{template.procedure.name} has no step {from_step!r}", run_id=run_id) from None
            if asked < index:
                return self._at(run_id, template, index)
            if asked > index:
                raise ProcedureError(
                    f"run {run_id!r} is at step {template.procedure.steps[index].id!r}, not {from_step!r}",
                    run_id=run_id,
                    step=from_step,
                )
        gate = template.procedure.gate_after(index)
        reasons = self._unmet(run_id, gate) if gate is not None else []
        if reasons:
            # E2: nothing was written; the agent keeps its step and learns exactly what is missing.
            return self._at(run_id, template, index, status="validation_failed", error="; ".join(reasons))
        if index == template.last:
            self._end(state, template, finished=True)  # E1
            return _completed(run_id)
        current, following = template.node_of(index), template.node_of(index + 1)
        self.graph.create_cluster(
            [],
            [
                {"type": "receives_from", "from": run_id, "to": current, "properties": dict(COMPLETED_STEP)},
                {"type": "acts_on", "from": run_id, "to": following, "properties": dict(ACTIVE_STEP)},
            ],
            unlinks=[{"type": "acts_on", "from": run_id, "to": current}],
        )
        return self._at(run_id, template, index + 1)

    def end_procedure(self, run_id: str) -> RunStep:
        """Mark the run completed and turn its actors' occupies into inhabits."""
        state = self.state(run_id)
        self._end(state, self.template(state.template_id), finished=False)
        return _completed(run_id)

    def _end(self, state: RunState, template: Template, *, finished: bool) -> None:
        """End a run in one cluster: status, the active step cooled, occupies -> inhabits.

        Also finishes an end written by an older version in two parts; a no-op on a cleanly
        ended run.
        """
        run_id = state.run_id
        updates = []
        if state.status != "completed":
            fields: dict[str, object] = {"status": "completed", "ended_at": _now(), "finished": finished}
            if state.active:
                fields["ended_at_step"] = template.procedure.steps[max(map(template.index_of_node, state.active))].id
            updates.append({"id": run_id, "fields": fields})
        if not updates and not state.active and not state.occupants:
            return
        # No step stays hot in a finished run: the active step is flipped like any completed one.
        unlinks = [{"type": "acts_on", "from": run_id, "to": step} for step in state.active]
        unlinks += [{"type": "occupies", "from": actor, "to": run_id} for actor in state.occupants]
        links = [{"type": "receives_from", "from": run_id, "to": step, "properties": dict(COMPLETED_STEP)} for step in state.active]
        links += [{"type": "inhabits", "from": actor, "to": run_id, "properties": dict(INHABITING)} for actor in state.occupants]
        self.graph.create_cluster([], links, updates=updates, unlinks=unlinks)

    def recover(self, run_id: str) -> RunStep:
        """Repair a run without exactly one active step (E3): heat the step after the last completed one.

        Several active steps (two writers raced) keep the furthest one. A run whose steps are
        all completed is ended. A healthy run is left as it is.
        """
        state = self.state(run_id)
        template = self.template(state.template_id)
        if state.status == "completed":
            repaired = bool(state.active or state.occupants)
            self._end(state, template, finished=True)
            return replace(_completed(run_id), recovered=repaired)
        if not state.orphaned:
            return replace(self._where(state), recovered=False)
        if state.active:
            keep = max(map(template.index_of_node, state.active))
            stale = [step for step in state.active if step != template.node_of(keep)]
            self.graph.create_cluster(
                [],
                [{"type": "receives_from", "from": run_id, "to": s, "properties": dict(COMPLETED_STEP)} for s in stale],
                unlinks=[{"type": "acts_on", "from": run_id, "to": s} for s in stale],
            )
            logger.warning("run %s had %d active steps; kept %s, cooled %s", run_id, len(state.active),
                           template.node_of(keep), ", ".join(stale))  # fmt: skip
            return replace(self._at(run_id, template, keep), recovered=True)
        done = [template.index_of_node(step) for step in state.completed]
        following = max(done, default=-1) + 1
        if following > template.last:
            logger.warning("run %s had no active step and every step completed; ending it", run_id)
            self._end(state, template, finished=True)
            return replace(_completed(run_id), recovered=True)
        step = template.node_of(following)
        self.graph.create_cluster(
            [],
            [{"type": "acts_on", "from": run_id, "to": step, "properties": dict(ACTIVE_STEP)}],
            unlinks=[{"type": "receives_from", "from": run_id, "to": step}],
        )
        logger.warning("run %s had no active step; heated %s after the last completed step", run_id, step)
        return replace(self._at(run_id, template, following), recovered=True)

    # ------------------------------------------------------------------------ agent work

    def record(self, run_id: str, actor_id: str, nodes: list[dict], links: list[dict] | None = None) -> Recorded:
        """Write an agent's work into the run space (B2), with a moment saying who created what.

        Every new node is contained by the run space; the actor expresses a moment that is
        about each of them. Refused, with nothing written: any node or link touching a
        procedure template (A1, also logged), links touching the run space itself or of the
        runtime's own link types, and ids that already exist outside this run.
        """
        nodes, links = list(nodes or []), list(links or [])
        if not nodes and not links:
            raise ProcedureError("nothing to record: give nodes and/or links", run_id=run_id)
        state = self.state(run_id)
        if state.status != "active":
            raise ProcedureError(f"run {run_id!r} is completed; start a new run to add work", run_id=run_id)
        if actor_id not in state.occupants:
            raise ProcedureError(f"{actor_id!r} does not occupy run {run_id!r}; only its actors record work", run_id=run_id)

        new_ids = [n["id"] for n in nodes if isinstance(n, dict) and isinstance(n.get("id"), str)]
        ends = [link.get(end) for link in links if isinstance(link, dict) for end in ("from", "to")]
        outside = list(dict.fromkeys(e for e in ends if isinstance(e, str) and e not in new_ids))
        existing = {node["id"]: node for node in self.graph.get_many(list(dict.fromkeys(new_ids + outside)))}
        refused = [n["id"] for n in nodes if isinstance(n, dict) and n.get("id") in new_ids and is_template_node(n)]
        refused += [i for i in dict.fromkeys(new_ids + outside) if i in existing and self._in_template(existing[i])]
        if refused:
            targets = list(dict.fromkeys(refused))
            logger.warning("refused a write into a procedure template: run %s, actor %s, nodes %s",
                           run_id, actor_id, ", ".join(targets))  # fmt: skip
            raise TemplateWriteRefused(run_id, actor_id, targets)
        if run_id in ends or run_id in new_ids:
            raise ProcedureError(f"run {run_id!r}: the run space's own links are kept by the runtime", run_id=run_id)
        # A type that is no name is refused by the schema with the rest of the cluster, below.
        named = (link.get("type") for link in links if isinstance(link, dict) and isinstance(link.get("type"), str))
        reserved = sorted(set(RUNTIME_LINKS).intersection(named))
        if reserved:
            raise ProcedureError(f"run {run_id!r}: link type(s) {', '.join(reserved)} are kept by the runtime", run_id=run_id)
        reused = [i for i in new_ids if i in existing]
        if reused:
            inside = {node["id"] for node in self.graph.contents_of(run_id)}
            foreign = [i for i in reused if i not in inside]
            if foreign:
                raise ProcedureError(
                    f"run {run_id!r}: node(s) {', '.join(foreign)} already exist outside this run; "
                    "record creates new nodes (link to existing ones instead)",
                    run_id=run_id,
                )

        template = self.template(state.template_id)
        step = template.procedure.steps[template.index_of_node(state.active[0])].id if len(state.active) == 1 else None
        # Same work, same moment id: a retried record() creates nothing new. The step is left
        # out of the id so a retry after the run moved on still finds the first moment.
        triples = sorted([str(link.get(k)) for k in ("type", "from", "to")] for link in links if isinstance(link, dict))
        key = json.dumps([actor_id, sorted(new_ids), triples])
        moment_id = f"{run_id}/moment/{hashlib.sha256(key.encode()).hexdigest()[:16]}"
        moment = {
            "id": moment_id,
            "node_type": "moment",
            "type": "procedure_work",
            "status": "recorded",
            "content": f"{actor_id} recorded {len(new_ids)} node(s) and {len(links)} link(s) at step {step!r}",
            "run_id": run_id,
            "step": step,
            "created": new_ids,
            "at": _now(),
        }
        trace = [{"type": "contains", "from": run_id, "to": node_id} for node_id in [*new_ids, moment_id]]
        trace.append({"type": "expresses", "from": actor_id, "to": moment_id})
        trace += [{"type": "about", "from": moment_id, "to": node_id} for node_id in new_ids]
        counts = self.graph.create_cluster([*nodes, moment], [*links, *trace])
        return Recorded(run_id=run_id, step_id=step, moment_id=moment_id, created=counts)

    def _in_template(self, node: dict) -> bool:
        if is_template_node(node):
            return True
        return any(is_template_node(holder) for holder in self.graph.related_to(node["id"], "contains", "to"))

    # -------------------------------------------------------------------------- helpers

    def _unmet(self, run_id: str, gate: Validation) -> list[str]:
        contents = self.graph.contents_of(run_id)
        nodes = {node["id"]: node for node in contents}
        links: list[dict] = []
        if gate.links:
            types = {requirement.type for requirement in gate.links}
            for node in contents:
                if any(requirement.source.matches(node) for requirement in gate.links):
                    links += [link for link in self.graph.links_from(node["id"]) if link["type"] in types]
            missing = list(dict.fromkeys(link["to"] for link in links if link["to"] not in nodes))
            nodes.update({node["id"]: node for node in self.graph.get_many(missing)})
        return unmet(gate, contents, links, nodes)

    def _at(self, run_id: str, template: Template, index: int, *, status: RunStatus = "active",
            error: str | None = None) -> RunStep:
        return RunStep(run_id=run_id, status=status, step_id=template.procedure.steps[index].id,
                       step_content=template.contents[index], validation_error=error)

    def _where(self, state: RunState) -> RunStep:
        """Where a run stands, without changing it."""
        if state.status == "completed":
            return _completed(state.run_id)
        template = self.template(state.template_id)
        if state.orphaned:
            raise ProcedureError(f"run {state.run_id!r} has {len(state.active)} active steps; call recover()", run_id=state.run_id)
        return self._at(state.run_id, template, template.index_of_node(state.active[0]))
