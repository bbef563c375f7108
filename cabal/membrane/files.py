"""The files ``read_file`` and ``move_file`` steps may touch: those under a membrane's file root.

A cluster commits to the graph all or nothing; the disk cannot be rolled back with it. So:

- every path is resolved (``..`` and symlinks followed) and must land inside the root: a path
  that climbs out, an absolute path elsewhere, a symlink that leads out are refused;
- a read takes a regular file of at most ``max_read_bytes`` holding UTF-8 text (no NUL bytes);
- a move is planned while the protocol runs (``plan_move``: its source must be there, its
  target free) and done only after the cluster is committed (``apply``). A move never
  overwrites a file, and ``check_moves`` checks the whole plan again just before the commit,
  so a move that cannot be done stops the commit instead of failing after it.

Planned moves are read-your-writes, like the session's graph writes: a path a planned move
takes away is gone, and its target reads as the file that will be there.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from cabal.errors import ConfigError
from cabal.membrane.results import FileError, FileMove

MAX_READ_BYTES = 1_000_000


class FileRefused(Exception):
    """A path or a file a step may not use. ``field`` names the step field it came from when
    the refusal knows it (a move's ``from`` or ``to``); the caller adds the rest of the place."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class FileRoot:
    def __init__(self, root: str | Path, *, max_read_bytes: int = MAX_READ_BYTES) -> None:
        folder = Path(root)
        if not folder.is_dir():
            raise ConfigError(f"the membrane's file root {str(root)!r} is not a folder")
        self.root = folder.resolve()
        self.max_read_bytes = max_read_bytes

    def relative(self, path: str) -> str:
        """Where ``path`` (relative to the root, or absolute) lands, relative to the root."""
        if not isinstance(path, str) or not path.strip():
            raise FileRefused(f"a path must be non-empty text, got {path!r}")
        if "\x00" in path:
            raise FileRefused(f"the path {path!r} holds a NUL character")
        try:
            resolved = (self.root / path).resolve()  # an absolute path replaces the root
        except (OSError, RuntimeError) as exc:  # a symlink loop
            raise FileRefused(f"the path {path!r} cannot be resolved: {exc}") from None
        if not resolved.is_relative_to(self.root):
            raise FileRefused(f"the path {path!r} leads outside the file root {str(self.root)!r}")
        if resolved == self.root:
            raise FileRefused(f"the path {path!r} is the file root itself, not a file in it")
        return resolved.relative_to(self.root).as_posix()

    # ------------------------------------------------------------------------------ reading

    def read_text(self, path: str, planned: Sequence[FileMove] = ()) -> str:
        """The text of a file, as the session sees the disk (after its ``planned`` moves)."""
        found = self._on_disk(self.relative(path), planned)
        full = self.root / found
        try:
            info = full.stat()
        except FileNotFoundError:
            raise FileRefused(f"there is no file {found!r} under the file root") from None
        except OSError as exc:
            raise FileRefused(f"cannot read {found!r}: {exc.strerror}") from None
        if not full.is_file():
            raise FileRefused(f"{found!r} is not a regular file")
        limit = self.max_read_bytes
        if info.st_size > limit:
            raise FileRefused(f"{found!r} is {info.st_size:,} bytes; a read takes at most {limit:,}")
        with full.open("rb") as handle:
            data = handle.read(limit + 1)
        if len(data) > limit:  # it grew since the stat
            raise FileRefused(f"{found!r} is over {limit:,} bytes; a read takes at most {limit:,}")
        if b"\x00" in data:
            raise FileRefused(f"{found!r} is binary (it holds NUL bytes); a read takes UTF-8 text")
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise FileRefused(f"{found!r} is not UTF-8 text (byte {exc.start} does not decode); "
                              "a read takes UTF-8 text") from None  # fmt: skip

    # ------------------------------------------------------------------------------ moving

    def plan_move(self, step: str, source: str, target: str, planned: Sequence[FileMove] = ()) -> FileMove:
        """The move ``step`` asks for, checked against the disk and the moves planned before it."""
        move = FileMove(step, self._field(source, "from"), self._field(target, "to"))
        self._check(move, planned)
        return move

    def check_moves(self, moves: Sequence[FileMove]) -> None:
        """Check a whole plan again, in order (the disk may have changed since it was made)."""
        for index, move in enumerate(moves):
            try:
                again = FileMove(move.step, self._field(move.source, "from"), self._field(move.target, "to"))
                self._check(again, moves[:index])
            except FileRefused as exc:
                raise FileRefused(f"step {move.step!r}: {exc}", field=exc.field) from None

    def apply(self, moves: Sequence[FileMove]) -> tuple[tuple[FileMove, ...], tuple[FileError, ...]]:
        """Do the moves in order: (the moves done, the moves that failed and why). Never raises."""
        done, failed = [], []
        for move in moves:
            try:
                self._move(move)
            except FileRefused as exc:
                failed.append(FileError(move, str(exc)))
            except OSError as exc:
                failed.append(FileError(move, f"moving {move.source!r} to {move.target!r} failed: {exc}"))
            else:
                done.append(move)
        return tuple(done), tuple(failed)

    def _move(self, move: FileMove) -> None:
        source = self.root / self._field(move.source, "from")  # confined again: the disk may have changed
        target = self.root / self._field(move.target, "to")
        if not source.is_file():
            raise FileRefused(f"there is no file {move.source!r} to move", field="from")
        if os.path.lexists(target):
            raise FileRefused(f"{move.target!r} already exists; a move never overwrites a file", field="to")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(source, target)

    def _check(self, move: FileMove, planned: Sequence[FileMove]) -> None:
        if move.source == move.target:
            raise FileRefused(f"{move.source!r} would move onto itself", field="to")
        found = self._on_disk(move.source, planned, field="from")
        if not (self.root / found).is_file():
            raise FileRefused(f"there is no file {move.source!r} to move", field="from")
        if self._exists(move.target, planned):
            raise FileRefused(f"{move.target!r} already exists; a move never overwrites a file", field="to")
        folder = (self.root / move.target).parent
        while not folder.exists():
            folder = folder.parent
        if not folder.is_dir():
            raise FileRefused(f"{move.target!r} cannot be made: {folder.relative_to(self.root).as_posix()!r} is a file",
                              field="to")  # fmt: skip

    def _field(self, path: str, field: str) -> str:
        try:
            return self.relative(path)
        except FileRefused as exc:
            raise FileRefused(str(exc), field=field) from None

    def _exists(self, relative: str, planned: Sequence[FileMove]) -> bool:
        try:
            found = self._on_disk(relative, planned)
        except FileRefused:  # a planned move takes it away
            return False
        return found != relative or os.path.lexists(self.root / relative)

    @staticmethod
    def _on_disk(relative: str, planned: Sequence[FileMove], field: str | None = None) -> str:
        """Where the file the session sees at ``relative`` is on the disk now, going back
        through the planned moves (the latest one that names the path decides)."""
        for move in reversed(planned):
            if relative == move.target:
                relative = move.source
            elif relative == move.source:
                raise FileRefused(f"{relative!r} is moved to {move.target!r} by step {move.step!r} earlier in this "
                                  "session", field=field)  # fmt: skip
        return relative
