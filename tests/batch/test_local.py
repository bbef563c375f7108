"""A batch on local worker processes: six missions side by side, the same batch run again,
a broken mission file among good ones, a worker killed mid-mission, and the report."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cabal import run_mission
from cabal.batch import batch_status, run_batch
from cabal.batch.events import BatchEnded, BatchStarted, MissionAssigned, MissionEnded, MissionLost
from cabal.rounds.events import (Answered, MissionEvent, MissionStarted, MissionStopped, RunEnded, StepStarted,
                                 TurnDone, TurnStarted)
from cabal.batch.plan import load_plan
from cabal.exports import render_batch as render

from .conftest import ANSWER, INPUT, OUTPUT, QUESTION_SCRIPT, TOKENS, WorkerKiller, batch_file, cabal, cli, mission_facts, readme_requests

ESCAPES = re.compile(r"[\r\x1b]")


@pytest.fixture(scope="module")
def six(home: str, tmp_path_factory: pytest.TempPathFactory):
    """Six question missions, answered unattended, on two local worker processes."""
    folder = tmp_path_factory.mktemp("six")
    path = batch_file(folder, "six", readme_requests(6), answers=[ANSWER])
    events: list = []
    result = run_batch(path, workers=2, home=home, on_event=events.append)
    return path, result, events


def test_six_missions_run_side_by_side_on_two_local_workers(six) -> None:
    path, result, events = six

    assert result.ran == 6 and result.budget_spent is None
    report = result.report
    assert report.summary() == "6 missions: 6 done"
    assert [(r.key, r.state, r.stop_reason, r.round, r.rounds_limit, r.products_accepted, r.products_total,
             r.failed_turns, r.tokens, r.attempts) for r in report.rows] == [
        (f"r{n}", "done", "concluded", 1, 3, 1, 1, 0, TOKENS, 1) for n in range(1, 7)]
    assert [r.mission_id for r in report.rows] == [m.mission_id for m in load_plan(path).missions]
    totals = report.totals
    assert (totals.missions, totals.states, totals.tokens, totals.products_accepted) == (6, {"done": 6}, 6 * TOKENS, 6)
    assert all(r.duration_s > 0 for r in report.rows)

    kinds = [type(e).__name__ for e in events]
    assert kinds[0] == "BatchStarted" and kinds[-1] == "BatchEnded"
    assert isinstance(events[0], BatchStarted) and events[0].parallel == 2 and events[0].to_run == 6
    assert sum(isinstance(e, MissionAssigned) for e in events) == sum(isinstance(e, MissionEnded) for e in events) == 6
    # Never more than two missions at once, and every mission's own events, naming it.
    running, most = set(), 0
    for event in events:
        if isinstance(event, MissionAssigned):
            running.add(event.mission_id)
            most = max(most, len(running))
        elif isinstance(event, MissionEnded):
            running.discard(event.outcome.mission_id)
    assert most == 2
    own = [e for e in events if isinstance(e, MissionEvent)]
    assert {e.mission for e in own} == {r.mission_id for r in report.rows}
    assert {MissionStarted, StepStarted, TurnStarted, TurnDone, Answered, MissionStopped, RunEnded} <= {
        type(e) for e in own}
    assert sum(isinstance(e, TurnDone) for e in own) == 6 * 7  # every turn of every mission
    assert events[-1] == BatchEnded(report.batch_id, {"done": 6}, events[-1].elapsed_s, None)


def test_running_a_finished_batch_again_does_nothing_and_says_so(six, home: str) -> None:
    path, result, _ = six
    runs = Path(home, "batches", result.batch_id, "runs.jsonl").read_text()

    again = cabal("batch", str(path), "--home", home)

    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[0] == f"batch {result.batch_id}: nothing to run: 6 missions: 6 done"
    assert Path(home, "batches", result.batch_id, "runs.jsonl").read_text() == runs  # nothing ran
    assert again.stderr == "" and not ESCAPES.search(again.stdout)


def test_status_and_batches_show_where_it_is(six, home: str, capsys: pytest.CaptureFixture[str]) -> None:
    _, result, _ = six

    status, shown, _ = cli(capsys, "batch", "status", result.batch_id, "--home", home)
    listed, listing, _ = cli(capsys, "batches", "--home", home)
    _, as_json, _ = cli(capsys, "batch", "status", result.batch_id, "--json", "--home", home)

    assert status == listed == 0
    lines = shown.splitlines()
    assert lines[0] == f"{result.batch_id}: 6 missions: 6 done"
    assert lines[1] == f"  r1 {result.report.rows[0].mission_id}: done (concluded), round 1/3, 1/1 accepted"
    assert lines[-1] == f"usage: {6 * TOKENS:,} tokens, $0.0000, 0 failed turns"
    assert f"{result.batch_id}: 6 missions: 6 done" in listing.splitlines()
    data = json.loads(as_json)
    assert data["totals"]["tokens"] == 6 * TOKENS and len(data["missions"]) == 6


def test_the_batch_commands_that_read_load_no_engine_and_no_model_client(six, home: str, tmp_path: Path) -> None:
    # Like cabal status: reading a batch is reading graphs and files, without LangGraph,
    # LangChain or a provider SDK, whose imports cost a second.
    _, result, _ = six
    heavy = ("langgraph", "langchain_core", "langchain_anthropic", "anthropic", "langsmith")
    probe = ("import json, sys\nfrom cabal.cli import main\nmain(json.loads(sys.argv[1]))\n"
             "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & set(json.loads(sys.argv[2])))),"
             " file=sys.stderr)")
    for command in (["batch", "status", result.batch_id], ["batches"],
                    ["batch", "report", result.batch_id, "--format", "html", "--output", str(tmp_path / "b.html")]):
        ran = subprocess.run([sys.executable, "-c", probe, json.dumps([*command, "--home", home]), json.dumps(heavy)],
                             capture_output=True, text=True, timeout=60)
        assert json.loads(ran.stderr.strip().splitlines()[-1]) == [], (command, ran.stderr)


def test_the_report_in_each_format(six, home: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, result, _ = six
    first = result.report.rows[0]
    # A mission's own report, where one exists, is linked from the HTML page.
    own = Path(home, "missions", first.mission_id, "report.html")
    own.write_text("<html>mission report</html>")
    try:
        report = batch_status(result.batch_id, home=home)
        md, csv, data = render(report, "md"), render(report, "csv"), json.loads(render(report, "json"))
        page = tmp_path / "out" / "batch.html"
        page.parent.mkdir()
        status, written, _ = cli(capsys, "batch", "report", result.batch_id, "--format", "html", "--output", str(page),
                                 "--home", home)
    finally:
        own.unlink()

    assert md.splitlines()[0] == f"# Batch six ({result.batch_id})"
    assert md.splitlines()[2].startswith(f"6 missions: 6 done · {6 * TOKENS:,} tokens · $0.0000 · ")
    assert (f"| r1 `{first.mission_id}` | {first.request} | scripted:question.script.yaml | 1 | done (concluded) | "
            f"1/3 | 1/1 | 0 | {TOKENS:,} | $0.0000 |") in md
    assert f"| **total** (6) | | | | | | 6/6 | 0 | {6 * TOKENS:,} | $0.0000 |" in md
    rows = csv.splitlines()
    assert rows[0].startswith("key,mission_id,request,model,operatives,repeat,state,stop_reason,round,rounds_limit,"
                              "products_accepted,products_total,failed_turns,input_tokens,output_tokens,tokens,cost_usd")
    assert rows[1].startswith(f"r1,{first.mission_id},\"{first.request}\",scripted:question.script.yaml,1,1,done,concluded,"
                              f"1,3,1,1,0,{INPUT},{OUTPUT},{TOKENS},0.0,")
    assert rows[-1].startswith(f"total,,,,,,,,,,6,6,0,{6 * INPUT},{6 * OUTPUT},{6 * TOKENS},0.0,")
    assert data["totals"]["states"] == {"done": 6} and data["missions"][0]["report_path"] == str(own)

    assert status == 0 and written == f"wrote {page}\n"
    html = page.read_text()
    assert html.count("<svg") == 2  # outcomes and duration per mission; scripted models cost nothing:
    assert "no cost recorded: the models have no known prices" in html
    assert "<script" not in html and "http" not in html and "src=" not in html and "url(" not in html
    link = os.path.relpath(own, page.parent)
    assert f'<a href="{link}">{first.mission_id}</a>' in html
    assert html.count("<a href=") == 1  # only the mission whose report exists


def test_a_broken_mission_file_is_reported_while_the_others_finish(home: str, tmp_path: Path) -> None:
    for name in ("tally", "count"):
        (tmp_path / f"{name}.mission.yaml").write_text(
            f"request: Write the README intro for {name}.\nteam: {{operatives: 1}}\nrounds: 3\n"
            f"model: scripted:{QUESTION_SCRIPT}\nanswers: ['{ANSWER}']\n")
    broken = tmp_path / "broken.mission.yaml"
    broken.write_text("request: A team too big.\nteam:\n  operatives: 40\n")

    ran = cabal("batch", str(tmp_path), "--workers", "2", "--home", home)

    assert ran.returncode == 1, ran.stderr  # something could not run
    assert "Traceback" not in ran.stderr and not ESCAPES.search(ran.stdout)
    batch_id = load_plan(tmp_path).batch_id
    tokens = batch_status(batch_id, home=home).totals.tokens
    assert f"batch {batch_id}: 3 missions: 2 done, 1 invalid · {tokens:,} tokens · $0.0000" in ran.stdout.splitlines()
    broken_id = load_plan(tmp_path).missions[0].mission_id
    assert (f"invalid: broken.mission.yaml ({broken_id}): {broken}:3: invalid mission: team.operatives: "
            "Input should be less than or equal to 12") in ran.stdout.splitlines()
    states = [(r.key, r.state) for r in batch_status(batch_id, home=home).rows]
    assert states == [("broken.mission.yaml", "invalid"), ("count.mission.yaml", "done"), ("tally.mission.yaml", "done")]


def test_a_killed_worker_process_resumes_its_mission_with_the_graph_of_a_clean_run(home: str, tmp_path: Path) -> None:
    model = "py:slow_models:question"  # 80 ms a call: a mission is still running when its worker dies
    path = batch_file(tmp_path, "killed", readme_requests(6), model=model, answers=[ANSWER])
    clean = run_mission(load_plan(path).missions[0].spec, home=home)  # the reference, uninterrupted
    assert (clean.state, clean.stop_reason) == ("done", "concluded")
    killer = WorkerKiller()

    result = run_batch(path, workers=2, home=home, on_event=killer)

    killed, events = killer.killed, killer.events
    assert len(killed) == 1
    lost = [e for e in events if isinstance(e, MissionLost)]
    assert [(e.mission_id, e.attempt, e.reason, e.retry) for e in lost] == [
        (killed[0], 1, "its process was killed (signal 9)", True)]
    again = [e for e in events if isinstance(e, MissionAssigned) and e.mission_id == killed[0]]
    assert [(e.attempt, e.resumed) for e in again] == [(1, False), (2, True)]
    assert result.report.summary() == "6 missions: 6 done"
    assert {r.mission_id: r.attempts for r in result.report.rows}[killed[0]] == 2
    reference = mission_facts(home, clean.mission_id)
    for row in result.report.rows:
        assert mission_facts(home, row.mission_id) == reference, row.key


def test_the_report_reads_every_mission_over_one_connection(six, home: str, monkeypatch) -> None:
    from cabal.batch.report import collect
    from cabal.batch.store import BatchStore
    from cabal.graph import ContextGraph
    from cabal.rounds.workspace import Workspace

    path, result, _ = six
    workspace = Workspace.at(home)
    opened = []
    real_at = ContextGraph.at.__func__  # how a workspace opens a graph: on its server, resolved once
    monkeypatch.setattr(ContextGraph, "at", classmethod(lambda cls, *a, **k: opened.append(k.get("name"))
                                                        or real_at(cls, *a, **k)))
    report = collect(workspace, BatchStore(workspace.home, result.batch_id), load_plan(path))
    assert [row.state for row in report.rows] == ["done"] * 6  # every mission read
    assert opened == [report.rows[0].mission_id]  # one connection, where each mission opened its own
