"""The two pictures of the HTML report: the product tree (an HTML outline the template draws
from ``product_tree``) and the timeline (inline SVG).

Every piece of text comes from the model or the user, so the SVG is built with ``Markup``:
``Markup(template).format(...)`` escapes each argument, and nothing is ever concatenated raw.
Both stay readable at about 30 products and 20 rounds: the tree grows down, one line a product,
and the timeline has one column a round in a picture drawn ``TIMELINE_WIDTH`` wide (wider with
many rounds) that scales to fill its card, and never below its drawn size: there its text is
12 px or more, and a narrow screen scrolls it sideways.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from markupsafe import Markup

from cabal.report.model import MissionReport, Product
from cabal.report.read import step_position
from cabal.vocabulary import Step, count_of

STATUS_COLOURS = {"accepted": ("#e3f4e8", "#2f8a4c"), "open": ("#fff4dc", "#b7791f"), "removed": ("#eeeeee", "#888888")}
OUTCOME_COLOURS = {"final": "#3b73c4", "halt": "#8a4fbf", "failed": "#d64541"}

# The timeline: a column a round (wider when there are few), a row a step.
LABEL_WIDTH, TIMELINE_WIDTH, COLUMN_RANGE, DOT_PITCH, BARS = 100, 900, (42, 200), 9, 56


def product_anchor(report: MissionReport, product: Product) -> str:
    """The HTML id of a product's section (an index, not the graph id: ids may hold anything)."""
    return f"product-{report.products.index(product) + 1}"


@dataclass(frozen=True)
class TreeNode:
    """A product in the tree the report draws (an HTML outline: its labels are body text, they
    wrap on a phone and never shrink with the picture), with the products below it."""

    product: Product
    version: str  # what stands for it: "v2 accepted", "v1", "no version"
    children: tuple[TreeNode, ...] = ()


def product_tree(report: MissionReport) -> tuple[TreeNode, ...]:
    """The live products as a tree: the roots, each with its children, in the report's order."""
    products = report.live_products
    below: dict[str | None, list[Product]] = defaultdict(list)
    known = {p.id for p in products}
    for product in products:
        below[product.parent_id if product.parent_id in known else None].append(product)

    def node(product: Product) -> TreeNode:
        shown = product.shown
        version = (f"v{shown.number}" + (" accepted" if shown.accepted else "")) if shown else "no version"
        return TreeNode(product, version, tuple(node(child) for child in below[product.id]))

    return tuple(node(root) for root in below[None])


