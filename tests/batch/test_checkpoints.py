"""Where checkpoints live: SQLite in the workspace by default, a Postgres server when
CABAL_CHECKPOINTS names one (what workers on several machines share); a store that is wrong
or out of reach is one line, before anything is written. And a mission id chosen by the caller."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from cabal import resume_mission, run_mission
from cabal.errors import MissionError, ModelError
from cabal.graph import ContextGraph
from cabal.llm import FunctionChatModel

from .conftest import ANSWER, QUESTION_SCRIPT, cabal

QUESTION_MISSION = Path(__file__).resolve().parents[1] / "rounds" / "data" / "question.mission.yaml"


def test_a_mission_pauses_in_one_process_and_resumes_in_another_from_postgres(home: str, postgres: str) -> None:
    import psycopg

    asked = cabal("run", str(QUESTION_MISSION), "--home", home, env={"CABAL_CHECKPOINTS": postgres})
    mission_id = re.search(r"^mission: (m-\S+)$", asked.stdout, re.MULTILINE).group(1)
    answered = cabal("resume", mission_id, "--answer", ANSWER, "--home", home, env={"CABAL_CHECKPOINTS": postgres})

    assert "state: halted (waiting for your answer), round 0" in asked.stdout
    assert "state: done (concluded), round 1" in answered.stdout, answered.stdout + answered.stderr
    with psycopg.connect(postgres) as connection:
        count = connection.execute("SELECT count(*) FROM checkpoints WHERE thread_id = %s", (mission_id,)).fetchone()[0]
    assert count > 0


@pytest.mark.parametrize(("store", "message"), [
    ("mysql://db/cabal", "cabal: CABAL_CHECKPOINTS=mysql://db/cabal: expected a postgresql:// URL, or nothing "
                         "(SQLite in the workspace)"),
    ("postgresql://cabal:secret@127.0.0.1:1/cabal", "cabal: cannot reach the checkpoint store "
                                                    "postgresql://cabal:***@127.0.0.1:1/cabal: "),
])
def test_a_wrong_checkpoint_store_is_one_line_and_nothing_is_written(home: str, store: str, message: str) -> None:
    before = _missions(home)

    result = cabal("run", str(QUESTION_MISSION), "--home", home, env={"CABAL_CHECKPOINTS": store})

    assert result.returncode == 2  # a setting is wrong: nothing ran (exits.USAGE)
    assert result.stderr.startswith(message) and "secret" not in result.stderr and "Traceback" not in result.stderr
    assert _missions(home) == before


def test_a_mission_takes_the_id_its_caller_chose(home: str) -> None:
    spec = {"request": "Write the README intro.", "team": {"operatives": 1}, "rounds": 3,
            "model": f"scripted:{QUESTION_SCRIPT}", "answers": [ANSWER]}

    result = run_mission(spec, mission_id="m-chosen-0001", home=home)
    with pytest.raises(MissionError) as exists:
        run_mission(spec, mission_id="m-chosen-0001", home=home)
    with pytest.raises(MissionError) as invalid:
        run_mission(spec, mission_id="M_Chosen", home=home)

    assert (result.mission_id, result.state) == ("m-chosen-0001", "done")
    assert str(exists.value) == "mission m-chosen-0001 already exists" and exists.value.hint == "cabal resume m-chosen-0001"
    assert str(invalid.value) == "invalid mission id 'M_Chosen': use m- then up to 100 letters, digits, underscores and hyphens"


def _missions(home: str) -> list[str]:
    with ContextGraph.open(name="cabal", home=home) as graph:
        return sorted(name for name in graph.list_graphs() if name.startswith("m-"))


def test_a_mission_stopped_before_its_first_checkpoint_starts_its_loop_on_resume(
        home: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CABAL_CHECKPOINTS", raising=False)
    spec = {"request": "Write the README intro.", "team": {"operatives": 1}, "rounds": 3,
            "model": f"scripted:{QUESTION_SCRIPT}", "answers": [ANSWER]}

    def outage(request):
        raise ModelError("the provider is down", transient=True)

    paused = run_mission(spec, model=FunctionChatModel(outage), mission_id="m-no-checkpoint-0001", home=home)
    # As if its process had died after the mission was written, before the loop's first checkpoint.
    with sqlite3.connect(Path(home, "checkpoints.sqlite")) as connection:
        for table in ("checkpoints", "writes"):
            connection.execute(f"DELETE FROM {table} WHERE thread_id = ?", ("m-no-checkpoint-0001",))
    done = resume_mission("m-no-checkpoint-0001", model=f"scripted:{QUESTION_SCRIPT}", home=home)

    assert (paused.state, paused.detail) == ("interrupted", "the model is unavailable: the provider is down")
    assert (done.state, done.stop_reason, done.round) == ("done", "concluded", 1)
