"""A batch report as one self-contained HTML page: no script, no font, no request anywhere, so
it opens offline and can be mailed as it is. The charts (outcomes, cost and duration per
mission) are inline SVG; each mission links to its own report where one exists.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from html import escape
from pathlib import Path

from cabal.batch.render import clip, duration, rounds_text, state_text
from cabal.batch.report import BatchReport, MissionRow

STATE_COLOURS = {
    "done": "#2e7d32", "halted": "#f9a825", "interrupted": "#607d8b", "failed": "#c62828", "diverged": "#ad1457",
    "running": "#1565c0",
    "pending": "#9e9e9e", "refused": "#6a1b9a", "invalid": "#8d6e63",
}
LABEL_W, BAR_W, VALUE_W, ROW_H = 150, 250, 90, 20  # two charts side by side on a laptop screen
LABEL_MAX_W, CHAR_W = 260, 7.5  # a label column wide enough for the longest key (12 px text), up to LABEL_MAX_W
LEGEND_COLUMNS = 3  # of 160 px each, within the chart's width
REQUEST_CHARS = 160  # the table shows the start of a request; the whole of it is its tooltip

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:1280px;color:#222;padding:0 1rem}
.wide{overflow-x:auto}
h1{font-size:1.5rem;margin-bottom:.2rem}h2{font-size:1.15rem;margin-top:2rem}
.muted{color:#666}p{overflow-wrap:anywhere}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,440px),1fr));gap:1.5rem}
figure{margin:0;min-width:0;overflow-x:auto}figcaption{font-weight:600;margin-bottom:.3rem}
figure svg{display:block;height:auto}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{border-bottom:1px solid #ddd;padding:.3rem .4rem;text-align:left;vertical-align:top}
th{background:#f5f5f5}td.n,th.n{text-align:right;white-space:nowrap}tr.total td{font-weight:600;border-top:2px solid #999}
td.text{min-width:11em}td.mission{overflow-wrap:anywhere;min-width:8em}td.model{min-width:8em}
.state{display:inline-block;width:.7em;height:.7em;border-radius:2px;margin-right:.35em}
code{font-size:12px}svg text{font:12px system-ui,sans-serif;fill:#222}
"""


