"""Small builders and graph readings shared by the procedure tests."""

from __future__ import annotations

ACTIVE = {"energy": 8, "polarity": [0.9, 0.1]}
COMPLETED = {"energy": 1, "polarity": [0.2, 0.8]}


def narrative(node_id: str, kind: str, **fields: object) -> dict:
    return {"id": node_id, "node_type": "narrative", "type": kind, "name": node_id, **fields}


def notes(*ids: str) -> list[dict]:
    return [narrative(node_id, "note", content=f"observation {node_id}") for node_id in ids]


def step_links(graph, run_id: str) -> dict[str, tuple[str, dict]]:
    """step id -> (link type, properties) of every step link of the run."""
    return {
        link["to"].rsplit("/", 1)[1]: (link["type"], link["properties"])
        for link in graph.links_from(run_id)
        if link["type"] in ("acts_on", "receives_from")
    }


def active_steps(graph, run_id: str) -> list[str]:
    """Step ids of the run whose link is hot and forward (B4): exactly one in a healthy run."""
    return [
        step
        for step, (_, properties) in step_links(graph, run_id).items()
        if properties.get("energy", 0) > 5 and properties["polarity"][0] > properties["polarity"][1]
    ]
