"""The type checker holds over the whole package, and the lazy package faces are typed.

``mypy`` (configured in pyproject.toml, with the pydantic plugin) runs from this interpreter over
``cabal/``; its cache lives in the repository's ``.mypy_cache`` (ignored by git), so a second run
takes seconds. Each public name a package exports lazily (``cabal.lazy``) is imported under
``if TYPE_CHECKING:`` too, so a user's checker sees ``call_model``'s signature rather than ``Any``.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The packages whose names load on first use, and the top-level face that re-exports cabal.rounds.
LAZY_PACKAGES = ("cabal.graph", "cabal.llm", "cabal.rounds", "cabal.batch")
FACES = ("cabal", *LAZY_PACKAGES)


def _exports(package: str) -> dict[str, str]:
    """The ``lazy_names(__name__, {name: module})`` map of ``package``, as full module names."""
    tree = ast.parse((ROOT / package.replace(".", "/") / "__init__.py").read_text())
    assigned = {node.targets[0].id: node.value for node in tree.body
                if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)}
    call = next(node for node in ast.walk(tree)
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "lazy_names")
    table = call.args[1]
    mapping = ast.literal_eval(assigned[table.id] if isinstance(table, ast.Name) else table)
    return {name: f"{package}.{module}" for name, module in mapping.items()}


def _typed_imports(package: str) -> dict[str, str]:
    """The names ``package`` imports under ``if TYPE_CHECKING:``, each with its module."""
    tree = ast.parse((ROOT / package.replace(".", "/") / "__init__.py").read_text())
    block = next(node for node in tree.body
                 if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING")
    return {alias.name: node.module for node in block.body if isinstance(node, ast.ImportFrom)
            for alias in node.names}


def test_each_lazy_name_is_imported_for_checkers_from_the_module_that_loads_it():
    for package in LAZY_PACKAGES:
        assert _typed_imports(package) == _exports(package), package
    top = importlib.import_module("cabal")
    assert set(_typed_imports("cabal")) == set(top.__all__)
    assert set(_typed_imports("cabal").values()) == {"cabal.rounds"}


def test_mypy_finds_no_error_and_sees_every_public_name_typed(tmp_path):
    # One run checks the package and reveals what a user's checker sees of each public name.
    names = [(face, name) for face in FACES for name in importlib.import_module(face).__all__]
    probe = tmp_path / "faces.py"
    probe.write_text("".join(f"from {face} import {name} as _{i}\nreveal_type(_{i})\n"
                             for i, (face, name) in enumerate(names)))
    result = subprocess.run([sys.executable, "-m", "mypy", "cabal", str(probe)],
                            capture_output=True, text=True, cwd=ROOT, timeout=280)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    revealed = re.findall(r'faces\.py:\d+: note: Revealed type is "(.*)"', output)
    assert len(revealed) == len(names), output
    untyped = [f"{face}.{name}" for (face, name), shown in zip(names, revealed) if shown == "Any"]
    assert untyped == [], output


def test_no_submodule_shadows_a_public_name_of_its_package() -> None:
    # Importing a submodule sets an attribute of its package: one named like a public function
    # (cabal.rounds.transcript was both) replaces that function once the submodule is imported.
    import pkgutil

    import cabal
    import cabal.rounds

    for package in (cabal, cabal.rounds):
        submodules = {module.name for module in pkgutil.iter_modules(package.__path__)}
        assert set(package.__all__) & submodules == set(), package.__name__
