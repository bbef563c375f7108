"""What a person sees while a mission runs: every working agent at once on a terminal, plain lines elsewhere."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import signal
import subprocess
import time
from dataclasses import replace

import pytest
from rich.console import Console

from cabal.cli.progress import Progress
from cabal.rounds.events import (
    Answered, GraphRestarted, HaltRaised, MissionInterrupted, MissionResumed, MissionStarted, MissionStopped,
    ModelCalled, Presented, RoundStarted, RunEnded, SpokenLine, StepStarted, TurnDone, TurnStarted, UserMessage,
)
from cabal.vocabulary import MissionState, Step, StopReason, TurnOutcome

from .test_cli import CABAL, DATA, LAUNCH, ROOT

M = "m-demo-000001"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def started(source: str = "mission file", **budget) -> MissionStarted:
    return MissionStarted(M, name="demo", request="r", operatives=3, rounds=2, model="scripted:x",
                          budget_tokens=budget.get("tokens"), budget_cost_usd=budget.get("cost"), budget_source=source)


@pytest.mark.parametrize(("source", "budget", "said"), [
    ("default", {"cost": 2.0}, "budget $2.00 (default; --budget-usd or budget: none to change)"),
    ("default", {"cost": 2.0, "tokens": 400000}, "budget $2.00 and 400,000 tokens (default; --budget-usd or budget: "
                                                 "none to change)"),
    ("CABAL_BUDGET_USD", {"cost": 7.5}, "budget $7.50 (CABAL_BUDGET_USD)"),
    ("--budget-usd", {"cost": 3.0}, "budget $3.00 (--budget-usd)"),
    ("none", {}, "no budget (budget: none)"),
    ("none", {"tokens": 5000}, "budget 5,000 tokens (no cost limit)"),
])
def test_the_first_line_states_the_budget_and_where_it_came_from(source: str, budget: dict, said: str) -> None:
    out = io.StringIO()
    progress = Progress(out, live=False)

    progress(started(source, **budget))

    assert out.getvalue() == f"mission {M}: 3 operatives, up to 2 rounds, model scripted:x, {said}\n"


def test_a_graph_restart_is_said_in_one_line() -> None:
    out = io.StringIO()
    progress = Progress(out, live=False)

    progress(GraphRestarted(M, round=2, restart=1, max_restarts=3, detail="Connection refused."))

    assert out.getvalue() == ("the graph server stopped (Connection refused.); started it again, replaying from "
                              "round 2's last checkpoint (restart 1 of 3)\n")


def done(agent: str, step: Step, tokens: tuple[int, int], cost: float, outcome=TurnOutcome.FINAL, attempts=1,
         problems=(), halt=None, round=1) -> TurnDone:  # noqa: A002
    return TurnDone(M, round=round, step=step, agent=agent, outcome=outcome, attempts=attempts, calls=attempts,
                    input_tokens=tokens[0], output_tokens=tokens[1], cache_read_tokens=0, cost_usd=cost,
                    problems=problems, summary="", halt=halt)


def test_plain_lines_tell_each_turn_and_the_conversation_once() -> None:
    out = io.StringIO()
    progress = Progress(out)

    for event in [
        started(tokens=1000),
        HaltRaised(M, round=0, step="bootstrap", halt="r0.bootstrap.halt", asker="chair-1", message="Who for?",
                   options=("students", "teachers")),
        Answered(M, round=0, halt="r0.bootstrap.halt", text="Students.", source="mission file"),
        RoundStarted(M, round=1, budget_tokens=1000, budget_cost_usd=None),
        StepStarted(M, round=1, step=Step.WRITE),
        TurnStarted(M, round=1, step=Step.WRITE, agent="operative-1"),
        done("operative-1", Step.WRITE, (100, 20), 0.5, attempts=2),
        done("operative-2", Step.WRITE, (50, 5), 0.25, outcome=TurnOutcome.FAILED, attempts=3,
             problems=("versions.0: not yours",)),
        Presented(M, round=1, agent="envoy-1", lines=(SpokenLine("chair-1", "Brief written."),)),
        UserMessage(M, round=1, note="user.r1.note0", text="Cheaper, please.", product=None),
        MissionStopped(M, round=2, reason=StopReason.CONCLUDED, detail="All done."),
    ]:
        progress(event)
    progress.close()

    assert out.getvalue() == (
        "mission m-demo-000001: 3 operatives, up to 2 rounds, model scripted:x, budget 1,000 tokens (mission file)\n"
        "\n── round 0 ──\n"
        "chair-1 asks you: Who for?  [students / teachers]\n"
        "you (mission file): Students.\n"
        "round 1 · write · operative-1, 1 retry · 120 tokens · $0.5000\n"
        "round 1 · write · operative-2 (failed), 2 retries · 175 tokens · $0.7500\n"
        "  rejected: versions.0: not yours\n"
        "\n── round 1 ──\n"
        "chair-1: Brief written.\n"
        "you: Cheaper, please.\n"
        "\n── round 2 ──\n"
        "chair-1: All done. (mission concluded)\n")


def test_a_resumed_run_shows_its_rounds_heading_only_questions_are_tagged_and_a_pause_is_said_once() -> None:
    out = io.StringIO()
    progress = Progress(out)

    for event in [
        MissionResumed(M, name="demo", round=3, answer=None, model="scripted:x", budget_tokens=None,
                       budget_cost_usd=None, spent_tokens=900, spent_cost_usd=0.0),
        Presented(M, round=3, agent="envoy-1", lines=(SpokenLine("operative-1", "Checklist written."),)),
        done("chair-1", Step.PLAN, (10, 2), 0.0, outcome=TurnOutcome.HALT, halt="question", round=4),
        done("chair-1", Step.PLAN, (10, 2), 0.0, outcome=TurnOutcome.HALT, halt="done", round=5),
        MissionInterrupted(M, round=5, detail="the user pressed Ctrl-C", hint=f"cabal resume {M}"),
    ]:
        progress(event)
    progress.close()

    assert out.getvalue() == (
        "mission m-demo-000001 resumed in round 3 (900 tokens, $0.0000 spent so far)\n"
        "\n── round 3 ──\n"
        "operative-1: Checklist written.\n"
        "round 4 · plan · chair-1 (question) · 912 tokens · $0.0000\n"
        "round 5 · plan · chair-1 · 924 tokens · $0.0000\n"
        "paused: the user pressed Ctrl-C; go on with: cabal resume m-demo-000001\n")
    assert progress.interrupted


def test_a_model_without_a_price_reads_not_priced_from_the_resume_on_and_a_priced_one_beside_it_adds_up() -> None:
    out = io.StringIO()
    progress = Progress(out)
    unpriced = replace(done("operative-1", Step.WRITE, (100, 12), 0.0, round=2), priced=False)

    for event in [
        MissionResumed(M, name="demo", round=2, answer=None, model="ollama:qwen3:8b", budget_tokens=None,
                       budget_cost_usd=None, spent_tokens=900, spent_cost_usd=0.0, spent_turns=4,
                       spent_unpriced_turns=4),
        unpriced,
        done("chair-1", Step.PLAN, (10, 2), 0.25, round=2),
    ]:
        progress(event)
    progress.close()

    assert out.getvalue() == (
        "mission m-demo-000001 resumed in round 2 (900 tokens so far; cost not priced)\n"
        "round 2 · write · operative-1 · 1,012 tokens · not priced\n"
        "round 2 · plan · chair-1 · 1,024 tokens · $0.2500 + not priced\n")


def test_a_terminal_shows_every_working_agent_at_once_with_the_spend_against_the_budget() -> None:
    progress = Progress(Terminal())
    now = time.time()
    try:
        progress(started(tokens=400000, cost=5.0))
        progress(RoundStarted(M, round=1, budget_tokens=400000, budget_cost_usd=5.0))
        progress(StepStarted(M, round=1, step=Step.WRITE))
        for agent in ("operative-1", "operative-2", "operative-3"):
            progress(TurnStarted(M, round=1, step=Step.WRITE, agent=agent, at=now - 7.2))
        progress(ModelCalled(M, round=1, step=Step.WRITE, agent="operative-2", call=1, model="claude-sonnet-4-6",
                             input_tokens=1200, output_tokens=34, cache_read_tokens=0, cache_write_tokens=0,
                             cost_usd=0.0041, duration_s=3.0))
        working = rendered(progress)
        progress(done("operative-2", Step.WRITE, (1200, 34), 0.0041))
        after = rendered(progress)
        assert progress._live is not None
        progress(RunEnded(M, state=MissionState.HALTED, stop_reason=StopReason.QUESTION, round=1, turns=1,
                          input_tokens=1200, output_tokens=34, cache_read_tokens=0, cost_usd=0.0041, question="?"))
        assert progress._live is None  # the run is over: the terminal is free for the next answer
    finally:
        progress.close()

    rows = [line.split() for line in working.splitlines()[1:]]
    assert rows == [["operative-1", "write", "0:07", "0", "tokens", "$0.0000"],
                    ["operative-2", "write", "0:07", "1,234", "tokens", "$0.0041"],
                    ["operative-3", "write", "0:07", "0", "tokens", "$0.0000"]]
    assert re.fullmatch(r"round 1 · write · \d:\d\d · 1,234 / 400,000 tokens · \$0\.0041 / \$5\.00",
                        working.splitlines()[0].strip())
    assert [line.split()[0] for line in after.splitlines()[1:]] == ["operative-1", "operative-3"]
    assert "1,234 / 400,000 tokens" in after.splitlines()[0]


def rendered(progress: Progress) -> str:
    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(progress._panel())
    return console.file.getvalue()


def run_on_a_terminal(home, latency: str, seen=None, **terminal_size: str) -> tuple[subprocess.Popen, bytes]:
    """`cabal run` of the launch example on a pseudo-terminal, to its end; ``seen(process, output)``
    hears the output so far after each read."""
    controller, terminal = pty.openpty()
    environment = {**os.environ, "PYTHONPATH": str(DATA), "CABAL_TEST_LATENCY": latency, **terminal_size}
    process = subprocess.Popen([str(CABAL), "run", str(LAUNCH), "--model", "py:slow_factory:launch_model",
                                "--home", str(home)],
                               stdin=terminal, stdout=terminal, stderr=terminal, cwd=ROOT, env=environment)
    os.close(terminal)
    output = b""
    while select.select([controller], [], [], 60)[0]:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        output += chunk
        if seen is not None:
            seen(process, output)
    return process, output


def test_cabal_run_on_a_terminal_shows_parallel_operatives_together(graph_server) -> None:
    process, output = run_on_a_terminal(graph_server.home, "0.3", COLUMNS="120")
    assert process.wait(timeout=60) == 0
    lines = ANSI.sub("", output.decode()).replace("\r\n", "\n").split("\n")

    # One frame of the live display holds both operatives of a round's Write step, each by its name.
    frames = [i for i, line in enumerate(lines) if line.strip().startswith("round 1 · write ·")]
    assert any(lines[i + 1].split()[:3] == ["Ada", "(operative-1)", "write"]
               and lines[i + 2].split()[:3] == ["Brook", "(operative-2)", "write"] for i in frames if i + 2 < len(lines))
    text = "\n".join(lines)
    assert text.count("Who is Margin for at launch") == 1
    assert "state: done (concluded), round 2" in text


CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
HOSTILE = "Done\x1b[2J\x1b]0;owned\x07\x9b31m\a\rsoon."  # clear screen, set title, C1 colour, bell, CR


def test_no_control_sequence_from_model_or_user_text_reaches_the_terminal() -> None:
    plain, terminal = io.StringIO(), Terminal()
    for out in (Progress(plain), Progress(terminal, live=True)):
        for event in [
            started(),
            HaltRaised(M, round=0, step="bootstrap", halt="h", asker="chair-1", message=HOSTILE, options=(HOSTILE,)),
            Answered(M, round=0, halt="h", text=HOSTILE, source="user"),
            Presented(M, round=1, agent="envoy-1", lines=(SpokenLine("chair-1", HOSTILE),)),
            UserMessage(M, round=1, note="n", text=HOSTILE, product=None),
            done("operative-2", Step.WRITE, (1, 1), 0.0, outcome=TurnOutcome.FAILED, problems=(HOSTILE,)),
            MissionStopped(M, round=1, reason=StopReason.CONCLUDED, detail=HOSTILE),
        ]:
            out(event)
        out.close()

    assert not CONTROLS.search(plain.getvalue())
    assert plain.getvalue().count("Donesoon.") == 7
    shown = ANSI.sub("", terminal.getvalue())  # rich's own styling is the only escape left
    assert not CONTROLS.search(shown.replace("\n", "").replace("\r", "")) and shown.count("Donesoon.") == 7


FOOTER = re.compile(r"round \d+ · \w+ · \d+:\d\d · ")  # the live line: where, the clock, the spend


def test_ctrl_c_on_a_terminal_leaves_no_stale_footer_and_says_the_pause_once(graph_server) -> None:
    import pyte

    interrupted = []

    def press_ctrl_c(process: subprocess.Popen, output: bytes) -> None:
        if not interrupted and b"round 1 \xc2\xb7 write" in output:  # two operatives at work, the footer drawn
            time.sleep(0.3)
            process.send_signal(signal.SIGINT)
            interrupted.append(True)

    process, output = run_on_a_terminal(graph_server.home, "0.5", press_ctrl_c, COLUMNS="100", LINES="60")
    assert process.wait(timeout=60) == 130
    screen = pyte.Screen(100, 60)
    pyte.ByteStream(screen).feed(output)
    shown = [line.rstrip() for line in screen.display if line.strip()]

    assert not [line for line in shown if FOOTER.search(line)], "\n".join(shown)
    assert shown[-1].startswith("paused: the user pressed Ctrl-C; go on with: cabal resume m-launch-plan-")
    assert sum("Ctrl-C" in line for line in shown) == 1


def test_live_lines_show_an_agent_by_the_name_the_team_gave_it_beside_its_id() -> None:
    out = io.StringIO()
    progress = Progress(out, live=False)
    named = MissionStarted(M, name="demo", request="r", operatives=2, rounds=2, model="scripted:x", budget_tokens=None,
                           budget_cost_usd=None, budget_source="none", names={"operative-1": "Dana"})

    for event in [named, done("operative-1", Step.WRITE, (10, 5), 0.0), done("operative-2", Step.WRITE, (10, 5), 0.0),
                  Presented(M, round=1, agent="envoy-1", lines=(SpokenLine("operative-1", "The brief is written."),))]:
        progress(event)

    lines = out.getvalue().splitlines()
    assert lines[1:] == ["round 1 · write · Dana (operative-1) · 15 tokens · $0.0000",
                         "round 1 · write · operative-2 · 30 tokens · $0.0000",
                         "",
                         "── round 1 ──",
                         "Dana (operative-1): The brief is written."]
