"""A package's public names, each imported from its module on first use.

``cabal``'s packages re-export their public names, but importing the module behind a name can
cost a second (LangGraph, LangChain, a provider SDK); a command that never uses the name should
not pay for it. A package sets ``__getattr__ = lazy_names(__name__, {name: module})``, and
imports the same names under ``if TYPE_CHECKING:`` so that a type checker sees them typed rather
than as ``Any`` (``tests/test_types.py`` holds the two lists equal).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_names(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: ``exports`` maps each name to the submodule
    (relative to ``package``) that defines it; any other name is an ``AttributeError``."""

    def __getattr__(name: str) -> Any:
        if name in exports:
            return getattr(import_module(f"{package}.{exports[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
