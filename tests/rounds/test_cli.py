"""The `cabal` mission commands, run as a user runs them: the real console script in a subprocess.

Every command points `--home` at the session's graph server workspace, so the subprocesses
attach to the server the `graph_server` fixture started instead of starting their own.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cabal.graph import ContextGraph

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
CABAL = Path(sys.executable).with_name("cabal")
LAUNCH = ROOT / "examples" / "launch" / "launch.mission.yaml"
QUESTION = DATA / "question.mission.yaml"
QUESTION_TEXT = "Who reads the README first, people installing tally or people contributing to it?"
ESCAPES = re.compile(r"[\r\x1b]")


def cabal(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run the console script as a user would, without a terminal (stdin and stdout are not TTYs)."""
    return cabal_all([list(args)], env=env, timeout=timeout)[0]


def cabal_all(commands: list[list[str]], *, env: dict[str, str] | None = None,
              timeout: float = 60) -> list[subprocess.CompletedProcess[str]]:
    """Several independent commands at once (each pays the interpreter's start-up; overlap it)."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(DATA), os.environ.get("PYTHONPATH", "")]),
                   **(env or {})}
    running = [(args, subprocess.Popen([str(CABAL), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       stdin=subprocess.DEVNULL, text=True, cwd=ROOT, env=environment))
               for args in commands]
    results = []
    for args, process in running:
        out, err = process.communicate(timeout=timeout)
        results.append(subprocess.CompletedProcess(args, process.returncode, out, err))
    return results


def mission_id_of(output: str) -> str:
    found = re.search(r"^mission: (m-\S+)$", output, re.MULTILINE)
    assert found, output
    return found.group(1)


def assert_plain(result: subprocess.CompletedProcess[str]) -> None:
    """Not a terminal: plain lines only, no carriage returns or ANSI escapes, no traceback."""
    assert not ESCAPES.search(result.stdout) and not ESCAPES.search(result.stderr)
    assert "Traceback" not in result.stderr


@pytest.fixture(scope="module")
def home(graph_server) -> str:
    return os.environ["CABAL_HOME"]


@pytest.fixture(scope="module")
def launch(home: str) -> tuple[subprocess.CompletedProcess[str], str]:
    result = cabal("run", str(LAUNCH), "--home", home)
    return result, mission_id_of(result.stdout)


def start_question(home: str, *extra: str, env: dict[str, str] | None = None) -> str:
    """`cabal run` the question mission: it pauses at bootstrap with the Chair's question."""
    result = cabal("run", str(QUESTION), "--home", home, *extra, env=env)
    assert result.returncode == 3, result.stderr  # 3: waiting for the user's answer
    mission_id = mission_id_of(result.stdout)
    assert "state: halted (waiting for your answer), round 0" in result.stdout
    return mission_id


# ------------------------------------------------------------------------------- run & read


def test_run_prints_the_conversation_and_the_outcome(launch) -> None:
    result, mission_id = launch

    assert result.returncode == 0, result.stderr
    assert_plain(result)
    out = result.stdout
    # One plain line per turn, the conversation as it happens, then the report.
    first = out.splitlines()[0]
    assert first.startswith(f"mission {mission_id}: 2 operatives, up to 4 rounds, model scripted:")
    assert first.endswith(", budget $2.00 and 400,000 tokens (default; --budget-usd or budget: none to change)")
    assert "round 1 · plan · chair-1 · " in out
    assert ("── round 0 ──\nchair-1 asks you: Who is Margin for at launch, students or teachers? The brief, the price "
            "and the checklist all depend on it.  [students / teachers / both]\n"
            "you (mission file): Students first: university students who take lecture notes.") in out
    assert out.count("Who is Margin for at launch") == 1  # the question, once
    # Each round's Envoy lines right after its Presentation, before the next round starts.
    presented = out.index("round 1 · presentation · envoy-1 · ")
    lines = out.index("\n── round 1 ──\nchair-1: We chartered the launch for university students")
    assert presented < lines < out.index("round 2 · reflect · ")
    assert out.count("We chartered the launch for university students") == 1
    assert ("chair-1: The launch plan is complete: brief, pricing and launch-day checklist are all accepted. "
            "(mission concluded)") in out
    assert "accepted: Launch brief, Pricing decision, Launch-day checklist" in out
    assert f"read the work: cabal show {mission_id}" in out
    assert f"\nmission: {mission_id}\nstate: done (concluded), round 2\n" in out
    transcript = Path(re.search(r"^transcript: (.+)$", out, re.MULTILINE).group(1))
    assert transcript.is_file()
    assert transcript.read_text().startswith(f"# launch-plan ({mission_id})")


