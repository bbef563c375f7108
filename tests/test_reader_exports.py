"""The accepted work as a reader gets it: Word and PDF files with headings, lists, tables and the
citations as numbered notes, then the sources; opened here with python-docx and pypdf."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import docx
import pypdf
import pytest

from cabal.errors import ConfigError
from cabal.exports import render_mission, render_products
from cabal.report.model import (Agent, Mission, MissionReport, Product, Source, SourceSection, Spend, Usage,
                                Version)
from cabal.report.notes import Note, NotedText, cited_sources, noted, noted_all

CABAL = Path(sys.executable).with_name("cabal")

PRICE = """# Decision

Students pay **3.99 USD** a month [[s:s1#2]], below every paid competitor [[s:s2]].

## Why

1. The brief caps it under 5 USD [[s:s1#2]].
2. Interviews: "the price of a coffee" [[s:s3.v2#1]].

- Résumé of risks: churn in summer — watch it
  - nested: schools buy by the classroom

| plan | price |
| --- | --- |
| student | 3.99 [[s:s2]] |
| pro | 8 |

> Quoted from the brief.

```
price = 3.99
```

See [the sheet](https://example.org/prices) and [[p:p-evidence]]. Σ ≠ ∞."""

EVIDENCE = "Seven of twelve pay for nothing today [[s:s3.v2#1]].\n\nUnknown citation stays: [[s:s9]]."


def report() -> MissionReport:
    def version(product: str, content: str) -> Version:
        return Version(id=f"v-{product}", number=1, round=1, author="a1", content=content, accepted=True)

    def product(pid: str, name: str, content: str | None, depth: int = 1, parent: str | None = "p-root") -> Product:
        versions = (version(pid, content),) if content is not None else ()
        return Product(id=pid, name=name, type="Content" if content else "Collection", status="accepted",
                       parent_id=parent, depth=depth, versions=versions,
                       accepted_version_id=f"v-{pid}" if content is not None else None)

    sections = {"s1": (SourceSection(id="s1#2", position=2, heading="Constraints", text="Under 5 USD."),),
                "s3.v2": (SourceSection(id="s3.v2#1", position=1, heading="Today", text="Seven pay nothing."),)}

    def source(node: str, name: str, note: str | None = None) -> Source:
        sid, _, v = node.partition(".v")
        return Source(id=node, source_id=sid, version=int(v or 1), name=name, note=note, format="docx", size=10,
                      sha256="0", sections=3, cited=True, cited_sections=sections.get(node, ()))

    return MissionReport(
        mission=Mission(id="m-price-000001", name="student-price", request="Price it.", state="done", round=3),
        agents=(Agent(id="a1", role="operative", name="Ada"),),
        products=(product("p-root", "Pricing", None, depth=0, parent=None),
                  product("p-price", "Student price", PRICE),
                  product("p-evidence", "Interview evidence", EVIDENCE),
                  Product(id="p-draft", name="Draft not accepted", type="Content", status="open", depth=1,
                          parent_id="p-root", versions=(Version(id="v-d", number=1, round=1, author="a1",
                                                                content="never shown", accepted=False),))),
        conversation=(), questions=(), turns=(), usage=Usage(total=Spend(), by_agent=(), by_round=()),
        sources=(source("s1", "brief.docx", "What we promise"), source("s2", "prices.xlsx"),
                 source("s3", "notes.pdf"), source("s3.v2", "notes.pdf")))


def test_citations_become_numbered_notes_a_source_cited_twice_keeps_its_number() -> None:
    first = noted("Under 5 [[s:s1#2]], see [[s:s2]] and again [[s:s1#2]].", report())
    second = noted("Coffee [[s:s3.v2#1]] and [[s:s2]]; see [[p:p-price]]; the ceiling [[p:p-price]]; [[s:s9]].",
                   report(), earlier=first.notes)

    assert first == NotedText("Under 5 [^1], see [^2] and again [^1].", (
        Note(1, "s1#2", "brief.docx: Constraints"), Note(2, "s2", "prices.xlsx")))
    # Another document: its name where the sentence names it, a "see" note where a citation would stand.
    assert second == NotedText("Coffee [^3] and [^2]; see Student price; the ceiling [^4]; [[s:s9]].", (
        *first.notes, Note(3, "s3.v2#1", "notes.pdf (version 2): Today"), Note(4, "p:p-price", "see “Student price”")))
    assert noted_all(["a [[s:s2]]", "b [[s:s2]]"], report(), marker=lambda n: f"<{n}>") == (
        ("a <1>", "b <1>"), (Note(1, "s2", "prices.xlsx"),))
    assert [s.id for s in cited_sources(second.notes, report())] == ["s1", "s2", "s3.v2"]


def word_text(data: bytes) -> list[tuple[str, str]]:
    """Each paragraph's style and text, a raised note number shown as ^N, tables' cells as rows."""
    def text(paragraph) -> str:
        return "".join(f"^{run.text}" if run.font.superscript else run.text for run in paragraph.runs)

    document = docx.Document(io.BytesIO(data))
    shown = [(paragraph.style.name, text(paragraph)) for paragraph in document.paragraphs]
    for table in document.tables:
        shown += [("table", " | ".join(text(cell.paragraphs[0]) for cell in row.cells)) for row in table.rows]
    return shown


def test_the_word_export_has_headings_lists_tables_and_notes_then_the_sources() -> None:
    shown = word_text(render_mission(report(), "docx"))  # type: ignore[arg-type]

    assert shown == [
        ("Title", "student-price"),
        ("Subtitle", "m-price-000001, round 3"),
        ("Heading 1", "Pricing"),
        ("Heading 2", "Student price"),
        ("Heading 3", "Decision"),
        ("Normal", "Students pay 3.99 USD a month^1, below every paid competitor^2."),
        ("Heading 4", "Why"),
        ("List Continue", "1. The brief caps it under 5 USD^1."),
        ("List Continue", '2. Interviews: "the price of a coffee"^3.'),
        ("List Bullet", "Résumé of risks: churn in summer — watch it"),
        ("List Bullet 2", "nested: schools buy by the classroom"),
        ("Quote", "Quoted from the brief."),
        ("No Spacing", "price = 3.99"),
        ("Normal", "See the sheet (https://example.org/prices) and Interview evidence. Σ ≠ ∞."),
        ("Heading 2", "Interview evidence"),
        ("Normal", "Seven of twelve pay for nothing today^3."),
        ("Normal", "Unknown citation stays: [[s:s9]]."),
        ("Heading 1", "Notes"),
        ("Normal", "1. brief.docx: Constraints"),
        ("Normal", "2. prices.xlsx"),
        ("Normal", "3. notes.pdf (version 2): Today"),
        ("Heading 1", "Sources"),
        ("List Bullet", "brief.docx: What we promise"),
        ("List Bullet", "prices.xlsx"),
        ("List Bullet", "notes.pdf (version 2)"),
        ("table", "plan | price"),
        ("table", "student | 3.99^2"),
        ("table", "pro | 8"),
    ]


def pdf_lines(data: bytes) -> list[str]:
    reader = pypdf.PdfReader(io.BytesIO(data))
    return [line.strip() for page in reader.pages for line in page.extract_text().splitlines() if line.strip()]


def test_the_pdf_export_reads_as_the_word_one_does() -> None:
    data = render_mission(report(), "pdf")
    lines = pdf_lines(data)  # type: ignore[arg-type]

    assert pypdf.PdfReader(io.BytesIO(data)).metadata.title == "student-price"  # type: ignore[arg-type, union-attr]
    assert lines[:6] == ["student-price", "m-price-000001, round 3", "Pricing", "Student price", "Decision",
                         "Students pay 3.99 USD a month1, below every paid competitor2."]
    for expected in ("1. The brief caps it under 5 USD1.", "• Résumé of risks: churn in summer — watch it",
                     "plan price", "student 3.99[2]", "price = 3.99", "Seven of twelve pay for nothing today3.",
                     "Notes", "1. brief.docx: Constraints", "3. notes.pdf (version 2): Today", "Sources",
                     "• notes.pdf (version 2)"):
        assert expected in lines
    assert "never shown" not in " ".join(lines)  # only accepted work
    assert "Σ ≠ ∞." in lines[lines.index("price = 3.99") + 1]


def test_one_file_per_product_holds_its_own_notes_numbered_from_one() -> None:
    files = render_products(report(), "docx")

    assert [name for name, _ in files] == ["Student price", "Interview evidence"]
    evidence = word_text(files[1][1])
    assert evidence[:3] == [("Title", "Interview evidence"), ("Subtitle", "student-price (m-price-000001), round 3"),
                            ("Normal", "Seven of twelve pay for nothing today^1.")]
    assert ("Normal", "1. notes.pdf (version 2): Today") in evidence
    with pytest.raises(ConfigError, match=r"^the md format has no file per product; these do: docx, pdf$"):
        render_products(report(), "md")


def test_without_the_export_extra_the_one_line_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "fpdf", None)  # as in an install without the extra: the import fails

    with pytest.raises(ConfigError) as error:
        render_mission(report(), "pdf")

    assert str(error.value) == "writing a PDF file needs the export extra: pip install 'cabal-agents[export]'"


def test_cabal_export_writes_word_and_pdf_files_of_a_finished_mission(tmp_path: Path, graph_server) -> None:
    env = {**os.environ, "CABAL_HOME": str(graph_server.home)}
    example = Path(__file__).resolve().parents[1] / "examples" / "sources" / "sources.mission.yaml"
    ran = subprocess.run([str(CABAL), "run", str(example), "--quiet"], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path, env=env)
    mission_id = next(line.split()[1] for line in ran.stdout.splitlines() if line.startswith("mission: "))

    def export(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(CABAL), "export", mission_id, *args], capture_output=True, timeout=120,
                              cwd=tmp_path, env=env)

    one, each, piped = export("-o", "work.docx"), export("--format", "pdf", "--per-product", "-o", "each"), \
        export("--format", "pdf")

    leader, follower = os.openpty()  # a terminal as the output: a PDF is refused there, in one line
    on_terminal = subprocess.run([str(CABAL), "export", mission_id, "--format", "pdf"], stdout=follower,
                                 stderr=subprocess.PIPE, timeout=120, cwd=tmp_path, env=env)
    os.close(follower)
    os.close(leader)
    no_folder = export("--format", "docx", "--per-product")

    assert (on_terminal.returncode, on_terminal.stderr.decode()) == (
        2, "cabal: a pdf file is not for a terminal: write it with -o FILE.pdf\n")
    assert (no_folder.returncode, no_folder.stderr.decode()) == (
        2, "cabal: --per-product writes one file per product: name their folder with -o FOLDER\n")
    assert one.returncode == 0 and one.stdout.decode().startswith("wrote work.docx (docx, ")
    assert sorted(p.name for p in (tmp_path / "each").iterdir()) == ["Interview evidence.pdf", "Student price.pdf"]
    assert piped.stdout.startswith(b"%PDF-")
    word = word_text((tmp_path / "work.docx").read_bytes())
    assert [text for style, text in word if style.startswith("Heading")] == [
        "Student price", "Interview evidence", "Notes", "Sources"]
    assert ("Normal", "1. docs/product-brief.md: Constraints") in word
    assert pdf_lines((tmp_path / "each" / "Student price.pdf").read_bytes())[-2:] == [
        "• docs/product-brief.md: What we promise and the price ceiling",
        "• docs/competitor-prices.csv: Monthly prices of the apps students use today"]
