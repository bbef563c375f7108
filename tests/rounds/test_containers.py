"""A Collection or an Orchestration is done when all its children are accepted: one rule
(``report.model.settled_statuses``), seen the same in status, show, the exports and the batch report."""

from __future__ import annotations

from pathlib import Path

import pytest

from cabal.batch.report import read_status
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
    ], mission_done=False)

    assert found == {"lib": "accepted", "a": "accepted", "gone": "removed", "plan": "accepted", "inner": "accepted",
                     "b": "accepted", "c": "accepted", "half": "open", "d": "accepted", "e": "open", "empty": "open",
                     "dropped": "removed", "choice": "open", "f": "accepted"}


def test_an_empty_container_is_done_when_the_mission_is() -> None:
    rows = [("lib", "Collection", "open", None), ("a", "Content", "accepted", None)]

    assert settled_statuses(rows, mission_done=False) == {"lib": "open", "a": "accepted"}
    assert settled_statuses(rows, mission_done=True) == {"lib": "accepted", "a": "accepted"}


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

    assert [(p.name, p.status) for p in report.live_products] == [
        ("Library", "accepted"), ("Overview 1", "accepted"), ("Audience 2", "accepted"), ("Requirements 3", "accepted")]
    assert "- Library [Collection] accepted · no version" in render_markdown(report)
    assert '<div class="figure"><b>4 / 4</b><span>products accepted</span></div>' in render_html(report)
    assert "- Library [Collection] accepted · no version" in cabal("status", concluded, "--home", home).stdout
    assert read_status(Workspace.at(Path(home)), concluded)[1] == (4, 4)  # the batch report's "accepted" column
