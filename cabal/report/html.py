"""A mission report as one self-contained HTML page (``cabal export --format html``).

Offline by construction: the styles are inline (``templates/report.css``, which ``cabal serve``
serves as a file), the pictures are inline SVG, there is no script, and a Content-Security-Policy
forbids the page to load anything at all. Every text from the model or the user is escaped by
the template (autoescape); a version's Markdown is rendered with raw HTML and images turned off,
so it can add neither markup nor a request, and no control character survives (``printable``).
The page is made of ``templates/sections``, which the mission page of ``cabal serve`` includes
too.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from markupsafe import Markup, escape

from cabal.limits import printable
from cabal.report.model import MissionReport
from cabal.report.svg import OUTCOME_COLOURS, STATUS_COLOURS, product_anchor, product_tree, timeline_svg
from cabal.vocabulary import CABAL_VERSION, price_hint, stop_phrase

if TYPE_CHECKING:
    from jinja2 import Environment
    from markdown_it import MarkdownIt

TEMPLATES = Path(__file__).resolve().parent / "templates"
_MARKDOWN_SPECIAL = re.compile(r"[\\`*_{}\[\]()#+\-.!<>|]")


def render_html(report: MissionReport) -> str:
    return printable(template_environment().get_template("report.html.j2").render(report_context(report)))


def report_context(report: MissionReport) -> dict[str, Any]:
    """What the report's templates (the page and each of ``templates/sections``) draw from: the
    export renders it whole, ``cabal serve`` renders the same sections in its mission page."""
    return dict(
        report=report, mission=report.mission, tree=product_tree(report), timeline=timeline_svg(report),
        anchor=lambda product: product_anchor(report, product), who=report.who,
        readable=lambda text: Markup(linked_text(report, text)),
        plain=report.readable,  # references as names, no links: for attributes (a tooltip), escaped as any text
        content=lambda text: markdown_html(linked_text(report, text, markdown=True)),
        cited_anchor=cited_anchor,
        accepted=sum(1 for p in report.live_products if p.status == "accepted"),
        status_colours=STATUS_COLOURS, outcome_colours=OUTCOME_COLOURS, version=CABAL_VERSION,
    )


def linked_text(report: MissionReport, text: str | None, *, markdown: bool = False) -> str:
    """``text`` (the team's, the Chair's charter, the user's) as the page shows it, each reference
    a link: a product's or a version's name to the product's section, a source's to the cited
    text in the Sources section. The one renderer of references, wherever the page shows a text:
    as HTML (escaped, the links added: safe to mark up), or, with ``markdown``, as Markdown, for
    a version's content (which ``markdown_html`` renders)."""
    def link(anchor: str, label: str) -> str:
        if markdown:
            escaped = _MARKDOWN_SPECIAL.sub(lambda match: "\\" + match[0], label)
            return f"[{escaped}](#{anchor})"
        return str(Markup('<a href="#{}">{}</a>').format(anchor, label))

    # Escaping first leaves every reference as it was (their ids hold none of & < > ' "); the
    # labels put in their place are escaped by the link itself.
    source = (text or "") if markdown else str(escape(text or ""))
    linked = report.readable(source, link=lambda product, label: link(product_anchor(report, product), label),
                             cite=lambda cited_id, label: link(cited_anchor(cited_id), label))
    return linked


def cited_anchor(cited_id: str) -> str:
    """The anchor of a cited source or section in the report's Sources section: ``cited-s2-v2-3``."""
    return "cited-" + re.sub(r"[^A-Za-z0-9]+", "-", cited_id).strip("-")


def when(timestamp: str) -> str:
    """An ISO 8601 time as people read it: ``2026-11-25 12:11 UTC`` (to the minute)."""
    day, _, clock = timestamp.partition("T")
    zone = " UTC" if clock.endswith(("+00:00", "Z")) else ""
    return f"{day} {clock[:5]}{zone}" if clock else day


def markdown_html(text: str) -> Markup:
    """A version's Markdown as HTML: no raw HTML (it is shown as text), no images, safe links only."""
    return Markup(_markdown().render(text or ""))


@cache
def _markdown() -> MarkdownIt:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False}).enable("table").disable("image")


@cache
def template_environment(*folders: Path) -> Environment:
    """The report's Jinja environment (autoescape on); ``folders`` are searched before the
    report's own templates, so another page can include the report's sections."""
    from jinja2 import ChoiceLoader, Environment, FileSystemLoader, StrictUndefined

    environment = Environment(loader=ChoiceLoader([FileSystemLoader(folder) for folder in (*folders, TEMPLATES)]),
                              autoescape=True, undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                              keep_trailing_newline=True)  # an included section ends as its file does
    environment.filters["thousands"] = lambda number: f"{number:,}"
    environment.filters["price_hint"] = price_hint
    environment.filters["when"] = when
    environment.filters["stop_phrase"] = stop_phrase  # a stop reason as people read it, on every page
    return environment
