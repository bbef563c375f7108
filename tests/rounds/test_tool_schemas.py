"""The answer tools' schemas as a model reads them: each rule said once, nothing pydantic adds
for its own use, and the validation of the full model unchanged."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from cabal.entities import PlanOutput
from cabal.membrane.validation import pydantic_problems
from cabal.rounds.turn import step_tools
from cabal.vocabulary import Step

# A Plan answer wrong in four ways: a thinking without its acceptance rationale, an ADD without
# its new id nor its product's DoD, an acceptance that is no boolean.
INVALID_PLAN = {
    "thinking": {"roundStrategy": "Finish the briefing first."},
    "treeOperations": [{"action": "ADD", "parentId": "p1", "product": {"name": "FAQ", "type": "Content"}}],
    "acceptance": [{"productId": "p1", "accepted": "maybe"}],
    "assignments": [],
}


def _keys(schema: object) -> set[str]:
    """Every key of ``schema``'s objects, property names apart (they are the answer's fields)."""
    if isinstance(schema, list):
        return set().union(*(_keys(item) for item in schema))
    if not isinstance(schema, dict):
        return set()
    found = {key for key in schema if key != "properties"}
    for key, value in schema.items():
        found |= set().union(*(_keys(sub) for sub in value.values())) if key in ("properties", "$defs") else _keys(value)
    return found


def test_the_plan_tool_schema_is_shorter_and_validates_as_before() -> None:
    schema = step_tools(Step.PLAN)[0]["input_schema"]

    # 7,794 characters before: with the classes' docstrings, defaults, the union's discriminator,
    # and the acceptance rule the Plan prompt states too (6,052 without them; the record of
    # decisions then added its field).
    assert len(json.dumps(schema)) == 6736
    assert _keys(schema) & {"title", "default", "discriminator"} == set()
    assert [name for name, sub in schema["$defs"].items() if "description" in sub] == []
    assert "description" not in schema and "description" not in schema["$defs"]["Acceptance"]["properties"]["accepted"]
    # A field's own rule stays where the model fills it.
    assert schema["$defs"]["Directive"]["properties"]["objective"]["description"] == (
        "What to do, concrete enough to act on alone (not 'improve it')")
    with pytest.raises(ValidationError) as refused:
        PlanOutput.model_validate(INVALID_PLAN)
    assert [str(problem) for problem in pydantic_problems(refused.value)] == [
        "thinking.acceptanceRationale: Field required",
        "treeOperations.0.ADD.newId: Field required",
        "treeOperations.0.ADD.product.dod: Field required",
        "acceptance.0.accepted: Input should be a valid boolean, unable to interpret input (got str 'maybe')",
    ]
