"""The documentation site builds strictly (a broken link or a warning fails it), offline, and its
generated pages say what the code does: every command of the parser, every event kind."""

from __future__ import annotations

import argparse
import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cabal.cli import build_parser
from cabal.rounds.event_schema import event_fields
from cabal.rounds.events import EVENT_TYPES

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {key: value for key, value in os.environ.items() if "MKDOCS" not in key}  # as a user builds it
    built = subprocess.run([str(Path(sys.executable).with_name("mkdocs")), "build", "--strict", "-d", str(out)],
                           cwd=ROOT, capture_output=True, text=True, timeout=240, env=env)
    assert built.returncode == 0, built.stderr
    # Quiet: MkDocs' INFO lines and nothing else (no warning, no theme's banner).
    assert [line for line in (built.stdout + built.stderr).splitlines() if not line.startswith("INFO ")] == []
    return out


def text_of(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


def commands(parser: argparse.ArgumentParser, prefix: str = "cabal") -> list[str]:
    found = []
    for action in parser._actions:  # noqa: SLF001
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for name, sub in action.choices.items():
                found += [f"{prefix} {name}", *commands(sub, f"{prefix} {name}")]
    return found


def test_the_cli_reference_shows_every_command_and_option_of_the_parser(site: Path) -> None:
    page = text_of(site / "reference" / "cli" / "index.html")
    parser = build_parser()
    names = commands(parser)
    assert {"cabal run", "cabal graph status", "cabal batch", "cabal serve"} <= set(names)
    for name in names:
        assert f"{name}¶" in page, name  # a heading (with its permalink) per command
    run = parser._subparsers._group_actions[0].choices["run"]  # noqa: SLF001
    for action in run._actions:  # noqa: SLF001
        for option in action.option_strings:
            if option not in ("-h", "--help"):
                assert option in page, option


def test_the_events_reference_lists_every_kind_with_its_fields(site: Path) -> None:
    page = text_of(site / "reference" / "events" / "index.html")
    for kind, event_type in EVENT_TYPES.items():
        assert re.search(rf"^{kind}\n{re.escape(', '.join(event_fields(event_type)))}\n", page, re.MULTILINE), kind


def test_the_mission_file_reference_is_the_schema_cabal_schema_prints(site: Path) -> None:
    from cabal.rounds.mission import MissionSpec

    page = text_of(site / "reference" / "mission-file" / "index.html")
    for field in MissionSpec.model_json_schema()["properties"]:
        assert f"\n{field}\n" in page, field


def test_the_site_is_offline(site: Path) -> None:
    for page in site.rglob("*.html"):
        text = page.read_text()
        assert "fonts.googleapis" not in text and "fonts.gstatic" not in text, page
        assert not re.search(r"<script[^>]+src=\"https?://", text), page
        assert not re.search(r"<link[^>]+href=\"https?://[^\"]+\.css", text), page


def test_the_api_reference_is_drawn_from_the_docstrings(site: Path) -> None:
    from cabal.rounds.api import run_mission

    page = text_of(site / "reference" / "api" / "index.html")
    first_line = (run_mission.__doc__ or "").strip().splitlines()[0]
    assert first_line in page