def test_status_json_has_the_exact_product_tree(launch, home: str) -> None:
    _, mission_id = launch

    result = cabal("status", mission_id, "--json", "--home", home)

    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert (status["mission"], status["state"], status["stop_reason"], status["round"]) == (
        mission_id, "done", "concluded", 2)
    assert status["pending_halt"] is None
    assert status["usage"]["calls"] == 19 and status["usage"]["cost_usd"] == 0  # 19 turns of one call each
    assert [(p["depth"], p["name"], p["type"], p["status"], p["owner"], p["version"]) for p in status["products"]] == [
        (0, "Launch brief", "Content", "accepted", "operative-1", 1),
        (0, "Pricing decision", "Decision", "accepted", "operative-2", 2),
        (0, "Launch-day checklist", "Content", "accepted", "operative-1", 1),
    ]


def test_transcript_and_missions_list_the_mission(launch, home: str) -> None:
    _, mission_id = launch

    transcript, missions = cabal_all([["transcript", mission_id, "--home", home], ["missions", "--home", home]])

    assert transcript.returncode == 0 and missions.returncode == 0
    assert_plain(transcript)
    assert transcript.stdout.startswith(f"# launch-plan ({mission_id})\n\nState: done, round 2, stopped: concluded")
    assert "**Brook (operative-2):** Pricing now compares us with the leading note app and passed inspection." in transcript.stdout
    assert "- r2 plan chair-1: final, 2 assignments, 1 acceptance decision [1 attempt]" in transcript.stdout
    assert "- r1 close chair-1: final, 1 acceptance decision [1 attempt]" in transcript.stdout
    assert f"{mission_id}: done (concluded), round 2" in missions.stdout.splitlines()


def test_the_research_example_runs_every_turn_first_time(home: str) -> None:
    result = cabal("run", str(ROOT / "examples" / "research" / "research.mission.yaml"), "--home", home, "--quiet")
    mission_id = mission_id_of(result.stdout)

    assert result.returncode == 0, result.stderr
    assert "state: done (concluded), round 3" in result.stdout
    # --quiet: the outcome only, no progress and no conversation.
    assert result.stdout.startswith(f"\nmission: {mission_id}\nstate: done (concluded), round 3\n"), result.stdout
    with ContextGraph.open(name=mission_id, home=home) as graph:
        turns = graph.find("moment", {"type": "turn"}, fields=["attempts", "outcome"])
        tree = {p["name"]: (p["type"], p["status"], p.get("parent_id")) for p in graph.find("product")}
        mission = graph.get(mission_id)
        chair_versions = graph.find("version", {"author": "chair-1"}, fields=["product_id", "number"])
    assert [(v["product_id"], v["number"]) for v in chair_versions] == [("r0.bootstrap.chair-1.add_product0", 2)]
    assert len(turns) == 30 and {t["attempts"] for t in turns} == {1}
    assert {t["outcome"] for t in turns} == {"final", "halt"}
    notes, recommendation = "r0.bootstrap.chair-1.add_product2", "r0.bootstrap.chair-1.add_product4"
    assert tree == {
        "Evaluation criteria": ("Content", "accepted", None),
        "Benchmark plan": ("Content", "accepted", None),
        "Database notes": ("Collection", "open", None),
        "Vendor shortlist": ("Content", "removed", None),  # removed in round 1
        "Recommendation": ("Decision", "accepted", None),
        "Hosting cost sheet": ("Content", "accepted", recommendation),  # moved in round 2
        "Milvus notes": ("Content", "accepted", notes),  # added in round 1 under the collection
        "Qdrant notes": ("Content", "accepted", notes),
        "pgvector notes": ("Content", "accepted", notes),
    }
    assert "Data, replicas and backups stay in an EU region; managed services are allowed" in mission["constraints"]
    # The accepted work itself is in the status, the transcript and `cabal show`, not only its names.
    status, transcript, show = cabal_all([["status", mission_id, "--json", "--home", home],
                                          ["transcript", mission_id, "--home", home],
                                          ["show", mission_id, "Evaluation criteria", "--home", home]])
    criteria = next(p for p in json.loads(status.stdout)["products"] if p["name"] == "Evaluation criteria")
    assert (criteria["content"]["version"], criteria["content"]["accepted"]) == (2, True)
    assert "Each criterion has a weight (total 100) and a pass threshold" in criteria["content"]["text"]
    assert "Each criterion has a weight (total 100) and a pass threshold" in transcript.stdout
    assert "Each criterion has a weight (total 100) and a pass threshold" in show.stdout