def html_page(report: BatchReport, page: Path | None = None) -> str:
    """The whole page; ``page`` is where it will be written (for relative links)."""
    totals = report.totals
    budget = [f"{report.budget.tokens:,} tokens" if report.budget.tokens is not None else "",
              f"${report.budget.cost_usd:.2f}" if report.budget.cost_usd is not None else ""]
    budget_text = f" · batch budget {' and '.join(b for b in budget if b)}" if any(budget) else ""
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Batch {escape(report.name)}</title><style>{STYLE}</style></head><body>",
        f"<h1>Batch {escape(report.name)}</h1>",
        f'<p class="muted"><code>{escape(report.batch_id)}</code> · {escape(report.source)}'
        + (" · running now" if report.running else "") + "</p>",
        f"<p>{escape(report.summary())} · {totals.tokens:,} tokens · ${totals.cost_usd:.4f} · "
        f"{escape(duration(totals.duration_s))} of worker time{escape(budget_text)}</p>",
        '<div class="charts">',
        _figure("Outcomes", outcomes_chart(report)),
        _figure("Cost per mission (US$)", bar_chart(report.rows, lambda r: r.cost_usd, lambda v: f"${v:.4f}")
                if totals.cost_usd > 0 else '<p class="muted">no cost recorded: the models have no known prices</p>'),
        _figure("Duration per mission", bar_chart(report.rows, lambda r: r.duration_s, duration)),
        "</div>",
        "<h2>Missions</h2>", _table(report, page),
    ]
    if report.pending_questions:
        parts += ["<h2>Pending questions</h2>", "<ul>"]
        parts += [f"<li><b>{escape(row.key)}</b> <code>{escape(row.mission_id)}</code>: "
                  f"{escape(row.pending_question or '')}<br><span class=\"muted\">answer: <code>cabal resume "
                  f"{escape(row.mission_id)} --answer '...'</code> or <code>cabal chat {escape(row.mission_id)}"
                  f"</code></span></li>" for row in report.pending_questions]
        parts.append("</ul>")
    troubled = [row for row in report.rows if row.detail and row.state not in ("done", "halted")]
    if troubled:
        parts += ["<h2>Problems</h2>", "<ul>"]
        parts += [f"<li><b>{escape(row.key)}</b> ({escape(row.state)}): {escape(row.detail or '')}</li>"
                  for row in troubled]
        parts.append("</ul>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def outcomes_chart(report: BatchReport) -> str:
    """One bar split by state, with a legend of counts."""
    counts = report.totals.states
    total = max(sum(counts.values()), 1)
    width = LABEL_W + BAR_W + VALUE_W
    x, bars, legend = 0.0, [], []
    for index, (state, count) in enumerate(counts.items()):
        share = BAR_W * count / total
        bars.append(f'<rect x="{x:.1f}" y="0" width="{share:.1f}" height="24" fill="{STATE_COLOURS[state]}">'
                    f"<title>{count} {escape(state)}</title></rect>")
        x += share
        column, line = index % LEGEND_COLUMNS, index // LEGEND_COLUMNS
        legend.append(f'<rect x="{column * 160}" y="{36 + line * 20}" width="12" height="12" '
                      f'fill="{STATE_COLOURS[state]}"/><text x="{column * 160 + 18}" y="{46 + line * 20}">'
                      f"{count} {escape(state)}</text>")
    height = 36 + -(-len(counts) // LEGEND_COLUMNS) * 20
    return _svg(width, height, "".join(bars) + "".join(legend), label="outcomes")


def bar_chart(rows: tuple[MissionRow, ...], value: Callable[[MissionRow], float],
              label: Callable[[float], str]) -> str:
    """One bar per mission, coloured by its state, its value written after it."""
    top = max((value(row) for row in rows), default=0.0) or 1.0
    # The label column fits the longest key (a key longer than LABEL_MAX_W allows is clipped with "…").
    fits = int((LABEL_MAX_W - 12) / CHAR_W)
    keys = [clip(row.key, fits) for row in rows]
    label_w = min(LABEL_MAX_W, max([LABEL_W, *(round(len(key) * CHAR_W) + 12 for key in keys)]))
    width, height = label_w + BAR_W + VALUE_W, ROW_H * max(len(rows), 1)
    items = []
    for index, (row, key) in enumerate(zip(rows, keys)):
        y = index * ROW_H
        length = BAR_W * value(row) / top
        items.append(
            f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">{escape(key)}</text>'
            f'<rect x="{label_w}" y="{y + 3}" width="{length:.1f}" height="{ROW_H - 6}" '
            f'fill="{STATE_COLOURS[row.state]}"><title>{escape(row.mission_id)}: {escape(label(value(row)))}'
            f"</title></rect>"
            f'<text x="{label_w + length + 6:.1f}" y="{y + 14}">{escape(label(value(row)))}</text>')
    return _svg(width, height, "".join(items))


def _svg(width: float, height: float, body: str, *, label: str | None = None) -> str:
    """A chart as wide as its figure, never narrower than drawn: its 12 px text stays 12 px or more
    (a narrow screen scrolls the figure sideways)."""
    named = f' aria-label="{label}"' if label else ""
    return (f'<svg viewBox="0 0 {width:g} {height:g}" width="100%" style="min-width:{width:g}px" role="img"{named}>'
            f"{body}</svg>")


def _figure(caption: str, svg: str) -> str:
    return f"<figure><figcaption>{escape(caption)}</figcaption>{svg}</figure>"


def _table(report: BatchReport, page: Path | None) -> str:
    asking = any(row.pending_question for row in report.rows)  # the column only when a mission waits
    head = ("<tr><th>mission</th><th>request</th><th>model</th><th class=n>ops</th><th>state</th>"
            "<th class=n>rounds</th><th class=n>accepted</th><th class=n>failed turns</th><th class=n>tokens</th>"
            "<th class=n>cost</th><th class=n>duration</th>" + ("<th>pending question</th>" if asking else "") + "</tr>")
    rows = []
    for row in report.rows:
        mission = escape(row.mission_id)
        link = _link(row, page)
        if link is not None:
            mission = f'<a href="{escape(link)}">{mission}</a>'
        rows.append(
            f'<tr><td class="mission"><b>{escape(row.key)}</b><br><code>{mission}</code></td>'
            f'<td class="text" title="{escape(row.request)}">{escape(clip(row.request, REQUEST_CHARS))}</td>'
            f"<td class=model>{_breakable(row.model)}</td><td class=n>{row.operatives or ''}</td>"
            f'<td><span class="state" style="background:{STATE_COLOURS[row.state]}"></span>{escape(state_text(row))}</td>'
            f"<td class=n>{rounds_text(row)}</td><td class=n>{row.products_accepted}/{row.products_total}</td>"
            f"<td class=n>{row.failed_turns}</td><td class=n>{row.tokens:,}</td><td class=n>${row.cost_usd:.4f}</td>"
            f'<td class=n>{escape(duration(row.duration_s))}</td>'
            + (f'<td class="text">{escape(row.pending_question or "")}</td>' if asking else "") + "</tr>")
    totals = report.totals
    rows.append(f'<tr class="total"><td>total ({totals.missions})</td><td></td><td></td><td></td><td></td><td></td>'
                f"<td class=n>{totals.products_accepted}/{totals.products_total}</td>"
                f"<td class=n>{totals.failed_turns}</td><td class=n>{totals.tokens:,}</td>"
                f"<td class=n>${totals.cost_usd:.4f}</td><td class=n>{escape(duration(totals.duration_s))}</td>"
                + ("<td></td>" if asking else "") + "</tr>")
    return f'<div class="wide"><table>{head}{"".join(rows)}</table></div>'


def _breakable(name: str) -> str:
    """A model's name, escaped, that may wrap after its ``:``, ``.`` and ``/`` and nowhere else."""
    return "".join(escape(char) + ("<wbr>" if char in ":./" else "") for char in name)


def _link(row: MissionRow, page: Path | None) -> str | None:
    """The link to the mission's own report: relative to the page, so both folders can move."""
    if row.report_path is None:
        return None
    if page is None:
        return Path(row.report_path).as_uri()
    return os.path.relpath(row.report_path, Path(page).resolve().parent)
