"""The batch commands' edges: every mistake one line with its exit status, and the live view
(one updating line on a terminal, plain lines otherwise)."""

from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path

import pytest

from cabal.batch.events import BatchEnded, BatchStarted, BudgetReached, MissionAssigned, MissionEnded, MissionOutcome
from cabal.batch.progress import BatchProgress
from cabal.cli import exits
from cabal.llm.usage import Usage
from cabal.rounds.events import EVENT_TYPES, TurnDone
from cabal.vocabulary import Step, TurnOutcome

from .conftest import ANSWER, batch_file, cli, readme_requests


@pytest.mark.parametrize(("args", "message", "code"), [
    (["batch", "nope.yaml"], "cabal: nope.yaml: no such file or folder", exits.USAGE),
    (["batch", "status"], "cabal: cabal batch status needs a batch id", exits.USAGE),
    (["batch", "status", "b-nope"], "cabal: batch not found: 'b-nope'", exits.FAILED),
    (["batch", "report", "b-nope", "--workers", "2"], "cabal: --workers does not apply to cabal batch report", exits.USAGE),
    (["batch", "resume", "b-nope", "--answer", "no-equals-sign"], "cabal: --answer 'no-equals-sign': expected MISSION_ID=TEXT", exits.USAGE),
    (["batch", "{plan}", "--format", "csv"], "cabal: --format does not apply to cabal batch PLAN", exits.USAGE),
    (["batch", "{plan}", "--dask", "nowhere"], "cabal: --dask nowhere: expected local:N or a scheduler address such as tcp://HOST:8786", exits.USAGE),
    (["batch", "{plan}", "more.yaml"], "cabal: cabal batch {plan} more.yaml: one PLAN at a time", exits.USAGE),
])
def test_a_mistake_is_one_line_with_its_exit_status(home: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    args: list[str], message: str, code: int) -> None:
    plan = str(batch_file(tmp_path, "edges", ["A request."]))

    status, out, err = cli(capsys, *[a.replace("{plan}", plan) for a in args], "--home", home)

    assert status == code  # usage: the command line or a file is wrong; a batch not found, like a mission
    assert err.splitlines()[0].startswith(message.replace("{plan}", plan))
    assert len(err.splitlines()) <= 2 and out == ""  # the message, and maybe a hint


def test_the_live_view_keeps_one_line_current_on_a_terminal() -> None:
    terminal = _Terminal()
    view = BatchProgress(terminal)

    for event in _events():
        view(event)

    shown = terminal.getvalue()
    assert shown.startswith("\r\x1b[Kbatch b-demo-1: 3 missions, 1 finished before; running 2 on 2 local processes\n")
    assert "\r\x1b[Km-a (r1) done (concluded) in 4.0 s\n" in shown
    assert shown.endswith("\r\x1b[K2/3 done · 1 running · 0 halted · 0 failed · 1,500 tokens of 20,000 · $0.0300 of $1.00 "
                          "· ~4.0 s left")
    assert view.status_line() == ("2/3 done · 1 running · 0 halted · 0 failed · 1,500 tokens of 20,000 · $0.0300 of $1.00 "
                                  "· ~4.0 s left")


def test_the_view_is_plain_lines_when_output_is_not_a_terminal() -> None:
    out = io.StringIO()
    view = BatchProgress(out, verbose=True)

    for event in [*_events(), BudgetReached("the batch's token budget is spent (20,000 of 20,000 tokens)"),
                  BatchEnded("b-demo-1", {"done": 2, "interrupted": 1}, 12.5, None)]:
        view(event)

    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()
    assert lines == [
        "batch b-demo-1: 3 missions, 1 finished before; running 2 on 2 local processes "
        "[1/3 done · 0 running · 0 halted · 0 failed · 1,000 tokens of 20,000 · $0.0100 of $1.00]",
        "m-a (r1) starts on vm:11",
        "m-b (r2) starts on vm:12",
        "m-b · turn_done · round 1 · step write · agent operative-1 · outcome final · attempts 1 · calls 1 · "
        "input_tokens 400 · output_tokens 100 · cache_read_tokens 0 · cost_usd 0.01 · priced True",
        "m-a (r1) done (concluded) in 4.0 s "
        "[2/3 done · 1 running · 0 halted · 0 failed · 1,500 tokens of 20,000 · $0.0300 of $1.00 · ~4.0 s left]",
        "the batch's token budget is spent (20,000 of 20,000 tokens): no new model call starts; running missions pause "
        "[2/3 done · 1 running · 0 halted · 0 failed · 1,500 tokens of 20,000 · $0.0300 of $1.00 · ~4.0 s left]",
        "batch b-demo-1 ended in 12.5 s: 2 done, 1 interrupted "
        "[2/3 done · 1 running · 0 halted · 0 failed · 1,500 tokens of 20,000 · $0.0300 of $1.00 · ~4.0 s left]",
    ]


