"""A mission report as Markdown: the transcript, ``cabal export --format md`` and ``cabal show``.

A version's content is Markdown itself; its headings are moved down below the report's own, so
a version's ``# Title`` does not outrank the product it belongs to. What is rendered is meant
for people (a file, a terminal): it leaves here ``printable``, without the terminal control
sequences a graph written by other means may hold.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from cabal.limits import printable
from cabal.report.model import DecisionRevision, Line, MissionReport, Product, Spend, Version
from cabal.vocabulary import count_of, price_hint, stop_phrase

CONTENT_LEVEL = 5  # a version's own top heading becomes #####, below "#### v2"
_HEADING = re.compile(r"^(#{1,6})(\s)")
_FENCE = re.compile(r"^\s*(```|~~~)")


def render_markdown(report: MissionReport, *, history: bool = True) -> str:
    """The whole mission: request, charter, products with content (and history), conversation,
    questions, usage, failed turns and every turn."""
    lines = header(report)
    lines += [f"_{report.mission.lineage}_", ""] if report.mission.lineage else []
    lines += ["## Request", "", report.mission.request, ""]
    if report.mission.charter or report.mission.objectives or report.mission.constraints:
        lines += ["## Mission", ""]
        if report.mission.charter:
            lines += [report.readable(report.mission.charter), ""]
        lines += [f"- objective: {report.readable(o)}" for o in report.mission.objectives]
        lines += [f"- constraint: {report.readable(c)}" for c in report.mission.constraints]
        lines.append("")
    lines += decisions_section(report, history=history)
    lines += products_section(report, report.live_products, history=history)
    removed = [p for p in report.products if p.status == "removed"]
    if removed:
        lines += ["### Removed products", ""]
        lines += [f"- {p.name} [{p.type}], added in round {p.round}" for p in removed]
        lines.append("")
    lines += sources_section(report)
    lines += ["## Conversation", ""]
    current = None
    for line in report.conversation:
        if line.round != current:
            current = line.round
            lines += [f"### Round {current}", ""]
        lines += [conversation_line(line, report.readable(line.text), bold=True, speaker=report.who(line.speaker)), ""]
    lines += ["## Questions and answers", ""]
    for question in report.questions:
        options = f" (options: {', '.join(question.options)})" if question.options else ""
        answer = (f" Answered in round {question.answered_round}: {question.answer}" if question.answer
                  else f" ({question.status})")
        lines.append(f"- round {question.round}, {question.step}, {report.who(question.asker)}: {question.message}"
                     f"{options}.{answer}")
    if not report.questions:
        lines.append("No question was put to the user.")
    lines += ["", *usage_section(report), "## Failed turns", ""]
    for turn in report.failed_turns:
        lines.append(f"- r{turn.round} {turn.step} {report.who(turn.agent)}, after {count_of(turn.attempts, 'attempt')}: "
                     + ("; ".join(turn.problems) or "no valid answer"))
    if not report.failed_turns:
        lines.append("None: every turn got a valid answer.")
    lines += ["", *(tool_calls_section(report) if report.tool_calls else []), "## Turns", ""]
    for turn in report.turns:
        problems = f" (rejected: {'; '.join(turn.problems)})" if turn.outcome == "failed" and turn.problems else ""
        lines.append(f"- r{turn.round} {turn.step} {report.who(turn.agent)}: {turn.outcome}, {turn.summary} "
                     f"[{count_of(turn.attempts, 'attempt')}]{problems}")
    return printable("\n".join(lines).rstrip() + "\n")


def render_products(report: MissionReport, products: Iterable[Product], *, history: bool = False,
                    version: Version | None = None, overview: bool = True) -> str:
    """``cabal show``: each product's shown version (or ``version``, for a single product), after
    the mission's header and the tree unless ``overview`` is off."""
    chosen = list(products)
    if overview:
        lines = (header(report) + decisions_section(report, history=history)
                 + products_section(report, chosen, history=history, version=version))
        if history and report.tool_calls:  # --history: what the agents looked up, beside what they wrote
            lines += tool_calls_section(report)
        lines += sources_section(report)
    else:
        lines = [line for product in chosen
                 for line in product_markdown(report, product, history=history, version=version)]
    return printable("\n".join(lines).rstrip() + "\n")


def decisions_section(report: MissionReport, *, history: bool) -> list[str]:
    """The Chair's record of decisions: the current ones, then (with ``history``) every earlier
    revision, each with who decided it, when and why."""
    if not report.decision_record:
        return []
    lines = ["## Decisions", ""]
    lines += [decision_line(report, d) for d in report.current_decisions] or ["Every decision was retired."]
    earlier = [d for d in report.decision_record if d.status != "current"]
    if history and earlier:
        lines += ["", "### Earlier decisions", ""]
        lines += [decision_line(report, d) + f" ({'retired' if d.decision is None else d.status})" for d in earlier]
    return [*lines, ""]


