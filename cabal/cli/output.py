"""Where a command's report goes: a file (``-o``, whose suffix may choose the format) or stdout.
The commands that write reports (export, diff, eval) share it."""

from __future__ import annotations

import sys
from pathlib import Path

from cabal.errors import ConfigError

SUFFIXES = {"md": "md", "markdown": "md", "json": "json", "html": "html", "htm": "html", "csv": "csv"}


def chosen_format(given: str | None, target: Path | None, allowed: tuple[str, ...] = ("md", "json", "html"),
                  default: str = "md") -> str:
    """``given``, else the format ``target``'s suffix names (one of ``allowed``), else ``default``."""
    named = SUFFIXES.get(target.suffix.lstrip(".").lower()) if target else None
    return given or (named if named in allowed else None) or default


def write_report(text: str, target: Path | None, chosen: str) -> None:
    """``text`` to ``target`` (saying so), or to stdout when there is none."""
    if target is None:
        sys.stdout.write(text)
        return
    try:
        target.write_text(text, encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"cannot write {target}: {error.strerror}") from None
    print(f"wrote {target} ({chosen}, {len(text.encode()):,} bytes)")