def test_events_go_to_a_file_as_json_lines_the_missions_own_as_cabal_run_writes_them(
        home: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = batch_file(tmp_path, "events", readme_requests(2), answers=[ANSWER])
    events_file = tmp_path / "events.jsonl"

    status, out, _ = cli(capsys, "batch", str(plan), "--workers", "2", "--events", str(events_file), "--home", home)

    assert status == 0, out
    events = [json.loads(line) for line in events_file.read_text().splitlines()]
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "batch_start" and kinds[-1] == "batch_end"
    assert kinds.count("mission_assigned") == kinds.count("mission_end") == 2
    missions = {e["mission_id"] for e in events if e["kind"] == "mission_assigned"}
    # The missions' own lines, exactly as `cabal run --events` writes them: each names its mission.
    own = [e for e in events if e["kind"] in EVENT_TYPES]
    assert {e["mission"] for e in own} == missions
    assert {"mission_start", "step_start", "turn_start", "turn_done", "answer", "stop", "run_end"} <= {
        e["kind"] for e in own}
    assert sum(e["kind"] == "turn_done" for e in own) == 2 * 7  # every turn of both missions
    assert events[-1]["counts"] == {"done": 2}


def test_quiet_shows_only_the_outcome_as_cabal_run_does(home: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    plan = batch_file(tmp_path, "hushed", readme_requests(1), answers=[ANSWER])

    status, out, err = cli(capsys, "batch", str(plan), "--workers", "1", "--quiet", "--home", home)

    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith("batch b-hushed-") and lines[0].split(": ", 1)[1].startswith("1 mission: 1 done · ")
    assert lines[1:] == [f"report: cabal batch report {lines[0].split(':')[0].removeprefix('batch ')} "
                         "--format html --output report.html"]
    assert cli(capsys, "batch", str(plan), "--quiet", "--verbose", "--home", home)[2].startswith(
        "cabal: --quiet and --verbose contradict each other")


def test_a_batchs_folders_and_files_are_private_to_its_owner(home: str, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    plan = batch_file(tmp_path, "private", readme_requests(1), answers=[ANSWER])
    previous = os.umask(0o022)  # the usual umask: whatever Cabal did not make private would be readable by all
    try:
        status, out, _ = cli(capsys, "batch", str(plan), "--workers", "1", "--max-concurrent", "1", "--quiet",
                             "--home", home)
    finally:
        os.umask(previous)
    assert status == 0, out

    batches = Path(home) / "batches"
    batch_id = out.split(":", 1)[0].removeprefix("batch ")
    modes = {str(path.relative_to(batches)): stat.S_IMODE(path.stat().st_mode)
             for path in [batches, batches / batch_id, *(batches / batch_id).rglob("*")]}

    assert {name: mode for name, mode in modes.items() if not name.startswith(f"{batch_id}/limits/")} == {
        ".": 0o700, batch_id: 0o700, f"{batch_id}/plan.json": 0o600, f"{batch_id}/runs.jsonl": 0o600,
        f"{batch_id}/lock": 0o600, f"{batch_id}/limits": 0o700}
    limits = {name: mode for name, mode in modes.items() if name.startswith(f"{batch_id}/limits/")}
    assert limits[f"{batch_id}/limits/slots"] == 0o700 and limits[f"{batch_id}/limits/slots/0"] == 0o600
    assert set(limits.values()) <= {0o700, 0o600}, limits
    assert (Path(home) / ".gitignore").read_text().splitlines()[-1] == "*"


def test_no_batch_event_has_the_kind_of_a_mission_event() -> None:
    # One --events file holds both: a reader tells them apart by kind alone.
    from cabal.batch import events as batch_events

    kinds = {value.kind for value in vars(batch_events).values()
             if isinstance(value, type) and issubclass(value, batch_events._Event) and value is not batch_events._Event}
    assert len(kinds) == 6 and not kinds & set(EVENT_TYPES)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _events() -> list:
    """Three missions: m-c finished before (1,000 tokens, $0.01); m-a and m-b run on two workers."""
    return [
        BatchStarted("b-demo-1", "demo", 3, 2, 1, "2 local processes", 2,
                     {"m-a": "pending", "m-b": "pending", "m-c": "done"},
                     {"m-a": (0, 0.0), "m-b": (0, 0.0), "m-c": (1000, 0.01)}, 20_000, 1.0),
        MissionAssigned("m-a", "r1", 1, "vm:11", resumed=False),
        MissionAssigned("m-b", "r2", 1, "vm:12", resumed=False),
        TurnDone("m-b", round=1, step=Step.WRITE, agent="operative-1", outcome=TurnOutcome.FINAL, attempts=1, calls=1,
                 input_tokens=400, output_tokens=100, cache_read_tokens=0, cost_usd=0.01, problems=(), summary=""),
        MissionEnded("r1", MissionOutcome("m-a", 1, "done", "concluded", 3, Usage(input_tokens=0, output_tokens=0),
                                          0.01, elapsed_s=4.0)),
    ]


@pytest.mark.parametrize(("states", "failed_turns", "code"), [
    (["done", "done"], 0, exits.DONE),
    (["done", "done"], 2, exits.FAILED_TURNS),
    (["done", "interrupted", "pending"], 0, exits.INTERRUPTED),
    (["done", "halted", "interrupted"], 0, exits.HALTED),
    (["halted", "invalid"], 0, exits.FAILED),
    (["done", "refused"], 0, exits.FAILED),
    (["failed", "halted"], 0, exits.FAILED),
])
def test_a_batch_exits_with_its_worst_missions_status(states: list[str], failed_turns: int, code: int) -> None:
    from cabal.batch.plan import BatchBudget
    from cabal.batch.report import BatchReport
    from cabal.cli.batch import batch_exit

    from .test_render import row

    rows = tuple(row(f"k{n}", state, 0.0, 1.0, failed_turns=failed_turns if n == 0 else 0)
                 for n, state in enumerate(states))
    assert batch_exit(BatchReport("b-x-00000000", "x", "/x", False, BatchBudget(), rows)) == code


def test_a_folder_batch_says_which_files_it_skips_and_counts_a_mission_that_did_not_load(
        home: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "broken.mission.yaml").write_text("request: A.\nround: 2\n")
    (tmp_path / "clinic.yaml").write_text("request: B.\n")
    (tmp_path / "all.batch.yaml").write_text("requests: [C.]\n")

    status, out, _ = cli(capsys, "batch", str(tmp_path), "--home", home)

    lines = out.splitlines()
    assert lines[:2] == [f"skipped all.batch.yaml: a batch file: run it alone, cabal batch {tmp_path / 'all.batch.yaml'}",
                         "skipped clinic.yaml: not named *.mission.yaml: rename it clinic.mission.yaml to run it"]
    assert status == exits.FAILED
    assert lines[2].endswith(": nothing to run: 1 mission: 1 invalid")
    assert lines[3].endswith(f"{tmp_path / 'broken.mission.yaml'}:2: invalid mission: unknown field `round`; "
                             "did you mean `rounds`? (allowed: rounds, model, budget, models, request, sources, name, source_limits, tool_timeout_s, tools, memory, answers, chat_answers, max_tool_calls, gates, team)")


def test_the_live_counter_counts_a_mission_that_did_not_load() -> None:
    view = BatchProgress(io.StringIO())

    view(BatchStarted("b-demo-2", "demo", 3, 2, 1, "2 local processes", 2,
                      {"m-a": "pending", "m-b": "pending", "m-bad": "invalid"}, {}))

    assert view.status_line() == "0/3 done · 0 running · 0 halted · 1 failed · 0 tokens · $0.0000"


def test_batch_takes_model_like_run_and_it_becomes_every_missions_model(home: str, tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from cabal.batch.api import batch_status

    plan = str(batch_file(tmp_path, "simulated", ["Write a short guide to brewing tea."]))  # the file's: a script

    status, out, err = cli(capsys, "batch", plan, "--repeat", "2", "--model", "simulated", "--quiet", "--workers", "1",
                           "--home", home)

    assert status == exits.DONE, out + err
    rows = batch_status(out.split("batch ", 1)[1].split(":", 1)[0], home=home).rows
    assert [(row.key, row.model, row.state) for row in rows] == [("r1-x1", "simulated", "done"),
                                                                  ("r1-x2", "simulated", "done")]
    refused = cli(capsys, "batch", str(batch_file(tmp_path, "compare", ["A request."],
                                                  matrix={"model": ["simulated", "simulated"]})),
                  "--model", "simulated", "--home", home)
    assert refused[0] == exits.USAGE and refused[2].startswith("cabal: --model simulated: ")
    assert "compares models (matrix.model or matrix.models); change the matrix instead" in refused[2]