def decision_line(report: MissionReport, decision: DecisionRevision) -> str:
    said = report.readable(decision.decision) if decision.decision is not None else "retired"
    why = f" Why: {report.readable(decision.why)}" if decision.why else ""
    return (f"- {decision.id} {report.readable(decision.topic)}: {said} "
            f"({report.who(decision.author)}, round {decision.round}).{why}")


def sources_section(report: MissionReport) -> list[str]:
    """The user's sources, one line each, then the sections versions cite, quoted (what a
    citation such as ``[s2 interview-notes.md §2]`` in a version stands for)."""
    if not report.sources:
        return []
    lines = ["## Sources", ""]
    for source in report.sources:
        state = " (superseded by a later version)" if source.superseded else ""
        lines.append(f"- {source.source_id}{f' v{source.version}' if source.version > 1 else ''} {source.name}: "
                     f"{source.size} bytes, {source.sections} section(s){state}" + (f". {source.note}" if source.note else ""))
    cited = [(source, section) for source in report.sources for section in source.cited_sections]
    if cited:
        lines += ["", "### Cited sections", ""]
        for source, section in cited:
            lines += [f"[{report.citation_label(section.id)}]", "",
                      *(f"> {line}" for line in section.text.splitlines()), ""]
    return [*lines, ""]


def header(report: MissionReport) -> list[str]:
    mission = report.mission
    state = (f"State: {mission.state}, round {mission.round}"
             + (f", stopped: {stop_phrase(mission.stop_reason)}" if mission.stop_reason else "")
             + (f" ({report.readable(mission.detail)})" if mission.detail else ""))  # a done message names products
    return [f"# {mission.name} ({mission.id})", "", state, ""]


def products_section(report: MissionReport, products: list[Product] | tuple[Product, ...], *, history: bool,
                     version: Version | None = None) -> list[str]:
    lines = ["## Products", ""]
    if not products:
        return lines + ["No products yet.", ""]
    top = min(p.depth for p in products)
    for product in products:
        shown = product.shown
        where = f"v{shown.number}" + (" accepted" if shown.accepted else "") if shown else "no version"
        lines.append(f"{'  ' * (product.depth - top)}- {product.name} [{product.type}] {product.status} · {where}"
                     f" · owner {report.who(product.owner)}")
    lines.append("")
    for product in products:
        lines += product_markdown(report, product, history=history, version=version if len(products) == 1 else None)
    return lines


def product_markdown(report: MissionReport, product: Product, *, history: bool,
                     version: Version | None = None) -> list[str]:
    """One product: what it is, the content of its shown version (or ``version``), its history.
    References in what the agents wrote are shown as the names they stand for."""
    readable = report.readable
    lines = [f"### {product.name}", "",
             f"{product.type} · {product.status} · owner {report.who(product.owner)} · added in round {product.round}",
             ""]
    if product.dod:
        lines += [f"Definition of done: {readable(product.dod)}", ""]
    shown = version or product.shown
    if shown is None:
        lines += ["No version yet.", ""]
    else:
        state = "accepted" if shown.accepted else ("latest, not accepted" if shown is product.latest else "not accepted")
        lines += [f"#### v{shown.number} ({state})" + (f": {shown.title}" if shown.title else ""), "",
                  f"Written in round {shown.round} by {report.who(shown.author)}."
                  + (f" {readable(shown.change_summary)}" if shown.change_summary else ""), "",
                  demote_headings(readable(shown.content).strip(), CONTENT_LEVEL - 1), ""]
    if history:
        lines += history_markdown(report, product)
    return lines


