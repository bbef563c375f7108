"""The example examples/sources/ with its price tool: the scripted team cites the user's files and
quotes the prices server's answer; the simulated team calls the tool on its own."""

from __future__ import annotations

from pathlib import Path

from cabal import run_mission
from cabal.graph import ContextGraph
from cabal.report import read_report
from cabal.report.html import render_html
from cabal.rounds.simulated import simulated_team

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sources" / "sources.mission.yaml"


def test_the_examples_scripted_team_quotes_the_price_tool_in_an_accepted_product(graph_server) -> None:
    result = run_mission(EXAMPLE, home=graph_server.home)

    assert (result.state, result.stop_reason) == ("done", "concluded")
    with ContextGraph.open(name=result.mission_id, home=graph_server.home) as graph:
        report = read_report(graph, result.mission_id)
    price = report.product("Student price")
    assert price.status == "accepted"
    assert 'the price tool answers "Obsidian Sync: 4 USD a month"' in " ".join(price.accepted_version.content.split())
    assert "[[s:s3]]" in price.accepted_version.content
    [call] = report.tool_calls
    assert (call.agent, call.name, call.arguments, call.outcome, call.digest) == (
        "operative-1", "prices__lookup", '{"competitor": "Obsidian"}', "ok", "Obsidian Sync: 4 USD a month")
    assert "<td>Obsidian Sync: 4 USD a month</td>" in render_html(report)


def test_the_simulated_team_calls_the_examples_price_tool_and_quotes_what_it_answers(graph_server) -> None:
    result = run_mission(EXAMPLE, model=simulated_team(initial_products=2), rounds=1, home=graph_server.home)

    with ContextGraph.open(name=result.mission_id, home=graph_server.home) as graph:
        report = read_report(graph, result.mission_id)
    answer = "No price for Overview. Known competitors: Evernote, GoodNotes, Notion, Obsidian, Quizlet."
    assert [(c.name, c.arguments, c.digest) for c in report.tool_calls] == [
        ("prices__lookup", '{"competitor": "Overview"}', answer)]  # the request names no deliverable: the default
    quoted = "A tool answered: No price for Overview Known competitors: Evernote, GoodNotes, Notion, Obsidian, Quizlet."
    assert quoted in report.product("Overview").latest.content  # as one plain sentence: its inner stops dropped
