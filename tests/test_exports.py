"""Export formats are one registry: the CLI, the web page and the docs page read it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cabal.errors import ConfigError
from cabal.exports import FORMATS, export_format, format_of, names, render_batch, render_mission

ROOT = Path(__file__).resolve().parents[1]


def test_an_unknown_format_is_an_error_listing_the_known_ones():
    with pytest.raises(ConfigError, match=r"^unknown mission report format 'rtf'; use one of html, md, json, docx, pdf$"):
        render_mission(None, "rtf")  # type: ignore[arg-type] - refused before the report is read
    with pytest.raises(ConfigError, match=r"^unknown batch report format 'xml'; use one of html, md, json, csv$"):
        render_batch(None, "xml")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="use one of html, md, json, docx, pdf$"):
        export_format("csv", "mission")  # a batch's format only


def test_a_files_suffix_picks_its_format():
    assert [format_of(Path(name), "mission") for name in ("r.HTM", "r.markdown", "r.json", "r.txt", "r")] == [
        "html", "md", "json", "md", "md"]
    assert format_of(None, "batch") == "md" and format_of(Path("rows.csv"), "batch") == "csv"


def test_the_docs_page_lists_every_format():
    rows = re.findall(r"^\| `(\w+)` \| (\w+) \| (yes|no) \| (yes|no) \| ([^|]+) \|$",
                      (ROOT / "docs" / "guide" / "exports.md").read_text(), re.MULTILINE)
    assert rows == [(f.name, f.title, "yes" if f.offers("mission") else "no", "yes" if f.offers("batch") else "no",
                     ", ".join(f".{suffix}" for suffix in f.suffixes)) for f in FORMATS]


def test_the_cli_offers_the_registrys_formats():
    for command, subject in ((["export", "--help"], "mission"), (["batch", "--help"], "batch")):
        shown = subprocess.run([str(Path(sys.executable).with_name("cabal")), *command], capture_output=True,
                               text=True, check=True, env={**os.environ, "COLUMNS": "200"}).stdout
        assert "{" + ",".join(names(subject)) + "}" in shown
