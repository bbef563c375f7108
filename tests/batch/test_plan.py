"""What a batch is: plans from batch files (inline, CSV, JSONL, matrix, repeat), folders and
globs of mission files; stable ids; every broken input a located one-line error."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cabal.batch.plan import BatchSpec, load_plan
from cabal.errors import ConfigError

from .conftest import QUESTION_SCRIPT, batch_file, cabal

MISSION_ID = re.compile(r"m-[a-z0-9-]+-[0-9a-f]{8}")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_batch_file_runs_one_mission_template_over_many_requests(tmp_path: Path) -> None:
    path = write(tmp_path / "study.batch.yaml", """
name: readme-study
mission:
  team: {operatives: 2, names: {operative-1: Ada}}
  rounds: 4
  budget: {tokens: 50000}
  model: scripted:scripts/team.yaml
  answers: [Users first.]
requests:
  - Write the README intro for tally.
  - {request: Write the README intro for count., name: count-intro, answers: []}
budget: {tokens: 90000, cost_usd: 2.5}
""")

    plan = load_plan(path)

    assert plan.name == "readme-study"
    assert re.fullmatch(r"b-readme-study-[0-9a-f]{8}", plan.batch_id)
    assert plan.source == str(path.resolve())
    assert (plan.budget.tokens, plan.budget.cost_usd) == (90000, 2.5)
    assert [m.key for m in plan.missions] == ["r1", "r2"]
    first, second = plan.missions
    assert (first.spec.name, second.spec.name) == ("readme-study-1", "count-intro")
    assert first.mission_id.startswith("m-readme-study-1-") and second.mission_id.startswith("m-count-intro-")
    assert all(MISSION_ID.fullmatch(m.mission_id) for m in plan.missions)
    assert (first.spec.request, first.spec.answers, second.spec.answers) == (
        "Write the README intro for tally.", ["Users first."], [])
    assert (first.spec.team.operatives, first.spec.team.names, first.spec.rounds, first.spec.budget.tokens) == (
        2, {"operative-1": "Ada"}, 4, 50000)
    # A script's relative path is made absolute against the batch file, so any worker finds it.
    assert first.spec.model == f"scripted:{tmp_path / 'scripts' / 'team.yaml'}"
    assert first.model == "scripted:team.yaml"


def test_requests_from_csv_and_jsonl_with_a_matrix_and_a_repeat_count(tmp_path: Path) -> None:
    write(tmp_path / "requests.csv", "id,question\nfaq,Write the FAQ.\nintro,\"Write the intro, short.\"\n")
    write(tmp_path / "requests.jsonl", '{"q": "Write the FAQ."}\n\n{"q": "Write the intro."}\n')
    csv_plan = load_plan(write(tmp_path / "csv.batch.yaml", """
