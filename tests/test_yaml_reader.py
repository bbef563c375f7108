"""Cabal's YAML reader has two parsers: libyaml's (C, the fast path) and PyYAML's pure-Python one
(the reference, and the one whose errors a problem quotes). Both must read every file the same,
down to the line of each mapping and key."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from cabal import yaml_reader
from cabal.errors import ProtocolLoadError
from cabal.yaml_reader import LineDict, read_yaml

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted(ROOT / name for name in subprocess.run(
    ["git", "ls-files", "*.yaml", "*.yml"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split())

pytestmark = pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML without libyaml has one parser")


def reference(text: str):
    return yaml.load(text, Loader=yaml_reader._Loader)  # a SafeLoader


def shape(data):
    """Everything the readers give, lines included, as plain comparable values."""
    if isinstance(data, LineDict):
        return ("map", data.line, sorted(data.key_lines.items(), key=repr), data.duplicates,
                [(shape(k), shape(v)) for k, v in data.items()])
    if isinstance(data, list):
        return ("list", [shape(item) for item in data])
    return (type(data).__name__, data)


def test_the_repository_holds_yaml_files_to_compare():
    assert len(SHIPPED) >= 70
    assert ROOT / "protocols" / "start_mission.yaml" in SHIPPED


@pytest.mark.parametrize("path", SHIPPED, ids=lambda path: str(path.relative_to(ROOT)))
def test_both_parsers_read_every_file_the_same_with_its_lines(path: Path):
    text = path.read_text(encoding="utf-8")

    assert shape(yaml_reader._parsed(text)) == shape(reference(text))


@pytest.mark.parametrize("text", [
    "a: 010\nb: 1:30\nc: on\nd: 0x1F\ne: .5\nf: 1e3\ng: ~\nh: 2024-01-01\ni: True\nj: yes\nk: -.inf",
    "a: 1\na: 2\nb:\n  - x\n  - {c: [1, 2]}\n",
    "<<: {a: 1}\nb: 2",
    "a: |\n  x\n  y\nb: >-\n  x\n\n  y\n",
    "a: \"\\u00e9\\x41\"\nb: 'it''s'\nc: \U0001F600\nd: \"x\u2028y\"",
    "a: 1\x85b: 2\u2028c: 3",  # NEL and LINE SEPARATOR end lines too
    "---\na: 1\n...\n",
    "",
    "# only a comment",
])
def test_both_parsers_agree_on_scalars_mappings_and_empty_documents(text: str):
    assert shape(yaml_reader._parsed(text)) == shape(reference(text))


@pytest.mark.parametrize(("text", "message"), [
    ("a: &x 1\nb: *x", "s:2: invalid YAML: an alias (*x) is not allowed here; write the value out"),
    ("- &a [*a]", "s:1: invalid YAML: an alias (*a) is not allowed here; write the value out"),
    ("a: [1, 2", "s:1: invalid YAML: expected ',' or ']', but got '<stream end>'"),
    ("a: 1\n---\nb: 2", "s:2: invalid YAML: but found another document"),
    ("a: \ud800", ("s: invalid YAML: unacceptable character #xd800: special characters are not allowed\n"
                   "  in \"<unicode string>\", position 3")),
])
def test_a_document_libyaml_refuses_or_that_holds_an_alias_gets_the_reference_parsers_problem(text, message):
    with pytest.raises(ProtocolLoadError) as refused:
        read_yaml(text, "s")

    assert str(refused.value) == message
