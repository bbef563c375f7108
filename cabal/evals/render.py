"""An evaluation's reports: Markdown, one offline HTML page (a chart per expectation), JSON and
CSV; and two evaluations compared (Markdown or JSON)."""

from __future__ import annotations

import csv
import io
import json

from cabal.evals.run import Change, EvalResult, GroupSummary, failing, summarize, versus_summary
from cabal.evals.versus import CRITERIA, Comparison
from cabal.limits import printable
from cabal.vocabulary import NOT_PRICED

EVAL_FORMATS = ("md", "html", "json", "csv")


def render_eval(result: EvalResult, chosen: str) -> str:
    summaries = summarize(result)
    if chosen == "json":
        versus = versus_summary(result)
        data = {**result.model_dump(mode="json"), "summary": [_summary_json(s) for s in summaries],
                "passed": not failing(result), "versus_baseline": versus.model_dump() if versus else None}
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
    versus = versus_summary(result)
    if versus is not None:
        lines += ["## The team against one call of its model (judged blind, in both orders)", "",
                  f"wins {versus.wins}, ties {versus.ties}, losses {versus.losses}; the team spent "
                  + (f"{versus.token_ratio:.1f}x the baselines' tokens" if versus.token_ratio else "no tokens")
                  + (f" and {versus.dollar_ratio:.1f}x their dollars" if versus.dollar_ratio else "") + ".", ""]
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


# ------------------------------------------------------------------ a blind comparison


def render_judgement(comparison: Comparison, chosen: str) -> str:
    """``cabal judge``'s report: md, json or html (the Markdown rendered, every text escaped)."""
    if chosen == "json":
        data = {**comparison.model_dump(mode="json"), "wins": comparison.wins}
        return json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    text = printable("\n".join(judgement_markdown(comparison)) + "\n")
    if chosen == "html":
        from cabal.report.html import markdown_html

        return (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" "
                f"content=\"width=device-width, initial-scale=1\"><title>Judged blind</title><style>{_PAGE_CSS}</style>"
                f"</head><body><main>{markdown_html(text)}</main></body></html>\n")
    return text


_PAGE_CSS = ("body{font:16px/1.5 system-ui,sans-serif;margin:0;color:#1d1d1f}main{max-width:60rem;margin:auto;"
             "padding:1rem}table{border-collapse:collapse;display:block;overflow-x:auto}td,th{border:1px solid #ccc;"
             "padding:.3rem .5rem;vertical-align:top;text-align:left}code{overflow-wrap:anywhere}")


def judgement_markdown(comparison: Comparison) -> list[str]:
    a, b, wins = comparison.a, comparison.b, comparison.wins
    overall = {"A": f"A ({a.mission_id}) serves the user better", "B": f"B ({b.mission_id}) serves the user better",
               "tie": "a tie: no side is better in both orders"}[comparison.overall]
    lines = ["# Judged blind, in both orders", "",
             f"- A: `{a.mission_id}` ({_made(a.kind)}, {a.documents} documents, {a.words:,} words)",
             f"- B: `{b.mission_id}` ({_made(b.kind)}, {b.documents} documents, {b.words:,} words)",
             f"- judge: {comparison.judge_model}; each comparison asked twice, once with each side shown first; a side "
             "wins only where both orders agree", "",
             f"**Overall: {overall}.** Deliverables: A {wins['A']}, B {wins['B']}, tie {wins['tie']}. "
             f"Confidence: {', '.join(comparison.confidence)}.", "",
             *([f"Read with care: the two sides were not told the same; {'; '.join(comparison.unshared)} (the judge "
                "reads everything the user said).", ""] if comparison.unshared else []),
             "| verdict | A's document | B's document | A shown first | B shown first |", "|---|---|---|---|---|"]
    for row in comparison.deliverables:
        orders = {o.shown_first: o.verdict or "no answer" for o in row.orders}
        lines.append(f"| **{row.verdict}** | {_cell(row.a_name or '(none)')} | {_cell(row.b_name or '(none)')} | "
                     f"{orders.get('A', '-')} | {orders.get('B', '-')} |")
    lines += ["", "## Cost", "", "| | calls | tokens in | tokens out | US$ without caching | US$ with caching "
              "(estimate) | cacheable input |", "|---|---|---|---|---|---|---|"]
    for label, side in (("A", a), ("B", b)):
        cost = side.cost
        if cost is None:
            lines.append(f"| {label} | - | - | - | not recorded | not recorded | - |")
            continue
        lines.append(f"| {label} ({cost.model}) | {cost.calls} | {cost.input_tokens:,} | {cost.output_tokens:,} | "
                     f"{_dollars(cost.usd_without_cache)} | {_dollars(cost.usd_with_cache)} | "
                     f"{cost.cacheable_share:.0%} |")
    if a.cost and b.cost and b.cost.total_tokens:
        lines += ["", f"A spent {a.cost.total_tokens / b.cost.total_tokens:.1f}x B's tokens"
                  + (f" and {a.cost.usd_without_cache / b.cost.usd_without_cache:.1f}x its dollars without caching"
                     if a.cost.usd_without_cache and b.cost.usd_without_cache else "") + "."]
    judge_usd = _dollars(comparison.judge_usd)
    lines += ["", f"The judge: {comparison.judge_usage.calls} calls, {comparison.judge_usage.total_tokens:,} tokens, "
                  f"{judge_usd}.", ""]
    if comparison.scores:
        lines += ["## Scores (1-10, the mean of both orders)", "", "| | " + " | ".join(CRITERIA) + " |",
                  "|---|" + "---|" * len(CRITERIA)]
        lines += [f"| {side} | " + " | ".join(f"{scores[c]:.1f}" for c in CRITERIA) + " |"
                  for side, scores in comparison.scores.items()]
        lines.append("")
    lines += ["## Reasons", ""]
    for row in comparison.deliverables:
        lines.append(f"### {row.name}")
        lines += [f"- {order.shown_first} shown first: **{order.verdict or 'no answer'}**: {order.reason}"
                  for order in row.orders]
        lines.append("")
    lines.append("### Overall")
    lines += [f"- {order.shown_first} shown first: **{order.verdict or 'no answer'}**: {order.reason}"
              for order in comparison.overall_orders]
    lines += ["", f"Deliverables matched {comparison.matching}."]
    lines += [f"Problem: {problem}" for problem in comparison.problems]
    return lines


def _made(kind: str) -> str:
    return "one call of the model" if kind == "baseline" else "a team in rounds"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _dollars(value: float | None) -> str:
    return NOT_PRICED if value is None else f"${value:.4f}"