# ------------------------------------------------------------------------- the user's part


def test_a_question_halts_the_run_and_resume_finishes_it(home: str) -> None:
    result = cabal("run", str(QUESTION), "--home", home)
    mission_id = mission_id_of(result.stdout)

    assert result.returncode == 3, result.stderr  # halted: waiting for the user's answer
    assert_plain(result)
    assert f"chair-1 asks you: {QUESTION_TEXT}  [users / contributors]" in result.stdout
    assert result.stdout.count(QUESTION_TEXT) == 1  # printed when asked, not again in the report
    assert "state: halted (waiting for your answer), round 0" in result.stdout
    assert f"answer with: cabal resume {mission_id} --answer '...'" in result.stdout

    resumed = cabal("resume", mission_id, "--answer", "People installing it, on any OS.", "--home", home)

    assert resumed.returncode == 0, resumed.stderr
    assert_plain(resumed)
    assert "round 1 · write · Ada (operative-1) · " in resumed.stdout  # by the name the mission file gives
    assert "state: done (concluded), round 1" in resumed.stdout
    with ContextGraph.open(name=mission_id, home=home) as graph:
        assert [(p["name"], p["status"]) for p in graph.find("product")] == [("README intro", "accepted")]


def test_chat_answers_the_pending_question(home: str) -> None:
    mission_id = start_question(home)

    waiting = cabal("chat", mission_id, "--home", home)  # no TTY and no --answer: says how to answer

    assert waiting.returncode == 3, waiting.stderr
    assert f"chair-1 asks you: {QUESTION_TEXT}" in waiting.stdout
    assert f"waiting for your answer: cabal resume {mission_id} --answer '...'" in waiting.stdout

    answered = cabal("chat", mission_id, "--answer", "Contributors first.", "--home", home)

    assert answered.returncode == 0, answered.stderr
    assert_plain(answered)
    assert "you: Contributors first." in answered.stdout
    assert "chair-1: The README's opening paragraph is done. (mission concluded)" in answered.stdout
    assert "state: done (concluded), round 1" in answered.stdout


def test_chat_takes_the_answer_piped_on_standard_input(home: str) -> None:
    mission_id = start_question(home)

    piped = subprocess.run([str(CABAL), "chat", mission_id, "--home", home], input="\nContributors first.\n",
                           capture_output=True, text=True, cwd=ROOT, timeout=60)

    assert piped.returncode == 0, piped.stderr
    assert_plain(piped)
    assert "you: Contributors first." in piped.stdout
    assert "state: done (concluded), round 1" in piped.stdout


def test_say_reaches_the_next_rounds_chair_prompt(home: str, tmp_path: Path) -> None:
    # The recording model writes each prompt it is shown to CABAL_TEST_PROMPTS, in any process.
    env = {"CABAL_TEST_PROMPTS": str(tmp_path)}
    mission_id = start_question(home, "--model", "py:recording_factory:question_model", env=env)
    note = "Mention that tally runs on Windows, macOS and Linux."

    said = cabal("say", mission_id, note, "--home", home)
    resumed = cabal("resume", mission_id, "--answer", "People installing it.", "--home", home, env=env)

    assert said.returncode == 0, said.stderr
    assert said.stdout == "message left for the team; it reads it at the next Reflect and Plan & Assign\n"
    assert resumed.returncode == 0, resumed.stderr
    assert "state: done (concluded), round 1" in resumed.stdout
    with ContextGraph.open(name=mission_id, home=home) as graph:
        notes = graph.find("collab", {"author": "user"})
    assert [(n["id"], n["type"], n["comment"], n["round"]) for n in notes] == [
        ("user.r0.note0", "user_independent", note, 0)]
    plan_prompt = (tmp_path / "r1.plan.chair-1.txt").read_text()
    assert f"The user wrote: {note}" in plan_prompt
    assert not (tmp_path / "r1.reflect.operative-1.txt").exists()  # round 1 has nothing to reflect on
    assert "The user answered: People installing it." in (tmp_path / "r0.bootstrap.chair-1.txt").read_text()


