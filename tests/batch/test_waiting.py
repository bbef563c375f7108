"""What waits in a batch: a question nobody answered parks its mission and the batch goes on;
answered later, the mission completes; a spent batch budget pauses the batch until raised."""

from __future__ import annotations

from pathlib import Path

from cabal.batch import batch_status, resume_batch, run_batch
from cabal.batch.events import BudgetReached
from cabal.exports import render_batch as render

from .conftest import ANSWER, QUESTION, QUESTION_SCRIPT, TOKENS, batch_file, cabal, readme_requests



def test_a_parked_question_is_listed_and_answering_it_later_completes_the_mission(home: str, tmp_path: Path) -> None:
    requests = readme_requests(3)
    path = batch_file(tmp_path, "parked", [requests[0], {"request": requests[1], "answers": []}, requests[2]],
                      answers=[ANSWER])

    ran = cabal("batch", str(path), "--workers", "2", "--home", home)

    assert ran.returncode == 3, ran.stdout + ran.stderr  # nothing failed; something waits
    report = batch_status(_batch_id(ran.stdout), home=home)
    assert [(r.key, r.state, r.stop_reason) for r in report.rows] == [
        ("r1", "done", "concluded"), ("r2", "halted", "questionToUser"), ("r3", "done", "concluded")]
    parked = report.rows[1]
    assert parked.pending_question == QUESTION
    assert f"waiting for you: {parked.mission_id} (r2): {QUESTION}" in ran.stdout.splitlines()
    md = render(report, "md")
    assert f"## Pending questions\n\n- r2 `{parked.mission_id}`: {QUESTION}" in md

    answered = cabal("resume", parked.mission_id, "--answer", ANSWER, "--home", home)
    finished = cabal("batch", "resume", report.batch_id, "--home", home)

    assert answered.returncode == 0 and "state: done (concluded), round 1" in answered.stdout
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert finished.stdout.splitlines()[0] == f"batch {report.batch_id}: nothing to run: 3 missions: 3 done"
    assert batch_status(report.batch_id, home=home).pending_questions == []


def test_batch_resume_answers_pending_questions_on_its_workers(home: str, tmp_path: Path) -> None:
    path = batch_file(tmp_path, "answered", readme_requests(2), answers=[])
    first = run_batch(path, workers=2, home=home)
    waiting = [row.mission_id for row in first.report.pending_questions]
    assert first.report.summary() == "2 missions: 2 halted" and len(waiting) == 2

    typo = cabal("batch", "resume", first.batch_id, "--answer", "m-nope=Yes", "--home", home)
    result = resume_batch(first.batch_id, answers={waiting[0]: ANSWER}, home=home)

    assert typo.returncode == 2 and "Traceback" not in typo.stderr
    assert typo.stderr.splitlines()[0] == (f"cabal: --answer m-nope: not a mission of batch {first.batch_id} that waits "
                                           f"for an answer (waiting: {', '.join(sorted(waiting))})")
    assert result.ran == 1
    assert [(r.mission_id, r.state) for r in result.report.rows] == [(waiting[0], "done"), (waiting[1], "halted")]


def test_a_spent_batch_budget_pauses_the_batch_until_it_is_raised(home: str, tmp_path: Path) -> None:
    # One worker, missions in plan order: the first spends TOKENS; the second is refused
    # its next call once the batch has spent 15,000; the last two never start.
    path = batch_file(tmp_path, "budget", readme_requests(4), answers=[ANSWER], budget={"tokens": 15000})
    events: list = []

    first = run_batch(path, workers=1, home=home, on_event=events.append)

    reason = first.budget_spent
    assert reason is not None and reason.startswith("the batch's token budget is spent (")
    assert [e.reason for e in events if isinstance(e, BudgetReached)] == [reason]
    rows = first.report.rows
    assert [r.state for r in rows] == ["done", "interrupted", "pending", "pending"]
    assert rows[1].detail == reason  # paused by the batch, not by its model
    assert 15000 <= first.report.totals.tokens < 15000 + TOKENS
    assert (rows[2].detail, rows[3].detail) == (reason, reason)
    again = cabal("batch", str(path), "--home", home)  # the same budget: nothing starts
    assert again.returncode == 5  # exits.INTERRUPTED: missions wait for a budget, not an answer
    # Counted again from the missions' graphs: turns in flight when the budget closed are in.
    spent = f"the batch's token budget is spent ({first.report.totals.tokens:,} of 15,000 tokens)"
    assert f"{spent}; raise it: cabal batch resume {first.batch_id} --max-tokens N / --max-cost USD" in again.stdout

    raised = resume_batch(first.batch_id, max_tokens=100_000, home=home)

    assert raised.report.summary() == "4 missions: 4 done"
    assert raised.report.totals.tokens == 4 * TOKENS  # the paused mission wrote nothing twice
    assert raised.report.budget.tokens == 100_000  # kept in the batch's plan


def _batch_id(output: str) -> str:
    return output.splitlines()[0].split()[1].rstrip(":")


def test_missions_are_independent_one_that_fails_or_spends_its_budget_never_stops_the_others(
        home: str, tmp_path: Path) -> None:
    common = f"team: {{operatives: 1}}\nrounds: 3\nanswers: ['{ANSWER}']\n"
    (tmp_path / "fine.mission.yaml").write_text(f"request: Write the README intro.\n{common}"
                                                f"model: scripted:{QUESTION_SCRIPT}\n")
    (tmp_path / "frugal.mission.yaml").write_text(f"request: Write the README intro.\n{common}"
                                                  f"model: scripted:{QUESTION_SCRIPT}\n"
                                                  "budget: {tokens: 2000, when_spent: stop}\n")
    (tmp_path / "broken-model.mission.yaml").write_text(f"request: Write the README intro.\n{common}"
                                                        "model: py:slow_models:broken\n")

    ran = cabal("batch", str(tmp_path), "--workers", "3", "--home", home)

    assert ran.returncode == 1  # one failed
    rows = {row.key: row for row in batch_status(_batch_id(ran.stdout), home=home).rows}
    assert (rows["fine.mission.yaml"].state, rows["fine.mission.yaml"].stop_reason) == ("done", "concluded")
    assert (rows["frugal.mission.yaml"].state, rows["frugal.mission.yaml"].stop_reason) == ("done", "budget")
    broken = rows["broken-model.mission.yaml"]
    assert (broken.state, broken.stop_reason) == ("failed", "error")
    assert broken.detail == "RuntimeError: the model's adapter is broken"
    assert f"failed: broken-model.mission.yaml ({broken.mission_id}): {broken.detail}" in ran.stdout.splitlines()
