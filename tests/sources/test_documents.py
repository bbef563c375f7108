"""Word, PDF, PowerPoint, Excel and HTML sources: real files, made here with their own libraries,
read as Markdown whose headings are the sections a citation names; one that cannot be read is
one line naming the file, and `cabal run` stops with status 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import docx
import openpyxl
import pypdf
import pytest
from fpdf import FPDF
from pptx import Presentation

from cabal.errors import ConfigError
from cabal.sources import Chunk, SourceLimits, collect, read_source, typed_wanted
from tests.sources.test_collect import collected, mission_file, refusal

CABAL = Path(sys.executable).with_name("cabal")


def word_file(path: Path) -> Path:
    document = docx.Document()
    document.add_heading("Pricing brief", 1)
    document.add_paragraph("Students pay 4 USD a month.")
    document.add_heading("Risks", 2)
    document.add_paragraph("Churn in summer", style="List Bullet")
    table = document.add_table(rows=2, cols=2)
    for (row, column), text in {(0, 0): "plan", (0, 1): "price", (1, 0): "student", (1, 1): "4"}.items():
        table.cell(row, column).text = text
    document.save(path)
    return path


def pdf_file(path: Path, *, plain: bool = False) -> Path:
    """Two pages of text; ``plain``: uncompressed, with the binary comment of line 2 made ASCII (the
    same length, so every offset holds): a PDF that is all ASCII, as some tools write them."""
    pdf = FPDF()
    pdf.set_compression(not plain)
    pdf.set_font("helvetica", size=11)
    pdf.add_page()
    pdf.multi_cell(0, 6, "Twelve students said 4 USD is fair.\n\nThree would pay 6.")
    pdf.add_page()
    pdf.multi_cell(0, 6, "Two schools buy seats by the classroom.")
    data = bytes(pdf.output())
    path.write_bytes(data.replace(b"%\xe9\xeb\xf1\xbf\n", b"%ABCD\n", 1) if plain else data)
    return path


def deck_file(path: Path) -> Path:
    deck = Presentation()
    for title, body in (("Launch plan", "Ship in March"), ("Budget", "Ten thousand USD")):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    untitled = deck.slides.add_slide(deck.slide_layouts[6])  # blank: no title to stand as its heading
    untitled.shapes.add_textbox(0, 0, 100, 100).text_frame.text = "Questions?"
    deck.save(path)
    return path


def workbook_file(path: Path) -> Path:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Prices"
    sheet.append(["app", "monthly"])
    sheet.append(["Quizlet", 7.99])
    book.create_sheet("Notes").append(["cheap is good"])
    book.save(path)
    return path


def test_word_pdf_powerpoint_excel_and_html_are_read_as_sections_under_their_headings(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    word_file(docs / "brief.docx")
    pdf_file(docs / "notes.pdf")
    deck_file(docs / "deck.pptx")
    workbook_file(docs / "prices.xlsx")
    (docs / "page.html").write_text("<h1>Offer</h1><p>Seats <b>by class</b></p><h2>Terms</h2><ul><li>yearly</li></ul>"
                                    "<script>steal()</script>")

    read = {f.name: (f.format, f.skipped, f.chunks) for f in collected(mission_file(tmp_path, "  - docs\n")).files}

    assert read == {
        "docs/brief.docx": ("docx", None, (
            Chunk(1, "Pricing brief", "# Pricing brief\n\nStudents pay 4 USD a month."),
            Chunk(2, "Risks", "## Risks\n\n* Churn in summer\n\n|  |  |\n| --- | --- |\n| plan | price |\n"
                              "| student | 4 |"))),
        "docs/notes.pdf": ("pdf", None, (
            Chunk(1, "Page 1", "## Page 1\n\nTwelve students said 4 USD is fair.\n\nThree would pay 6."),
            Chunk(2, "Page 2", "## Page 2\n\nTwo schools buy seats by the classroom."))),
        "docs/deck.pptx": ("pptx", None, (
            Chunk(1, "Launch plan", "# Launch plan\nShip in March"),
            Chunk(2, "Budget", "# Budget\nTen thousand USD"),
            Chunk(3, "Slide 3", "# Slide 3\nQuestions?"))),
        "docs/prices.xlsx": ("xlsx", None, (
            Chunk(1, "Prices", "## Prices\n| app | monthly |\n| --- | --- |\n| Quizlet | 7.99 |"),
            Chunk(2, "Notes", "## Notes\n| cheap is good |\n| --- |"))),
        "docs/page.html": ("html", None, (
            Chunk(1, "Offer", "# Offer\n\nSeats **by class**"),
            Chunk(2, "Terms", "## Terms\n\n* yearly"))),
    }


def test_a_pdf_is_read_as_a_pdf_whatever_its_name_and_never_as_its_raw_syntax(tmp_path: Path) -> None:
    # An uncompressed PDF is plain ASCII: read by its name alone, a symlink's target without a
    # suffix (a content store) or a file without one went into the prompts as PDF syntax.
    store = tmp_path / "store"
    store.mkdir()
    pdf_file(store / "blob-0001", plain=True)
    (store / "blob-0001").read_bytes().decode("ascii")  # text, as far as a UTF-8 check can tell
    (tmp_path / "notes.pdf").symlink_to(store / "blob-0001")
    (tmp_path / "notes").write_bytes((store / "blob-0001").read_bytes())

    texts = collect(typed_wanted([str(tmp_path / "notes.pdf"), str(tmp_path / "notes")]), SourceLimits()).files

    assert [(t.format, t.skipped, t.chunks[0].text) for t in texts] == [
        ("pdf", None, "## Page 1\n\nTwelve students said 4 USD is fair.\n\nThree would pay 6.")] * 2
    assert not any("obj" in c.text or "%PDF" in c.text for t in texts for c in t.chunks)


def test_an_encrypted_or_broken_document_is_one_line_naming_the_file_where_the_mission_names_it(tmp_path: Path) -> None:
    writer = pypdf.PdfWriter(clone_from=pdf_file(tmp_path / "open.pdf"))
    writer.encrypt("secret", algorithm="AES-256")
    writer.write(tmp_path / "locked.pdf")
    (tmp_path / "broken.docx").write_bytes(b"PK\x03\x04 not a Word file")
    (tmp_path / "locked.xlsx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600))  # an encrypted Office file

    assert refusal(mission_file(tmp_path, "  - locked.pdf\n")) == (
        f"{tmp_path / 'm.mission.yaml'}:3: sources[0]: locked.pdf: this PDF is encrypted with a password: save a copy "
        "without one and name that")
    assert refusal(mission_file(tmp_path, "  - open.pdf\n  - broken.docx\n")) == (
        f"{tmp_path / 'm.mission.yaml'}:4: sources[1]: broken.docx: not a readable Word document (BadZipFile: File is "
        "not a zip file)")
    assert refusal(mission_file(tmp_path, "  - locked.xlsx\n")) == (
        f"{tmp_path / 'm.mission.yaml'}:3: sources[0]: locked.xlsx: this Excel workbook is encrypted with a password "
        "(or is an old binary Office file): save a copy without a password, as .xlsx, and name that")


def test_without_the_documents_extra_a_document_names_the_extra_to_install(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "markitdown", None)  # as in an install without the extra: the import fails

    with pytest.raises(ConfigError) as error:
        read_source(word_file(tmp_path / "brief.docx"), "brief.docx", None)

    assert str(error.value) == "brief.docx: reading a Word document needs the documents extra: pip install 'cabal[documents]'"


def test_cabal_run_stops_with_status_2_and_one_line_on_an_encrypted_pdf(tmp_path: Path, graph_server) -> None:
    writer = pypdf.PdfWriter(clone_from=pdf_file(tmp_path / "open.pdf"))
    writer.encrypt("secret", algorithm="AES-256")
    writer.write(tmp_path / "locked.pdf")
    (tmp_path / "m.mission.yaml").write_text("request: Read.\nrounds: 1\nmodel: simulated\nsources:\n  - locked.pdf\n")

    ran = subprocess.run([str(CABAL), "run", "m.mission.yaml"], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path, env={**os.environ, "CABAL_HOME": str(graph_server.home)})

    assert (ran.returncode, ran.stdout) == (2, "")
    assert ran.stderr == ("cabal: m.mission.yaml:5: sources[0]: locked.pdf: this PDF is encrypted with a password: "
                          "save a copy without one and name that\n")


def test_a_document_gone_unreadable_by_a_resume_leaves_the_team_its_version(tmp_path: Path) -> None:
    from cabal.rounds.sources import changed_sources

    writer = pypdf.PdfWriter(clone_from=pdf_file(tmp_path / "notes.pdf"))
    writer.encrypt("secret", algorithm="AES-256")
    writer.write(tmp_path / "notes.pdf")  # the file the mission read, now encrypted
    source = {"id": "s1", "source_id": "s1", "version": 1, "name": "notes.pdf", "path": str(tmp_path / "notes.pdf"),
              "sha256": "old"}

    assert changed_sources(None, "m-x", [source], 2, max_bytes=10**6) == (  # nothing to prepare: no membrane needed
        [], ["source s1 (notes.pdf) cannot be read now: notes.pdf: this PDF is encrypted with a password: save a "
             "copy without one and name that; the team keeps version 1"])
