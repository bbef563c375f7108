"""The CLI at its edges: Ctrl-C, Ctrl-D, a closed pipe, exit statuses, and where the workspace is.

Each runs the real console script in a subprocess, as a user would.
"""

from __future__ import annotations

import multiprocessing
import os
import pty
import re
import select
import signal
import stat
import subprocess
import time
from pathlib import Path

from cabal.graph import ContextGraph
from cabal.rounds.workspace import Workspace
from tests.polling import wait_until

from .test_cli import CABAL, DATA, LAUNCH, QUESTION, ROOT, assert_plain, cabal, cabal_all, mission_id_of

MISSION_LINE = b"mission m-"


def environment(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(DATA), os.environ.get("PYTHONPATH", "")]), **extra}


def test_ctrl_c_pauses_the_mission_says_how_to_go_on_and_resume_finishes_it(graph_server, tmp_path: Path) -> None:
    home = str(graph_server.home)
    log = tmp_path / "run.log"
    with open(log, "wb") as out:
        process = subprocess.Popen([str(CABAL), "run", str(LAUNCH), "--home", home,
                                    "--model", "py:slow_factory:launch_model"], stdout=out, stderr=subprocess.PIPE,
                                   stdin=subprocess.DEVNULL, cwd=ROOT, env=environment(CABAL_TEST_LATENCY="0.5"))
        wait_until(lambda: MISSION_LINE in log.read_bytes(), timeout=60, what="the mission to start")
        time.sleep(1.2)  # inside the mission, a model call in flight
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    mission_id = log.read_text().split("mission ", 1)[1].split(":", 1)[0]

    assert process.returncode == 130
    assert "Traceback" not in err.decode()
    said = log.read_text() + err.decode()  # the pause is said once, by the progress lines
    assert said.count("Ctrl-C") == 1
    assert log.read_text().strip().endswith(f"paused: the user pressed Ctrl-C; go on with: cabal resume {mission_id}")
    assert f"{mission_id}: interrupted" in cabal("status", mission_id, "--home", home).stdout

    resumed = cabal("resume", mission_id, "--home", home, "--model", "py:slow_factory:launch_model",
                    env={"CABAL_TEST_LATENCY": "0.01"})

    assert resumed.returncode == 0, resumed.stderr
    assert "state: done (concluded), round 2" in resumed.stdout


def test_ctrl_d_at_the_chat_prompt_keeps_the_question_for_later(graph_server) -> None:
    home = str(graph_server.home)
    started = cabal("run", str(QUESTION), "--home", home)
    mission_id = mission_id_of(started.stdout)
    controller, terminal = pty.openpty()
    process = subprocess.Popen([str(CABAL), "chat", mission_id, "--home", home], stdin=terminal, stdout=terminal,
                               stderr=terminal, cwd=ROOT, env=environment())
    os.close(terminal)
    output = b""
    while b"you> " not in output and select.select([controller], [], [], 30)[0]:
        output += os.read(controller, 65536)
    os.write(controller, b"\x04")  # Ctrl-D: end of input
    while select.select([controller], [], [], 30)[0]:
        try:
            chunk = os.read(controller, 65536)
        except OSError:
            break
        if not chunk:
            break
        output += chunk

    assert process.wait(timeout=30) == 3  # still waiting for an answer
    text = output.decode()
    assert "Traceback" not in text
    assert f"no answer given; answer later with: cabal chat {mission_id}" in text
    assert cabal("status", mission_id, "--home", home).returncode == 0


def test_a_closed_pipe_ends_the_command_quietly(graph_server) -> None:
    # `true` reads nothing and is gone before cabal's first line: every write meets a closed pipe.
    closed = subprocess.run(f"'{CABAL}' schema export | true; echo \"$PIPESTATUS\"", shell=True, executable="/bin/bash",
                            capture_output=True, text=True, cwd=ROOT, env=environment(), timeout=60)
    head = subprocess.run(f"'{CABAL}' schema export | head -c 20", shell=True, capture_output=True, text=True,
                          cwd=ROOT, env=environment(), timeout=60)

    assert (closed.stdout, closed.stderr) == ("141\n", "")
    assert (head.stdout, head.stderr) == ('{\n  "$schema": "http', "")


def _first_lines_then_close(command: list[str], lines: int) -> tuple[int, str, str]:
    """``cabal ... | head -N`` with a real pipe: read ``lines`` lines, close the reading end while
    the mission still runs, and wait for the command. Its status, what was read, its stderr."""
    process = subprocess.Popen([str(CABAL), *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, cwd=ROOT, env=environment())
    assert process.stdout is not None and process.stderr is not None
    read = [process.stdout.readline().decode() for _ in range(lines)]
    process.stdout.close()
    err = process.stderr.read().decode()
    return process.wait(timeout=120), "".join(read), err


def test_a_reader_that_goes_away_never_fails_the_mission(graph_server) -> None:
    """`cabal run FILE | head -3` failed the mission with "BrokenPipeError" at round 0: the
    terminal is a view of the run, and the run goes on without it (so does a resume's)."""
    home = str(graph_server.home)
    status, read, err = _first_lines_then_close(["run", str(LAUNCH), "--home", home], 3)
    mission_id = read.split("mission ", 1)[1].split(":", 1)[0]

    assert (status, err) == (0, "")
    assert read.splitlines()[1] == "round 0 · bootstrap · chair-1 (question) · 1,335 tokens · $0.0000"
    assert cabal("status", mission_id, "--home", home).stdout.startswith(f"{mission_id}: done (concluded), round 2\n")

    asked = mission_id_of(cabal("run", str(QUESTION), "--home", home).stdout)
    status, read, err = _first_lines_then_close(["resume", asked, "--home", home, "--answer", "people installing it"],
                                                1)

    assert (status, err) == (0, "")
    assert read.startswith(f"mission {asked} resumed in round 0")
    assert cabal("status", asked, "--home", home).stdout.startswith(f"{asked}: done (concluded), round 1\n")


def test_exit_statuses_say_how_a_mission_ended(graph_server, tmp_path: Path) -> None:
    home = str(graph_server.home)
    bad = tmp_path / "bad.mission.yaml"
    bad.write_text("request: x\nrounds: 250\n")
    halted, done, usage, rounds, unknown = (
        cabal("run", str(QUESTION), "--home", home),
        cabal("run", str(LAUNCH), "--home", home, "--quiet"),
        cabal("run", str(bad), "--home", home),
        cabal("run", str(LAUNCH), "--home", home, "--rounds", "-5"),
        cabal("status", "m-no-such-mission", "--home", home),
    )

    assert [r.returncode for r in (halted, done, usage, rounds, unknown)] == [3, 0, 2, 2, 1]
    for result in (usage, rounds, unknown):
        assert_plain(result)
        assert result.stdout == "" and len(result.stderr.strip().splitlines()) <= 2  # the message, and a hint
    assert "rounds: Input should be less than or equal to 200" in usage.stderr
    assert "--rounds: invalid mission: rounds: Input should be greater than or equal to 1" in rounds.stderr


def test_the_workspace_is_found_like_git_finds_a_repository(graph_server, tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "docs" / "deep").mkdir(parents=True)
    env = {k: v for k, v in environment().items() if k != "CABAL_HOME"}
    started = subprocess.run([str(CABAL), "run", str(LAUNCH), "--quiet"], capture_output=True, text=True,
                             cwd=project, env=env, timeout=120)
    mission_id = mission_id_of(started.stdout)
    assert (project / ".cabal").is_dir() and started.returncode == 0

    below = subprocess.run([str(CABAL), "status", mission_id], capture_output=True, text=True,
                           cwd=project / "docs" / "deep", env=env, timeout=60)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    outside = subprocess.run([str(CABAL), "status", mission_id], capture_output=True, text=True, cwd=elsewhere,
                             env=env, timeout=60)
    listing = subprocess.run([str(CABAL), "missions"], capture_output=True, text=True, cwd=elsewhere, env=env,
                             timeout=60)

    assert below.returncode == 0 and f"{mission_id}: done (concluded), round 2" in below.stdout
    for result in (outside, listing):
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert result.stderr.startswith(f"cabal: no Cabal workspace here: no .cabal folder in {elsewhere} or any of "
                                        "its parents\n")
    assert not (elsewhere / ".cabal").exists()  # reading never creates a workspace
    subprocess.run([str(CABAL), "graph", "stop"], cwd=project, env=env, timeout=60, capture_output=True)
    with ContextGraph.open(name="unused", home=graph_server.home):
        pass  # the session's own server is untouched


EMPTY_ID_COMMANDS = [["status", ""], ["show", ""], ["chat", ""], ["resume", ""], ["say", "", "hello"], ["stop", ""],
                     ["export", ""], ["transcript", ""]]


def test_an_empty_mission_id_is_a_one_line_error_for_every_command(graph_server) -> None:
    home = str(graph_server.home)

    results = cabal_all([[*command, "--home", home] for command in EMPTY_ID_COMMANDS])

    for result in results:
        assert (result.returncode, result.stdout) == (2, ""), result.args
        assert_plain(result)
        assert result.stderr == ("cabal: invalid mission id '': it is empty\n"
                                 "hint: a mission id looks like m-launch-1a2b3c; `cabal missions` lists them\n")


def test_a_binary_or_hostile_mission_file_is_a_one_line_usage_error(graph_server, tmp_path: Path) -> None:
    home = str(graph_server.home)
    binary = tmp_path / "binary.mission.yaml"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    bomb = tmp_path / "bomb.mission.yaml"
    bomb.write_text('request: &r "lol"\nanswers: [*r, *r, *r]\n')
    escapes = tmp_path / "escapes.mission.yaml"
    escapes.write_text('request: "Plan the launch\\e[2J"\n')

    results = cabal_all([["run", str(path), "--home", home] for path in (binary, bomb, escapes)])

    assert [r.returncode for r in results] == [2, 2, 2]
    for result in results:
        assert_plain(result)
        assert result.stdout == ""
    assert [r.stderr for r in results] == [
        f"cabal: mission file {binary}: not UTF-8 text (byte 0x80 at offset 136): is it a binary file?\n",
        f"cabal: mission file {bomb}:2: invalid YAML: an alias (*r) is not allowed here; write the value out\n",
        f"cabal: {escapes}:1: invalid mission: request: Value error, contains an escape character (ESC) at position "
        "15; write plain text\n",
    ]


def test_stop_on_a_finished_mission_says_it_has_already_ended(graph_server) -> None:
    home = str(graph_server.home)
    mission_id = mission_id_of(cabal("run", str(LAUNCH), "--home", home, "--quiet").stdout)

    stopped = cabal("stop", mission_id, "--home", home)

    assert (stopped.returncode, stopped.stdout) == (1, "")
    assert stopped.stderr == f"cabal: mission {mission_id} has already ended: done (concluded)\n"


def test_a_model_factory_that_raises_is_a_one_line_error_and_starts_nothing(graph_server) -> None:
    home = str(graph_server.home)

    result = cabal("run", str(LAUNCH), "--home", home, "--model", "py:failing_factory:broken_model")

    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == ("cabal: model spec 'py:failing_factory:broken_model': broken_model() raised TypeError: "
                             "no model today\n")


def test_an_engine_error_fails_the_mission_with_its_message_and_keeps_the_traceback(graph_server) -> None:
    home = str(graph_server.home)

    result = cabal("run", str(LAUNCH), "--home", home, "--model", "py:failing_factory:crashing_model", "--quiet")

    mission_id = mission_id_of(result.stdout)
    assert result.returncode == 1
    assert_plain(result)
    assert "state: failed (error), round 0" in result.stdout
    log_path = graph_server.home / "missions" / mission_id / "error.log"
    assert cabal("status", mission_id, "--home", home).stdout.startswith(
        f"{mission_id}: failed (error), round 0: RuntimeError: the model's own code broke\ntraceback: {log_path}\n")
    log = log_path.read_text()
    assert log.startswith("Traceback (most recent call last):")
    assert "\nRuntimeError: the model's own code broke\nDuring task with name 'bootstrap'" in log
    with ContextGraph.open(name=mission_id, home=graph_server.home) as graph:
        assert graph.get(mission_id)["detail"] == "RuntimeError: the model's own code broke"


def test_an_answer_with_control_characters_is_refused_before_the_mission_goes_on(graph_server) -> None:
    home = str(graph_server.home)
    mission_id = mission_id_of(cabal("run", str(QUESTION), "--home", home).stdout)

    refused = cabal("resume", mission_id, "--home", home, "--answer", "Users\x1b[2J first")
    said = cabal("say", mission_id, "a note\x07", "--home", home)

    for result in (refused, said):
        assert result.returncode == 1
        assert_plain(result)
    assert refused.stderr == ("cabal: the answer cannot be used: contains an escape character (ESC) at position 5; "
                              "write plain text\n")
    assert said.stderr == ("cabal: cannot leave the message: item.content: contains a control character (U+0007) "
                           "at position 6; write plain text\n")
    assert cabal("status", mission_id, "--home", home).stdout.startswith(f"{mission_id}: halted (waiting for your answer), round 0\n")


CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
HOSTILE = "Margin\x1b[2J\x1b]0;owned\x07\x9b31m\a\r!"  # clear screen, window title, C1 colour, bell, CR


def test_control_sequences_in_the_graph_reach_no_terminal_and_no_file_for_people(graph_server, tmp_path: Path) -> None:
    # Text the graph holds whoever wrote it (another tool, an older version): the outputs strip it.
    home = str(graph_server.home)
    mission_id = mission_id_of(cabal("run", str(LAUNCH), "--home", home, "--quiet").stdout)
    with ContextGraph.open(name=mission_id, home=graph_server.home) as graph:
        message = sorted(m["id"] for m in graph.find("message"))[0]
        product = sorted(p["id"] for p in graph.find("product"))[0]
        graph.update(mission_id, {"request": f"Plan the launch of {HOSTILE}"})
        graph.update(message, {"content": f"{HOSTILE} is launched."})
        graph.update(product, {"name": f"{HOSTILE} brief"})

    results = cabal_all([["status", mission_id], ["show", mission_id], ["transcript", mission_id],
                         ["chat", mission_id], ["export", mission_id, "-o", str(tmp_path / "report.md")],
                         ["export", mission_id, "-o", str(tmp_path / "report.html")]],
                        env={"CABAL_HOME": home})

    for result in results:
        assert result.returncode == 0, result.args
        assert not CONTROLS.search(result.stdout.replace("\n", "")) and "Traceback" not in result.stderr
    status, show, transcript, chat, _, _ = (r.stdout for r in results)
    assert "- Margin! brief [" in status and "Margin! brief" in show
    assert "Margin! is launched." in chat and "Margin! is launched." in transcript
    assert "Plan the launch of Margin!" in transcript
    for report in ("report.md", "report.html"):
        text = (tmp_path / report).read_text()
        assert not CONTROLS.search(text.replace("\n", "")) and "Margin! is launched." in text
    with ContextGraph.open(name=mission_id, home=graph_server.home) as graph:  # the graph keeps the original
        assert graph.get(message)["content"] == f"{HOSTILE} is launched."


def test_the_workspace_is_private_to_its_owner(graph_server, tmp_path: Path) -> None:
    home = tmp_path / "project" / ".cabal"
    url = f"unix://{graph_server.socket_path}"  # the session's server; the workspace's files are its own
    events = tmp_path / "events.jsonl"
    (tmp_path / "project").mkdir()
    subprocess.run(["git", "init", "-q", str(tmp_path / "project")], check=True)  # a workspace in a git project
    previous = os.umask(0o022)  # the usual umask: whatever Cabal did not make private would be readable by all
    try:
        done, failed = (cabal("run", str(LAUNCH), "--home", str(home), "--url", url, "--quiet", "--events", str(events)),
                        cabal("run", str(LAUNCH), "--home", str(home), "--url", url, "--quiet",
                              "--model", "py:failing_factory:crashing_model"))
        with Workspace.at(home, url).checkpointer():  # SQLite's journal files exist while it is open
            journals = {path.name: stat.S_IMODE(path.stat().st_mode) for path in home.glob("checkpoints.sqlite-*")}
    finally:
        os.umask(previous)
    ok, broken = mission_id_of(done.stdout), mission_id_of(failed.stdout)

    modes = {str(path.relative_to(home)): stat.S_IMODE(path.stat().st_mode) for path in [home, *home.rglob("*")]}

    assert modes == {
        ".": 0o700, ".gitignore": 0o600, "checkpoints.sqlite": 0o600, "checkpoints.lock": 0o600, "missions": 0o700,
        f"missions/{ok}": 0o700, f"missions/{ok}/lock": 0o600, f"missions/{ok}/transcript.md": 0o600,
        f"missions/{broken}": 0o700, f"missions/{broken}/lock": 0o600, f"missions/{broken}/transcript.md": 0o600,
        f"missions/{broken}/error.log": 0o600,
        f"missions/{ok}/cassette.jsonl": 0o600, f"missions/{broken}/cassette.jsonl": 0o600,  # its model calls
    }
    assert journals == {"checkpoints.sqlite-wal": 0o600, "checkpoints.sqlite-shm": 0o600}
    assert stat.S_IMODE(events.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "project").stat().st_mode) == 0o755  # the user's own folder is left alone
    untracked = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=tmp_path / "project",
                               capture_output=True, text=True, check=True).stdout
    assert untracked == ""  # not `?? .cabal/`: the workspace ignores itself


