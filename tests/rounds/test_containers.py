"""A Collection or an Orchestration is done when it has children and all of them are accepted: one
rule (``report.model.settled_statuses``), seen the same in status, show, the exports and the batch
report. An empty one holds no accepted work: it stays open."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from cabal.batch.report import read_status
from cabal.cli.missions import report as outcome
from cabal.report.html import render_html
from cabal.report.markdown import render_markdown
from cabal.report.model import settled_statuses
from cabal.rounds.api import run_mission
from cabal.rounds.simulated import simulated_team
from cabal.rounds.workspace import Workspace, mission_report

from .test_cli import cabal


def test_a_container_is_accepted_once_every_live_child_is() -> None:
    found = settled_statuses([
        ("lib", "Collection", "open", None), ("a", "Content", "accepted", "lib"), ("gone", "Content", "removed", "lib"),
        ("plan", "Orchestration", "open", None), ("inner", "Collection", "open", "plan"),
        ("b", "Content", "accepted", "inner"), ("c", "Decision", "accepted", "plan"),
        ("half", "Orchestration", "open", None), ("d", "Content", "accepted", "half"), ("e", "Content", "open", "half"),
        ("empty", "Collection", "open", None), ("dropped", "Collection", "removed", None),
        ("choice", "Decision", "open", None), ("f", "Content", "accepted", "choice"),
    ])

    assert found == {"lib": "accepted", "a": "accepted", "gone": "removed", "plan": "accepted", "inner": "accepted",
                     "b": "accepted", "c": "accepted", "half": "open", "d": "accepted", "e": "open", "empty": "open",
                     "dropped": "removed", "choice": "open", "f": "accepted"}


def test_an_empty_container_is_never_accepted() -> None:
    rows = [("lib", "Collection", "open", None), ("a", "Content", "accepted", None),
            ("plan", "Orchestration", "open", None), ("gone", "Content", "removed", "plan")]

    assert settled_statuses(rows) == {"lib": "open", "a": "accepted", "plan": "open", "gone": "removed"}


def test_a_mission_that_ends_with_an_empty_library_does_not_report_it_accepted(graph_server) -> None:
    home = str(graph_server.home)
    # initial_products=1: the Library alone, nothing added under it; the Chair concludes in round 1.
    result = run_mission({"request": "Write a short handbook for new volunteers of a food bank.",
                          "team": {"operatives": 1}, "rounds": 2}, model=simulated_team(initial_products=1), home=home)
    assert (result.state, result.stop_reason) == ("done", "concluded")
    report = mission_report(result.mission_id, home=home)

    assert [(p.name, p.status) for p in report.live_products] == [("Library", "open")]
    assert "- Library [Collection] open · no version" in render_markdown(report)
    assert '<div class="figure"><b>0 / 1</b><span>products accepted</span></div>' in render_html(report)
    assert read_status(Workspace.at(Path(home)), result.mission_id)[1] == (0, 1)
    told = io.StringIO()
    outcome(result, question_shown=False, stream=told, home=home)  # what `cabal run` prints at the end
    assert "accepted:" not in told.getvalue()


@pytest.fixture(scope="module")
def concluded(graph_server) -> str:
    result = run_mission({"request": "Write a short handbook for new volunteers of a food bank.",
                          "team": {"operatives": 2}, "rounds": 3},
                         model=simulated_team(initial_products=4), home=graph_server.home)
    assert (result.state, result.stop_reason) == ("done", "concluded")
    return result.mission_id


def test_a_concluded_missions_collection_counts_as_accepted_everywhere(concluded: str, graph_server) -> None:
    home = str(graph_server.home)
    report = mission_report(concluded, home=home)

    # The Library is the parent of the three products; it is accepted with them.
    assert [(p.name, p.status, p.parent_id == report.live_products[0].id) for p in report.live_products] == [
        ("Library", "accepted", False), ("Short handbook for new volunteers of a food bank", "accepted", True),
        ("Overview", "accepted", True), ("Audience", "accepted", True)]
    assert "- Library [Collection] accepted · no version" in render_markdown(report)
    assert '<div class="figure"><b>4 / 4</b><span>products accepted</span></div>' in render_html(report)
    assert "- Library [Collection] accepted · no version" in cabal("status", concluded, "--home", home).stdout
    assert read_status(Workspace.at(Path(home)), concluded)[1] == (4, 4)  # the batch report's "accepted" column
