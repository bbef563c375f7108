"""`cabal eval`: expectations checked over K runs of each request, pass rates, the exit status,
a scripted judge recorded and replayed, reports, and two evaluations compared."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cabal.errors import ConfigError
from cabal.report.expect import Expectations, JudgeSpec
from cabal.evals.judge import JUDGE_CASSETTE, judge_mission
from cabal.evals.render import render_eval
from cabal.evals.run import compare, failing, load, run_eval, summarize
from cabal.llm.cassette import Cassette
from cabal.rounds import mission_report, run_mission

ROOT = Path(__file__).resolve().parents[2]
CABAL = Path(sys.executable).with_name("cabal")
SIMULATED = "py:cabal.rounds.simulated:team"
# The simulated team with a Chair that adds a product every round: a mission that runs to its round limit.
BUSY = f"py:{ROOT / 'tests' / 'rounds' / 'data' / 'busy_factory.py'}:team"
QUESTIONS = ["Does the guide say how long to steep?", "Does it cite a study?"]


def write_batch(folder: Path, **extra) -> Path:
    """Two requests played by the simulated team; the batch expects what always holds, the
    second request also what never does."""
    (folder / "judge.script.yaml").write_text(yaml.safe_dump([{
        "step": "judge", "agent": "judge", "tool": "score", "repeat": True,
        "args": {"scores": [{"question": 1, "score": 4, "reason": "it gives three minutes"},
                            {"question": 2, "score": 1, "reason": "no study is cited"}]}}]))
    batch = {"name": "tea-eval", "mission": {"rounds": 3, "model": SIMULATED},
             "expect": {"state": "done", "max_rounds": 3, "products_named": ["guide"]},
             "requests": ["Write a short guide to brewing tea.",
                          {"request": "Write a one-page onboarding guide for new volunteers.", "name": "onboarding",
                           "expect": {"accepted_at_least": 99}}], **extra}
    path = folder / "tea.batch.yaml"
    path.write_text(yaml.safe_dump(batch, sort_keys=False))
    return path


def cabal(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CABAL), *args], capture_output=True, text=True, cwd=cwd, timeout=120,
                          stdin=subprocess.DEVNULL)


def test_an_always_passing_and_an_always_failing_expectation_give_1_and_0_and_exit_1(graph_server,
                                                                                       tmp_path: Path) -> None:
    batch = write_batch(tmp_path)
    result = cabal("eval", str(batch), "--repeat", "2", "--workers", "2", "--home", str(graph_server.home),
                   "--format", "json", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    rates = {(s["group"], e["name"]): e["rate"] for s in data["summary"] for e in s["expectations"]}
    assert rates == {("r1", "state"): 1.0, ("r1", "products_named guide"): 1.0, ("r1", "max_rounds"): 1.0,
                     ("r2", "state"): 1.0, ("r2", "accepted_at_least"): 0.0,
                     ("r2", "products_named guide"): 1.0, ("r2", "max_rounds"): 1.0}
    assert data["passed"] is False and len(data["runs"]) == 4
    assert "1 expectation(s) below 80%: r2 accepted_at_least 0%" in result.stderr
    rows = list(csv.reader(io.StringIO(render_eval(load(data["eval_id"], graph_server.home), "csv"))))
    assert rows[0] == ["request", "expectation", "passed", "runs", "pass_rate"]
    assert ["r2", "accepted_at_least", "0", "2", "0.0000"] in rows and len(rows) == 8
    # Each run was recorded like any mission.
    for run in data["runs"]:
        assert (graph_server.home / "missions" / run["mission_id"] / "cassette.jsonl").is_file()
    # Without the failing expectation, every rate is 1.0: nothing fails (exit status 0).
    passing = run_eval(write_batch(tmp_path, requests=["Write a short guide to brewing tea."]), workers=1,
                       home=graph_server.home)
    assert failing(passing) == [] and all(r.rate == 1.0 for r in summarize(passing)[0].expectations)
    page = render_eval(passing, "html")
    assert page.count('<svg class="rates"') == 3 and "<script" not in page and "default-src 'none'" in page


def test_a_scripted_judge_scores_each_run_and_is_recorded_then_replayed(graph_server, tmp_path: Path) -> None:
    script = tmp_path / "judge.script.yaml"
    batch = write_batch(tmp_path, expect={"state": "done", "judge": {
        "model": f"scripted:{script}", "questions": QUESTIONS, "min_score": 3}},
        requests=["Write a short guide to brewing tea."])
    result = run_eval(batch, repeat=2, workers=2, home=graph_server.home)
    summary = summarize(result)[0]
    assert {r.name: r.rate for r in summary.expectations} == {
        "state": 1.0, f"judge: {QUESTIONS[0]}": 1.0, f"judge: {QUESTIONS[1]}": 0.0}
    assert [(q, s.mean, s.sd) for q, s in summary.judge] == [(QUESTIONS[0], 4.0, 0.0), (QUESTIONS[1], 1.0, 0.0)]
    assert failing(result) == [("r1", summary.expectations[2])]
    run = result.runs[0]
    cassette_path = graph_server.home / "missions" / run.mission_id / JUDGE_CASSETTE
    recorded = Cassette.read(cassette_path)
    assert [c.place.step for c in recorded.calls] == ["judge"] and recorded.calls[0].tool_calls[0]["name"] == "score"
    # The judge replayed from its recording gives the same scores, without its script.
    replayed = judge_mission(JudgeSpec(model=f"replay:{cassette_path}", questions=QUESTIONS),
                             mission_report(run.mission_id, home=graph_server.home))
    assert replayed.scores == ((4, "it gives three minutes"), (1, "no study is cited"))
    assert replayed.usage.input_tokens == recorded.calls[0].usage["input_tokens"] > 0
    # A rubric changed since: the strict replay says so instead of scoring.
    with pytest.raises(Exception, match=r"message 2 \(human\) differs from the recording"):
        judge_mission(JudgeSpec(model=f"replay:{cassette_path}", questions=QUESTIONS[:1]),
                      mission_report(run.mission_id, home=graph_server.home))


def test_a_judge_that_never_answers_validly_fails_its_questions(graph_server, tmp_path: Path) -> None:
    bad = tmp_path / "bad.script.yaml"
    bad.write_text(yaml.safe_dump([{"step": "judge", "tool": "score", "repeat": True,
                                    "args": {"scores": [{"question": 1, "score": 9, "reason": "great"}]}}]))
    mission = run_mission({"request": "Write a short guide to brewing tea.", "rounds": 2, "model": SIMULATED},
                          home=graph_server.home).mission_id
    judgement = judge_mission(JudgeSpec(model=f"scripted:{bad}", questions=QUESTIONS),
                              mission_report(mission, home=graph_server.home))
    assert judgement.scores == () and judgement.usage.calls == 3
    assert "scores.0.score" in judgement.problems and "less than or equal to 5" in judgement.problems


def test_two_evaluations_compared_mark_what_exceeds_the_spread(graph_server, tmp_path: Path) -> None:
    # The busy team's missions last as many rounds as they are given: fewer rounds are a change.
    batch = write_batch(tmp_path, requests=["Write a short guide to brewing tea."],
                        mission={"rounds": 3, "model": BUSY})
    before = run_eval(batch, workers=1, home=graph_server.home)
    batch.write_text(batch.read_text().replace("rounds: 3", "rounds: 2"))
    after = run_eval(batch, workers=1, home=graph_server.home)
    changes = {(c.group, c.what): c for c in compare(load(before.eval_id, graph_server.home),
                                                     load(after.eval_id, graph_server.home))}
    assert changes[("r1", "pass rate: state")].marked is False
    assert (changes[("r1", "mean rounds")].a, changes[("r1", "mean rounds")].b) == (3.0, 2.0)
    assert changes[("r1", "mean rounds")].marked is True
    shown = cabal("eval", "--compare", before.eval_id, after.eval_id, "--home", str(graph_server.home), cwd=tmp_path)
    assert shown.returncode == 0 and "| r1 | mean rounds | 3 | 2 | 0 | **!** |" in shown.stdout


def test_expectations_are_checked_when_the_file_is_read(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"'\(unclosed' is not a regular expression"):
        Expectations(products_named=["(unclosed"])
    batch = write_batch(tmp_path, expect={"stat": "done"})
    with pytest.raises(ConfigError, match=r"expect.*stat"):
        run_eval(batch)
    assert Expectations(cites_sources=2).cites_sources == 2 and Expectations(cites_sources=True).cites_sources is True


def test_the_example_evaluation_reads_with_its_judge_found_beside_it() -> None:
    from cabal.evals.run import load_expectations

    _, expectations = load_expectations(ROOT / "examples" / "batch" / "team-eval.batch.yaml")
    first, second = expectations[1], expectations[2]
    assert first.judge.model == f"scripted:{ROOT / 'examples' / 'batch' / 'judge.script.yaml'}"
    assert (second.state, second.accepted_at_least, second.products_named) == ("done", 3, ["^First-day checklist"])
    assert first.products_named is None and second.judge == first.judge


def test_each_expectation_checks_a_missions_report(graph_server) -> None:
    from cabal.report.expect import RunFacts, check

    mission = run_mission({"request": "For our tea shop we need a shopping list, a brewing guide and a tasting card.",
                           "rounds": 3, "model": SIMULATED}, home=graph_server.home)
    report = mission_report(mission.mission_id, home=graph_server.home)
    tokens = report.usage.total.input_tokens + report.usage.total.output_tokens
    expect = Expectations(state="done", accepted_at_least=4, products_named=["^Brewing", "^Budget"],
                          content_matches={"^Shopping": "What it is for", "^Tasting": "no such words"},
                          cites_sources=True, max_cost_usd=0, max_tokens=tokens - 1, max_rounds=3, max_failed_turns=0)
    found = {c.name: (c.passed, c.found) for c in check(expect, report, RunFacts("done", 1.0))}
    assert found == {
        "state": (True, "done"), "accepted_at_least": (True, "4"),  # the Library and its three products
        "products_named ^Brewing": (True, "Brewing guide"), "products_named ^Budget": (False, "none"),
        "content_matches ^Shopping": (True, "Shopping list"), "content_matches ^Tasting": (False, "no match"),
        "cites_sources": (False, "0 of 3 accepted texts cite a source"),
        "max_cost_usd": (True, "$0.0000"), "max_tokens": (False, f"{tokens:,}"), "max_rounds": (True, "1"),
        "max_failed_turns": (True, "0")}
    two_sources = Expectations(cites_sources=2)
    assert [(c.passed, c.found) for c in check(two_sources, report, RunFacts("done", 1.0))] == \
        [(False, "0 distinct sources")]
    never = check(expect, None, RunFacts("refused", 0.0))
    assert never[0] == check(Expectations(state="done"), None, RunFacts("refused", 0.0))[0]
    assert [c.passed for c in never] == [False] * 11 and never[1].found == "no mission"


def test_source_citations_are_counted_per_text_and_distinct() -> None:
    from cabal.report.expect import _cites

    texts = ["Qdrant wins [[s:bench-1]].", "Costs from [[s:prices]] and [[s:bench-1]].", "No source here [[p:x]]."]
    assert _cites(True, texts[:2]).passed and _cites(True, texts[:2]).found == "2 of 2 accepted texts cite a source"
    assert not _cites(True, texts).passed and _cites(True, texts).found == "2 of 3 accepted texts cite a source"
    assert _cites(2, texts).passed and not _cites(3, texts).passed and _cites(3, texts).found == "2 distinct sources"
    assert not _cites(True, []).passed  # nothing accepted cites nothing