def test_first_starts_at_the_same_moment_set_up_the_checkpoints_once(graph_server, tmp_path: Path) -> None:
    # Two processes opening a fresh workspace's checkpointer at once used to fail one in ~26 with
    # "database is locked". A hundred fresh workspaces, two processes each, released together.
    context = multiprocessing.get_context("fork")  # milliseconds per process: the race, not the start-up
    started = time.monotonic()
    for attempt in range(100):
        home = tmp_path / f"ws{attempt}" / ".cabal"
        gate = context.Barrier(2)
        pair = [context.Process(target=_open_checkpoints, args=(home, gate)) for _ in range(2)]
        for process in pair:
            process.start()
        for process in pair:
            process.join(timeout=30)
        assert [process.exitcode for process in pair] == [0, 0], attempt
    assert time.monotonic() - started < 60

    # And the real thing once: two `cabal run` on one fresh workspace, at once.
    home = tmp_path / "both" / ".cabal"
    url = f"unix://{graph_server.socket_path}"
    both = cabal_all([["run", str(LAUNCH), "--home", str(home), "--url", url, "--quiet"]] * 2)
    assert [r.returncode for r in both] == [0, 0], [r.stderr for r in both]
    assert all("state: done (concluded), round 2" in r.stdout for r in both)


def _open_checkpoints(home: Path, gate) -> None:
    gate.wait(timeout=10)
    with Workspace.at(home).checkpointer() as saver:
        assert list(saver.list(None)) == []


