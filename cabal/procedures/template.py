"""A procedure as a template in the graph: its ids, the cluster that installs it, reading it back.

A template is a space (type ``procedure``) containing one narrative (type ``step``) per step,
chained with ``precedes``. Its id carries the procedure's content hash, so installing is
idempotent and an edited procedure becomes a new template: a template, once written, is never
changed (A1), and a run keeps the exact guide it started with. Each step node holds its whole
rendered guide (``content``) and its gate as JSON, so a run continues from the graph alone (B6).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from cabal.errors import ProcedureError, ResourceNotFound
from cabal.procedures.model import Guide, Procedure, Step, Validation

if TYPE_CHECKING:
    from cabal.graph import ContextGraph

TEMPLATE_MARK = "template"  # field set on every template node; record() refuses to touch them


def template_id(procedure: Procedure) -> str:
    return f"procedure:{procedure.name}@{procedure.digest[:12]}"


def step_node_id(template: str, step_id: str) -> str:
    return f"{template}/{step_id}"


def is_template_node(node: dict) -> bool:
    return bool(node.get(TEMPLATE_MARK)) or (node.get("node_type") == "space" and node.get("type") == "procedure")


def render(procedure: Procedure, index: int) -> str:
    """The step's whole guide, as an agent reads it (B1): no other document needed."""
    step = procedure.steps[index]
    parts = [
        f"{procedure.name} — step {index + 1} of {len(procedure.steps)}: {step.title}",
        f"What: {step.guide.what}",
        f"Why: {step.guide.why}",
        f"How: {step.guide.how}",
    ]
    if step.guide.watch_out:
        parts.append(f"Watch out: {step.guide.watch_out}")
    gate = procedure.gate_after(index)
    moving_on = "finish the procedure" if index + 1 == len(procedure.steps) else "move on"
    if gate is not None:
        items = "\n".join(f"- {item}" for item in gate.describe())
        parts.append(f"Done when (checked when you call continue_procedure to {moving_on}):\n{items}")
    else:
        parts.append(f"Done when: nothing is checked; call continue_procedure to {moving_on} once your work is recorded.")
    parts.append(
        "Record your work with record(run_id, actor_id, nodes, links): every node goes into the run space. "
        "The procedure's own nodes are read-only."
    )
    return "\n\n".join(parts)


def install_cluster(procedure: Procedure) -> tuple[list[dict], list[dict]]:
    """Nodes and links of the template; committing them twice creates nothing the second time."""
    space = template_id(procedure)
    nodes: list[dict] = [
        {
            "id": space,
            "node_type": "space",
            "type": "procedure",
            "name": procedure.name,
            "description": procedure.description,
            "digest": procedure.digest,
            "steps": [step.id for step in procedure.steps],
            "completion": procedure.completion.to_json() if procedure.completion else None,
            TEMPLATE_MARK: True,
        }
    ]
    links: list[dict] = []
    for index, step in enumerate(procedure.steps):
        node_id = step_node_id(space, step.id)
        nodes.append(
            {
                "id": node_id,
                "node_type": "narrative",
                "type": "step",
                "name": step.title,
                "step": step.id,
                "position": index + 1,
                "procedure": procedure.name,
                "what": step.guide.what,
                "why": step.guide.why,
                "how": step.guide.how,
                "watch_out": step.guide.watch_out,
                "validation": step.validation.to_json() if step.validation else None,
                "content": render(procedure, index),
                TEMPLATE_MARK: True,
            }
        )
        links.append({"type": "contains", "from": space, "to": node_id})
        if index:
            links.append({"type": "precedes", "from": step_node_id(space, procedure.steps[index - 1].id), "to": node_id})
    return nodes, links


@dataclass(frozen=True)
class Template:
    """An installed procedure, read back from the graph."""

    id: str
    procedure: Procedure
    contents: tuple[str, ...]  # the stored guide of each step, in order

    def node_of(self, index: int) -> str:
        return step_node_id(self.id, self.procedure.steps[index].id)

    def index_of_node(self, node_id: str) -> int:
        prefix = self.id + "/"
        if not node_id.startswith(prefix):
            raise ProcedureError(f"{node_id!r} is not a step of template {self.id!r}")
        return self.procedure.index_of(node_id[len(prefix):])

    @property
    def last(self) -> int:
        return len(self.procedure.steps) - 1


def read_template(graph: ContextGraph, template: str) -> Template:
    """Rebuild a template from its nodes (no procedure file needed)."""
    space = graph.get(template)
    if space is None or space.get("node_type") != "space" or space.get("type") != "procedure":
        raise ResourceNotFound("procedure template", template)
    step_nodes = sorted(
        (node for node in graph.contents_of(template, "narrative") if node.get("type") == "step"),
        key=lambda node: node["position"],
    )
    if [node["step"] for node in step_nodes] != list(space["steps"]):
        raise ProcedureError(f"template {template!r} is damaged: its steps do not match {space['steps']}")
    steps = tuple(
        Step(
            node["step"],
            node["name"],
            Guide(node["what"], node["why"], node["how"], node.get("watch_out")),
            Validation.from_json(node["validation"]) if node.get("validation") else None,
        )
        for node in step_nodes
    )
    completion = Validation.from_json(space["completion"]) if space.get("completion") else None
    procedure = Procedure(space["name"], space["description"], steps, completion)
    return Template(template, procedure, tuple(node["content"] for node in step_nodes))
