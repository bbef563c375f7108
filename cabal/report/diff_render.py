"""A mission diff as Markdown, JSON or one self-contained HTML page (``cabal diff --format``).

The page is the export's kind of page: the report's styles inline, no script, a
Content-Security-Policy that lets it load nothing, every text escaped by the template
(autoescape) and made printable on the way out."""

from __future__ import annotations

import json

from cabal.limits import printable
from cabal.report.diff import Figures, Halt, MissionDiff, Piece, ProductChange
from cabal.vocabulary import CABAL_VERSION, state_phrase

DIFF_FORMATS = ("md", "html", "json")
# Rows of the figures table: (label, how one mission's figures show it).
FIGURE_ROWS = (
    ("state", lambda f: state_phrase(f.state, f.stop_reason)),
    ("rounds", lambda f: str(f.rounds)),
    ("turns", lambda f: str(f.turns)),
    ("failed turns", lambda f: str(f.failed_turns)),
    ("model calls", lambda f: str(f.calls)),
    ("products accepted", lambda f: str(f.accepted)),
    ("input tokens", lambda f: f"{f.input_tokens:,}"),
    ("output tokens", lambda f: f"{f.output_tokens:,}"),
    ("cost", lambda f: f"${f.cost_usd:.4f}"),
)


def render_diff(diff: MissionDiff, chosen: str) -> str:
    if chosen == "json":
        data = {**diff.model_dump(mode="json"), "same_content": diff.same_content, "counts": diff.counts}
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if chosen == "html":
        return diff_html(diff)
    return printable("\n".join(diff_markdown(diff)) + "\n")


def figure_rows(a: Figures, b: Figures) -> list[tuple[str, str, str]]:
    return [(label, show(a), show(b)) for label, show in FIGURE_ROWS]


def summary(diff: MissionDiff) -> str:
    if diff.same_content:
        return f"no difference in content: {len(diff.products)} product(s), the same texts, verdicts and decisions"
    return ", ".join(f"{n} {change}" for change, n in diff.counts.items() if n) + " product(s)"


def diff_markdown(diff: MissionDiff) -> list[str]:
    lines = [f"# {diff.a_name} vs {diff.b_name}", "", f"A: `{diff.a}`  ", f"B: `{diff.b}`", "",
             *([diff.lineage, ""] if diff.lineage else []), summary(diff), "", "## Figures", "", "| | A | B |", "|---|---|---|"]
    lines += [f"| {label} | {a} | {b} |" for label, a, b in figure_rows(diff.a_figures, diff.b_figures)]
    lines += ["", "## Products", ""]
    for product in diff.products:
        lines += _product_markdown(product)
    lines += ["## Questions and halts", "", "| round | A | B |", "|---|---|---|"]
    for index in range(max(len(diff.a_halts), len(diff.b_halts))):
        a = diff.a_halts[index] if index < len(diff.a_halts) else None
        b = diff.b_halts[index] if index < len(diff.b_halts) else None
        either = a or b
        assert either is not None, "one side has a halt at every index below the longer list"
        lines.append(f"| {either.round} | {_halt(a)} | {_halt(b)} |")
    return lines


def _product_markdown(product: ProductChange) -> list[str]:
    title = product.name if product.change != "renamed" else f"{product.a_name} → {product.b_name}"
    lines = [f"### {title} ({product.change})", ""]
    if product.change in ("added", "removed"):
        return lines
    lines += [f"- status: {product.a_status} / {product.b_status}; version compared: {_version(product.a_version)} / "
              f"{_version(product.b_version)}",
              f"- verdicts: {', '.join(product.a_verdicts) or '-'} / {', '.join(product.b_verdicts) or '-'}",
              f"- decisions: {', '.join(product.a_decisions) or '-'} / {', '.join(product.b_decisions) or '-'}", ""]
    if product.text_changed:
        lines += ["```diff", *_word_diff_text(product.text).splitlines(), "```", ""]
    return lines


def _version(number: int | None) -> str:
    return f"v{number}" if number is not None else "none"


def _word_diff_text(pieces: tuple[Piece, ...]) -> str:
    """Pieces the way ``git diff --word-diff`` writes them: ``[-removed-]{+added+}``."""
    return "".join(p.text if p.op == "=" else f"[-{p.text}-]" if p.op == "-" else f"{{+{p.text}+}}" for p in pieces)


def _halt(halt: Halt | None) -> str:
    if halt is None:
        return "-"
    text = halt.message + (f" → {halt.answer}" if halt.answer else "")
    return " ".join(text.split()).replace("|", "\\|")


def diff_html(diff: MissionDiff) -> str:
    from cabal.report.html import template_environment

    page = template_environment().get_template("diff.html.j2").render(**diff_sections_context(diff),
                                                                       version=CABAL_VERSION)
    return printable(page)


def diff_sections_context(diff: MissionDiff) -> dict:
    """What ``templates/sections/diff.html.j2`` draws from (the page here, and ``cabal serve``'s)."""
    halts = [(diff.a_halts[i] if i < len(diff.a_halts) else None, diff.b_halts[i] if i < len(diff.b_halts) else None)
             for i in range(max(len(diff.a_halts), len(diff.b_halts)))]
    return {"diff": diff, "summary": summary(diff), "figures": figure_rows(diff.a_figures, diff.b_figures),
            "halts": halts}