def test_missions_rm_removes_all_a_mission_leaves_and_refuses_a_running_one(graph_server) -> None:
    from cabal.rounds import mission_report, run_mission
    from cabal.rounds.transcripts import write_transcript

    home = str(graph_server.home)
    workspace = Workspace.at(home)
    gone, kept, busy = (run_mission(LAUNCH, home=home, model="simulated", rounds=1).mission_id for _ in range(3))
    folder = workspace.mission_dir(gone)
    write_transcript(workspace, gone, mission_report(gone, home=home))  # as `cabal run` leaves it
    assert {p.name for p in folder.iterdir()} >= {"cassette.jsonl", "transcript.md"}

    def threads() -> set[str]:
        with workspace.checkpointer() as saver:
            return {t.config["configurable"]["thread_id"] for t in saver.list(None)}

    assert {gone, kept, busy} <= threads()
    with workspace.driving(busy):  # a live run holds the mission's lock: removing it is refused, and nothing else
        refused = cabal("missions", "rm", kept, busy, "--home", home)
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [f"cabal: cannot remove mission {busy}: it is running",
                                           f"hint: stop it first (cabal stop {busy}), or wait for it to end"]

    removed = cabal("missions", "rm", gone, "--home", home)

    assert removed.returncode == 0, removed.stderr
    assert removed.stdout == f"removed {gone} (its graph, checkpoints, cassette and transcript)\n"
    assert not folder.exists() and gone not in threads() and {kept, busy} <= threads()
    with ContextGraph.open(name="cabal", home=home) as graph:
        assert gone not in graph.list_graphs() and {kept, busy} <= set(graph.list_graphs())
    listed = cabal("missions", "--home", home).stdout
    assert gone not in listed and kept in listed and busy in listed
    again = cabal("missions", "rm", gone, "--home", home)
    assert again.returncode == 1 and again.stderr.startswith(f"cabal: mission not found: '{gone}' (known: ")


