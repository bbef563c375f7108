"""Protocol YAML -> Protocol: accepted shapes, and every error located by file, step, field, line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cabal.errors import ProtocolLoadError, ProtocolProblem
from cabal.membrane.library import ProtocolLibrary
from cabal.membrane.loader import load_protocol
from cabal.membrane.protocol import COMPLETE, AskStep, BranchStep, CallStep, CreateStep, QueryStep, UpdateStep

HERE = Path(__file__).parent / "protocols"


def load(text: str, *, exists=("other",)):
    return load_protocol(textwrap.dedent(text), "p.yaml", protocol_exists=lambda name: name in exists)


def problems(text: str, **kwargs) -> list[ProtocolProblem]:
    with pytest.raises(ProtocolLoadError) as caught:
        load(text, **kwargs)
    return caught.value.problems


def only(text: str, **kwargs) -> ProtocolProblem:
    found = problems(text, **kwargs)
    assert len(found) == 1, found
    return found[0]


EVERY_STEP = """
protocol: every_step
version: "1.0"
description: one of each
steps:
  look:
    type: query
    query: {related_to: "{target}", via: [contains, about], direction: from, depth: 2}
    store_as: around
  pick:
    type: ask
    question: Which?
    expects: {type: enum, options: [a, b]}
    context_enrichment: {prompt: look around, allows: [exploration]}
    moment: {type: choice, agent_provides: [reasoning]}
  route:
    type: branch
    condition: "pick == 'a'"
    then: sub
    else: many
  sub:
    type: call_protocol
    protocol: other
    context: {parent: "{target}"}
    on_complete: many
  many:
    type: branch
    condition: pick
    cases: {a: make, b: touch}
    default: make
  touch:
    type: update
    node: "{target}"
    fields: {status: touched}
    next: make
  make:
    type: create
    nodes:
      - {id: "n-{pick}", node_type: narrative, type: note, name: "{pick}"}
    links:
      - {type: about, from: "n-{pick}", to: "{target}", condition: "pick == 'a'"}
      - {type: relates, from: "n-{pick}", to: "{item}", for_each: around}
"""


def test_every_step_type_loads_into_frozen_models():
    protocol = load(EVERY_STEP)
    assert protocol.name == "every_step" and protocol.first == "look" and protocol.version == "1.0"
    steps = protocol.steps
    assert isinstance(steps["look"], QueryStep) and steps["look"].store_as == "around"
    assert steps["look"].next == "pick"  # implicit: the following step
    ask = steps["pick"]
    assert isinstance(ask, AskStep) and ask.moment.agent_provides == ("reasoning",)
    assert ask.context_enrichment["allows"] == ("exploration",)
    assert isinstance(steps["route"], BranchStep) and (steps["route"].then, steps["route"].otherwise) == ("sub", "many")
    assert isinstance(steps["sub"], CallStep) and steps["sub"].on_complete == "many"
    assert dict(steps["many"].cases) == {"a": "make", "b": "touch"}
    assert isinstance(steps["touch"], UpdateStep)
    make = steps["make"]
    assert isinstance(make, CreateStep) and make.next == COMPLETE
    assert make.links[1].for_each == "{around}"
    with pytest.raises(AttributeError):
        ask.question = "changed"  # frozen


def test_questions_list_becomes_one_object_answer():
    protocol = load(
        """
        protocol: q
        steps:
          details:
            type: ask
            questions:
              - name: rule
                ask: State the rule
                why_it_matters: checks need it
                good_answer: "a charge is captured once"
                bad_answer: "be correct"
                expects: {type: string, min_length: 5}
              - {name: optional, ask: "Anything else?", required: false}
        """
    )
    step = protocol.steps["details"]
    assert [q.name for q in step.questions] == ["rule", "optional"]
    assert step.expects.type == "object"
    assert [(f.name, f.required) for f in step.expects.fields] == [("rule", True), ("optional", False)]
    assert "Why it matters: checks need it" in step.expects.fields[0].description


def test_earlier_membrane_format():
    protocol = load(
        """
        connectome: legacy
        start: second
        steps:
          - id: first
            type: query
            query: "MATCH (n:Node) WHERE n.id = $space_id RETURN n.id AS id"
            next: $complete
          - id: second
            type: query
            preset: all_spaces
            next: first
        """
    )
    assert protocol.name == "legacy" and protocol.first == "second"
    assert protocol.steps["first"].query.verb == "cypher"
    assert protocol.steps["second"].query.args["name"] == "all_spaces"


def test_for_each_on_ask_accepts_a_bare_or_braced_name():
    protocol = load(
        """
        protocol: fe
        steps:
          a: {type: ask, question: "Why {item}?", expects: string, for_each: behaviors}
          b: {type: ask, question: "x", expects: string, for_each: "{details.items}"}
        """
    )
    assert protocol.steps["a"].for_each == "{behaviors}"
    assert protocol.steps["b"].for_each == "{details.items}"


# ----------------------------------------------------------------------- located errors


def test_unknown_step_type():
    problem = only(
        """
        protocol: p
        steps:
          a:
            type: asks
            question: x
        """
    )
    assert (problem.file, problem.step, problem.field, problem.line) == ("p.yaml", "a", "type", 5)
    assert "unknown step type 'asks'" in problem.message
    assert str(problem).startswith("p.yaml:5 step 'a' field 'type': unknown step type")


@pytest.mark.parametrize(("written", "shown"), [("[ask]", "['ask']"), ("{ask: x}", "{'ask': 'x'}")])
def test_a_step_type_that_is_no_name_is_a_located_error(written, shown):
    """Found by the type checker: telling the upstream dialect apart looked the type up in a dict,
    and a list or mapping there crashed the loader with "unhashable type" instead of naming it."""
    problem = only(
        f"""
        protocol: p
        steps:
          a:
            type: {written}
            question: x
        """
    )
    assert (problem.file, problem.step, problem.field, problem.line) == ("p.yaml", "a", "type", 5)
    assert problem.message.startswith(f"unknown step type {shown}; known: ask, query, branch")


@pytest.mark.parametrize(
    ("body", "field", "line"),
    [
        ("a: {type: ask, question: x, expects: string, next: nowhere}", "next", 4),
        ("a: {type: branch, condition: 'x', then: nowhere, else: $complete}", "then", 4),
        ("a: {type: branch, condition: 'x', then: $complete, else: nowhere}", "else", 4),
        ("a: {type: branch, condition: 'x', cases: {1: nowhere}, default: $complete}", "cases.1", 4),
        ("a: {type: branch, condition: 'x', cases: {1: $complete}, default: nowhere}", "default", 4),
        ("a: {type: call_protocol, protocol: other, on_complete: nowhere}", "on_complete", 4),
    ],
)
def test_targets_that_point_nowhere(body, field, line):
    problem = only(f"protocol: p\nsteps:\n  x: {{type: ask, question: q, expects: string}}\n  {body}\n")
    assert (problem.step, problem.field, problem.line) == ("a", field, line)
    assert "'nowhere', which is not a step" in problem.message


def test_unknown_expects_type():
    problem = only(
        """
        protocol: p
        steps:
          a:
            type: ask
            question: x
            expects:
              type: uuid
        """
    )
    assert (problem.step, problem.field, problem.line) == ("a", "expects.type", 7)
    assert "unknown expects type 'uuid'" in problem.message


def test_call_to_a_protocol_that_does_not_exist():
    problem = only(
        """
        protocol: p
        steps:
          a:
            type: call_protocol
            protocol: ghost
        """
    )
    assert (problem.step, problem.field, problem.line) == ("a", "protocol", 6)
    assert problem.message == "calls protocol 'ghost', which does not exist"


def test_no_path_to_complete():
    found = problems(
        """
        protocol: p
        steps:
          a: {type: ask, question: x, expects: string, next: b}
          b: {type: branch, condition: "a == 'x'", then: a, else: b}
        """
    )
    assert [(p.step, p.line, p.message) for p in found] == [
        ("a", 4, "no path from this step to $complete"),
        ("b", 5, "no path from this step to $complete"),
    ]


def test_yaml_1_1_booleans_do_not_change_meaning():
    # ``on:`` is the field "on" (unknown here), never the boolean True.
    problem = only(
        """
        protocol: p
        steps:
          a:
            type: ask
            question: x
            expects: string
            on: b
        """
    )
    assert (problem.field, problem.line) == ("on", 8)
    protocol = load(
        """
        protocol: p
        steps:
          a: {type: ask, question: x, expects: {type: enum, options: [yes, no, on, off, 010]}}
          b: {type: branch, condition: a, cases: {yes: $complete, no: $complete, true: $complete}}
        """
    )
    assert list(protocol.steps["a"].expects.get("options")) == ["yes", "no", "on", "off", "010"]
    assert list(protocol.steps["b"].cases) == ["yes", "no", "true"]


def test_several_problems_are_reported_together():
    found = problems(
        """
        protocol: p
        bogus: 1
        output: {summry: "x"}
        steps:
          a:
            type: ask
            question: "{x|shout}"
            expects: {type: string, min_lenght: 3}
            next: b
          b:
            type: create
            nodes:
              - {id: "n", node_type: planet, type: x}
              - {id: "m", node_type: narrative, type: x}
            links:
              - {type: likes, from: n, to: m, condition: "import os"}
        """
    )
    located = {(p.step, p.field) for p in found}
    assert {
        (None, "bogus"),
        (None, "output.summry"),
        ("a", "question"),
        ("a", "expects.min_lenght"),
        ("b", "nodes.0.node_type"),
        ("b", "nodes.1"),
        ("b", "links.0.type"),
        ("b", "links.0.condition"),
    } <= located
    assert any("a narrative node needs name" in p.message for p in found)


def test_a_key_given_twice_is_reported_not_silently_overwritten():
    problem = only(
        """
        protocol: p
        steps:
          a: {type: ask, question: x, expects: string}
          a: {type: ask, question: y, expects: string}
        """
    )
    assert (problem.line, problem.message) == (5, "'a' is given twice; the second would silently win")


def test_a_moment_on_a_step_that_cannot_record_one():
    problem = only(
        """
        protocol: p
        steps:
          a: {type: ask, question: x, expects: string}
          b:
            type: branch
            condition: a
            then: $complete
            moment: true
        """
    )
    assert (problem.step, problem.field, problem.line) == ("b", "moment", 9)


def test_invalid_yaml_gives_its_line():
    problem = only("protocol: p\nsteps:\n  a: {type: ask\n")
    assert problem.line is not None and "invalid YAML" in problem.message


def test_dependency_problems():
    found = problems(
        """
        protocol: p
        dependencies:
          - {id: d1, exists: "{x}", on_missing: {action: spawn, protocol: ghost}}
          - {id: d2, exists: "{x}", on_missing: explode}
          - {id: d3, on_missing: fail}
        steps:
          a: {type: ask, question: x, expects: string}
        """
    )
    assert [(p.field, p.line) for p in found] == [
        ("dependencies.0.on_missing", 4),
        ("dependencies.1.on_missing", 5),
        ("dependencies.2", 6),
    ]


def test_query_problems_are_located():
    found = problems(
        """
        protocol: p
        steps:
          a:
            type: query
            query: {find: planet, limit: -1, sort: name}
        """
    )
    assert {(p.step, p.field, p.line) for p in found} == {
        ("a", "query.node_type", 6),
        ("a", "query.limit", 6),
        ("a", "query.sort", 6),
    }


def test_library_finds_files_by_name_and_checks_call_targets(tmp_path):
    (tmp_path / "caller.yaml").write_text("protocol: caller\nsteps:\n  c: {type: call_protocol, protocol: add_behavior}\n")
    (tmp_path / "wrong_name.yaml").write_text("protocol: other\nsteps:\n  a: {type: ask, question: x, expects: string}\n")
    library = ProtocolLibrary([HERE, tmp_path])
    assert {"add_behavior", "add_invariant", "caller", "record_note", "wrong_name"} <= set(library.names())
    assert library.get("caller").steps["c"].protocol == "add_behavior"
    with pytest.raises(ProtocolLoadError, match="must live in a file named other.yaml"):
        library.get("wrong_name")
    described = {entry["name"]: entry for entry in library.describe()}
    assert "error" in described["wrong_name"] and described["record_note"]["description"]
