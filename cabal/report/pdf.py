"""A reader's document as a PDF file (``cabal export --format pdf``), laid out by fpdf2 (the
``export`` extra: pure Python, no system library, where weasyprint needs Pango and Cairo).

Text is set in DejaVu Sans where the system has it (most Linux systems do; ``CABAL_PDF_FONT``
names another TrueType file), which covers most scripts; otherwise in the PDF's built-in
Helvetica, whose Windows-1252 characters cover Western European text: any other character is
written as "?" (the export's docs say so).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cabal.errors import ConfigError
from cabal.report.document import Block, ReaderDocument, Run, missing_extra, plain
from cabal.report.notes import source_entry

FONT_SETTING = "CABAL_PDF_FONT"
FONT_FOLDERS = ("/usr/share/fonts/truetype/dejavu", "/usr/share/fonts/dejavu", "/usr/share/fonts/TTF",
                "/Library/Fonts", "C:/Windows/Fonts")
BODY, SMALL, CODE = 10.5, 9.0, 9.0  # points
HEADING_SIZES = {0: 22.0, 1: 16.0, 2: 13.5, 3: 12.0}
LINE = 5.2  # mm, a body line
INDENT = 6.0  # mm, one level of a list
GREY = (90, 90, 90)


def render_pdf(document: ReaderDocument) -> bytes:
    """``document`` as the bytes of a PDF file (A4)."""
    try:
        from fpdf import FPDF
    except ImportError:
        raise missing_extra("a PDF file") from None
    pdf = FPDF(format="A4")
    pdf.set_margins(20, 20, 20)
    pdf.set_auto_page_break(True, margin=18)
    pdf.set_title(document.title)
    pdf.set_creator("Cabal")
    family, mono = _fonts(pdf)
    layout = _Layout(pdf, family, mono)
    pdf.add_page()
    layout.title(document.title, document.subtitle)
    for block in document.blocks:
        layout.block(block)
    if document.notes:
        layout.block(Block("heading", (Run("Notes"),), level=1))
        for note in document.notes:
            layout.hanging(f"{note.number}.", (Run(note.label),), SMALL)
    if document.sources:
        layout.block(Block("heading", (Run("Sources"),), level=1))
        for source in document.sources:
            layout.hanging("\u2022", (Run(source_entry(source)),), SMALL)
    return bytes(pdf.output())


def _fonts(pdf: Any) -> tuple[str, str]:
    """The text and code font families: DejaVu (or ``CABAL_PDF_FONT``) if found, else the built-in ones."""
    chosen = os.environ.get(FONT_SETTING)
    if chosen:
        if not Path(chosen).is_file():
            raise ConfigError(f"{FONT_SETTING}={chosen}: no such font file (name a TrueType .ttf file)")
        for style in ("", "B", "I", "BI"):
            pdf.add_font("Chosen", style, chosen)
        return "Chosen", "Courier"
    folder = next((Path(f) for f in FONT_FOLDERS if (Path(f) / "DejaVuSans.ttf").is_file()), None)
    if folder is None:
        pdf.core_fonts_encoding = "windows-1252"
        return "Helvetica", "Courier"
    faces = {"": "DejaVuSans.ttf", "B": "DejaVuSans-Bold.ttf", "I": "DejaVuSans-Oblique.ttf",
             "BI": "DejaVuSans-BoldOblique.ttf"}
    for style, file in faces.items():
        pdf.add_font("DejaVu", style, str(folder / (file if (folder / file).is_file() else faces[""])))
    mono = folder / "DejaVuSansMono.ttf"
    if mono.is_file():
        pdf.add_font("DejaVuMono", "", str(mono))
        return "DejaVu", "DejaVuMono"
    return "DejaVu", "Courier"


class _Layout:
    """Where the blocks go: one method per kind of block."""

    def __init__(self, pdf: Any, family: str, mono: str) -> None:
        self.pdf, self.family, self.mono = pdf, family, mono
        self.unicode = family != "Helvetica"

    def text(self, value: str) -> str:
        if self.unicode:
            return value
        return value.encode("windows-1252", "replace").decode("windows-1252")

    def title(self, title: str, subtitle: str) -> None:
        self.pdf.set_font(self.family, "B", HEADING_SIZES[0])
        self.pdf.multi_cell(0, 10, self.text(title), new_x="LMARGIN", new_y="NEXT")
        self.pdf.set_font(self.family, "", SMALL)
        self.pdf.set_text_color(*GREY)
        self.pdf.multi_cell(0, LINE, self.text(subtitle), new_x="LMARGIN", new_y="NEXT")
        self.pdf.set_text_color(0)
        self.pdf.ln(4)

    def block(self, block: Block) -> None:
        pdf = self.pdf
        if block.kind == "heading":
            size = HEADING_SIZES.get(block.level, BODY + 0.5)
            if pdf.will_page_break(size * 0.5 + 3 * LINE):  # a heading never ends a page alone
                pdf.add_page()
            pdf.ln(2.5 if block.level > 1 else 4)
            self.runs(block.runs, size, bold=True, height=size * 0.5)
            pdf.ln(1.5)
        elif block.kind == "item":
            marker = "\u2022" if block.number is None else f"{block.number}."
            self.hanging(marker, block.runs, BODY, indent=INDENT * (block.level - 1))
        elif block.kind == "table":
            self.table(block)
        elif block.kind == "code":
            pdf.set_font(self.mono, "", CODE)
            pdf.set_fill_color(242, 242, 242)
            pdf.multi_cell(0, 4.4, self.text(block.text), fill=True, new_x="LMARGIN", new_y="NEXT")
            pdf.set_fill_color(255)  # a table's cells after it are not shaded as code
            pdf.ln(2)
        elif block.kind == "quote":
            left = pdf.l_margin
            pdf.set_left_margin(left + INDENT)
            pdf.set_x(left + INDENT)
            pdf.set_text_color(*GREY)
            self.runs(block.runs, BODY, italic=True)
            pdf.set_text_color(0)
            pdf.set_left_margin(left)
            pdf.ln(2)
        elif block.kind == "rule":
            y = pdf.get_y() + 2
            pdf.line(pdf.l_margin, y, pdf.w - pdf.r_margin, y)
            pdf.ln(5)
        else:
            self.runs(block.runs, BODY)
            pdf.ln(2)

    def runs(self, runs: tuple[Run, ...], size: float, *, bold: bool = False, italic: bool = False,
             height: float = LINE) -> None:
        """Runs written in flow, wrapping at the margins; a note's number raised."""
        pdf = self.pdf
        for run in runs:
            style = ("B" if bold or run.bold else "") + ("I" if italic or run.italic else "")
            if run.note is not None:
                pdf.set_font(self.family, "", size)
                pdf.char_vpos = "SUP"
                pdf.write(height, str(run.note))
                pdf.char_vpos = "LINE"
            elif run.code:
                pdf.set_font(self.mono, "", size - 1)
                pdf.write(height, self.text(run.text))
            else:
                pdf.set_font(self.family, style, size)
                if run.link:
                    pdf.set_text_color(20, 70, 160)
                pdf.write(height, self.text(run.text), link=run.link or "")
                pdf.set_text_color(0)
        pdf.ln(height)

    def hanging(self, marker: str, runs: tuple[Run, ...], size: float, *, indent: float = 0.0) -> None:
        """A marker (a bullet, a number) in the margin of a paragraph that wraps under itself."""
        pdf = self.pdf
        left = pdf.l_margin
        pdf.set_x(left + indent)
        pdf.set_font(self.family, "", size)
        pdf.cell(INDENT, LINE, self.text(marker))
        pdf.set_left_margin(left + indent + INDENT)
        self.runs(runs, size)
        pdf.set_left_margin(left)
        pdf.ln(0.8)

    def table(self, block: Block) -> None:
        pdf = self.pdf
        pdf.ln(1.5)
        pdf.set_font(self.family, "", SMALL)
        columns = max(len(row) for row in block.rows)
        with pdf.table(first_row_as_headings=True, text_align="LEFT", line_height=4.6, padding=1.2,
                       headings_style=_heading_style(self.family)) as table:
            for row in block.rows:
                cells = table.row()
                for cell in (*row, *((),) * (columns - len(row))):
                    cells.cell(self.text(plain(cell)))
        pdf.ln(3)


def _heading_style(family: str) -> Any:
    from fpdf.fonts import FontFace

    return FontFace(family=family, emphasis="BOLD", fill_color=(235, 235, 235))
