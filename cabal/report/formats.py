"""A report as the text of one export format: what ``cabal export`` writes and ``cabal serve``
hands out for download."""

from __future__ import annotations

import json

from cabal.report.model import MissionReport

MEDIA_TYPES = {"md": "text/markdown; charset=utf-8", "json": "application/json", "html": "text/html; charset=utf-8"}


def render_report(report: MissionReport, chosen: str) -> str:
    """``report`` as Markdown (the transcript), JSON (its model, as ``cabal schema export``
    publishes it) or one self-contained HTML page."""
    if chosen == "json":
        return json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
    if chosen == "html":
        from cabal.report.html import render_html

        return render_html(report)
    from cabal.report.markdown import render_markdown

    return render_markdown(report)
