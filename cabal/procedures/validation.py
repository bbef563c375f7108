"""Check a step's validation spec against what a run space holds. Pure: the runtime reads the graph."""

from __future__ import annotations

from cabal.procedures.model import Validation


def unmet(validation: Validation, contents: list[dict], links: list[dict], nodes: dict[str, dict]) -> list[str]:
    """Every requirement the run space does not meet, as one specific reason each (empty: it passes).

    ``contents``: the nodes the run space contains; ``links``: links leaving those nodes;
    ``nodes``: every node by id that a link may point at (contents included).
    """
    reasons = []
    for requirement in validation.requires:
        found = sum(1 for node in contents if requirement.satisfied_by(node))
        if found < requirement.min:
            reasons.append(f"the run space needs {requirement.describe()}; found {found}")
    inside = {node["id"]: node for node in contents}
    for link_requirement in validation.links:
        found = sum(
            1
            for link in links
            if link["type"] == link_requirement.type
            and link["from"] in inside
            and link_requirement.source.matches(inside[link["from"]])
            and link["to"] in nodes
            and link_requirement.target.matches(nodes[link["to"]])
        )
        if found < link_requirement.min:
            reasons.append(f"the run space needs {link_requirement.describe()}; found {found}")
    return reasons