def test_missions_lists_the_newest_first_or_in_the_order_sort_asks(graph_server) -> None:
    from cabal.rounds import continue_mission, run_mission

    home = str(graph_server.home)
    made = []
    for _ in range(3):
        made.append(run_mission(LAUNCH, home=home, model="simulated", rounds=1).mission_id)
        time.sleep(1.1)  # a mission's start is recorded to the second

    def listed(*sort: str) -> list[str]:
        ran = cabal("missions", *sort, "--home", home)
        assert ran.returncode == 0, ran.stderr
        return [line.partition(":")[0] for line in ran.stdout.splitlines() if line.partition(":")[0] in made]

    assert listed() == made[::-1]
    assert listed("--sort", "newest") == made[::-1]
    assert listed("--sort", "id") == sorted(made)
    continue_mission(made[0], "One more round, on the price.", rounds=1, home=home)  # the oldest runs last
    assert listed() == made[::-1]
    assert listed("--sort", "active") == [made[0], made[2], made[1]]


def test_a_missing_key_or_a_card_of_an_unknown_kind_is_a_usage_error_and_starts_nothing(graph_server,
                                                                                         tmp_path: Path) -> None:
    home = str(graph_server.home)
    cards = tmp_path / "cards"
    cards.mkdir()
    (cards / "x.yaml").write_text("role: astrologer\n")
    mission = tmp_path / "cards.mission.yaml"
    mission.write_text("request: Plan the launch.\nteam: {cards: cards}\nmodel: simulated\n")
    before = Workspace.at(home).missions()
    no_key = {"OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""}

    keyless, astrologer = cabal_all([["run", str(LAUNCH), "--home", home, "--model", "openai:gpt-4.1-mini"],
                                     ["run", str(mission), "--home", home]], env=no_key)

    assert [(r.returncode, r.stdout, r.stderr) for r in (keyless, astrologer)] == [
        (2, "", "cabal: model 'gpt-4.1-mini' needs an OpenAI API key: set OPENAI_API_KEY\n"),
        (2, "", f"cabal: {cards / 'x.yaml'}:1 field 'role': unknown kind 'astrologer' (closest: watchdog, "
                "operative, chair)\n"),
    ]
    assert Workspace.at(home).missions() == before
