"""Rules of the house a check holds: the layers of docs/architecture.md (`lint-imports` checks the
contracts of pyproject.toml) and the size of functions.

CI runs the README's test command (pytest) and nothing else, so the check runs here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def lint_imports() -> str:
    beside = Path(sys.executable).with_name("lint-imports")  # the test extra's, in this environment
    return str(beside) if beside.exists() else shutil.which("lint-imports") or "lint-imports"


def test_imports_run_down_the_layers():
    result = subprocess.run([lint_imports(), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 3 kept, 0 broken." in result.stdout


@pytest.mark.parametrize(("module", "line", "broken"), [
    ("graph/idle.py", "from cabal.graph import server as _server", None),  # the watcher drives the server: fine
    ("graph/server.py", "from cabal.graph import idle as _idle", "No two modules (or packages) import each other"),
    ("rounds/rules.py", "from cabal.rounds import team as _team", "No two modules (or packages) import each other"),
    ("report/html.py", "from cabal import __version__ as _version", "Imports run down the layers"),
])
def test_the_contracts_refuse_a_new_cycle_and_an_import_up_the_house(tmp_path, module, line, broken):
    """A copy of the package with one import added: the contracts still hold, or name the one it breaks."""
    shutil.copytree(ROOT / "cabal", tmp_path / "cabal", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "cabal" / module
    target.write_text(target.read_text() + f"\n{line}  # noqa: E402, F401\n")

    result = subprocess.run([lint_imports(), "--no-cache"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120, env={**os.environ, "PYTHONPATH": str(tmp_path)})

    if broken is None:
        assert result.returncode == 0, result.stdout
    else:
        assert result.returncode == 1, result.stdout
        assert broken in result.stdout.split("Broken contracts")[1]


def test_the_architecture_page_names_every_layer():
    """The diagram and the contract list the same top-level modules."""
    import tomllib

    layers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]["layers"]
    page = (ROOT / "docs" / "architecture.md").read_text()
    for layer in layers:
        for name in layer.replace("|", ":").split(":"):
            assert f"cabal.{name.strip()}" in page, name


MAX_FUNCTION_LINES = 80  # the developer guide's "keep functions under ~80 lines", held


def test_no_function_is_over_80_lines():
    import ast

    long = []
    for path in sorted((ROOT / "cabal").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []
