"""Loading procedure files: the format, located problems, and A3 (no step without a guide)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cabal.errors import ProtocolLoadError, ProtocolProblem, ResourceNotFound
from cabal.procedures import (
    LinkRequirement,
    NodeRequirement,
    Procedures,
    Selector,
    Validation,
    list_procedures,
    load_file,
    load_procedure,
    parse_procedure,
)

MISSING_HOW = """\
procedure: broken
description: The second step has no how.
steps:
  - id: gather
    title: Gather notes
    guide:
      what: Write notes.
      why: They feed the summary.
      how: Record narratives of type note.
  - id: summarize
    title: Summarize
    guide:
      what: Write a summary.
      why: One page beats a pile.
"""


TEST_PROCEDURES_FILE = Path(__file__).parent / "procedures" / "checklist.yaml"


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return path


def test_a3_step_without_how_is_refused_at_load_with_file_step_field_and_line(tmp_path):
    path = write(tmp_path, "broken", MISSING_HOW)
    with pytest.raises(ProtocolLoadError) as caught:
        load_file(path)
    guide_line = MISSING_HOW.splitlines().index("    guide:", 6) + 1
    assert guide_line == 12
    assert caught.value.problems == [
        ProtocolProblem(
            file=str(path),
            message="guide.how is missing: every step needs What, Why and How",
            step="summarize",
            field="guide.how",
            line=12,
        )
    ]
    assert str(caught.value) == (
        f"{path}:12 step 'summarize' field 'guide.how': guide.how is missing: every step needs What, Why and How"
    )


def test_a3_refused_at_creation_time_so_nothing_reaches_the_graph(graph, actor, tmp_path):
    write(tmp_path, "broken", MISSING_HOW)
    with pytest.raises(ProtocolLoadError, match="field 'guide.how'"):
        Procedures(graph, [tmp_path]).start_procedure("broken", actor)
    assert graph.counts() == {"nodes": 1, "links": 0}  # only the actor


def test_every_problem_of_a_file_is_reported_at_once(tmp_path):
    text = """\
procedure: other_name
description: ""
steps:
  - id: one
    title: One
    guide:
      what: "   "
      why: Because.
      hwo: Typo.
  - id: one
    title: Again
    validation:
      requires:
        - {node_type: gadget, min: 0}
      links:
        - {type: loves, from: {node_type: narrative}}
completion: []
"""
    path = write(tmp_path, "many", text)
    with pytest.raises(ProtocolLoadError) as caught:
        load_file(path)
    located = [(p.step, p.field, p.line) for p in caught.value.problems]
    assert located == [
        (None, "procedure", 1),
        (None, "description", 2),
        ("one", "guide.hwo", 9),
        ("one", "guide.what", 7),
        ("one", "guide.how", 6),
        ("one", "id", 10),
        ("one", "guide", 10),
        ("one", "validation.requires.0.node_type", 14),
        ("one", "validation.requires.0.min", 14),
        ("one", "validation.links.0.type", 16),
        (None, "completion", 17),
    ]
    messages = [p.message for p in caught.value.problems]
    assert messages[0] == "procedure 'other_name' must live in a file named other_name.yaml"
    assert messages[3] == "guide.what is empty: every step needs What, Why and How"
    assert messages[5] == "step id 'one' is used twice"
    assert messages[7].startswith("unknown node type 'gadget'")


def test_invalid_yaml_is_located():
    with pytest.raises(ProtocolLoadError) as caught:
        parse_procedure("procedure: x\nsteps: [\n", "x.yaml")
    assert caught.value.problems[0].file == "x.yaml"
    assert caught.value.problems[0].line == 3
    assert caught.value.problems[0].message.startswith("invalid YAML")


def test_format_parses_guides_gates_and_completion():
    procedure = load_procedure("checklist", [Path(__file__).parent / "procedures"])
    assert [step.id for step in procedure.steps] == ["gather", "summarize", "sign"]
    summarize = procedure.steps[1]
    assert summarize.guide.watch_out == "Do not add facts that are not in a note."
    assert summarize.validation == Validation(
        requires=(NodeRequirement(Selector("narrative", "note"), 2, ("content",)),)
    )
    assert procedure.steps[2].validation.links == (
        LinkRequirement("about", Selector("narrative", "summary"), Selector("narrative", "note"), 2),
    )
    assert procedure.steps[0].validation is None
    assert procedure.completion == Validation(requires=(NodeRequirement(Selector("narrative", "signoff"), 1),))
    assert procedure.gate_after(0) is summarize.validation
    assert procedure.gate_after(2) is procedure.completion
    assert load_procedure(str(TEST_PROCEDURES_FILE)) == procedure  # a path works as well as a name
    for validation in (summarize.validation, procedure.steps[2].validation, procedure.completion):
        assert Validation.from_json(validation.to_json()) == validation


def test_list_procedures_shows_shipped_ones_user_overrides_and_broken_files(tmp_path):
    shipped = {entry["name"]: entry for entry in list_procedures()}
    assert shipped["write_adr"]["steps"] == ["frame", "options", "decide", "consequences"]
    assert shipped["incident_review"]["steps"] == ["timeline", "impact", "causes", "actions"]
    assert shipped["write_adr"]["problem"] is None and shipped["incident_review"]["problem"] is None

    override = (Path(__file__).parents[2] / "procedures" / "write_adr.yaml").read_text()
    override = override.replace("Write an architecture decision record (ADR)", "Our own ADR")
    write(tmp_path, "write_adr", override)
    write(tmp_path, "broken", MISSING_HOW)
    listed = {entry["name"]: entry for entry in list_procedures([tmp_path])}
    assert listed["write_adr"]["path"] == str(tmp_path / "write_adr.yaml")
    assert listed["write_adr"]["description"].startswith("Our own ADR")
    assert listed["broken"]["steps"] == []
    assert "step 'summarize' field 'guide.how'" in listed["broken"]["problem"]
    assert load_procedure("write_adr", [tmp_path]).description.startswith("Our own ADR")


def test_unknown_procedure_names_the_known_ones():
    with pytest.raises(ResourceNotFound) as caught:
        load_procedure("no_such_thing")
    assert caught.value.kind == "procedure"
    assert {"write_adr", "incident_review"} <= set(caught.value.known)


def test_shipped_steps_have_complete_guides():
    for name in ("write_adr", "incident_review"):
        procedure = load_procedure(name)
        assert len(procedure.steps) == 4
        for step in procedure.steps:
            assert all(len(text) > 80 for text in (step.guide.what, step.guide.why, step.guide.how)), step.id
            assert step.guide.watch_out
        assert all(step.validation for step in procedure.steps[1:])
        assert procedure.completion is not None