requests: {file: requests.csv, column: question, name_column: id}
matrix: {model: [claude-sonnet-4-6, claude-haiku-4-5], operatives: [1, 3]}
repeat: 2
"""))
    jsonl_plan = load_plan(write(tmp_path / "jsonl.batch.yaml", "requests: {file: requests.jsonl, column: q}\n"))

    assert [m.key for m in csv_plan.missions] == [
        f"r{r}-m{m}-o{o}-x{x}" for r in (1, 2) for m in (1, 2) for o in (1, 3) for x in (1, 2)]
    assert len({m.mission_id for m in csv_plan.missions}) == 16  # the same mission twice is two missions
    chosen = [(m.spec.name, m.spec.request, m.model, m.spec.team.operatives, m.repeat) for m in csv_plan.missions[:4]]
    assert chosen == [("faq", "Write the FAQ.", "claude-sonnet-4-6", 1, 1), ("faq", "Write the FAQ.", "claude-sonnet-4-6", 1, 2),
                      ("faq", "Write the FAQ.", "claude-sonnet-4-6", 3, 1), ("faq", "Write the FAQ.", "claude-sonnet-4-6", 3, 2)]
    assert csv_plan.missions[-1].spec.request == "Write the intro, short."
    assert csv_plan.missions[-1].model == "claude-haiku-4-5"
    assert [(m.key, m.spec.name, m.spec.request) for m in jsonl_plan.missions] == [
        ("r1", "jsonl-1", "Write the FAQ."), ("r2", "jsonl-2", "Write the intro.")]
    assert jsonl_plan.name == "jsonl"  # from the file name


def test_ids_stay_put_across_runs_and_an_edited_mission_is_a_new_one(tmp_path: Path) -> None:
    folder = tmp_path / "missions"
    write(folder / "a.mission.yaml", f"request: Write A.\nmodel: scripted:{QUESTION_SCRIPT}\n")
    write(folder / "b.mission.yaml", f"request: Write B.\nmodel: scripted:{QUESTION_SCRIPT}\n")
    write(folder / "b.script.yaml", "[]\n")  # not a mission file: a folder plan reads *.mission.yaml only

    first, again = load_plan(folder), load_plan(folder)
    write(folder / "b.mission.yaml", f"request: Write B, better.\nmodel: scripted:{QUESTION_SCRIPT}\n")
    edited = load_plan(folder)
    repeated = load_plan(folder, repeat=2)

    assert first == again
    assert first.name == "missions" and first.source == str(folder.resolve())
    assert [m.key for m in first.missions] == ["a.mission.yaml", "b.mission.yaml"]
    assert edited.batch_id == first.batch_id  # the same plan: found again by where it is
    assert edited.missions[0].mission_id == first.missions[0].mission_id
    assert edited.missions[1].mission_id != first.missions[1].mission_id
    assert [m.key for m in repeated.missions] == ["a.mission.yaml-x1", "a.mission.yaml-x2", "b.mission.yaml-x1",
                                                  "b.mission.yaml-x2"]


def test_a_glob_plans_the_files_it_matches(tmp_path: Path) -> None:
    write(tmp_path / "team" / "one.yaml", "request: One.\n")
    write(tmp_path / "team" / "deep" / "two.yaml", "request: Two.\n")

    plan = load_plan(str(tmp_path / "team" / "**" / "*.yaml"))

    assert plan.name == "team"
    assert [(m.key, m.request) for m in plan.missions] == [("deep/two.yaml", "Two."), ("one.yaml", "One.")]


def test_a_broken_mission_file_stays_in_the_plan_with_its_located_error(tmp_path: Path) -> None:
    write(tmp_path / "good.mission.yaml", "request: Fine.\n")
    bad = write(tmp_path / "bad.mission.yaml", "request: Too big a team.\nteam:\n  operatives: 40\n")
    broken = write(tmp_path / "broken.mission.yaml", "request: [unclosed\nteam: 2\n")

    plan = load_plan(tmp_path)

    assert [(m.key, m.spec is None) for m in plan.missions] == [
        ("bad.mission.yaml", True), ("broken.mission.yaml", True), ("good.mission.yaml", False)]
    assert plan.missions[0].error == f"{bad}:3: invalid mission: team.operatives: Input should be less than or equal to 12"
    assert plan.missions[1].error == f"mission file {broken}:2: invalid YAML: expected ',' or ']', but got ':'"


@pytest.mark.parametrize(("text", "files", "expected"), [
    ("requests: [unclosed\n", {}, "batch file {batch}:2: invalid YAML: expected ',' or ']', but got '<stream end>'"),
    ("requests: &r [A]\nmission: {answers: *r}\n", {},
     "batch file {batch}:2: invalid YAML: an alias (*r) is not allowed here; write the value out"),
    ("name: x\nrequests: [A]\nrepeats: 2\n", {},
     "{batch}:3: invalid batch file: unknown field `repeats`; did you mean `repeat`? (allowed: repeat, requests, "
     "expect, budget, matrix, name, mission)"),
    ("requests: [A]\nmission:\n  round: 2\n", {},
     "{batch}:3: invalid batch file: mission: unknown field `round`; did you mean `rounds`? (allowed: rounds, model, "
     "budget, models, request, sources, name, source_limits, tool_timeout_s, tools, memory, answers, chat_answers, max_tool_calls, gates, team)"),
    ("requests: [A]\nmission:\n  request: B\n", {},
     "{batch}:3: invalid batch file: mission.request: Input should be None"),
    ("requests: [A]\nmission:\n  team: {operatives: 0}\n", {},
     "{batch}:3: invalid batch file: mission.team.operatives: Input should be greater than or equal to 1"),
    ("requests: {file: r.csv, column: question}\n", {"r.csv": "id,request\n1,Hello\n"},
     "{folder}/r.csv:1: no column 'question' (columns: id, request)"),
    ("requests: {file: r.csv, column: request}\n", {"r.csv": "id,request\n1,Hello\n2,  \n"},
     "{folder}/r.csv:3: no request in 'request'"),
    ("requests: {file: r.jsonl, column: q}\n", {"r.jsonl": '{"q": "A"}\n{"q": \n'},
     "{folder}/r.jsonl:2: not valid JSON: Expecting value"),
    ("requests: {file: missing.csv, column: q}\n", {}, "requests file {folder}/missing.csv: cannot read: No such file or directory"),
    ("requests: []\n", {}, "{batch}: `requests` is empty"),
    ("requests: [A]\nmatrix: {operatives: [1, 13]}\n", {},
     "{batch} (request 1): invalid mission: team.operatives: Input should be less than or equal to 12"),
])
def test_a_broken_batch_file_is_one_located_line(tmp_path: Path, text: str, files: dict[str, str], expected: str) -> None:
    batch = write(tmp_path / "b.batch.yaml", text)
    for name, content in files.items():
        write(tmp_path / name, content)

    with pytest.raises(ConfigError) as error:
        load_plan(batch)

    message = expected.format(batch=batch.resolve(), folder=tmp_path.resolve())
    assert str(error.value) == message and "\n" not in message


def test_a_plan_that_names_nothing_says_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no such file or folder"):
        load_plan(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match=r"no mission files \(\*\.mission\.yaml or \*\.mission\.yml\) in this folder"):
        load_plan(tmp_path)
    with pytest.raises(ConfigError, match=r"no file matches this pattern"):
        load_plan(str(tmp_path / "*.yaml"))


def test_the_batch_schema_documents_the_file(tmp_path: Path) -> None:
    printed = cabal("schema", "batch")
    schema = json.loads(printed.stdout)

    assert printed.returncode == 0
    assert schema == BatchSpec.model_json_schema()
    assert set(schema["properties"]) == {"name", "mission", "requests", "matrix", "repeat", "budget", "expect"}
    assert "judge" in schema["$defs"]["Expectations"]["properties"]  # what `cabal eval` checks
    assert schema["required"] == ["requests"]
    template = schema["$defs"]["MissionTemplate"]["properties"]
    assert {"team", "rounds", "budget", "model", "models", "answers"} <= set(template)
    assert set(schema["$defs"]["Matrix"]["properties"]) == {"model", "models", "operatives", "rounds"}
    # and it is the file the tests' batches are written in
    assert load_plan(batch_file(tmp_path, "schema-check", ["A"])).missions[0].spec.request == "A"


def test_a_folder_plan_lists_the_yaml_files_it_does_not_run(tmp_path: Path) -> None:
    write(tmp_path / "good.mission.yaml", "request: Fine.\n")
    write(tmp_path / "clinic.yml", "request: Booking onboarding.\n")
    write(tmp_path / "notes.txt", "not YAML, not said")

    plan = load_plan(tmp_path)

    assert [m.key for m in plan.missions] == ["good.mission.yaml"]
    assert plan.skipped == (("clinic.yml", "not named *.mission.yaml: rename it clinic.mission.yml to run it"),)
