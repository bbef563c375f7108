"""A mission's transcript, rendered from the graph: the Markdown report of ``cabal.report``
(what ``cabal transcript`` prints and ``cabal export --format md`` writes).

A run does not write it (issue 32: reading the whole mission at the end of every run was ~3% of
a 20-round run's engine time, and its peak memory): ``cabal run`` and ``cabal resume`` write
``transcript.md`` from the report they read anyway to say what was accepted, and ``cabal
transcript ID`` renders it at any time. A run removes the file it makes stale.

(Named in the plural: a submodule named ``transcript`` would shadow the public
``cabal.rounds.transcript`` function, the attribute of the package, once imported.)"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cabal.graph import ContextGraph
from cabal.private import write_private

if TYPE_CHECKING:
    from cabal.report.model import MissionReport
    from cabal.rounds.workspace import Workspace


def render_transcript(graph: ContextGraph, mission_id: str) -> str:
    # The report's models load when a transcript is asked for, not before a run's first model call.
    from cabal.report import read_report
    from cabal.report.markdown import render_markdown

    return render_markdown(read_report(graph, mission_id))


def write_transcript(workspace: Workspace, mission_id: str, report: MissionReport) -> Path:
    """``transcript.md`` in the mission's folder, from a report already read; returns its path."""
    from cabal.report.markdown import render_markdown

    workspace.private_mission_dir(mission_id)
    path = workspace.transcript_path(mission_id)
    write_private(path, render_markdown(report))
    return path
