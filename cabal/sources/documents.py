"""Documents (Word, PDF, PowerPoint, Excel, HTML) read as Markdown, headings kept as sections.

One converter reads them all: Microsoft's markitdown (the ``documents`` extra), offline, with no
model to fetch. Its converters are called one by one, never its dispatcher, which falls back to
reading an unknown or broken file as plain text: raw PDF syntax in a prompt is what that gives.
A file that cannot be read (broken, encrypted, the extra missing) is a ``ConfigError`` naming
the file: the user's mission names it, so the mission does not start without it.
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass

from cabal.errors import ConfigError

EXTRA = "documents"
INSTALL_HINT = f"pip install 'cabal[{EXTRA}]'"


@dataclass(frozen=True)
class DocumentFormat:
    """One format the converter reads: its name (a source's ``format``), what people call it,
    markitdown's converter class, and the file name suffix that converter expects."""

    name: str
    title: str
    converter: str
    suffix: str


DOCUMENT_FORMATS: dict[str, DocumentFormat] = {f.name: f for f in (
    DocumentFormat("docx", "Word document", "DocxConverter", ".docx"),
    DocumentFormat("pdf", "PDF", "PdfConverter", ".pdf"),
    DocumentFormat("pptx", "PowerPoint deck", "PptxConverter", ".pptx"),
    DocumentFormat("xlsx", "Excel workbook", "XlsxConverter", ".xlsx"),
    DocumentFormat("html", "HTML page", "HtmlConverter", ".html"),
)}
"""Every format read through the converter, by name: the one registry of document readers."""

_OFFICE_PARTS = {"word/document.xml": "docx", "ppt/presentation.xml": "pptx", "xl/workbook.xml": "xlsx"}
_OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # an encrypted Office file (or a legacy .doc/.xls/.ppt)
_SLIDE = re.compile(r"^<!-- Slide number: (\d+) -->\n(#{1,6} )?", re.MULTILINE)


def sniffed_format(data: bytes) -> str | None:
    """The document format ``data`` is by its content, whatever its name says: a PDF starts with
    ``%PDF-``; Word, PowerPoint and Excel files are ZIP archives with a known main part."""
    if data[:1024].lstrip().startswith(b"%PDF-"):
        return "pdf"
    if data.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                names = set(archive.namelist())
        except (zipfile.BadZipFile, ValueError):
            return None
        return next((chosen for part, chosen in _OFFICE_PARTS.items() if part in names), None)
    return None


def document_text(data: bytes, format: str, name: str) -> str:  # noqa: A002 - the format's name
    """``data`` (a file named ``name``) as Markdown: headings as ``#`` lines, tables as pipe tables;
    a PDF's pages as ``## Page N`` sections. ``ConfigError`` when it cannot be read."""
    chosen = DOCUMENT_FORMATS[format]
    if chosen.name in ("docx", "pptx", "xlsx") and data.startswith(_OLE):
        raise ConfigError(f"{name}: this {chosen.title} is encrypted with a password (or is an old binary Office "
                          f"file): save a copy without a password, as {chosen.suffix}, and name that")
    try:
        from markitdown import MissingDependencyException, StreamInfo, converters
    except ImportError:
        raise ConfigError(_missing(name, chosen)) from None
    converter = getattr(converters, chosen.converter)()
    try:
        text = converter.convert(io.BytesIO(data), StreamInfo(extension=chosen.suffix, filename=name)).markdown
    except MissingDependencyException:  # markitdown installed without the part this format needs
        raise ConfigError(_missing(name, chosen)) from None
    except Exception as error:  # noqa: BLE001 - a parser's every failure on a user's file is that file's problem
        raise ConfigError(_unreadable(name, chosen, error)) from None
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if chosen.name == "pdf":
        return _pdf_pages(text)
    if chosen.name == "pptx":
        return _SLIDE.sub(lambda m: m[2] or f"# Slide {m[1]}\n", text)
    return text


def _missing(name: str, chosen: DocumentFormat) -> str:
    return f"{name}: reading a {chosen.title} needs the {EXTRA} extra: {INSTALL_HINT}"


def _unreadable(name: str, chosen: DocumentFormat, error: Exception) -> str:
    kind = type(error).__name__
    if kind in ("PDFPasswordIncorrect", "PDFEncryptionError", "FileNotDecryptedError"):
        return f"{name}: this PDF is encrypted with a password: save a copy without one and name that"
    detail = " ".join(str(error).split())[:120]
    return f"{name}: not a readable {chosen.title} ({kind}{': ' + detail if detail else ''})"


def _pdf_pages(text: str) -> str:
    """The converter ends each page with a form feed: each page becomes a ``## Page N`` section,
    what a citation of a PDF points at."""
    pages = [page.strip() for page in text.split("\f")]
    if len(pages) == 1:
        return pages[0]
    return "\n\n".join(f"## Page {number}\n\n{page}" for number, page in enumerate(pages, start=1) if page)
