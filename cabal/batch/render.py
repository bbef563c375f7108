"""A batch report as text: Markdown or CSV (``html`` has the page with charts; ``cabal.exports``
lists every format).

Each lists, per mission, the request, state, stop reason, rounds, products accepted out of
total, failed turns, tokens, cost, duration and any pending question, and the totals.
"""

from __future__ import annotations

import csv
import io

from cabal.batch.report import BatchReport, MissionRow
from cabal.vocabulary import state_phrase

CSV_COLUMNS = ("key", "mission_id", "request", "model", "operatives", "repeat", "state", "stop_reason", "round",
               "rounds_limit", "products_accepted", "products_total", "failed_turns", "input_tokens",
               "output_tokens", "tokens", "cost_usd", "duration_s", "attempts", "pending_question", "detail")



def markdown(report: BatchReport) -> str:
    totals = report.totals
    lines = [f"# Batch {report.name} ({report.batch_id})", "",
             f"{report.summary()} · {totals.tokens:,} tokens · ${totals.cost_usd:.4f} · "
             f"{duration(totals.duration_s)} of worker time" + (" · running now" if report.running else ""), ""]
    if report.budget.tokens is not None or report.budget.cost_usd is not None:
        limits = [f"{report.budget.tokens:,} tokens" if report.budget.tokens is not None else "",
                  f"${report.budget.cost_usd:.2f}" if report.budget.cost_usd is not None else ""]
        lines += [f"Batch budget: {' and '.join(x for x in limits if x)}", ""]
    lines += ["| mission | request | model | ops | state | rounds | accepted | failed turns | tokens | cost | duration |",
              "|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for row in report.rows:
        lines.append(f"| {row.key} `{row.mission_id}` | {_cell(clip(row.request, 80))} | {_cell(row.model)} | "
                     f"{row.operatives or ''} | {state_text(row)} | {rounds_text(row)} | "
                     f"{row.products_accepted}/{row.products_total} | {row.failed_turns} | {row.tokens:,} | "
                     f"${row.cost_usd:.4f} | {duration(row.duration_s)} |")
    lines.append(f"| **total** ({totals.missions}) | | | | | | {totals.products_accepted}/{totals.products_total} | "
                 f"{totals.failed_turns} | {totals.tokens:,} | ${totals.cost_usd:.4f} | {duration(totals.duration_s)} |")
    if report.pending_questions:
        lines += ["", "## Pending questions", ""]
        lines += [f"- {row.key} `{row.mission_id}`: {row.pending_question}  \n"
                  f"  answer: `cabal resume {row.mission_id} --answer '...'` or `cabal chat {row.mission_id}`"
                  for row in report.pending_questions]
    troubled = [row for row in report.rows if row.detail and row.state not in ("done", "halted")]
    if troubled:
        lines += ["", "## Problems", ""]
        lines += [f"- {row.key} `{row.mission_id}` ({row.state}): {row.detail}" for row in troubled]
    return "\n".join(lines) + "\n"


def as_csv(report: BatchReport) -> str:
    """One row per mission, then a row whose key is ``total``."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in report.rows:
        values = [getattr(row, name) for name in CSV_COLUMNS]
        writer.writerow(["" if value is None else value for value in values])
    totals = report.totals
    total = {"key": "total", "products_accepted": totals.products_accepted, "products_total": totals.products_total,
             "failed_turns": totals.failed_turns, "input_tokens": totals.input_tokens,
             "output_tokens": totals.output_tokens, "tokens": totals.tokens, "cost_usd": totals.cost_usd,
             "duration_s": totals.duration_s}
    writer.writerow([total.get(name, "") for name in CSV_COLUMNS])
    return out.getvalue()


def state_text(row: MissionRow) -> str:
    return state_phrase(row.state, row.stop_reason)


def rounds_text(row: MissionRow) -> str:
    return f"{row.round}/{row.rounds_limit}" if row.rounds_limit else ""


def duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m{rest:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