def test_stop_of_a_mission_waiting_for_an_answer_ends_it_now_and_withdraws_the_question(home: str) -> None:
    mission_id = start_question(home)

    stopped = cabal("stop", mission_id, "--home", home)
    again = cabal("stop", mission_id, "--home", home)

    assert (stopped.returncode, stopped.stderr) == (0, "")
    assert stopped.stdout == f"{mission_id} stopped at round 0; go on later with: cabal resume {mission_id}\n"
    assert again.returncode == 1 and again.stderr == (f"cabal: mission {mission_id} has already ended: "
                                                      "done (stopped at your request)\n")
    assert f"{mission_id}: done (stopped at your request), round 0" in cabal("status", mission_id, "--home", home).stdout
    with ContextGraph.open(name=mission_id, home=home) as graph:
        mission = graph.get(mission_id)
        halts = graph.find("halt", fields=["status", "answer"])
        turns = graph.find("moment", {"type": "turn"}, fields=["round", "step"])
    assert (mission["status"], mission["stop_reason"], mission["halt_requested"]) == ("done", "userHalt", True)
    assert halts == [{"id": "r0.bootstrap.halt", "status": "withdrawn", "answer": None}]  # not answered: withdrawn
    assert [(t["round"], t["step"]) for t in turns] == [(0, "bootstrap")]  # nothing ran after the question


def test_a_mission_stopped_at_its_first_question_resumes_to_that_question_not_to_round_one(home: str) -> None:
    """It has no charter yet: resumed as a stopped mission goes on, it started round 1 without one."""
    mission_id = start_question(home)
    cabal("stop", mission_id, "--home", home)

    asked = cabal("resume", mission_id, "--home", home)

    assert (asked.returncode, asked.stdout) == (1, "")
    assert asked.stderr == (f"cabal: mission {mission_id} is waiting for an answer: {QUESTION_TEXT}\n"
                            f"hint: cabal resume {mission_id} --answer '...'\n")
    assert cabal("status", mission_id, "--home", home).stdout.startswith(
        f"{mission_id}: halted (waiting for your answer), round 0\n")
    with ContextGraph.open(name=mission_id, home=home) as graph:
        assert graph.find("halt", fields=["status"]) == [{"id": "r0.bootstrap.halt", "status": "pending"}]
        assert graph.get(mission_id)["halt_requested"] is False  # round 1 will not stop at its start

    answered = cabal("resume", mission_id, "--home", home, "--answer", "People installing it.")

    assert answered.returncode == 0, answered.stderr
    assert "state: done (concluded), round 1\n" in answered.stdout
    with ContextGraph.open(name=mission_id, home=home) as graph:
        assert graph.get(mission_id)["charter"]
        assert graph.get("r0.bootstrap.halt")["status"] == "answered"
        assert graph.get("r0.bootstrap.halt")["answer"] == "People installing it."
        turns = graph.find("moment", {"type": "turn"}, fields=["round", "step"])
    assert {(0, "bootstrap"), (1, "plan"), (1, "write")} <= {(t["round"], t["step"]) for t in turns}


def test_stop_of_a_running_mission_ends_it_at_its_next_round(home: str) -> None:
    from cabal.rounds import run_mission, stop_mission
    from cabal.rounds.simulated import simulated_team

    stopped = []

    def stop_at_round_one(event) -> None:
        if event.kind == "round_start" and event.round == 1 and not stopped:
            stopped.append(stop_mission(event.mission, home=home))

    # A Chair that adds work every round: round 1's closing decisions do not end the mission.
    result = run_mission(LAUNCH, home=home, model=simulated_team(products_per_round=1), on_event=stop_at_round_one)

    assert [(s.state, s.stop_reason) for s in stopped] == [("running", None)]
    assert (result.state, result.stop_reason, result.round) == ("done", "userHalt", 1)


# ----------------------------------------------------------------------------- bad input


def test_a_mission_file_with_an_unknown_key_is_a_one_line_error(home: str, tmp_path: Path) -> None:
    mission = tmp_path / "typo.mission.yaml"
    mission.write_text("request: Plan a launch.\nrounds: 2\nround_limit: 3\n")

    result = cabal("run", str(mission), "--home", home)

    assert result.returncode == 2  # a usage error: the mission file is wrong
    assert_plain(result)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(mission) in lines[0] and "round_limit" in lines[0]


def test_an_unknown_mission_id_is_not_found(home: str) -> None:
    commands = [["status", "m-no-such-mission"], ["resume", "m-no-such-mission"], ["say", "m-no-such-mission", "hello"]]
    for command, result in zip(commands, cabal_all([[*c, "--home", home] for c in commands])):
        assert result.returncode == 1, command
        assert_plain(result)
        assert "mission not found: 'm-no-such-mission'" in result.stderr


