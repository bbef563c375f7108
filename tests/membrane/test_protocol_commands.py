"""``cabal protocols list|show|check``: check runs for real over protocols/ (what CI runs)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from cabal.cli import main
from cabal.yaml_reader import MAX_FILE_BYTES

REPO = Path(__file__).resolve().parents[2]
V1 = ["explore_space", "add_objectives", "add_invariant", "add_health_coverage", "add_implementation",
      "record_work", "investigate", "resolve_blocker"]  # fmt: skip



BROKEN = """\
protocol: broken
steps:
  first:
    type: asks
    question: What?
  second:
    type: ask
    question: Which?
    expects: {type: id_list, node_type: gadget}
    next: nowhere
  write:
    type: create
    nodes:
      - {id: "x-{second}", node_type: narrative, type: note, name: "{second|shout}"}
    links:
      - {type: likes, from: "x-{second}", to: "{space_id}"}
"""


def test_check_as_ci_runs_it():
    """The real console command over the shipped folder (the lead's round protocols included)."""
    command = Path(sys.executable).with_name("cabal")
    args = [str(command)] if command.exists() else [sys.executable, "-m", "cabal.cli"]
    done = subprocess.run([*args, "protocols", "check", "protocols/"], capture_output=True, text=True, cwd=REPO,
                          env=dict(os.environ), timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("ok: ") and done.stdout.rstrip().endswith("protocol file(s) checked")
    assert done.stderr == ""


def test_check_reports_every_problem_located_and_exits_1(tmp_path, capsys):
    (tmp_path / "broken.yaml").write_text(BROKEN)
    (tmp_path / "misnamed.yaml").write_text("protocol: other\nsteps:\n  a: {type: ask, question: x, expects: string}\n")
    (tmp_path / "fine.yaml").write_text("protocol: fine\nsteps:\n  a: {type: ask, question: x, expects: string}\n")
    assert main(["protocols", "check", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    file, misnamed = str(tmp_path / "broken.yaml"), str(tmp_path / "misnamed.yaml")
    lines = captured.out.splitlines()
    expected = [
        (f"{file}:4 step 'first' field 'type'", "unknown step type 'asks'"),
        (f"{file}:9 step 'second' field 'expects.node_type'", "unknown node_type 'gadget'"),
        (f"{file}:10 step 'second' field 'next'", "next points to 'nowhere', which is not a step of this protocol"),
        (f"{file}:14 step 'write' field 'nodes.0.name'", "unknown filter 'shout'"),
        (f"{file}:16 step 'write' field 'links.0.type'", "unknown link type 'likes'"),
        (f"{file}:16 step 'write' field 'links.0.to'", "nothing provides {space_id}"),
        (f"{misnamed}:1 field 'protocol'", "protocol 'other' must live in a file named other.yaml"),
    ]
    for where, message in expected:
        assert any(line.startswith(where + ": ") and message in line for line in lines), (where, lines)
    assert len(lines) == len(expected)
    assert captured.err == "7 problem(s) in 2 of 3 protocol file(s)\n"


def test_check_a_missing_path_is_a_clean_error(capsys):
    assert main(["protocols", "check", "no/such/dir"]) == 2
    assert capsys.readouterr().err == "cabal: no such protocol file or folder: no/such/dir\n"


def test_check_resolves_calls_between_the_files_given(tmp_path, capsys):
    (tmp_path / "outer.yaml").write_text("protocol: outer\nsteps:\n  go: {type: call_protocol, protocol: inner}\n")
    (tmp_path / "inner.yaml").write_text("protocol: inner\nsteps:\n  a: {type: ask, question: x, expects: string}\n")
    assert main(["protocols", "check", str(tmp_path / "outer.yaml"), str(tmp_path / "inner.yaml")]) == 0
    assert main(["protocols", "check", str(tmp_path / "outer.yaml")]) == 1
    assert "calls protocol 'inner', which does not exist" in capsys.readouterr().out


def test_list_and_show(capsys):
    assert main(["protocols", "list"]) == 0
    listed = {line.split()[0] for line in capsys.readouterr().out.splitlines()}
    assert set(V1) <= listed
    assert main(["protocols", "show", "add_health_coverage"]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith("add_health_coverage (version 1.0)\n")
    assert "needs validation: find query; if missing: fail" in shown
    assert "  docks: ask -> write_health" in shown
    assert "moment: health_design (description, reasoning)" in shown
    assert main(["protocols", "show", "add_module", "--source"]) == 0
    assert capsys.readouterr().out.startswith("# Helper of the v1 library")


def test_show_an_unknown_protocol(capsys):
    assert main(["protocols", "show", "nope"]) == 1
    assert capsys.readouterr().err.startswith("cabal: protocol not found: 'nope' (known: ")


def cabal_cli(*args: str, cwd: Path = REPO) -> tuple[subprocess.CompletedProcess, float]:
    """The real console command, and how long it took."""
    command = Path(sys.executable).with_name("cabal")
    started = time.monotonic()
    done = subprocess.run([str(command), *args], capture_output=True, text=True, cwd=cwd, env=dict(os.environ),
                          timeout=60)
    return done, time.monotonic() - started


ALIAS_BOMB = """\
protocol: bomb
a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
"""


def test_an_alias_bomb_is_refused_at_once_naming_the_file(tmp_path):
    (tmp_path / "bomb.yaml").write_text(ALIAS_BOMB)
    (tmp_path / "big.yaml").write_text("protocol: big\ndescription: " + "x" * MAX_FILE_BYTES + "\n")
    (tmp_path / "binary.yaml").write_bytes(b"protocol: bin\n\xff\xfe\x00\x01")

    checked, took = cabal_cli("protocols", "check", str(tmp_path))
    listed, listing_took = cabal_cli("protocols", "list", "--protocols", str(tmp_path))

    assert took < 5 and listing_took < 5
    assert checked.returncode == 1 and "Traceback" not in checked.stderr
    assert checked.stdout.splitlines() == [
        f"{tmp_path / 'big.yaml'}: too large: more than {MAX_FILE_BYTES:,} bytes",
        f"{tmp_path / 'binary.yaml'}: not UTF-8 text (byte 0xff at offset 14): is it a binary file?",
        f"{tmp_path / 'bomb.yaml'}:3: invalid YAML: an alias (*a) is not allowed here; write the value out",
    ]
    assert listed.returncode == 0
    assert [line.split(None, 1) for line in listed.stdout.splitlines() if line.startswith("bomb ")] == [
        ["bomb", f"BROKEN: {tmp_path / 'bomb.yaml'}:3: invalid YAML: an alias (*a) is not allowed here; write the value out"]]


def test_a_query_that_could_write_fails_check_by_the_rule_the_runtime_applies(tmp_path):
    (tmp_path / "wipe.yaml").write_text(
        "protocol: wipe\ndescription: reads, it says\nsteps:\n  look:\n    type: query\n"
        "    query: \"MATCH (n) DETACH DELETE n\"\n  done:\n    type: complete\n")

    checked, _ = cabal_cli("protocols", "check", str(tmp_path / "wipe.yaml"))

    assert checked.returncode == 1
    assert checked.stdout == (f"{tmp_path / 'wipe.yaml'}:6 step 'look' field 'query': a query may only read, and "
                              "this one could write (DELETE); a protocol writes with create and update steps\n")
