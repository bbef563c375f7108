"""Is the team worth it? The baseline (one call writes every document, a tool used), the blind
judge in both orders (a position-biased judge gives ties only; a consistent one gives wins;
invalid answers sent back or counted as no verdict), costs with and without prompt caching,
and the commands."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cabal.errors import MissionError
from cabal.evals.versus import JUDGE_CASSETTE, compare_missions, judgement_folder, match
from cabal.llm import FunctionChatModel
from cabal.llm.cassette import Cassette
from cabal.llm.costing import CallTokens, call_tokens, price_run
from cabal.llm.settings import ModelPrice
from cabal.rounds import mission_report, resume_mission, run_mission
from cabal.rounds.baseline import run_baseline
from cabal.rounds.facts import ComparedDocument, ComparisonFacts
from cabal.rounds.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]
CABAL = Path(sys.executable).with_name("cabal")
SOURCES_EXAMPLE = ROOT / "examples" / "sources" / "sources.mission.yaml"
THREE = ("For our tea shop we need a brewing guide for new staff, a price list for the counter and a short welcome "
         "note for customers.")


def cabal(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CABAL), *args], capture_output=True, text=True, cwd=cwd, timeout=180,
                          stdin=subprocess.DEVNULL)


def team_and_baseline(home: Path, request: str = THREE) -> tuple[str, str]:
    mission = {"request": request, "rounds": 2, "model": "simulated", "budget": "none"}
    team = run_mission(mission, home=home)
    baseline = run_baseline(mission, home=home)
    return team.mission_id, baseline.mission_id


def judge_model(choose) -> FunctionChatModel:
    """A judge whose per-deliverable verdict is ``choose(facts, first, second)`` ("X", "Y" or "tie")."""
    def answer(request):
        facts: ComparisonFacts = request.facts
        verdicts = [{"deliverable": n, "better": choose(facts, x, y), "reason": "because"}
                    for n, (x, y) in enumerate(facts.pairs, 1)]
        score = {c: 7 for c in ("faithful", "practical", "complete", "clear", "consistent")}
        return {"tool": "final_output", "args": {
            "deliverables": verdicts, "overall": verdicts[0]["better"], "overallReason": "as the first",
            "confidence": "medium", "scores": {"X": score, "Y": {**score, "clear": 3}}}}
    return FunctionChatModel(answer)


# ------------------------------------------------------------------------------ the baseline


def test_a_baseline_calls_the_missions_tool_and_stores_each_document_accepted(graph_server, tmp_path: Path) -> None:
    result = run_baseline(SOURCES_EXAMPLE, model="simulated", home=graph_server.home)
    assert (result.state, result.stop_reason, result.usage.calls) == ("done", "concluded", 2)
    assert result.lineage == "a baseline: one call of the model wrote every document"
    report = mission_report(result.mission_id, home=graph_server.home)
    assert report.mission.kind == "baseline"
    assert [(p.name, p.status, len(p.versions)) for p in report.products] == [
        ("Overview", "accepted", 1), ("Plan of action", "accepted", 1), ("Risks and open questions", "accepted", 1)]
    assert [(c.server, c.tool, c.outcome) for c in report.tool_calls] == [("prices", "lookup", "ok")]
    text = report.readable(report.products[0].accepted_version.content)
    assert "A tool answered: No price for Overview" in text  # the tool's own answer, quoted
    assert "[[s:" not in text and "[docs/product-brief.md: Margin Study: product brief]" in text  # read as a name
    assert [t.step for t in report.turns] == ["baseline"]
    with pytest.raises(MissionError, match="is a baseline"):
        resume_mission(result.mission_id, home=graph_server.home)
    listed = cabal("missions", "--home", str(graph_server.home), cwd=tmp_path)
    assert f"{result.mission_id}: done (concluded), round 1 · a baseline" in listed.stdout
    exported = cabal("export", result.mission_id, "--format", "md", "--home", str(graph_server.home), cwd=tmp_path)
    assert exported.returncode == 0 and "A tool answered: No price for Overview" in exported.stdout
    removed = cabal("missions", "rm", result.mission_id, "--home", str(graph_server.home), cwd=tmp_path)
    assert removed.returncode == 0, removed.stderr
    assert result.mission_id not in Workspace.at(graph_server.home).missions()


def test_a_baselines_invalid_answer_goes_back_with_every_problem(graph_server) -> None:
    seen: list[str] = []

    def writer(request):
        seen.append(str(request.messages[-1].content))
        bad = request.attempt == 1
        content = "A guide that cites [[s:s9]] and long enough to be a real document, really." if bad else \
            "A guide to brewing tea, long enough to be a real document, with its steps."
        names = ["Guide", "Guide"] if bad else ["Guide", "Price list"]
        return {"tool": "final_output", "args": {"documents": [{"name": n, "content": content} for n in names]}}

    result = run_baseline({"request": "Write a guide and a price list.", "model": "simulated"},
                          model=FunctionChatModel(writer), home=graph_server.home)
    assert result.state == "done"
    assert "two documents are named 'Guide'" in seen[1] and "[[s:s9]] names no file or section" in seen[1]
    report = mission_report(result.mission_id, home=graph_server.home)
    assert [p.name for p in report.products] == ["Guide", "Price list"]
    assert report.turns[0].attempts == 2


def test_a_baseline_that_never_answers_validly_writes_nothing(graph_server) -> None:
    before = set(Workspace.at(graph_server.home).missions())
    never = FunctionChatModel(lambda request: {"tool": "final_output", "args": {"documents": []}})
    with pytest.raises(MissionError, match="no valid answer in 3 tries"):
        run_baseline({"request": "Write a guide.", "model": "simulated"}, model=never, home=graph_server.home)
    assert set(Workspace.at(graph_server.home).missions()) == before


# ------------------------------------------------------------------------------ the judge


def test_a_judge_that_always_prefers_what_it_reads_first_gives_ties_only(graph_server) -> None:
    team, baseline = team_and_baseline(graph_server.home)
    comparison = compare_missions(team, baseline, judge_model(lambda facts, x, y: "X"), home=graph_server.home)
    assert [d.verdict for d in comparison.deliverables] == ["tie", "tie", "tie"]
    assert [[o.verdict for o in d.orders] for d in comparison.deliverables] == [["A", "B"]] * 3
    assert comparison.overall == "tie"
    assert comparison.scores == {"A": {"faithful": 7.0, "practical": 7.0, "complete": 7.0, "clear": 5.0,
                                       "consistent": 7.0},
                                 "B": {"faithful": 7.0, "practical": 7.0, "complete": 7.0, "clear": 5.0,
                                       "consistent": 7.0}}


def test_a_judge_that_consistently_prefers_one_side_gives_that_side_its_wins(graph_server) -> None:
    team, baseline = team_and_baseline(graph_server.home)

    def one_call(facts: ComparisonFacts, x: int | None, y: int | None) -> str:  # the baseline's documents
        written_in_one_call = [d for d in (facts.first, facts.second) if d and d[0].text.startswith("# ")]
        return "X" if written_in_one_call and written_in_one_call[0] is facts.first else "Y"

    comparison = compare_missions(team, baseline, judge_model(one_call), home=graph_server.home)
    assert [d.verdict for d in comparison.deliverables] == ["B", "B", "B"]
    assert comparison.overall == "B" and comparison.wins == {"A": 0, "B": 3, "tie": 0}
    calls = Cassette.read(judgement_folder(Workspace.at(graph_server.home), team, baseline) / JUDGE_CASSETTE).calls
    assert [(c.place.step, c.place.agent) for c in calls] == [("compare", "judge-1"), ("compare", "judge-2")]


def test_the_judge_reads_the_sets_blind(graph_server) -> None:
    team, baseline = team_and_baseline(graph_server.home)
    prompts: list[str] = []

    def reading(request):
        prompts.append(str(request.messages[-1].content))
        return judge_model(lambda facts, x, y: "tie").fn(request)

    compare_missions(team, baseline, FunctionChatModel(reading), home=graph_server.home)
    for prompt in prompts:
        for word in ("operative-", "chair-", "watchdog-", "baseline", "one call", team, baseline):
            assert word not in prompt, word
    assert prompts[0].index("# Set X") < prompts[0].index("# Set Y")


def test_invalid_judge_answers_go_back_and_an_order_without_a_valid_one_has_no_verdict(graph_server) -> None:
    team, baseline = team_and_baseline(graph_server.home)
    good = judge_model(lambda facts, x, y: "Y")
    answers: list[int] = []

    def sometimes(request):
        answers.append(request.attempt)
        if request.key.agent == "judge-2":  # the second order never answers validly
            return {"tool": "final_output", "args": {"deliverables": [], "overall": "maybe"}}
        if request.attempt == 1:  # the first order is repaired
            return {"tool": "final_output", "args": {**good.fn(request)["args"], "deliverables": [
                {"deliverable": 1, "better": "Y", "reason": "r"}]}}
        return good.fn(request)

    comparison = compare_missions(team, baseline, FunctionChatModel(sometimes), home=graph_server.home)
    assert answers == [1, 2, 1, 2, 3]
    assert [[o.verdict for o in d.orders] for d in comparison.deliverables] == [["B", None]] * 3
    assert [d.verdict for d in comparison.deliverables] == ["tie", "tie", "tie"]
    assert len(comparison.problems) == 1 and comparison.problems[0].startswith("order 2 (B shown first) got no valid")


def test_deliverables_that_differ_in_number_are_matched_by_name(graph_server, tmp_path: Path) -> None:
    team, _ = team_and_baseline(graph_server.home)
    two = run_baseline({"request": "Write a brewing guide for new staff, and a welcome note for customers.",
                        "model": "simulated"}, home=graph_server.home)
    result = cabal("judge", team, two.mission_id, "--judge-model", "simulated", "--format", "json",
                   "--home", str(graph_server.home), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["overall"] in ("A", "B", "tie")
    assert [(d["a_name"], d["b_name"]) for d in data["deliverables"]] == [
        ("Brewing guide for new staff", "Brewing guide for new staff"), ("Price list for the counter", None),
        ("Short welcome note for customers", "Welcome note for customers")]
    assert all(d["verdict"] in ("A", "B", "tie") for d in data["deliverables"])
    assert data["deliverables"][1]["verdict"] == "A"  # against nothing, the simulated judge prefers a document


def test_matching_pairs_the_names_that_share_most_words_first() -> None:
    a = tuple(ComparedDocument(n, "") for n in ("Switchover plan", "Volunteer briefing", "Form decision"))
    b = tuple(ComparedDocument(n, "") for n in ("One-page briefing for volunteers", "Plan for the switchover",
                                                "Budget"))
    assert match(a, b) == [(0, 1), (1, 0), (2, None), (None, 2)]


# ------------------------------------------------------------------------------ the costs


def test_costs_with_and_without_caching_follow_the_price_table() -> None:
    price = ModelPrice(input_per_mtok=3.0, output_per_mtok=15.0, cached_input_per_mtok=0.3, cache_write_per_mtok=3.75)
    calls = [CallTokens(100_000, 2_000, 0, 60_000), CallTokens(120_000, 1_000, 60_000, 0)]
    cost = price_run(calls, "claude-sonnet-4-6", price)
    assert cost.usd_without_cache == pytest.approx((220_000 * 3.0 + 3_000 * 15.0) / 1e6)  # 0.705
    assert cost.usd_with_cache == pytest.approx((100_000 * 3.0 + 60_000 * 0.3 + 60_000 * 3.75 + 3_000 * 15.0) / 1e6)
    assert cost.cacheable_share == pytest.approx(60_000 / 220_000)
    assert price_run(calls, "local", None).usd_without_cache is None


def test_a_prompt_that_repeats_an_earlier_ones_start_is_counted_cacheable(graph_server) -> None:
    team, _ = team_and_baseline(graph_server.home)
    rows = call_tokens(Cassette.read(Workspace.at(graph_server.home).mission_dir(team) / "cassette.jsonl"))
    assert rows[0].cached_tokens == 0  # nothing before the first call
    assert any(row.cached_tokens > 0 for row in rows[1:])  # the role's system prompt and the charter repeat
    assert all(row.cached_tokens <= row.input_tokens for row in rows)
    strict = call_tokens(Cassette.read(Workspace.at(graph_server.home).mission_dir(team) / "cassette.jsonl"),
                         min_chars=10**9)
    assert sum(row.cached_tokens for row in strict) == 0  # under the providers' least cacheable prefix: none


def test_cabal_cost_prices_a_recorded_run_at_a_named_model(graph_server, tmp_path: Path) -> None:
    team, _ = team_and_baseline(graph_server.home)
    result = cabal("cost", team, "--model", "claude-sonnet-4-6", "--home", str(graph_server.home), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{team} at claude-sonnet-4-6's list prices: ")
    assert re.search(r" [\d,]+ tokens in \([\d,]+ of them cached\), [\d,]+ out\n", result.stdout), result.stdout
    assert " without prompt caching, $" in result.stdout and " with it (an estimate: " in result.stdout
    free = cabal("cost", team, "--home", str(graph_server.home), cwd=tmp_path)  # at its own model: simulated
    assert "$0.0000 without prompt caching" in free.stdout
    unpriced = cabal("cost", team, "--model", "openai:relay-model", "--home", str(graph_server.home), cwd=tmp_path)
    assert "not priced: no list price is known for relay-model" in unpriced.stdout


def test_cabal_eval_runs_each_mission_against_its_baseline(graph_server, tmp_path: Path) -> None:
    batch = tmp_path / "tea.batch.yaml"
    batch.write_text(json.dumps({
        "name": "tea-versus", "mission": {"rounds": 2, "model": "simulated", "budget": "none"},
        "expect": {"state": "done"},
        "requests": [THREE, "We need a brewing guide for new staff and a welcome note for customers."]}))
    result = cabal("eval", str(batch), "--baseline", "--judge-model", "simulated", "--format", "json",
                   "--workers", "1", "--home", str(graph_server.home), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    versus = data["versus_baseline"]
    assert versus["wins"] + versus["ties"] + versus["losses"] == 2
    assert versus["token_ratio"] > 1  # the simulated team spends more than one call
    assert all(run["baseline_id"].startswith("m-") and run["versus"] in ("win", "tie", "loss") for run in data["runs"])
    refused = cabal("eval", str(batch), "--baseline", "--home", str(graph_server.home), cwd=tmp_path)
    assert refused.returncode == 2 and "--baseline needs --judge-model SPEC" in refused.stderr


def test_a_comparison_says_when_one_side_never_read_what_the_user_said(graph_server) -> None:
    """The two sides of a comparison may not have been told the same: a team whose user answered
    its Chair's question against a baseline of a mission file without that answer. The
    comparison says so beside its verdicts; sides told the same say nothing."""
    said = "Keep the price list to one page."
    mission = {"request": THREE, "rounds": 1, "model": "simulated", "budget": "none", "answers": [said]}
    team = run_mission(mission, home=graph_server.home)  # the simulated Chair asks first, and takes the answer
    untold = run_baseline({**mission, "answers": []}, home=graph_server.home)
    comparison = compare_missions(team.mission_id, untold.mission_id, "simulated", home=graph_server.home)
    assert comparison.unshared == (f"A read the user's words {said!r}; B never did",)
    told = run_baseline(mission, home=graph_server.home)
    assert compare_missions(team.mission_id, told.mission_id, "simulated", home=graph_server.home).unshared == ()


def test_the_judges_page_escapes_what_the_judge_wrote_and_prices_its_calls(graph_server, tmp_path: Path) -> None:
    from cabal.evals.render import render_judgement

    team, baseline = team_and_baseline(graph_server.home)

    def scheming(request):
        answer = judge_model(lambda facts, x, y: "tie").fn(request)
        answer["args"]["overallReason"] = "<script>alert('X')</script> X | Y"
        return answer

    comparison = compare_missions(team, baseline, FunctionChatModel(scheming), home=graph_server.home,
                                  price_as="claude-sonnet-4-6")
    page = render_judgement(comparison, "html")
    assert "<script>" not in page and "&lt;script&gt;alert" in page
    assert "alert('A')" in page.replace("&#x27;", "'") or "alert(&#39;A&#39;)" in page  # X and Y read as A and B
    assert comparison.judge_usd is not None and comparison.judge_usd > 0
    assert "| **tie** | Brewing guide for new staff | Brewing guide for new staff | tie | tie |" in \
        render_judgement(comparison, "md")


def test_a_judge_named_by_a_py_spec_judges_like_any_model(graph_server, tmp_path: Path) -> None:
    team, baseline = team_and_baseline(graph_server.home)
    factory = tmp_path / "always_b.py"
    factory.write_text(
        "from cabal.llm import FunctionChatModel\n"
        "def judge():\n"
        "    def answer(request):\n"
        "        facts = request.facts\n"
        "        better = 'Y' if facts.second and facts.second[0].text.startswith('# ') else 'X'\n"
        "        score = dict.fromkeys(('faithful', 'practical', 'complete', 'clear', 'consistent'), 5)\n"
        "        return {'tool': 'final_output', 'args': {'deliverables': [\n"
        "            {'deliverable': n, 'better': better, 'reason': 'r'} for n in range(1, len(facts.pairs) + 1)],\n"
        "            'overall': better, 'overallReason': 'r', 'confidence': 'low', 'scores': {'X': score, 'Y': score}}}\n"
        "    return FunctionChatModel(answer)\n")
    result = cabal("judge", team, baseline, "--judge-model", f"py:{factory}:judge", "--format", "json",
                   "--home", str(graph_server.home), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["overall"] == "B"  # it prefers the one call's documents, in both orders
