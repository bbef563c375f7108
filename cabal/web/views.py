"""The pages, rendered on the server from typed values, and their live parts.

The templates (``templates/``) extend one layout and include the report's own sections
(``cabal/report/templates/sections``) with the report's context (``report_context``), so a
mission's page shows exactly what its HTML export shows, live. Each live part of a page is a
Jinja block of its template: the page renders them all, a stream renders them one by one.
Autoescape is on everywhere: every text a model or a person wrote is escaped, and a version's
Markdown is rendered with raw HTML off.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jinja2 import Environment

from cabal.report.html import report_context, template_environment
from cabal.exports import formats as export_formats
from cabal.rounds.gates import PLAN_GATE
from cabal.rounds.transitions import ENDED, Action, allows
from cabal.vocabulary import CABAL_VERSION, Step
from cabal.web.forms import MAX_SOURCE_BYTES, MAX_SOURCE_FILES, SIMULATED, examples, model_choices
from cabal.web.live import Parts
from cabal.web.outline import outline
from cabal.web.runner import Activity
from cabal.web.state import MissionGroup, MissionView

TEMPLATES = Path(__file__).resolve().parent / "templates"
MISSION_PARTS = ("head", "question", "actions", "conversation", "request", "tree", "products", "timeline", "usage")
LIST_PARTS = ("missions",)


def _environment() -> Environment:
    return template_environment(TEMPLATES)


def render(template: str, **context: Any) -> str:
    return _environment().get_template(template).render(**_common(context))


def render_parts(template: str, names: Sequence[str], **context: Any) -> Parts:
    """The blocks ``names`` of ``template``, each rendered alone with ``context``."""
    page = _environment().get_template(template)
    values = page.new_context(_common(context))
    return Parts({name: "".join(page.blocks[name](values)) for name in names})


def _common(context: dict[str, Any]) -> dict[str, Any]:
    return {"version": CABAL_VERSION, **context}


# ------------------------------------------------------------------------------- the pages


def diff_context(a: Any, b: Any, *, workspace: Path, csrf: str) -> dict[str, Any]:
    """Two missions' reports compared, with what the report's diff section draws from."""
    from cabal.report.diff import diff_missions
    from cabal.report.diff_render import diff_sections_context

    return {**diff_sections_context(diff_missions(a, b)), "workspace": workspace, "csrf": csrf}


def missions_context(groups: Sequence[MissionGroup], *, csrf: str, workspace: Path) -> dict[str, Any]:
    return {"groups": groups, "count": sum(len(group.rows) for group in groups), "csrf": csrf,
            "workspace": workspace}


def mission_context(view: MissionView, activity: Activity | None, *, csrf: str, workspace: Path) -> dict[str, Any]:
    report, status = view.report, view.status
    pending = view.question
    question = next((q for q in report.questions if pending and q.id == pending.get("id")), None)
    return {
        **report_context(report),
        # The state a live process sees (a mission whose process died is interrupted, not running).
        # A pending question's words are its card's: not again as the mission's detail.
        "mission": report.mission.model_copy(update={"state": str(status.state),
                                                     "detail": None if question is not None else status.detail}),
        # What a run of this server is doing, while the mission runs: its last events (the run
        # ending) come after the graph says it stopped.
        "activity": activity if status.state == "running" else None,
        "view": view, "status": status, "csrf": csrf, "workspace": workspace,
        "exports": export_formats("mission"),  # the download links: one per format of the registry
        "question": question, "step_heading": _step_heading,
        "plan": outline(question.message) if question is not None and question.gate == PLAN_GATE else None,
        "can_answer": question is not None and view.driver is None,
        "can_stop": allows(Action.STOP, status.state),
        "can_resume": allows(Action.RESUME, status.state) and view.driver is None,
        "can_continue": status.state == "done" and view.driver is None,
        "can_fork": status.round >= 1 and view.driver is None,
        "stop_asked": report.mission.stop_requested and status.state not in ENDED,
    }


def _step_heading(step: str) -> str:
    return Step(step).heading.removesuffix(" (round 0)") if step in tuple(Step) else step


def new_context(*, csrf: str, workspace: Path, values: dict[str, str] | None = None, error: str | None = None,
                where: str | None = None) -> dict[str, Any]:
    """The new-mission page; ``values`` refill the form after ``error`` (found in the form ``where``)."""
    return {"examples": examples(), "models": model_choices(), "simulated": SIMULATED, "csrf": csrf,
            "workspace": workspace, "values": values or {}, "error": error, "where": where,
            "max_source_files": MAX_SOURCE_FILES, "max_source_mb": f"{MAX_SOURCE_BYTES / 1_000_000:g}"}
