"""read_file and move_file steps through the Membrane, against a real graph and a real folder:
reads feed the cluster, moves wait for its commit, and nothing moves when nothing is committed."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cabal.cli import main
from cabal.errors import ClusterError, ProtocolLoadError, ProtocolRuntimeError
from cabal.membrane import Membrane
from cabal.membrane.loader import load_protocol
from cabal.membrane.results import FileError, FileMove

HERE = Path(__file__).parent / "file_steps"
SOURCE = HERE / "file_note.yaml"
NOTE = "# Standup\n\nShip the importer on Friday.\n"
CONTEXT = {"actor_id": "agent-1", "space_id": "space-1", "name": "standup.md"}
MOVE = FileMove("archive", "inbox/standup.md", "archive/space-1/standup.md")


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "inbox").mkdir()
    (tmp_path / "inbox" / "standup.md").write_text(NOTE, encoding="utf-8")
    return tmp_path


@pytest.fixture
def membrane(graph, folder):
    graph.create_cluster([{"id": "space-1", "node_type": "space", "type": "module", "name": "billing"},
                          {"id": "agent-1", "node_type": "actor", "type": "agent", "name": "operative one"}])  # fmt: skip
    return Membrane(graph, [HERE], file_root=folder)


def files_under(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def runtime_error(call, *args, **kwargs) -> str:
    with pytest.raises(ProtocolRuntimeError) as caught:
        call(*args, **kwargs)
    return str(caught.value)


# ------------------------------------------------------------------------ the whole flow


def test_the_file_is_read_into_the_cluster_and_moved_after_the_commit(membrane, graph, folder):
    done = membrane.run("file_note", CONTEXT, {"shelf": "weekly"})
    assert (done.status, done.summary) == ("complete", "standup.md is note_standup-md on shelf weekly")
    assert done.created.to_wire() == {"nodes": 1, "links": 1, "moved": [
        {"step": "archive", "from": "inbox/standup.md", "to": "archive/space-1/standup.md"}]}  # fmt: skip
    assert (done.created.moved, done.file_errors) == ((MOVE,), ())
    note = graph.get("note_standup-md")
    assert (note["name"], note["content"]) == ("Standup", NOTE)
    assert files_under(folder) == ["archive/space-1/standup.md"]
    assert (folder / "archive" / "space-1" / "standup.md").read_text(encoding="utf-8") == NOTE


def test_step_by_step_the_planned_move_waits_in_the_session_until_the_commit(membrane, graph, folder):
    started = membrane.start("file_note", CONTEXT, session_id="s-file")
    assert (started.step.id, started.step.question) == ("shelf", "Which shelf does Standup go on?")
    assert files_under(folder) == ["inbox/standup.md"]  # planned, not done
    assert membrane.sessions.load("s-file").moves == [
        {"step": "archive", "source": "inbox/standup.md", "target": "archive/space-1/standup.md"}]  # fmt: skip
    rejected = membrane.continue_session("s-file", "w")  # too short: nothing moves either
    assert [str(p) for p in rejected.problems] == ["shelf: expected at least 2 characters, got 1"]
    assert files_under(folder) == ["inbox/standup.md"]
    done = Membrane(graph, [HERE], file_root=folder).continue_session("s-file", "weekly")  # another process
    assert (done.status, done.created.moved) == ("complete", (MOVE,))
    assert files_under(folder) == ["archive/space-1/standup.md"]


def test_an_aborted_session_moves_nothing(membrane, folder):
    started = membrane.start("file_note", CONTEXT)
    membrane.abort(started.session_id)
    assert files_under(folder) == ["inbox/standup.md"]


# ----------------------------------------------------------------- commits and dry runs


def test_a_failed_commit_moves_nothing(membrane, graph, folder):
    with pytest.raises(ClusterError):  # the space does not exist: the graph refuses the cluster
        membrane.run("file_note", {**CONTEXT, "space_id": "space-missing"}, {"shelf": "weekly"})
    assert files_under(folder) == ["inbox/standup.md"]
    assert graph.get("note_standup-md") is None


def test_a_dry_run_moves_nothing_and_committing_its_cluster_does(membrane, graph, folder):
    dry = membrane.run("file_note", CONTEXT, {"shelf": "weekly"}, commit=False)
    assert (dry.status, dry.cluster.moves, dry.created.moved) == ("complete", (MOVE,), ())
    assert dry.cluster.to_wire()["moves"] == [
        {"step": "archive", "from": "inbox/standup.md", "to": "archive/space-1/standup.md"}]  # fmt: skip
    prepared = membrane.prepare("file_note", CONTEXT, {"shelf": "weekly"}, session_id="s-dry")
    assert prepared.moves == (MOVE,)
    assert files_under(folder) == ["inbox/standup.md"]
    assert graph.get("note_standup-md") is None
    created = membrane.commit([prepared])  # as run() would have: the cluster, then its moves
    assert (created.nodes, created.links, created.moved, created.file_errors) == (1, 1, (MOVE,), ())
    assert files_under(folder) == ["archive/space-1/standup.md"]


def test_a_move_that_cannot_be_done_any_more_stops_the_commit(membrane, graph, folder):
    prepared = membrane.prepare("file_note", CONTEXT, {"shelf": "weekly"}, session_id="s-late")
    (folder / "inbox" / "standup.md").unlink()  # gone between the dry run and the commit
    assert runtime_error(membrane.commit, [prepared]) == (
        "step 'archive': there is no file 'inbox/standup.md' to move; nothing was written")  # fmt: skip
    assert graph.get("note_standup-md") is None


def test_a_move_that_fails_after_the_commit_is_reported(membrane, graph, folder):
    commit = graph.create_cluster

    def commit_then_race(*args, **kwargs):  # another process takes the target once the graph is written
        counts = commit(*args, **kwargs)
        (folder / "archive" / "space-1").mkdir(parents=True)
        (folder / "archive" / "space-1" / "standup.md").write_text("theirs", encoding="utf-8")
        return counts

    graph.create_cluster = commit_then_race
    done = membrane.run("file_note", CONTEXT, {"shelf": "weekly"})
    assert (done.status, done.created.nodes, done.created.moved) == ("complete", 1, ())
    assert done.file_errors == (FileError(MOVE, "'archive/space-1/standup.md' already exists; a move never overwrites "
                                                "a file"),)  # fmt: skip
    assert done.to_wire()["created"]["file_errors"] == [
        {"step": "archive", "from": "inbox/standup.md", "to": "archive/space-1/standup.md",
         "error": "'archive/space-1/standup.md' already exists; a move never overwrites a file"}]  # fmt: skip
    assert graph.get("note_standup-md")["content"] == NOTE  # the commit stands
    assert (folder / "inbox" / "standup.md").read_text(encoding="utf-8") == NOTE  # and the file was not lost


# ------------------------------------------------------------------- refusals, located


def test_without_a_file_root_a_protocol_with_file_steps_is_refused_before_it_starts(graph, membrane):
    rootless = Membrane(graph, [HERE])
    expected = (f"{SOURCE}:7 step 'read_note': a read_file step needs a file root, and this membrane has no file "
                "root (Membrane(graph, ..., file_root=FOLDER))")  # fmt: skip
    assert runtime_error(rootless.start, "file_note", CONTEXT) == expected
    assert runtime_error(rootless.run, "file_note", CONTEXT, {"shelf": "weekly"}, commit=False) == expected
    prepared = membrane.prepare("file_note", CONTEXT, {"shelf": "weekly"}, session_id="s-root")
    assert runtime_error(rootless.commit, [prepared]) == (
        "the cluster moves files (step 'archive'), and this membrane has no file root (Membrane(graph, ..., "
        "file_root=FOLDER)); nothing was written")  # fmt: skip
    assert graph.get("note_standup-md") is None


def test_a_session_started_with_a_root_and_continued_without_one_stops_at_the_step(graph, membrane, folder, tmp_path):
    protocols = tmp_path / "protocols"
    protocols.mkdir()
    (protocols / "late_read.yaml").write_text(textwrap.dedent("""\
        protocol: late_read
        steps:
          pick:
            type: ask
            question: Which file?
            expects: {type: string}
          read:
            type: read_file
            path: "{pick}"
          write:
            type: create
            nodes: [{id: "late", node_type: narrative, type: note, name: "{read|title}"}]
            links: [{type: contains, from: space-1, to: late}]
        """))  # fmt: skip
    started = Membrane(graph, [protocols], file_root=folder).start("late_read", CONTEXT)
    rootless = Membrane(graph, [protocols])  # a process that was given no file root
    assert runtime_error(rootless.continue_session, started.session_id, "inbox/standup.md") == (
        f"{protocols / 'late_read.yaml'}:8 step 'read': a read_file step needs a file root, and this membrane has "
        "no file root (Membrane(graph, ..., file_root=FOLDER))")  # fmt: skip
    assert graph.get("late") is None


@pytest.mark.parametrize("name", ["../../secret.txt", "link.md"])
def test_a_path_that_leaves_the_root_is_a_located_error_and_writes_nothing(membrane, graph, folder, name):
    (folder.parent / "secret.txt").write_text("not yours", encoding="utf-8")
    (folder / "inbox" / "link.md").symlink_to(folder.parent / "secret.txt")
    path = f"inbox/{name}"
    assert runtime_error(membrane.run, "file_note", {**CONTEXT, "name": name}, {"shelf": "weekly"}) == (
        f"{SOURCE}:7 step 'read_note' field 'path': the path {path!r} leads outside the file root "
        f"{str(folder.resolve())!r}")  # fmt: skip
    assert graph.find("narrative") == []


def test_a_binary_file_is_a_located_error(membrane, folder):
    (folder / "inbox" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    assert runtime_error(membrane.run, "file_note", {**CONTEXT, "name": "logo.png"}, {"shelf": "weekly"}) == (
        f"{SOURCE}:7 step 'read_note' field 'path': 'inbox/logo.png' is binary (it holds NUL bytes); a read takes "
        "UTF-8 text")  # fmt: skip


def test_a_move_onto_an_existing_file_is_refused_before_anything_is_written(membrane, graph, folder):
    (folder / "archive" / "space-1").mkdir(parents=True)
    (folder / "archive" / "space-1" / "standup.md").write_text("older", encoding="utf-8")
    assert runtime_error(membrane.run, "file_note", CONTEXT, {"shelf": "weekly"}) == (
        f"{SOURCE}:21 step 'archive' field 'to': 'archive/space-1/standup.md' already exists; a move never "
        "overwrites a file")  # fmt: skip
    assert graph.get("note_standup-md") is None
    assert files_under(folder) == ["archive/space-1/standup.md", "inbox/standup.md"]


# ------------------------------------------------------------------------ loading them


def problems_of(text: str) -> list[tuple]:
    with pytest.raises(ProtocolLoadError) as caught:
        load_protocol(textwrap.dedent(text), "f.yaml")
    return [(p.step, p.field, p.line, p.message) for p in caught.value.problems]


def test_malformed_file_steps_are_located_when_they_load():
    assert problems_of("""\
        protocol: f
        steps:
          up:
            type: read_file
            path: "../{name}"
          abs:
            type: read_file
            path: /etc/{name}
            store_as: 3
          nowhere:
            type: move_file
            from: "a/{name}"
            moment: true
          sideways:
            type: move_file
            from: "{name}"
            to: "x/{name|nope}"
            overwrite: true
        """) == [
        ("up", "path", 5, "'../{name}' climbs out with '..'; a path stays under the membrane's file root"),
        ("abs", "path", 8, "'/etc/{name}' is absolute; a path is relative to the membrane's file root"),
        ("abs", "store_as", 9, "'store_as' must be a name, got 3"),
        ("nowhere", "moment", 13, "a move_file step records no moment (ask, query, update, create steps do)"),
        ("nowhere", "to", 11, "a move_file step needs 'to': a path under the membrane's file root, got None"),
        ("sideways", "overwrite", 18,
         "move_file steps do not take 'overwrite' (they take: from, to, next, moment)"),
        ("sideways", "to", 17, "unknown filter 'nope' (known: basename, compact, count, default, field, first, "
                               "group, hash, ids, is_empty, is_present, join, json, last, lines, lower, map, names, "
                               "numbered, pad, range, slugify, sort, strip_prefix, title, truncate, upper, where, "
                               "words), in {name|nope}"),
    ]  # fmt: skip


def test_a_file_steps_text_feeds_later_steps_by_its_name(tmp_path):
    protocol = load_protocol((HERE / "file_note.yaml").read_text(), str(SOURCE), strict_names=True)
    step = protocol.steps["read_note"]
    assert (step.type, step.path, step.store_as, step.next) == ("read_file", "inbox/{name}", "text", "record")
    move = protocol.steps["archive"]
    assert (move.type, move.source, move.target, move.next) == ("move_file", "inbox/{name}", "archive/{space_id}/{name}",
                                                                "shelf")  # fmt: skip


def test_protocols_show_outlines_the_file_steps(capsys):
    assert main(["protocols", "show", "file_note", "--protocols", str(HERE)]) == 0
    shown = capsys.readouterr().out
    assert "  read_note: read_file inbox/{name} -> text, then record\n" in shown
    assert "  archive: move_file inbox/{name} -> archive/{space_id}/{name} after the commit, then shelf\n" in shown
