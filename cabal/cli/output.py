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


def write_report(text: str | bytes, target: Path | None, chosen: str) -> None:
    """``text`` to ``target`` (saying so), or to stdout when there is none; a binary file (Word,
    PDF) to stdout only when it is not a terminal (a pipe, a redirect)."""
    data = text if isinstance(text, bytes) else text.encode()
    if target is None:
        if isinstance(text, str):
            sys.stdout.write(text)
        elif sys.stdout.isatty():
            raise ConfigError(f"a {chosen} file is not for a terminal: write it with -o FILE.{chosen}")
        else:
            sys.stdout.flush()
            sys.stdout.buffer.write(text)
        return
    try:
        target.write_bytes(data)
    except OSError as error:
        raise ConfigError(f"cannot write {target}: {error.strerror}") from None
    print(f"wrote {target} ({chosen}, {len(data):,} bytes)")