def history_markdown(report: MissionReport, product: Product) -> list[str]:
    """Every version with its reviews and inspections, the Chair's decisions, and the collabs."""
    readable = report.readable
    lines = [f"#### History of {product.name}", ""]
    for version in product.versions:
        accepted = " [accepted]" if version.accepted else ""
        lines.append(f"- v{version.number}, round {version.round}, by {report.who(version.author)}{accepted}: "
                     f"{readable(version.change_summary or version.title) or 'no change summary'}")
        for review in version.reviews:
            lines.append(f"  - review by {report.who(review.author)}: {review.assessment}"
                         + (f". {readable(review.summary)}" if review.summary else ""))
        for inspection in version.inspections:
            lines.append(f"  - inspection by {report.who(inspection.author)}: {inspection.verdict}")
            for finding in inspection.findings:
                lines.append(f"    - finding, severity {finding.severity}, {finding.category}: {readable(finding.issue)}"
                             + (f" Recommendation: {readable(finding.recommendation)}" if finding.recommendation else ""))
    for decision in product.decisions:
        number = next((f"v{v.number}" for v in product.versions if v.id == decision.version_id), "a version")
        lines.append(f"- round {decision.round}: the Chair " + (f"accepted {number}" if decision.accepted
                                                               else f"rejected {number}: {readable(decision.reason)}"))
    for collab in product.collabs:
        if collab.responses:
            answered = "; ".join(f"{r.action} by {report.who(r.by)} in round {r.round}"
                                 + (f" ({readable(r.planned_change or r.rationale)})" if r.planned_change or r.rationale else "")
                                 for r in collab.responses)
            state = f"addressed: {answered}"
        else:
            state = "open"
        lines.append(f"- {collab.type} by {report.who(collab.author)}, round {collab.round}, importance {collab.importance}: "
                     f"{readable(collab.comment)} [{state}]")
    if len(lines) == 2:
        lines.append("Nothing yet.")
    return [*lines, ""]


def tool_calls_section(report: MissionReport) -> list[str]:
    """Every call the agents made to the mission's tools: who, which tool, with what, why, and
    the start of what came back (a tool's text is data: it leaves ``printable`` like the rest)."""
    lines = ["## Tool calls", ""]
    for call in report.tool_calls:
        why = f" Why: {call.why}" if call.why else ""
        lines.append(f"- r{call.round} {call.step} {report.who(call.agent)} called {call.name} {call.arguments}: "
                     f"{call.outcome}, {call.digest}.{why}")
    return [*lines, ""]


def conversation_line(line: Line, text: str | None = None, *, bold: bool = False, speaker: str | None = None) -> str:
    """One line of the conversation as people read it: in the transcript (``bold`` speaker), live
    and in ``cabal chat`` (plain). ``text``: the line's text as shown, if not its own; ``speaker``:
    who says it as shown (``MissionReport.who``), if not the line's id."""
    said = line.text if text is None else text
    speaker = speaker or line.speaker
    speaker = f"{speaker} asks you" if line.kind == "question" else speaker
    speaker = f"**{speaker}:**" if bold else f"{speaker}:"
    if line.kind == "question" and line.options:
        return f"{speaker} {said}  [{' / '.join(line.options)}]"
    if line.kind == "done":
        return f"{speaker} {said} (mission concluded)"
    if line.kind == "direction":
        return f"{speaker} {said} (the mission continues with this new direction)"
    return f"{speaker} {said}"


def usage_section(report: MissionReport) -> list[str]:
    total = report.usage.total
    lines = ["## Usage", "", f"In all: {spend_text(total)}.", "",
             "| agent | turns | input tokens | output tokens | cached | cost |", "|---|--:|--:|--:|--:|--:|"]
    lines += [f"| {report.who(row.agent)} | {_cells(row.spend)} |" for row in report.usage.by_agent]
    lines += ["", "| round | turns | input tokens | output tokens | cached | cost |", "|--:|--:|--:|--:|--:|--:|"]
    lines += [f"| {row.round} | {_cells(row.spend)} |" for row in report.usage.by_round]
    if report.usage.by_model:
        lines += ["", "| model | turns | input tokens | output tokens | cached | cost |", "|---|--:|--:|--:|--:|--:|"]
        lines += [f"| {_in_cell(row.model)} | {_cells(row.spend)} |" for row in report.usage.by_model]
    if report.usage.unpriced_models:
        lines += ["", price_hint(report.usage.unpriced_models) + "."]
    return [*lines, ""]


def spend_text(spend: Spend) -> str:
    return (f"{spend.turns} turns, {spend.input_tokens:,} input tokens, {spend.output_tokens:,} output tokens, "
            f"{spend.cache_read_tokens:,} cached, {spend.cost}")


def _in_cell(text: str) -> str:
    """``text`` as one table cell: a pipe (a model's path may hold one) does not end it."""
    return text.replace("|", "\\|")


def _cells(spend: Spend) -> str:
    return (f"{spend.turns} | {spend.input_tokens:,} | {spend.output_tokens:,} | {spend.cache_read_tokens:,} | "
            f"{spend.cost}")


def demote_headings(text: str, levels: int) -> str:
    """``text`` with each ATX heading ``levels`` deeper (at most ######), code blocks left alone."""
    out, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and (match := _HEADING.match(line)):
            line = "#" * min(len(match.group(1)) + levels, 6) + line[len(match.group(1)):]
        out.append(line)
    return "\n".join(out)
