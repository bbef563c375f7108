"""Find the team's data folders: agents/, protocols/, skills/, prompts/, procedures/, examples/.

Built-in folders ship inside the wheel (``cabal/_data/<kind>``); in a source checkout they are
the folders at the repository root. A user's own folders of the same names add to them and
override files by name: later folders win.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import TypeVar

from cabal.errors import ConfigError

KINDS = ("agents", "protocols", "skills", "prompts", "procedures", "examples")

_PACKAGE_DIR = Path(__file__).resolve().parent
_PARSED: dict[tuple, object] = {}
T = TypeVar("T")


def builtin_dir(kind: str) -> Path:
    if kind not in KINDS:
        raise ValueError(f"unknown data kind {kind!r}; one of {KINDS}")
    installed = _PACKAGE_DIR / "_data" / kind
    if installed.is_dir():
        return installed
    return _PACKAGE_DIR.parent / kind


def example_file(path: str | Path) -> Path:
    """``path``, or, when no such file is here and it names one of the examples Cabal ships
    (``examples/launch/launch.mission.yaml``), that example: after ``pip install`` the README's
    first command runs from any folder, as it does in a checkout."""
    path = Path(path)
    parts = path.parts
    if path.exists() or path.is_absolute() or len(parts) < 2 or parts[0] != "examples":
        return path
    shipped = builtin_dir("examples").joinpath(*parts[1:])
    return shipped if shipped.is_file() else path


def search_path(kind: str, extra: Iterable[str | Path] = ()) -> list[Path]:
    """Folders to look in, lowest priority first: built-in, then each extra folder. An extra
    folder that is not there is an error: a mistyped path must not silently mean "no overrides"."""
    dirs = [builtin_dir(kind)]
    for folder in extra:
        path = Path(folder).expanduser().resolve()
        if not path.is_dir():
            raise ConfigError(f"{kind} folder not found: {folder}" + (" (it is a file)" if path.exists() else ""))
        if path not in dirs:
            dirs.append(path)
    return dirs


def files_by_name(kind: str, suffixes: tuple[str, ...], extra: Iterable[str | Path] = ()) -> dict[str, Path]:
    """Map of stem -> file over the search path; a later folder's file replaces an earlier one."""
    found: dict[str, Path] = {}
    for folder in search_path(kind, extra):
        for path in sorted(folder.iterdir()) if folder.is_dir() else []:
            if path.is_file() and path.suffix in suffixes:
                found[path.stem] = path
    return found


def parsed_once(path: Path, parse: Callable[[Path], T], *key: Hashable) -> T:
    """``parse(path)``, once per process for each version of the file (its path, modification
    time and size) and ``key``: what else the result depends on, starting with the kind of
    thing parsed. Every mission run loads the team's data files anew; parsing their YAML again
    was a tenth of a short mission's engine time. ``parse`` must return a value nobody changes
    (frozen dataclasses, tuples)."""
    stat = path.stat()
    cache_key = (str(path), stat.st_mtime_ns, stat.st_size, *key)
    if cache_key not in _PARSED:
        _PARSED[cache_key] = parse(path)
    return _PARSED[cache_key]  # type: ignore[return-value]
