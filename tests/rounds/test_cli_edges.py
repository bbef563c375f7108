"""The CLI at its edges: Ctrl-C, Ctrl-D, a closed pipe, exit statuses, and where the workspace is.

Each runs the real console script in a subprocess, as a user would.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import time
from pathlib import Path

from cabal.graph import ContextGraph

from .test_cli import CABAL, DATA, LAUNCH, QUESTION, ROOT, assert_plain, cabal, mission_id_of

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
        deadline = time.monotonic() + 60
        while MISSION_LINE not in log.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.2)  # inside the mission, a model call in flight
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    mission_id = log.read_text().split("mission ", 1)[1].split(":", 1)[0]

    assert process.returncode == 130
    assert "Traceback" not in err.decode()
    assert err.decode().strip().endswith(f"interrupted (Ctrl-C); the mission is paused. Go on with: "
                                         f"cabal resume {mission_id}")
    assert f"{mission_id}: interrupted" in cabal("status", mission_id, "--home", home).stdout

    resumed = cabal("resume", mission_id, "--home", home, "--model", "py:slow_factory:launch_model",
                    env={"CABAL_TEST_LATENCY": "0.01"})

    assert resumed.returncode == 0, resumed.stderr
    assert "state: done (concluded), round 4" in resumed.stdout


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

    assert below.returncode == 0 and f"{mission_id}: done (concluded), round 4" in below.stdout
    for result in (outside, listing):
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert result.stderr.startswith(f"cabal: no Cabal workspace here: no .cabal folder in {elsewhere} or any of "
                                        "its parents\n")
    assert not (elsewhere / ".cabal").exists()  # reading never creates a workspace
    subprocess.run([str(CABAL), "graph", "stop"], cwd=project, env=env, timeout=60, capture_output=True)
    with ContextGraph.open(name="unused", home=graph_server.home):
        pass  # the session's own server is untouched
