"""Value types of a procedure: frozen, no I/O. The loader builds them, the template stores them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class Selector:
    """Which nodes count: a node type and, optionally, its subtype. Empty matches any node."""

    node_type: str | None = None
    type: str | None = None

    def matches(self, node: dict) -> bool:
        if self.node_type is not None and node.get("node_type") != self.node_type:
            return False
        return self.type is None or node.get("type") == self.type

    def describe(self) -> str:
        noun = self.node_type or "node"
        return f"{noun} of type {self.type!r}" if self.type else noun

    def to_data(self) -> dict:
        return {key: value for key, value in (("node_type", self.node_type), ("type", self.type)) if value is not None}


@dataclass(frozen=True)
class NodeRequirement:
    """At least ``min`` nodes matching ``selector`` in the run space, each with ``fields`` filled."""

    selector: Selector
    min: int = 1
    fields: tuple[str, ...] = ()

    def satisfied_by(self, node: dict) -> bool:
        return self.selector.matches(node) and all(node.get(name) not in (None, "", []) for name in self.fields)

    def describe(self) -> str:
        text = f"at least {self.min} {self.selector.describe()}"
        return text + (f" with {', '.join(self.fields)} filled" if self.fields else "")

    def to_data(self) -> dict:
        data = {**self.selector.to_data(), "min": self.min}
        return data | ({"fields": list(self.fields)} if self.fields else {})


@dataclass(frozen=True)
class LinkRequirement:
    """At least ``min`` links of ``type`` from a run-space node matching ``source`` to a node matching ``target``."""

    type: str
    source: Selector = Selector()
    target: Selector = Selector()
    min: int = 1

    def describe(self) -> str:
        return f"at least {self.min} {self.type!r} link(s) from a {self.source.describe()} to a {self.target.describe()}"

    def to_data(self) -> dict:
        return {"type": self.type, "from": self.source.to_data(), "to": self.target.to_data(), "min": self.min}


@dataclass(frozen=True)
class Validation:
    """What the run space must contain: checked by ``continue_procedure`` before a step is entered."""

    requires: tuple[NodeRequirement, ...] = ()
    links: tuple[LinkRequirement, ...] = ()

    def describe(self) -> list[str]:
        return [r.describe() for r in self.requires] + [r.describe() for r in self.links]

    def to_json(self) -> str:
        return json.dumps(
            {"requires": [r.to_data() for r in self.requires], "links": [r.to_data() for r in self.links]},
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> Validation:
        data = json.loads(text)
        return cls(
            requires=tuple(
                NodeRequirement(Selector(r.get("node_type"), r.get("type")), r["min"], tuple(r.get("fields", ())))
                for r in data.get("requires", [])
            ),
            links=tuple(
                LinkRequirement(r["type"], Selector(**r["from"]), Selector(**r["to"]), r["min"])
                for r in data.get("links", [])
            ),
        )


@dataclass(frozen=True)
class Guide:
    """What an agent needs to do a step without opening any other document (B1)."""

    what: str
    why: str
    how: str
    watch_out: str | None = None


@dataclass(frozen=True)
class Step:
    id: str
    title: str
    guide: Guide
    validation: Validation | None = None  # entry gate: what must exist before this step starts


@dataclass(frozen=True)
class Procedure:
    name: str
    description: str
    steps: tuple[Step, ...]
    completion: Validation | None = None  # exit gate of the last step
    source: str | None = None  # the file it came from; not part of its identity

    def index_of(self, step_id: str) -> int:
        for index, step in enumerate(self.steps):
            if step.id == step_id:
                return index
        raise KeyError(step_id)

    def gate_after(self, index: int) -> Validation | None:
        """The check that must pass to leave step ``index``: the next step's entry gate, or completion."""
        return self.steps[index + 1].validation if index + 1 < len(self.steps) else self.completion

    @property
    def digest(self) -> str:
        """Content hash of everything an agent or a gate sees; a changed procedure is a new template."""
        data = {
            "name": self.name,
            "description": self.description,
            "completion": self.completion.to_json() if self.completion else None,
            "steps": [
                {
                    "id": s.id,
                    "title": s.title,
                    "guide": [s.guide.what, s.guide.why, s.guide.how, s.guide.watch_out],
                    "validation": s.validation.to_json() if s.validation else None,
                }
                for s in self.steps
            ],
        }
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


# ------------------------------------------------------------------------------ results

RunStatus = Literal["active", "validation_failed", "completed"]


@dataclass(frozen=True)
class RunStep:
    """Where a run stands after a call: its current step with the step's whole guide
    (``validation_failed``: the gate of the next step is not met, ``validation_error`` says
    what is missing), or ``completed`` with no step. ``recovered`` is set by ``recover``."""

    run_id: str
    status: RunStatus
    step_id: str | None = None
    step_content: str | None = None
    validation_error: str | None = None
    recovered: bool | None = None

    def to_wire(self) -> dict[str, Any]:
        wire = {"run_id": self.run_id, "step_id": self.step_id, "step_content": self.step_content,
                "status": self.status, "validation_error": self.validation_error}
        return wire if self.recovered is None else {**wire, "recovered": self.recovered}


@dataclass(frozen=True)
class Recorded:
    """What ``record`` wrote: the moment that says who created what, and the graph's counts."""

    run_id: str
    step_id: str | None
    moment_id: str
    created: Mapping[str, int]

    def to_wire(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "step_id": self.step_id, "moment_id": self.moment_id,
                "created": dict(self.created)}
