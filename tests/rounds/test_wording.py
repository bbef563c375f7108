"""What people read says what happened in words, never Cabal's stored names: one table of phrases
for stop reasons and halts (cabal.vocabulary), used by every line, page and export; counts in
words; the simulated team named "simulated"; a continued mission's direction told once."""

from __future__ import annotations

import re

import pytest

from cabal.rounds.run import counted
from cabal.vocabulary import STOP_PHRASES, StopReason, count_of, halt_phrase, state_phrase, stop_phrase
from tests.rounds.test_cli import cabal

STORED_NAMES = re.compile(r"noMoreRounds|questionToUser|userHalt|cabal-function|user\.r\d+\.note\d+")


@pytest.fixture(scope="module")
def home(graph_server) -> str:
    return str(graph_server.home)


def test_every_stop_reason_and_halt_has_its_phrase() -> None:
    assert set(STOP_PHRASES) == set(StopReason)
    assert [stop_phrase(reason) for reason in StopReason] == [
        "concluded", "round limit reached", "budget spent", "stopped at your request", "error",
        "waiting for your answer", "a call the recording does not answer"]
    assert state_phrase("halted", "questionToUser") == "halted (waiting for your answer)"
    assert (state_phrase("running", None), stop_phrase(None)) == ("running", "")
    assert (halt_phrase("question"), halt_phrase("done")) == ("a question for you", "the mission is done")


def test_an_answers_counts_are_words_with_their_plurals() -> None:
    assert [counted(name, number) for name, number in (
        ("acceptance", 5), ("acceptance", 1), ("tree_operations", 2), ("reviews", 1), ("remarks", 2),
        ("assignments", 1), ("chair_versions", 3))] == [
        "5 acceptance decisions", "1 acceptance decision", "2 changes to the tree", "1 review", "2 remarks",
        "1 assignment", "3 versions by the Chair"]
    assert (count_of(1, "attempt"), count_of(3, "attempt")) == ("1 attempt", "3 attempts")


def test_a_simulated_mission_out_of_rounds_then_continued_reads_in_words_everywhere(home, tmp_path) -> None:
    path = tmp_path / "bake.mission.yaml"
    path.write_text("request: Plan a bake sale.\nname: bake\nrounds: 1\n")

    # A Chair that adds work every round: the closing decisions never end the mission by themselves.
    ran = cabal("run", str(path), "--model", "py:busy_factory:team", "--home", home, timeout=180)

    assert ran.returncode == 0, ran.stderr
    mission_id = re.search(r"^mission: (m-bake-\w+)$", ran.stdout, re.M)[1]
    assert "ended: round limit reached (the round limit (1) is reached)" in ran.stdout.splitlines()
    assert "state: done (round limit reached), round 1" in ran.stdout.splitlines()

    continued = cabal("continue", mission_id, "Focus on the cakes.", "--rounds", "1", "--home", home, timeout=180)

    assert continued.returncode == 0, continued.stderr
    told = [line for line in continued.stdout.splitlines() if "Focus on the cakes." in line]
    assert told == ["you: Focus on the cakes. (the mission continues with this new direction)"]
    assert any(line.startswith(f"mission {mission_id} resumed at the start of round 2 (")
               for line in continued.stdout.splitlines())

    status = cabal("status", mission_id, "--home", home)
    shown = cabal("show", mission_id, "--home", home)
    transcript = cabal("transcript", mission_id, "--home", home)
    page = tmp_path / "report.html"
    exported = cabal("export", mission_id, "--format", "html", "-o", str(page), "--home", home)
    assert status.stdout.splitlines()[0] == f"{mission_id}: done (round limit reached), round 2"
    assert re.search(r"^\| simulated \| \d+ \|", transcript.stdout, re.M)  # the usage table: the model as named
    assert exported.returncode == 0, exported.stderr
    for said in (ran.stdout, continued.stdout, status.stdout, shown.stdout, transcript.stdout, page.read_text()):
        assert STORED_NAMES.findall(said) == []
