"""Expects: one definition per type gives both the check and the JSON Schema."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from cabal.membrane.validation import (
    TYPES,
    hoist_defs,
    list_of,
    object_of,
    parse_expects,
    register_entity,
    schema_of,
    validate,
    ExpectsField,
)

NODES = {
    "b1": {"id": "b1", "node_type": "narrative", "type": "behavior"},
    "b2": {"id": "b2", "node_type": "narrative", "type": "goal"},
    "s1": {"id": "s1", "node_type": "space", "type": "module"},
}


def lookup(ids):
    return {i: NODES[i] for i in ids if i in NODES}


def expects(**raw):
    parsed, problems = parse_expects(raw)
    assert problems == []
    return parsed


def check(raw, value):
    return validate(expects(**raw), value, lookup, "step")


def messages(raw, value):
    return [f"{p.path}: {p.message}" for p in check(raw, value)[1]]


class Note(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")
    product_id: str
    importance: int = Field(ge=1, le=10)


register_entity("Note", Note)


def test_string():
    raw = {"type": "string", "min_length": 3, "max_length": 5, "pattern": "^[a-z]+$"}
    assert check(raw, "abcd") == ("abcd", [])
    assert messages(raw, "ab") == ["step: expected at least 3 characters, got 2"]
    assert messages(raw, "abcdef") == ["step: expected at most 5 characters, got 6"]
    assert messages(raw, "ABC") == ["step: expected text matching the pattern '^[a-z]+$', got 'ABC'"]
    assert messages(raw, 12) == ["step: expected text, got int 12"]


def test_id_exists_and_type():
    raw = {"type": "id", "node_type": "narrative"}
    assert check(raw, "b1") == ("b1", [])
    assert messages(raw, "zz") == ["step: no node with id 'zz' in the graph"]
    assert messages(raw, "s1") == ["step: expected a narrative node, but 's1' is a space"]
    assert messages(raw, None) == ["step: expected a node id (text), got nothing (null)"]


def test_id_list_each_filter_min_max():
    raw = {"type": "id_list", "filter": {"type": "behavior"}, "min": 1, "max": 2}
    assert check(raw, ["b1"]) == (["b1"], [])
    assert messages(raw, ["b1", "zz", "b2"]) == [
        "step.1: no node with id 'zz' in the graph",
        "step.2: node 'b2' has type='goal', expected type='behavior'",
        "step: expected at most 2 ids, got 3",
    ]
    assert messages(raw, []) == ["step: expected at least 1 ids, got 0"]
    assert messages(raw, "b1") == ["step: expected a list of node ids, got str 'b1'"]


def test_string_list():
    raw = {"type": "string_list", "min": 2}
    assert check(raw, ["a", "b"]) == (["a", "b"], [])
    assert messages(raw, ["a", 3]) == ["step.1: expected text, got int 3"]
    assert messages(raw, ["a"]) == ["step: expected at least 2 items, got 1"]
    assert messages(raw, "a") == ["step: expected a list of texts, got str 'a'"]


def test_enum():
    raw = {"type": "enum", "options": ["low", "high", 1]}
    assert check(raw, "low") == ("low", [])
    assert messages(raw, "mid") == ["step: expected one of ['low', 'high', 1], got str 'mid'"]
    assert messages(raw, True) == ["step: expected one of ['low', 'high', 1], got bool True"]


def test_number_and_integer():
    raw = {"type": "number", "min": 0, "max": 1}
    assert check(raw, 0.5) == (0.5, [])
    assert check(raw, "1") == (1, [])
    assert messages(raw, 2) == ["step: expected a number of at most 1, got 2"]
    assert messages(raw, "x") == ["step: expected a number, got str 'x'"]
    assert messages(raw, True) == ["step: expected a number, got bool True"]
    assert messages({"type": "integer"}, 1.5) == ["step: expected an integer, got float 1.5"]


@pytest.mark.parametrize(("value", "expected"), [("yes", True), ("No", False), ("true", True), (False, False)])
def test_boolean_accepts_yes_no(value, expected):
    assert check({"type": "boolean"}, value) == (expected, [])


def test_boolean_refuses_other_text():
    assert messages({"type": "boolean"}, "maybe") == ["step: expected yes/no or true/false, got str 'maybe'"]


def test_entity_maps_pydantic_errors_to_paths():
    raw = {"type": "entity", "entity": "Note"}
    assert check(raw, {"productId": "p1", "importance": 3}) == ({"productId": "p1", "importance": 3}, [])
    found = messages(raw, {"productId": "p1", "importance": 11, "extra": 1})
    assert found[0].startswith("step.importance: Input should be less than or equal to 10")
    assert found[1].startswith("step.extra: Extra inputs are not permitted")


def test_entity_list():
    raw = {"type": "entity_list", "entity": "Note", "min": 1}
    value, problems = check(raw, [{"productId": "p", "importance": 1}, {"importance": 1}])
    assert [p.path for p in problems] == ["step.1.productId"]
    assert schema_of(expects(**raw))["items"]["properties"]["productId"] == {"title": "Productid", "type": "string"}


def test_object_and_list_composites():
    item = object_of([ExpectsField("rule", expects(type="string", min_length=3)), ExpectsField("n", expects(type="number"), False)])
    answer = list_of(item, 2)
    value, problems = validate(answer, [{"rule": "abc"}, {"rule": "a", "x": 1}], lookup, "ask")
    assert value[0] == {"rule": "abc", "n": None}
    assert [str(p) for p in problems] == [
        "ask.1.rule: expected at least 3 characters, got 1",
        "ask.1.x: unexpected field; expected only ['rule', 'n']",
    ]
    assert validate(answer, [{}], lookup, "ask")[1][0].message == "expected a list of 2 answers, one per item, got 1 answers"


@pytest.mark.parametrize(
    ("raw", "schema"),
    [
        ({"type": "string", "min_length": 2, "pattern": "x"}, {"type": "string", "minLength": 2, "pattern": "x"}),
        ({"type": "id_list", "min": 1, "max": 3}, {"type": "array", "minItems": 1, "maxItems": 3}),
        ({"type": "enum", "options": ["a", "b"]}, {"type": "string", "enum": ["a", "b"]}),
        ({"type": "number", "min": 1, "max": 2}, {"type": "number", "minimum": 1, "maximum": 2}),
        ({"type": "boolean"}, {"type": "boolean"}),
    ],
)
def test_schema_carries_the_same_constraints(raw, schema):
    produced = schema_of(expects(**raw))
    assert {k: v for k, v in produced.items() if k in schema} == schema


def test_every_type_has_schema_and_check():
    assert set(TYPES) == {"string", "id", "id_list", "string_list", "enum", "number", "integer", "boolean", "entity", "entity_list"}


def test_parse_expects_problems():
    assert parse_expects({"type": "strng"})[1] == [
        ("expects.type", "unknown expects type 'strng'; known: string, id, id_list, string_list, enum, number, integer, boolean, entity, entity_list")
    ]
    assert parse_expects({"type": "string", "min_lenght": 3})[1][0][0] == "expects.min_lenght"
    assert parse_expects({"type": "enum"})[1] == [("expects.options", "enum needs 'options'")]
    assert parse_expects({"type": "string", "pattern": "("})[1][0][0] == "expects.pattern"
    assert parse_expects({"type": "entity", "entity": "Nope"})[1] == [("expects.entity", "no entity model named 'Nope'")]
    assert parse_expects({"type": "string", "min_length": "3"})[1][0][1] == "must be int, got str '3'"


def test_hoist_defs_moves_nested_defs_to_the_root():
    schema = {"type": "object", "properties": {"a": {"$defs": {"X": {"type": "string"}}, "$ref": "#/$defs/X"}}}
    assert hoist_defs(schema) == {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/X"}},
        "$defs": {"X": {"type": "string"}},
    }
