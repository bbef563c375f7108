"""The batch commands' edges: every mistake one line with exit status 1, and the live view
(one updating line on a terminal, plain lines otherwise)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from cabal.batch.events import BatchEnded, BatchStarted, BudgetReached, MissionEnded, MissionOutcome, MissionStarted, tagged
from cabal.batch.progress import BatchProgress
from cabal.llm.usage import Usage

from .conftest import ANSWER, batch_file, cli, readme_requests


@pytest.mark.parametrize(("args", "message"), [
    (["batch", "nope.yaml"], "cabal: nope.yaml: no such file or folder"),
    (["batch", "status"], "cabal: cabal batch status needs a batch id"),
    (["batch", "status", "b-nope"], "cabal: batch not found: 'b-nope'"),
    (["batch", "report", "b-nope", "--workers", "2"], "cabal: --workers does not apply to cabal batch report"),
    (["batch", "resume", "b-nope", "--answer", "no-equals-sign"], "cabal: --answer 'no-equals-sign': expected MISSION_ID=TEXT"),
    (["batch", "{plan}", "--format", "csv"], "cabal: --format does not apply to cabal batch PLAN"),
    (["batch", "{plan}", "--dask", "nowhere"], "cabal: --dask nowhere: expected local:N or a scheduler address such as tcp://HOST:8786"),
    (["batch", "{plan}", "more.yaml"], "cabal: cabal batch {plan} more.yaml: one PLAN at a time"),
])
def test_a_mistake_is_one_line_and_exit_status_1(home: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 args: list[str], message: str) -> None:
    plan = str(batch_file(tmp_path, "edges", ["A request."]))

    status, out, err = cli(capsys, *[a.replace("{plan}", plan) for a in args], "--home", home)

    assert status == 1
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
        "m-b · turn_done · round 1 · step write · agent operative-1 · outcome final · input_tokens 400 · "
        "output_tokens 100 · cost_usd 0.01",
        "m-a (r1) done (concluded) in 4.0 s "
        "[2/3 done · 1 running · 0 halted · 0 failed · 1,500 tokens of 20,000 · $0.0300 of $1.00 · ~4.0 s left]",
        "the batch's token budget is spent (20,000 of 20,000 tokens): no new model call starts; running missions pause "
        "[2/3 done · 1 running · 0 halted · 0 failed · 1,500 tokens of 20,000 · $0.0300 of $1.00 · ~4.0 s left]",
        "batch b-demo-1 ended in 12.5 s: 2 done, 1 interrupted "
        "[2/3 done · 1 running · 0 halted · 0 failed · 1,500 tokens of 20,000 · $0.0300 of $1.00 · ~4.0 s left]",
    ]


def test_events_go_to_a_file_as_json_lines_the_missions_own_tagged_with_their_id(
        home: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = batch_file(tmp_path, "events", readme_requests(2), answers=[ANSWER])
    events_file = tmp_path / "events.jsonl"

    status, out, _ = cli(capsys, "batch", str(plan), "--workers", "2", "--events", str(events_file), "--home", home)

    assert status == 0, out
    events = [json.loads(line) for line in events_file.read_text().splitlines()]
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "batch_start" and kinds[-1] == "batch_end"
    assert kinds.count("mission_start") == kinds.count("mission_end") == 2
    missions = {e["mission_id"] for e in events if e["kind"] == "mission_start"}
    own = [e for e in events if e["kind"] in ("start", "step", "turn_start", "turn_done", "answer", "stop")]
    assert {e["mission"] for e in own} == missions
    assert sum(e["kind"] == "turn_done" for e in own) == 2 * 13  # every turn of both missions
    assert events[-1]["counts"] == {"done": 2}


def test_a_mission_event_is_forwarded_with_its_mission() -> None:
    assert tagged({"kind": "step", "round": 1, "step": "write"}, "m-a") == {
        "kind": "step", "round": 1, "step": "write", "mission": "m-a"}


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _events() -> list:
    """Three missions: m-c finished before (1,000 tokens, $0.01); m-a and m-b run on two workers."""
    return [
        BatchStarted("b-demo-1", "demo", 3, 2, 1, "2 local processes", 2,
                     {"m-a": "pending", "m-b": "pending", "m-c": "done"},
                     {"m-a": (0, 0.0), "m-b": (0, 0.0), "m-c": (1000, 0.01)}, 20_000, 1.0),
        MissionStarted("m-a", "r1", 1, "vm:11", resumed=False),
        MissionStarted("m-b", "r2", 1, "vm:12", resumed=False),
        tagged({"kind": "turn_done", "round": 1, "step": "write", "agent": "operative-1", "outcome": "final",
                "input_tokens": 400, "output_tokens": 100, "cost_usd": 0.01}, "m-b"),
        MissionEnded("r1", MissionOutcome("m-a", 1, "done", "concluded", 3, Usage(input_tokens=0, output_tokens=0),
                                          0.01, elapsed_s=4.0)),
    ]
