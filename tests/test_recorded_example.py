"""The recorded example (``examples/foodbank``): a mission a capable language model answered,
call by call, through an OpenAI-compatible endpoint, replayed from its cassette on every run.

Strict, it must reproduce the recording: the same accepted products with the same text. After a
change to what agents are shown, the strict replay stops at the first changed call, and the
lenient replay still carries the mission to its end with the same products.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from cabal.graph import EmbeddedServer
from cabal.report.html import render_html
from cabal.report.markdown import render_markdown
from cabal.rounds.api import run_mission
from cabal.rounds.workspace import mission_report
from cabal.resources import builtin_dir

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "foodbank"
MISSION = EXAMPLE / "foodbank.mission.yaml"
CASSETTE = EXAMPLE / "foodbank.cassette.jsonl"
INTERNAL_ID = re.compile(r"\br\d+\.(?:bootstrap|reflect|plan|write|peer_review|inspect|presentation|close)\.[\w.-]+")
ACCEPTED = {
    "Intake form decision: what we ask and what we stop collecting":
        "# Intake form decision: what we ask and what we stop collecting\n\n## Decision\nThe",
    "Switchover plan for the two Saturday sessions":
        "# Switchover plan: Saturday intake from paper cards to tablets\n\nBoth Saturday se",
    "Volunteer briefing (one page)":
        "# Tablet intake: before your first tablet session\n\n**What changes and when**\n- P",
}


def accepted(mission_id: str, home: Path) -> dict[str, str]:
    """Each accepted product's name and the start of its accepted text."""
    report = mission_report(mission_id, home=home)
    return {p.name: next(v.content for v in p.versions if v.id == p.accepted_version_id)[:80]
            for p in report.products if p.status == "accepted" and p.accepted_version_id}


def test_the_recording_replays_strictly_to_its_end(graph_server) -> None:
    result = run_mission(MISSION, home=graph_server.home)
    assert (result.state, result.stop_reason) == ("done", "concluded"), result.detail
    assert accepted(result.mission_id, graph_server.home) == ACCEPTED
    # A real model's texts are full of references: every output shows each as what it names.
    report = mission_report(result.mission_id, home=graph_server.home)
    for output in (render_markdown(report), render_html(report)):
        # The page's appendix of cited sections labels each with the citation that names it.
        assert "[[" not in output.replace('<span class="mono">[[s:', "")
        assert INTERNAL_ID.findall(output) == []


def test_a_changed_prompt_stops_the_strict_replay_and_the_lenient_one_goes_on(tmp_path: Path) -> None:
    # A project's own prompts/ folder overrides the built-in one: one more line in the Write step.
    project = tmp_path / "project"
    (project / "prompts" / "steps").mkdir(parents=True)
    write = (builtin_dir("prompts") / "steps" / "write.md").read_text()
    (project / "prompts" / "steps" / "write.md").write_text(write + "\nKeep each version as short as it can be.\n")
    home = project / ".cabal"

    strict = run_mission(MISSION, home=home)
    assert (strict.state, strict.stop_reason) == ("diverged", "replayDiverged")
    assert "round 1, step 'write'" in str(strict.detail) and "differs from the recording" in str(strict.detail)

    lenient = run_mission(MISSION, home=home, model=f"replay:{CASSETTE}?mode=lenient")
    assert (lenient.state, lenient.stop_reason) == ("done", "concluded"), lenient.detail
    assert accepted(lenient.mission_id, home) == ACCEPTED


@pytest.fixture(autouse=True)
def _no_leftovers(tmp_path: Path):
    yield
    home = tmp_path / "project" / ".cabal"
    if home.exists():  # the project's own workspace started a graph server of its own
        EmbeddedServer(home).stop()
    shutil.rmtree(tmp_path / "project", ignore_errors=True)


def test_the_recorded_comparison_with_one_call_replays_offline(graph_server, tmp_path: Path) -> None:
    """The recorded example's team against its recorded baseline (one call of a Claude model wrote
    the three documents), judged blind by two recorded judges, one per order: all offline."""
    import json
    import subprocess
    import sys

    from cabal.rounds.baseline import run_baseline

    team = run_mission(MISSION, home=graph_server.home)
    baseline = run_baseline(MISSION, model=f"replay:{EXAMPLE / 'baseline.cassette.jsonl'}", home=graph_server.home)
    assert accepted(baseline.mission_id, graph_server.home) == {
        "Intake form decision":
            "# Decision: what the new tablet intake form asks, and what we stop collecting\n\n*",
        "Switchover plan": "# Switchover plan: tablet intake for the two Saturday sessions\n\n**Riverside Comm",
        "Volunteer briefing": "# Tablet intake: volunteer briefing\n\n**Riverside Community Pantry** · Keep this "}
    judged = subprocess.run(
        [str(Path(sys.executable).with_name("cabal")), "judge", team.mission_id, baseline.mission_id,
         "--judge-model", f"replay:{EXAMPLE / 'judge.cassette.jsonl'}", "--price-as", "claude-sonnet-4-6",
         "--format", "json", "--home", str(graph_server.home)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert judged.returncode == 0, judged.stderr
    comparison = json.loads(judged.stdout)
    # With the record of decisions, the closing decisions in the round work passes and documents
    # ready to hand out (issue 37), the team ties one call overall: both orders prefer the team's
    # form decision and one call's briefing; each order prefers a different switchover plan.
    assert comparison["overall"] == "tie"
    assert [(d["verdict"], [o["verdict"] for o in d["orders"]]) for d in comparison["deliverables"]] == [
        ("A", ["A", "A"]), ("tie", ["A", "B"]), ("B", ["B", "B"])]
    assert comparison["confidence"] == ["medium", "medium"]
    assert comparison["unshared"] == []  # both read the user's answer
    team_cost, baseline_cost = comparison["a"]["cost"], comparison["b"]["cost"]
    assert (team_cost["calls"], baseline_cost["calls"]) == (20, 1)
    assert team_cost["input_tokens"] + team_cost["output_tokens"] == 217_013
    assert baseline_cost["input_tokens"] + baseline_cost["output_tokens"] == 7_172
