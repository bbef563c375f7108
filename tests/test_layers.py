"""Rules of the house a check holds: the layers of docs/architecture.md (`lint-imports` checks the
contracts of pyproject.toml) and the size of functions.

CI runs the README's test command (pytest) and nothing else, so the check runs here."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def lint_imports() -> str:
    beside = Path(sys.executable).with_name("lint-imports")  # the test extra's, in this environment
    return str(beside) if beside.exists() else shutil.which("lint-imports") or "lint-imports"


def test_imports_run_down_the_layers():
    result = subprocess.run([lint_imports(), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 2 kept, 0 broken." in result.stdout


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
