"""The report's renderings of a known batch: every state, costs, a pending question, a broken
file, a mission with its own report; the HTML page self-contained, its charts to scale."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cabal.batch.html import BAR_W, LABEL_W, STATE_COLOURS
from cabal.batch.plan import BatchBudget
from cabal.exports import names
from cabal.exports import render_batch as render
from cabal.batch.report import STATE_ORDER, BatchReport, MissionRow
from cabal.errors import ConfigError


def row(key: str, state: str, cost: float, seconds: float, **fields) -> MissionRow:
    values = dict(key=key, mission_id=f"m-{key}-0000abcd", request=f"Plan the launch of {key}.", model="claude-sonnet-4-6",
                  operatives=2, repeat=1, state=state, stop_reason=None, round=0, rounds_limit=4, products_accepted=0,
                  products_total=0, failed_turns=0, input_tokens=0, output_tokens=0, cost_usd=cost, duration_s=seconds,
                  attempts=1, pending_question=None, detail=None, report_path=None)
    return MissionRow(**{**values, **fields})


@pytest.fixture
def report(tmp_path: Path) -> BatchReport:
    own = tmp_path / "missions" / "m-margin-0000abcd" / "report.html"
    own.parent.mkdir(parents=True)
    own.write_text("<html></html>")
    return BatchReport("b-launches-1234abcd", "launches", "/plans/launches.batch.yaml", False,
                       BatchBudget(tokens=500_000, cost_usd=5.0), (
        row("margin", "done", 0.50, 120.0, stop_reason="concluded", round=4, products_accepted=3, products_total=3,
            input_tokens=90_000, output_tokens=10_000, report_path=str(own)),
        row("tally", "halted", 0.25, 30.0, stop_reason="questionToUser", round=1, products_accepted=0, products_total=2,
            input_tokens=40_000, output_tokens=5_000, pending_question="Who is Tally for: <students> or teachers?"),
        row("ledger", "failed", 0.125, 60.0, stop_reason="error", round=2, failed_turns=2, products_total=3,
            input_tokens=20_000, output_tokens=2_000, detail="KeyError: 'owner'"),
        row("broken", "invalid", 0.0, 0.0, request="", model="", operatives=None, rounds_limit=None,
            detail="/plans/broken.mission.yaml:3: invalid mission: team.operatives: Input should be less than or equal to 12"),
    ))


def test_markdown_lists_each_mission_the_totals_the_questions_and_the_problems(report: BatchReport) -> None:
    md = render(report, "md")

    assert md.splitlines()[:5] == [
        "# Batch launches (b-launches-1234abcd)", "",
        "4 missions: 1 done, 1 halted, 1 failed, 1 invalid · 167,000 tokens · $0.8750 · 3m30s of worker time", "",
        "Batch budget: 500,000 tokens and $5.00"]
    assert ("| margin `m-margin-0000abcd` | Plan the launch of margin. | claude-sonnet-4-6 | 2 | done (concluded) | 4/4 | "
            "3/3 | 0 | 100,000 | $0.5000 | 2m00s |") in md
    assert "| **total** (4) | | | | | | 3/8 | 2 | 167,000 | $0.8750 | 3m30s |" in md
    assert ("- tally `m-tally-0000abcd`: Who is Tally for: <students> or teachers?  \n"
            "  answer: `cabal resume m-tally-0000abcd --answer '...'` or `cabal chat m-tally-0000abcd`") in md
    assert "- ledger `m-ledger-0000abcd` (failed): KeyError: 'owner'" in md
    assert "- broken `m-broken-0000abcd` (invalid): /plans/broken.mission.yaml:3: invalid mission: team.operatives" in md


def test_json_and_csv_carry_every_field(report: BatchReport) -> None:
    data = json.loads(render(report, "json"))
    rows = render(report, "csv").splitlines()

    assert data["batch"] == {"id": "b-launches-1234abcd", "name": "launches", "source": "/plans/launches.batch.yaml",
                             "running": False, "budget": {"tokens": 500000, "cost_usd": 5.0}}
    assert data["totals"]["states"] == {"done": 1, "halted": 1, "failed": 1, "invalid": 1}
    assert (data["totals"]["tokens"], data["totals"]["cost_usd"], data["totals"]["duration_s"]) == (167000, 0.875, 210.0)
    assert data["missions"][1]["pending_question"] == "Who is Tally for: <students> or teachers?"
    assert len(rows) == 6  # the header, four missions, the totals
    assert rows[2] == ("tally,m-tally-0000abcd,Plan the launch of tally.,claude-sonnet-4-6,2,1,halted,questionToUser,1,4,"
                       "0,2,0,40000,5000,45000,0.25,30.0,1,Who is Tally for: <students> or teachers?,")
    assert rows[-1] == "total,,,,,,,,,,3,8,2,150000,17000,167000,0.875,210.0,,,"


def test_the_html_page_is_self_contained_with_charts_to_scale(report: BatchReport, tmp_path: Path) -> None:
    page = tmp_path / "reports" / "launches.html"

    html = render(report, "html", page=page)

    assert html.startswith("<!DOCTYPE html>") and html.count("<svg") == 3
    for outside in ("<script", "http:", "https:", "src=", "url(", "@import"):
        assert outside not in html
    # Cost bars to scale: the dearest mission's bar is the full width, the others in proportion.
    costs = re.findall(r'<rect x="150" y="\d+" width="([\d.]+)" height="14" fill="(#\w+)"><title>m-(\w+)-0000abcd: \$',
                       html)
    assert costs == [(f"{BAR_W:.1f}", STATE_COLOURS["done"], "margin"), (f"{BAR_W / 2:.1f}", STATE_COLOURS["halted"], "tally"),
                     (f"{BAR_W / 4:.1f}", STATE_COLOURS["failed"], "ledger"), ("0.0", STATE_COLOURS["invalid"], "broken")]
    assert LABEL_W == 150
    assert '<a href="../missions/m-margin-0000abcd/report.html">m-margin-0000abcd</a>' in html
    assert html.count("<a href=") == 1
    assert "Who is Tally for: &lt;students&gt; or teachers?" in html  # escaped, never markup


def test_every_state_has_a_colour_and_an_unknown_format_is_refused(report: BatchReport) -> None:
    assert set(STATE_COLOURS) == {str(state) for state in STATE_ORDER}
    assert names("batch") == ["html", "md", "json", "csv"]
    with pytest.raises(ConfigError, match="unknown batch report format 'pdf'; use one of html, md, json, csv"):
        render(report, "pdf")


def test_a_batch_in_every_state_is_counted_in_order_and_coloured_by_state() -> None:
    states = [str(state) for state in STATE_ORDER]
    everyone = BatchReport("b-all-00000000", "all", "/plans/all", True, BatchBudget(),
                           tuple(row(state, state, 0.0, 1.0) for state in reversed(states)))

    md, html = render(everyone, "md"), render(everyone, "html")

    assert md.splitlines()[2].startswith("9 missions: " + ", ".join(f"1 {state}" for state in states) + " · ")
    assert "running now" in md and "Batch budget" not in md
    # The outcomes bar: one segment and one legend entry per state, in the report's order.
    segments = re.findall(r'<rect x="[\d.]+" y="0" width="([\d.]+)" height="24" fill="(#\w+)"><title>1 (\w+)</title>',
                          html)
    assert segments == [(f"{BAR_W / 9:.1f}", STATE_COLOURS[state], state) for state in states]
    # Each table row's mark has its own state's colour (the table keeps the plan's order).
    marks = re.findall(r'<span class="state" style="background:(#\w+)"></span>(\w+)</td>', html)
    assert marks == [(STATE_COLOURS[state], state) for state in reversed(states)]
    # No prices known: the cost chart gives way to a sentence; no mission report, no link.
    assert "no cost recorded" in html and html.count("<svg") == 2 and "<a href=" not in html
