"""The file root of file steps: paths confined to it, reads of UTF-8 text only, moves planned
against the disk and the moves planned before them, then done in order. No graph here."""

from __future__ import annotations

import os

import pytest

from cabal.errors import ConfigError
from cabal.membrane.files import FileRefused, FileRoot
from cabal.membrane.results import FileError, FileMove


@pytest.fixture
def root(tmp_path):
    """A file root with an inbox, and a secret just outside it."""
    (tmp_path / "root" / "inbox").mkdir(parents=True)
    (tmp_path / "root" / "inbox" / "a.md").write_text("# Alpha\n\nfirst\n", encoding="utf-8")
    (tmp_path / "root" / "top.txt").write_text("top", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("do not read", encoding="utf-8")
    return FileRoot(tmp_path / "root")


def refusal(call, *args) -> tuple[str, str | None]:
    with pytest.raises(FileRefused) as caught:
        call(*args)
    return str(caught.value), caught.value.field


# ------------------------------------------------------------------------------- reading


def test_a_read_within_the_root_returns_the_text(root):
    assert root.read_text("inbox/a.md") == "# Alpha\n\nfirst\n"
    assert root.read_text("inbox/../top.txt") == "top"  # '..' that stays inside is fine
    assert root.read_text(str(root.root / "top.txt")) == "top"  # an absolute path inside the root
    (root.root / "bom.txt").write_bytes("\ufeffhello".encode())
    assert root.read_text("bom.txt") == "hello"  # a byte-order mark is not part of the text


def test_paths_that_leave_the_root_are_refused(root, tmp_path):
    os.symlink(tmp_path / "secret.txt", root.root / "inbox" / "link.txt")
    os.symlink(tmp_path, root.root / "up")
    outside = f"leads outside the file root {str(root.root)!r}"
    for path in ("../secret.txt", "inbox/../../secret.txt", str(tmp_path / "secret.txt"), "/etc/hostname",
                 "inbox/link.txt", "up/secret.txt"):  # fmt: skip
        assert refusal(root.read_text, path) == (f"the path {path!r} {outside}", None), path
    assert refusal(root.read_text, ".") == ("the path '.' is the file root itself, not a file in it", None)
    assert refusal(root.read_text, "") == ("a path must be non-empty text, got ''", None)
    assert refusal(root.read_text, "a\x00b") == ("the path 'a\\x00b' holds a NUL character", None)


def test_a_symlink_that_stays_inside_the_root_is_followed(root):
    os.symlink(root.root / "inbox" / "a.md", root.root / "alias.md")
    assert root.read_text("alias.md") == "# Alpha\n\nfirst\n"


def test_only_small_utf8_text_files_are_read(tmp_path):
    small = FileRoot(tmp_path, max_read_bytes=10)
    (tmp_path / "ten.txt").write_text("0123456789", encoding="utf-8")
    (tmp_path / "eleven.txt").write_text("0123456789A", encoding="utf-8")
    (tmp_path / "nul.bin").write_bytes(b"GIF\x00\x01")
    (tmp_path / "latin1.txt").write_bytes("café".encode("latin-1"))
    (tmp_path / "folder").mkdir()
    assert small.read_text("ten.txt") == "0123456789"
    assert refusal(small.read_text, "eleven.txt") == ("'eleven.txt' is 11 bytes; a read takes at most 10", None)
    assert refusal(small.read_text, "nul.bin") == ("'nul.bin' is binary (it holds NUL bytes); a read takes UTF-8 text", None)
    assert refusal(small.read_text, "latin1.txt") == (
        "'latin1.txt' is not UTF-8 text (byte 3 does not decode); a read takes UTF-8 text", None)  # fmt: skip
    assert refusal(small.read_text, "folder") == ("'folder' is not a regular file", None)
    assert refusal(small.read_text, "missing.txt") == ("there is no file 'missing.txt' under the file root", None)


def test_the_default_read_limit_is_one_megabyte(tmp_path):
    (tmp_path / "big.txt").write_bytes(b"x" * 1_000_001)
    assert refusal(FileRoot(tmp_path).read_text, "big.txt") == (
        "'big.txt' is 1,000,001 bytes; a read takes at most 1,000,000", None)  # fmt: skip


def test_a_root_that_is_not_a_folder_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="is not a folder"):
        FileRoot(tmp_path / "nowhere")


# -------------------------------------------------------------------------------- moving


