"""``cabal protocols check``: every problem in one pass, template names nothing provides included."""

from __future__ import annotations

import textwrap

from cabal.cli import main
from cabal.membrane import Membrane

# Before, fixing the first three problems revealed the next two: a step that could not be read
# hid where it went, and "no path to $complete" waited for everything else to be fixed.
WAVES = """\
protocol: waves
context: [space_id]
steps:
  first:
    type: asks
    question: What?
    next: nowhere
  second:
    type: ask
    question: Which?
    expects: {type: id_list, node_type: gadget}
    next: also_nowhere
  circle:
    type: branch
    condition: "{second} is empty"
    then: circle
    else: circle
  write:
    type: create
    nodes:
      - {id: "n-{notez}", node_type: narrative, type: note, name: "{second}"}
    links:
      - {type: contains, from: "{space_id}", to: "n-{notez}"}
"""


def check(tmp_path, capsys, name: str, text: str) -> tuple[int, list[str], str]:
    path = tmp_path / f"{name}.yaml"
    path.write_text(textwrap.dedent(text))
    code = main(["protocols", "check", str(path)])
    captured = capsys.readouterr()
    return code, [line.replace(f"{path}", "F") for line in captured.out.splitlines()], captured.err


def test_every_problem_in_one_pass(tmp_path, capsys):
    code, lines, err = check(tmp_path, capsys, "waves", WAVES)
    assert code == 1
    assert lines == [
        "F:5 step 'first' field 'type': unknown step type 'asks'; known: ask, query, branch, call_protocol, create, "
        "update, set, each, complete, read_file, move_file",
        "F:11 step 'second' field 'expects.node_type': unknown node_type 'gadget'; known: acceptance, actor, agent, "
        "assignment, chair_decision, chunk, collab, directive, fact, finding, halt, inspection, library_item, message, mission, "
        "moment, narrative, product, reflection, remark, response, review, session, source, space, thing, user, "
        "version",
        "F:7 step 'first' field 'next': next points to 'nowhere', which is not a step of this protocol",
        "F:12 step 'second' field 'next': next points to 'also_nowhere', which is not a step of this protocol",
        "F:13 step 'circle': no path from this step to $complete",
        "F:21 step 'write' field 'nodes.0.id': nothing provides {notez}: not the steps before this one, a loop "
        "variable, a built-in or the declared context (declare it under 'context:' if the caller passes it); "
        "also read in 1 other place(s)",
    ]
    assert err == "6 problem(s) in 1 of 1 protocol file(s)\n"


NOTES = """\
protocol: notes
context: [space_id]
steps:
  notes:
    type: ask
    question: What did you notice in {space_id}?
    expects: {type: string, min_length: 3}
  write:
    type: create
    nodes:
      - {id: "note-{space_id|slugify}", node_type: narrative, type: note, name: "{notez}"}
    links:
      - {type: contains, from: "{space_id}", to: "note-{space_id|slugify}"}
"""


def test_a_misspelt_answer_is_found_before_anything_runs(tmp_path, capsys):
    code, lines, _ = check(tmp_path, capsys, "notes", NOTES)
    assert (code, lines) == (1, [
        "F:11 step 'write' field 'nodes.0.name': nothing provides {notez}: not the steps before this one, a loop "
        "variable, a built-in or the declared context (declare it under 'context:' if the caller passes it)"
    ])  # fmt: skip
    assert check(tmp_path, capsys, "notes", NOTES.replace("{notez}", "{notes}"))[:2] == (0, ["ok: 1 protocol file(s) checked"])


def test_the_runtime_still_reads_undeclared_names_from_the_context(graph):
    membrane = Membrane(graph)
    protocol = membrane.load_string(NOTES.replace("context: [space_id]\n", ""))
    assert protocol.context is None and protocol.name == "notes"


def test_without_a_declaration_each_context_name_is_reported_once(tmp_path, capsys):
    code, lines, _ = check(tmp_path, capsys, "notes", NOTES.replace("context: [space_id]\n", ""))
    assert code == 1
    assert lines == [
        "F:5 step 'notes' field 'question': nothing provides {space_id}: not the steps before this one, a loop "
        "variable, a built-in or the declared context (list the names a protocol reads from its context under "
        "'context:' if the caller passes it); also read in 3 other place(s)",
        "F:10 step 'write' field 'nodes.0.name': nothing provides {notez}: not the steps before this one, a loop "
        "variable, a built-in or the declared context (list the names a protocol reads from its context under "
        "'context:' if the caller passes it)",
    ]


def test_a_name_is_provided_by_an_earlier_step_or_a_loop_only(tmp_path, capsys):
    code, lines, _ = check(tmp_path, capsys, "order", """\
        protocol: order
        context: []
        steps:
          early:
            type: ask
            question: "Before {late}?"
            expects: string
          late:
            type: ask
            question: Now?
            expects: {type: string_list}
          write:
            type: create
            nodes:
              - {for_each: late, id: "n-{index}", node_type: narrative, type: note, name: "{item}"}
              - {id: "m", node_type: narrative, type: note, name: "{item}"}
            links:
              - {for_each: late, type: relates, from: "n-{index}", to: m}
        """)
    assert code == 1
    assert [line.split(": nothing provides ")[0] + " " + line.split("nothing provides ")[1][:8] for line in lines] == [
        "F:6 step 'early' field 'question' {late}: ",
        "F:16 step 'write' field 'nodes.1.name' {item}: ",
    ]


def test_names_a_called_protocol_leaves_count_after_the_call(tmp_path, capsys):
    (tmp_path / "inner.yaml").write_text("protocol: inner\ncontext: []\nsteps:\n  picked: {type: ask, question: x, expects: string}\n")
    (tmp_path / "outer.yaml").write_text(textwrap.dedent("""\
        protocol: outer
        context: []
        steps:
          go: {type: call_protocol, protocol: inner}
          use: {type: ask, question: "You picked {picked}; and {unheard}?", expects: string}
        """))
    assert main(["protocols", "check", str(tmp_path / "outer.yaml"), str(tmp_path / "inner.yaml")]) == 1
    out = capsys.readouterr().out
    assert "{unheard}" in out and "{picked}" not in out


def test_upstream_dialect_files_read_their_context_implicitly(tmp_path, capsys):
    code, lines, _ = check(tmp_path, capsys, "upstream", """\
        protocol: upstream
        triggers: [{event: x}]
        steps:
          ask_it:
            type: ask
            context: "In {space}"
            questions:
              - {name: answer_one, ask: "One?", expects: {type: string}}
            next: $complete
        """)
    assert (code, lines) == (0, ["ok: 1 protocol file(s) checked"])