def test_schema_prints_the_mission_file_json_schema() -> None:
    result = cabal("schema")

    assert result.returncode == 0, result.stderr
    schema = json.loads(result.stdout)
    assert schema["title"] == "MissionSpec" and schema["additionalProperties"] is False
    assert "request" in schema["properties"] and "request" in schema["required"]
    assert {"team", "rounds", "budget", "model", "answers"} <= set(schema["properties"])


def test_a_missing_model_script_is_a_clear_error(home: str) -> None:
    result = cabal("run", str(LAUNCH), "--model", "scripted:missing.yaml", "--home", home)

    assert result.returncode == 1
    assert_plain(result)
    assert f"model script {LAUNCH.parent / 'missing.yaml'}: cannot read" in result.stderr  # relative to the mission file
    assert "mission:" not in result.stdout


def test_reading_commands_load_no_engine_and_no_model_client(launch, home: str) -> None:
    """`status`, `transcript`, `show`, `missions`, `say` and `stop` only read or write the graph:
    they start without LangGraph, LangChain or a provider SDK, whose imports cost a second. The
    commands that only read also leave the membrane and the entity models (the write path) unloaded."""
    _, mission_id = launch
    heavy = ["langgraph", "langchain_core", "langchain_anthropic", "anthropic", "langsmith"]
    write_path = ["cabal.membrane", "cabal.entities"]
    commands = [["status", mission_id], ["status", mission_id, "--json"], ["transcript", mission_id],
                ["show", mission_id], ["missions"], ["stop", mission_id], ["--help"]]
    probe = ("import json, sys\nfrom cabal.cli import main\n"
             "try:\n    main(json.loads(sys.argv[1]))\nexcept SystemExit:\n    pass\n"
             "unwanted = set(json.loads(sys.argv[2]))\n"
             "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in unwanted or m in unwanted)),"
             " file=sys.stderr)")
    for command in commands:
        args = [*command, "--home", home] if command != ["--help"] else command
        unwanted = heavy + (write_path if command[0] != "stop" else [])
        result = subprocess.run([sys.executable, "-c", probe, json.dumps(args), json.dumps(unwanted)],
                                capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert json.loads(result.stderr.strip().splitlines()[-1]) == [], (command, result.stderr)


def test_status_says_what_to_run_next_in_every_state(home: str, launch) -> None:
    from cabal.rounds import run_mission, stop_mission
    from cabal.rounds.simulated import simulated_team

    def simulated(model="simulated", **mission) -> str:
        spec = {"name": "next", "request": "Write a short guide to brewing tea.", "rounds": 1, **mission}
        return run_mission(spec, home=home, model=model).mission_id

    concluded = launch[1]
    out_of_rounds = simulated(simulated_team(products_per_round=1))  # a Chair with more to add: not concluded
    asking = start_question(home)
    stopped = start_question(home)
    stop_mission(stopped, home=home)
    budget_question = simulated(budget={"tokens": 3000})
    budget_spent = simulated(budget={"tokens": 3000, "when_spent": "stop"})
    ids = (concluded, out_of_rounds, asking, stopped, budget_question, budget_spent)

    shown = [result.stdout.splitlines()[1:3] for result in cabal_all([["status", i, "--home", home] for i in ids])]

    assert [lines[0] for lines in shown] == [
        f"take it further with: cabal continue {concluded} \"a new direction\"",
        f"more rounds: cabal resume {out_of_rounds} --rounds N   (N above 1; or with a new direction: cabal "
        f"continue {out_of_rounds} \"...\" --rounds N)",
        f"answer with: cabal chat {asking}   (or: cabal resume {asking} --answer '...')",
        f"go on with: cabal resume {stopped}   (or with a new direction: cabal continue {stopped} \"...\")",
        f"raise the budget with: cabal resume {budget_question} --answer continue   (doubles it; --answer N: a "
        "budget of N tokens; --answer stop: end here)",
        "the budget is spent: run the mission again with a larger one (cabal run FILE --budget-usd USD, or budget: "
        "in the mission file)",
    ]
    assert [lines[1] for lines in shown] == [
        f"the whole of it: cabal export {i} --format html -o report.html" if i not in (asking, budget_question)
        else "waiting for you: " + (QUESTION_TEXT if i == asking else shown[4][1].removeprefix("waiting for you: "))
        for i in ids]
