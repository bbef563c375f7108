"""An evaluation's reports: Markdown, one offline HTML page (a chart per expectation), JSON and
CSV; and two evaluations compared (Markdown or JSON)."""

from __future__ import annotations

import csv
import io
import json

from cabal.evals.run import Change, EvalResult, GroupSummary, failing, summarize
from cabal.limits import printable

EVAL_FORMATS = ("md", "html", "json", "csv")


def render_eval(result: EvalResult, chosen: str) -> str:
    summaries = summarize(result)
    if chosen == "json":
        data = {**result.model_dump(mode="json"), "summary": [_summary_json(s) for s in summaries],
                "passed": not failing(result)}
        return json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    if chosen == "csv":
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["request", "expectation", "passed", "runs", "pass_rate"])
        for summary in summaries:
            for rate in summary.expectations:
                writer.writerow([summary.group, rate.name, rate.passed, rate.runs, f"{rate.rate:.4f}"])
        return printable(out.getvalue())
    if chosen == "html":
        return eval_html(result, summaries)
    return printable("\n".join(eval_markdown(result, summaries)) + "\n")


def verdict(result: EvalResult) -> str:
    below = failing(result)
    if not below:
        return f"every expectation passed in at least {result.min_pass:.0%} of the runs"
    return f"{len(below)} expectation(s) below {result.min_pass:.0%}: " + "; ".join(
        f"{group} {rate.name} {rate.rate:.0%}" for group, rate in below[:5]) + (" ..." if len(below) > 5 else "")


def eval_markdown(result: EvalResult, summaries: list[GroupSummary]) -> list[str]:
    lines = [f"# Evaluation {result.name}", "", f"`{result.eval_id}` · batch `{result.batch_id}` · "
             f"{len(result.runs)} runs ({result.repeat} per request) in {result.elapsed_s:.1f} s", "",
             verdict(result), ""]
    for summary in summaries:
        lines += [f"## {summary.group}: {' '.join(summary.request.split())[:100]}", "",
                  "| expectation | pass rate | passed |", "|---|---|---|"]
        lines += [f"| {rate.name} | {rate.rate:.0%} | {rate.passed}/{rate.runs} |" for rate in summary.expectations]
        lines += ["", "| figure | mean | p90 | sd |", "|---|---|---|---|"]
        for figure, spread in (("tokens", summary.tokens), ("cost (US$)", summary.cost_usd),
                               ("rounds", summary.rounds), ("wall time (s)", summary.wall_s)):
            lines.append(f"| {figure} | {_number(spread.mean)} | {_number(spread.p90)} | {_number(spread.sd)} |")
        if summary.judge:
            lines += ["", "| judge question | scored | mean | low | high | sd |", "|---|---|---|---|---|---|"]
            lines += [f"| {q} | {s.n}/{summary.runs} | " + (f"{s.mean:.2f} | {s.low:g} | {s.high:g} | {s.sd:.2f} |"
                                                           if s.n else "- | - | - | - |") for q, s in summary.judge]
            lines.append(f"\njudge cost: ${summary.judge_cost_usd:.4f}")
        lines.append("")
    return lines


def eval_html(result: EvalResult, summaries: list[GroupSummary]) -> str:
    from cabal.report.html import template_environment
    from cabal.report.svg import rate_bars_svg
    from cabal.vocabulary import CABAL_VERSION

    names = list(dict.fromkeys(rate.name for s in summaries for rate in s.expectations))
    charts = [(name, rate_bars_svg([(f"{s.group}: {s.request}", rate.rate) for s in summaries
                                    for rate in s.expectations if rate.name == name],
                                   threshold=result.min_pass, caption=name))
              for name in names]
    page = template_environment().get_template("eval.html.j2").render(
        result=result, summaries=summaries, charts=charts, verdict=verdict(result), version=CABAL_VERSION)
    return printable(page)


def _summary_json(summary: GroupSummary) -> dict:
    data = summary.model_dump(mode="json")
    data["expectations"] = [{**rate.model_dump(), "rate": rate.rate} for rate in summary.expectations]
    return data


def render_comparison(a: EvalResult, b: EvalResult, changes: list[Change], chosen: str) -> str:
    if chosen == "json":
        return json.dumps({"a": a.eval_id, "b": b.eval_id, "changes": [c.model_dump() for c in changes]},
                          indent=1) + "\n"
    lines = [f"# {a.eval_id} vs {b.eval_id}", "",
             "Marked (**!**): a change beyond the run-to-run spread of either evaluation.", "",
             "| request | what | A | B | spread | |", "|---|---|---|---|---|---|"]
    for change in changes:
        lines.append(f"| {change.group} | {change.what} | {_number(change.a)} | {_number(change.b)} | "
                     f"{change.spread:.4g} | {'**!**' if change.marked else ''} |")
    return printable("\n".join(lines) + "\n")


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
