"""Every export format, in one table: what ``cabal export``, ``cabal batch report``, the web
page's download links and docs/guide/exports.md offer.

A format renders a mission's report (``MissionReport``), a batch's (``BatchReport``) or both;
the reader's formats (Word, PDF) render a mission's accepted work, as one file or one file per
product (``products``). Adding one is one row here and its renderer. The renderers are imported when a format is
used, so a command that exports Markdown never loads the HTML templates.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from cabal.errors import ConfigError

if TYPE_CHECKING:
    from cabal.batch.report import BatchReport
    from cabal.report.document import ReaderDocument
    from cabal.report.model import MissionReport

Subject = Literal["mission", "batch"]


@dataclass(frozen=True)
class ExportFormat:
    """One format: its name (``--format``, the download's suffix), how a link names it, its
    media type, the file suffixes that choose it, and its renderers (None: not offered). A
    binary format's renderers give bytes."""

    name: str
    title: str
    media_type: str
    suffixes: tuple[str, ...]
    mission: Callable[[MissionReport], str | bytes] | None = None
    batch: Callable[[BatchReport, Path | None], str] | None = None  # Path: where an HTML page will be written
    products: Callable[[MissionReport], list[tuple[str, bytes]]] | None = None  # (product name, file) for each

    def offers(self, subject: Subject) -> bool:
        return getattr(self, subject) is not None


def _mission_md(report: MissionReport) -> str:
    from cabal.report.markdown import render_markdown

    return render_markdown(report)


def _mission_json(report: MissionReport) -> str:
    # The report's model as it is: `cabal schema export` publishes its schema.
    return json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"


def _mission_html(report: MissionReport) -> str:
    from cabal.report.html import render_html

    return render_html(report)


def _layout(name: str) -> Callable[[ReaderDocument], bytes]:
    """The renderer of a reader's format: Word or PDF."""
    if name == "docx":
        from cabal.report.word import render_word

        return render_word
    from cabal.report.pdf import render_pdf

    return render_pdf


def _reader_file(name: str, report: MissionReport) -> bytes:
    from cabal.report.document import reader_documents

    return _layout(name)(reader_documents(report)[0])


def _reader_files(name: str, report: MissionReport) -> list[tuple[str, bytes]]:
    from cabal.report.document import reader_documents

    return [(document.title, _layout(name)(document)) for document in reader_documents(report, per_product=True)]


def _batch_md(report: BatchReport, page: Path | None) -> str:
    from cabal.batch.render import markdown

    return markdown(report)


def _batch_json(report: BatchReport, page: Path | None) -> str:
    return json.dumps(report.to_wire(), indent=2) + "\n"


def _batch_csv(report: BatchReport, page: Path | None) -> str:
    from cabal.batch.render import as_csv

    return as_csv(report)


def _batch_html(report: BatchReport, page: Path | None) -> str:
    from cabal.batch.html import html_page

    return html_page(report, page)


FORMATS: tuple[ExportFormat, ...] = (
    ExportFormat("html", "HTML", "text/html; charset=utf-8", ("html", "htm"), _mission_html, _batch_html),
    ExportFormat("md", "Markdown", "text/markdown; charset=utf-8", ("md", "markdown"), _mission_md, _batch_md),
    ExportFormat("json", "JSON", "application/json", ("json",), _mission_json, _batch_json),
    ExportFormat("csv", "CSV", "text/csv; charset=utf-8", ("csv",), batch=_batch_csv),
    ExportFormat("docx", "Word", "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
                 ("docx",), partial(_reader_file, "docx"), products=partial(_reader_files, "docx")),
    ExportFormat("pdf", "PDF", "application/pdf", ("pdf",), partial(_reader_file, "pdf"),
                 products=partial(_reader_files, "pdf")),
)
DEFAULT_FORMAT = "md"


def formats(subject: Subject) -> list[ExportFormat]:
    """The formats a mission's (or a batch's) report comes in, in the table's order."""
    return [chosen for chosen in FORMATS if chosen.offers(subject)]


def names(subject: Subject) -> list[str]:
    return [chosen.name for chosen in formats(subject)]


def export_format(name: str, subject: Subject) -> ExportFormat:
    """The format called ``name``, or a ``ConfigError`` that lists the known ones."""
    for chosen in formats(subject):
        if chosen.name == name:
            return chosen
    raise ConfigError(f"unknown {subject} report format {name!r}; use one of {', '.join(names(subject))}")


def format_of(path: Path | None, subject: Subject) -> str:
    """The format a file's suffix asks for (``report.htm``: html), else the default."""
    suffix = path.suffix.lstrip(".").lower() if path else ""
    return next((chosen.name for chosen in formats(subject) if suffix in chosen.suffixes), DEFAULT_FORMAT)


def render_mission(report: MissionReport, name: str) -> str | bytes:
    """A mission's report in the format called ``name`` (bytes for a binary one: Word, PDF)."""
    renderer = export_format(name, "mission").mission
    assert renderer is not None  # export_format offers only formats that have one
    return renderer(report)


def render_products(report: MissionReport, name: str) -> list[tuple[str, bytes]]:
    """Each accepted product of a mission as its own file in the format called ``name``: (its
    name, the file); a ``ConfigError`` for a format that has no file per product."""
    renderer = export_format(name, "mission").products
    if renderer is None:
        per_product = [f.name for f in FORMATS if f.products is not None]
        raise ConfigError(f"the {name} format has no file per product; these do: {', '.join(per_product)}")
    return renderer(report)


def render_batch(report: BatchReport, name: str, *, page: Path | None = None) -> str:
    """A batch's report in the format called ``name``; ``page`` is where an HTML report will be
    written (its links to the missions' own reports are relative to it)."""
    renderer = export_format(name, "batch").batch
    assert renderer is not None
    return renderer(report, page)