def timeline_svg(report: MissionReport) -> Markup:
    """The rounds left to right: tokens spent (bars), each step's turns (a dot a turn, coloured by
    outcome) and what the round settled (products accepted, questions asked)."""
    if not report.turns:
        return Markup("")
    rounds = list(range(0, max(report.mission.round, max(t.round for t in report.turns)) + 1))
    steps = sorted({t.step for t in report.turns}, key=step_position)
    cells: dict[tuple[str, int], list] = defaultdict(list)
    for turn in report.turns:
        cells[(turn.step, turn.round)].append(turn)
    column = max(COLUMN_RANGE[0], min(COLUMN_RANGE[1], (TIMELINE_WIDTH - LABEL_WIDTH) // len(rounds)))
    per_line = (column - 10) // DOT_PITCH
    lines = max(math.ceil(len(turns) / per_line) for turns in cells.values())
    step_height = 12 + lines * DOT_PITCH
    spend = {row.round: row.spend for row in report.usage.by_round}
    most = max((s.total_tokens for s in spend.values()), default=0) or 1
    accepted = defaultdict(list)
    for product in report.products:
        for decision in product.decisions:
            if decision.accepted:
                accepted[decision.round].append(product.name)
    asked = defaultdict(list)
    for question in report.questions:
        asked[question.round].append(question.message)

    top = BARS + 22
    width = LABEL_WIDTH + column * len(rounds) + 8
    height = top + step_height * len(steps) + 44
    # As wide as its card (width 100%), never narrower than drawn (min-width): its text stays 12 px or more.
    parts = [Markup('<svg class="timeline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="100%" '
                    'style="min-width: {w}px" role="img" aria-label="Timeline of the rounds">').format(w=width, h=height)]
    for row, step in enumerate(steps):
        y = top + row * step_height
        if row % 2 == 0:
            parts.append(Markup('<rect x="0" y="{}" width="{}" height="{}" fill="#f5f7fa"/>').format(y, width, step_height))
        parts.append(Markup('<text x="6" y="{}" class="label">{}</text>').format(y + 15, _step_label(step)))
    for index, round_number in enumerate(rounds):
        x = LABEL_WIDTH + index * column
        spent = spend.get(round_number)
        tokens = spent.total_tokens if spent else 0
        bar = round(BARS * tokens / most) if tokens else 0
        parts.append(Markup(
            '<g><title>round {r}: {tokens} tokens, {cost}</title>'
            '<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="#c9d6ea"/></g>'
            '<text x="{cx}" y="{ty}" class="axis" text-anchor="middle">{r}</text>').format(
            r=round_number, tokens=f"{tokens:,}", cost=spent.cost if spent else "$0", x=x + 8,
            y=BARS - bar + 4, w=column - 16, h=bar, cx=x + column / 2, ty=BARS + 17))
        for row, step in enumerate(steps):
            for place, turn in enumerate(cells.get((step, round_number), ())):
                cx = x + 9 + (place % per_line) * DOT_PITCH
                cy = top + row * step_height + 10 + (place // per_line) * DOT_PITCH
                tooltip = (f"round {turn.round} · {turn.step} · {report.who(turn.agent)}: {turn.outcome}, "
                           f"{turn.input_tokens + turn.output_tokens:,} tokens, {count_of(turn.attempts, 'attempt')}")
                parts.append(Markup('<circle cx="{}" cy="{}" r="3.6" fill="{}"><title>{}</title></circle>').format(
                    cx, cy, OUTCOME_COLOURS.get(turn.outcome, "#666"), tooltip))
        marks_y = top + step_height * len(steps) + 18
        if accepted.get(round_number):
            names = accepted[round_number]
            parts.append(Markup('<g><title>accepted: {}</title><text x="{}" y="{}" class="accepted" '
                                'text-anchor="middle">✓{}</text></g>').format(
                ", ".join(names), x + column / 2, marks_y, len(names)))
        if asked.get(round_number):
            parts.append(Markup('<g><title>asked: {}</title><text x="{}" y="{}" class="asked" '
                                'text-anchor="middle">?</text></g>').format(
                " / ".join(asked[round_number]), x + column / 2, marks_y + 18))
    parts.append(Markup('<text x="6" y="{}" class="label">settled</text>').format(top + step_height * len(steps) + 18))
    parts.append(Markup('<text x="6" y="{}" class="label">tokens</text>').format(BARS / 2 + 8))
    parts.append(Markup("</svg>"))
    return Markup("").join(parts)


def _step_label(step: str) -> str:
    return Step(step).heading.removesuffix(" (round 0)") if step in tuple(Step) else step


def _clip(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: max(chars - 1, 1)] + "…"


# Rate bars (an evaluation's pass rates): a row a label, the bar's length its share of 1.
RATE_LABEL, RATE_BAR, RATE_ROW = 220, 300, 22


def rate_bars_svg(rows: list[tuple[str, float]], *, threshold: float | None = None, caption: str = "") -> Markup:
    """One bar a row, 0 to 1 (a pass rate), green at or above ``threshold`` (a dashed line), red below."""
    height = RATE_ROW * len(rows) + 8
    width = RATE_LABEL + RATE_BAR + 60
    parts = [Markup('<svg class="rates" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" '
                    'height="{h}" role="img" aria-label="{c}">').format(w=width, h=height, c=caption)]
    for index, (label, rate) in enumerate(rows):
        y = 4 + index * RATE_ROW
        good = threshold is None or rate >= threshold
        parts.append(Markup(
            '<g><title>{label}: {pct}</title><text x="{lx}" y="{ty}" class="label" text-anchor="end">{short}</text>'
            '<rect x="{x}" y="{y}" width="{full}" height="14" fill="#eef2f6"/>'
            '<rect x="{x}" y="{y}" width="{w}" height="14" fill="{fill}"/>'
            '<text x="{vx}" y="{ty}" class="axis">{pct}</text></g>').format(
            label=label, pct=f"{rate:.0%}", lx=RATE_LABEL - 8, ty=y + 12, short=_clip(label, 32), x=RATE_LABEL,
            y=y, full=RATE_BAR, w=round(RATE_BAR * max(0.0, min(rate, 1.0))), fill="#2f8a4c" if good else "#d64541",
            vx=RATE_LABEL + RATE_BAR + 6))
    if threshold is not None:
        x = RATE_LABEL + RATE_BAR * threshold
        parts.append(Markup('<line x1="{x}" y1="0" x2="{x}" y2="{h}" stroke="#1f2933" stroke-dasharray="3 3"/>').format(
            x=x, h=height))
    parts.append(Markup("</svg>"))
    return Markup("").join(parts)
