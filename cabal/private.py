"""Files and folders only their owner may read: the workspace's.

A workspace holds a team's whole work (its graph, checkpoints, transcripts, error logs), so what
Cabal writes there is private whatever the umask: folders 0700, files 0600. A folder or a file
with content that a workspace made before this rule left wider is narrowed when Cabal uses it.

A folder that must sit in a place other users share (the graph server's socket folder in the
temporary directory, for a workspace path too long for a socket) is used only when it is ours
and private: one that exists with another owner or a wider mode is refused, never reused, since
whoever made it could read or replace what Cabal puts there.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import IO, BinaryIO, Literal, TextIO, overload

from cabal.errors import ConfigError

FOLDER_MODE = 0o700
FILE_MODE = 0o600
_OPEN_FLAGS = {"a": os.O_WRONLY | os.O_CREAT | os.O_APPEND, "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC}


def private_folder(path: Path) -> Path:
    """``path`` as a folder only its owner may enter; folders above it are made as usual."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir(mode=FOLDER_MODE)
        os.chmod(path, FOLDER_MODE)  # mkdir's mode passes through the umask
    except FileExistsError:
        narrow(path)
    return path


def workspace_folder(home: Path) -> Path:
    """The workspace's own folder, private, with a ``.gitignore`` that ignores all of it: a
    workspace inside a git project is never shown as untracked (``?? .cabal/``) nor committed
    by a ``git add .``. A ``.gitignore`` that is there already is left as its owner made it."""
    private_folder(home)
    ignore = home / ".gitignore"
    if not ignore.exists():
        try:
            with open_private(ignore, "w") as handle:
                handle.write("# Cabal's workspace: private, never committed.\n*\n")
        except FileExistsError:
            pass
    return home


def shared_place_folder(path: Path) -> Path:
    """``path``, a folder in a place other users share (the temporary directory): made ours and
    private, or, if it exists, used only when it still is (a ``ConfigError`` says why not)."""
    try:
        path.mkdir(mode=FOLDER_MODE)
        os.chmod(path, FOLDER_MODE)
        return path
    except FileExistsError:
        pass
    found = os.lstat(path)
    if not stat.S_ISDIR(found.st_mode):
        wrong = "it is not a folder"
    elif found.st_uid != os.getuid():
        wrong = f"it belongs to another user (uid {found.st_uid})"
    elif stat.S_IMODE(found.st_mode) & 0o077:
        wrong = f"others may use it (mode {stat.S_IMODE(found.st_mode):o})"
    else:
        return path
    raise ConfigError(f"refusing to use {path}: {wrong}; a folder in a shared place must be yours with mode 700",
                      hint=f"remove {path} if nothing of yours uses it")


def private_file(path: Path) -> Path:
    """``path`` as a file only its owner may read and write, created empty if it is missing.

    A file that exists is narrowed without being opened: closing any descriptor of a file drops
    every fcntl lock this process holds on it, and SQLite keeps its locks that way (a database
    whose lock vanished is truncated under another process's feet: a bus error)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        narrow(path)
    else:
        os.fchmod(fd, FILE_MODE)  # whatever the umask
        os.close(fd)
    return path


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, a file only its owner may read."""
    with open_private(path, "w") as handle:
        os.fchmod(handle.fileno(), FILE_MODE)  # a file that existed keeps its mode on open
        handle.write(text)


@overload
def open_private(path: str | Path, mode: Literal["a", "w"] = "a") -> TextIO: ...
@overload
def open_private(path: str | Path, mode: Literal["ab", "wb"]) -> BinaryIO: ...
def open_private(path: str | Path, mode: str = "a") -> IO:
    """Open ``path`` for writing (``a``/``w``, ``b`` for bytes); a file it creates is private
    from its first byte, one that exists keeps its mode."""
    fd = os.open(path, _OPEN_FLAGS[mode.replace("b", "")], FILE_MODE)
    return os.fdopen(fd, mode) if "b" in mode else os.fdopen(fd, mode, encoding="utf-8")


def narrow(path: Path) -> None:
    """Take away what others may do with ``path`` (never opening it), if it is ours to change and
    still there."""
    try:
        found = os.stat(path)
        if found.st_uid == os.getuid() and stat.S_IMODE(found.st_mode) & 0o077:
            os.chmod(path, stat.S_IMODE(found.st_mode) & ~0o077)
    except FileNotFoundError:
        pass
