"""A mission's transcript, rendered from the graph: the Markdown report of ``cabal.report``
(what ``cabal transcript`` prints and ``cabal export --format md`` writes)."""

from __future__ import annotations

from cabal.graph import ContextGraph


def render_transcript(graph: ContextGraph, mission_id: str) -> str:
    # The report's models load when a run writes its transcript, not before its first model call.
    from cabal.report import read_report
    from cabal.report.markdown import render_markdown

    return render_markdown(read_report(graph, mission_id))
