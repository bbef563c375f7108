"""A reader's document as a Word file (``cabal export --format docx``), written by python-docx
(the ``export`` extra): Word's own styles (Title, Heading 1-6, List Bullet, Quote), so the file
takes the reader's theme, and a table of contents or a restyle works as on any Word document."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from cabal.report.document import Block, ReaderDocument, Run, missing_extra
from cabal.report.notes import source_entry

if TYPE_CHECKING:
    from docx.text.paragraph import Paragraph

CODE_FONT = "Courier New"


def render_word(document: ReaderDocument) -> bytes:
    """``document`` as the bytes of a .docx file."""
    try:
        import docx
    except ImportError:
        raise missing_extra("a Word file") from None
    word = docx.Document()
    word.core_properties.title = document.title
    word.add_heading(document.title, 0)
    word.add_paragraph(document.subtitle, style="Subtitle")
    for block in document.blocks:
        _block(word, block)
    if document.notes:
        word.add_heading("Notes", 1)
        for note in document.notes:
            word.add_paragraph(f"{note.number}. {note.label}")
    if document.sources:
        word.add_heading("Sources", 1)
        for source in document.sources:
            word.add_paragraph(source_entry(source), style="List Bullet")
    out = io.BytesIO()
    word.save(out)
    return out.getvalue()


def _block(word: Any, block: Block) -> None:
    if block.kind == "heading":
        _runs(word.add_heading("", min(block.level, 9)), block.runs)
    elif block.kind == "item":
        depth = min(block.level, 3)
        if block.number is None:
            _runs(word.add_paragraph(style="List Bullet" if depth == 1 else f"List Bullet {depth}"), block.runs)
        else:  # the number written: Word's numbered styles count on across separate lists
            paragraph = word.add_paragraph(style="List Continue" if depth == 1 else f"List Continue {depth}")
            _runs(paragraph, (Run(f"{block.number}. "), *block.runs))
    elif block.kind == "table":
        columns = max(len(row) for row in block.rows)
        table = word.add_table(rows=len(block.rows), cols=columns)
        table.style = "Table Grid"
        for r, row in enumerate(block.rows):
            for c, cell in enumerate(row):
                paragraph = table.cell(r, c).paragraphs[0]
                _runs(paragraph, tuple(Run(x.text, bold=True, note=x.note) for x in cell) if r == 0 else cell)
    elif block.kind == "code":
        paragraph = word.add_paragraph(style="No Spacing")
        run = paragraph.add_run(block.text)
        run.font.name = CODE_FONT
    elif block.kind == "quote":
        _runs(word.add_paragraph(style="Quote"), block.runs)
    elif block.kind == "rule":
        word.add_paragraph("* * *").alignment = 1  # centred
    else:
        _runs(word.add_paragraph(), block.runs)


def _runs(paragraph: Paragraph, runs: tuple[Run, ...]) -> None:
    for run in runs:
        if run.note is not None:
            added = paragraph.add_run(str(run.note))
            added.font.superscript = True
            continue
        added = paragraph.add_run(run.text)
        added.bold, added.italic = run.bold or None, run.italic or None
        if run.code:
            added.font.name = CODE_FONT
        if run.link and run.link != run.text:  # python-docx writes no hyperlinks: the address beside its text
            paragraph.add_run(f" ({run.link})")