def test_a_planned_move_is_checked_and_relative_to_the_root(root):
    assert root.plan_move("s", "inbox/a.md", str(root.root / "done" / "a.md")) == FileMove("s", "inbox/a.md", "done/a.md")
    assert refusal(root.plan_move, "s", "inbox/b.md", "done/b.md") == ("there is no file 'inbox/b.md' to move", "from")
    assert refusal(root.plan_move, "s", "inbox/a.md", "top.txt") == (
        "'top.txt' already exists; a move never overwrites a file", "to")  # fmt: skip
    assert refusal(root.plan_move, "s", "inbox/a.md", "inbox/./a.md") == ("'inbox/a.md' would move onto itself", "to")
    assert refusal(root.plan_move, "s", "inbox/a.md", "top.txt/a.md") == (
        "'top.txt/a.md' cannot be made: 'top.txt' is a file", "to")  # fmt: skip
    assert refusal(root.plan_move, "s", "inbox/a.md", "../a.md") == (
        f"the path '../a.md' leads outside the file root {str(root.root)!r}", "to")  # fmt: skip


def test_planned_moves_are_read_your_writes(root):
    first = root.plan_move("first", "inbox/a.md", "done/a.md")
    assert refusal(root.read_text, "inbox/a.md", [first]) == (
        "'inbox/a.md' is moved to 'done/a.md' by step 'first' earlier in this session", None)  # fmt: skip
    assert root.read_text("done/a.md", [first]) == "# Alpha\n\nfirst\n"  # still in the inbox on disk
    assert refusal(root.plan_move, "again", "inbox/a.md", "other/a.md", [first]) == (
        "'inbox/a.md' is moved to 'done/a.md' by step 'first' earlier in this session", "from")  # fmt: skip
    assert refusal(root.plan_move, "onto", "top.txt", "done/a.md", [first]) == (
        "'done/a.md' already exists; a move never overwrites a file", "to")  # fmt: skip
    # a chain: the file moved on again, and the place it left is free for another
    second = root.plan_move("second", "done/a.md", "kept/a.md", [first])
    refill = root.plan_move("refill", "top.txt", "inbox/a.md", [first, second])
    assert root.read_text("kept/a.md", [first, second, refill]) == "# Alpha\n\nfirst\n"
    assert root.read_text("inbox/a.md", [first, second, refill]) == "top"


def test_moves_are_done_in_order_and_failures_are_reported_not_raised(root):
    plan = [root.plan_move("first", "inbox/a.md", "done/2026/a.md")]
    plan.append(root.plan_move("second", "done/2026/a.md", "kept/a.md", plan))
    plan.append(FileMove("third", "inbox/gone.md", "kept/gone.md"))
    (root.root / "kept").mkdir()
    moved, errors = root.apply(plan)
    assert moved == (plan[0], plan[1])
    assert errors == (FileError(plan[2], "there is no file 'inbox/gone.md' to move"),)
    assert (root.root / "kept" / "a.md").read_text() == "# Alpha\n\nfirst\n"
    assert not (root.root / "inbox" / "a.md").exists()
    assert (root.root / "done" / "2026").is_dir()  # folders on the way are made


def test_a_move_never_overwrites_even_when_the_target_appeared_after_the_plan(root):
    plan = [root.plan_move("s", "inbox/a.md", "done/a.md")]
    (root.root / "done").mkdir()
    (root.root / "done" / "a.md").write_text("someone else's", encoding="utf-8")
    with pytest.raises(FileRefused, match="^step 's': 'done/a.md' already exists; a move never overwrites a file$"):
        root.check_moves(plan)
    assert root.apply(plan) == ((), (FileError(plan[0], "'done/a.md' already exists; a move never overwrites a file"),))
    assert (root.root / "done" / "a.md").read_text() == "someone else's"
    assert (root.root / "inbox" / "a.md").exists()


def test_a_plan_is_confined_again_when_it_is_done(root, tmp_path):
    plan = [root.plan_move("s", "inbox/a.md", "out/a.md")]
    os.symlink(tmp_path, root.root / "out")  # the target's folder now leads outside
    moved, errors = root.apply(plan)
    assert (moved, errors) == ((), (FileError(plan[0], f"the path 'out/a.md' leads outside the file root "
                                                        f"{str(root.root)!r}"),))  # fmt: skip
    assert not (tmp_path / "a.md").exists()
