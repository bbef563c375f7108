"""Recording, replaying and scripting a mission: the research example recorded with the scripted
model, replayed from its cassette on the real graph server, node for node."""

from __future__ import annotations

import json
import shlex
import shutil
import stat
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from cabal.errors import ModelError
from cabal.graph import ContextGraph
from cabal.llm.cassette import CASSETTE_FILE, CallPlace, Cassette, canonical_json, sha256_of
from cabal.llm.replay import parse_replay_spec, replay_spec
from cabal.rounds.api import resume_mission, run_mission
from cabal.rounds.replays import replay_mission

ROOT = Path(__file__).resolve().parents[2]
RESEARCH = ROOT / "examples" / "research" / "research.mission.yaml"
LAUNCH = ROOT / "examples" / "launch" / "launch.mission.yaml"
QUESTION = ROOT / "tests" / "rounds" / "data" / "question.mission.yaml"
# The simulated team with a Chair that adds a product every round: a mission that runs to its round limit.
BUSY = f"py:{ROOT / 'tests' / 'rounds' / 'data' / 'busy_factory.py'}:team"
CABAL = Path(sys.executable).with_name("cabal")
RESEARCH_CALLS = 33  # the research example's script: 30 turns, three calls of them asking for context
# Fields that name how a mission was started, not what its team did: the model spec (a script, or a
# cassette to replay), the mission file as stored (a replay stores the answers it was given), and
# the clock.
NOT_CONTENT = {"model", "model_settings", "agent_models", "spec", "timestamp", "started_at"}


@pytest.fixture
def home(graph_server) -> Path:
    return graph_server.home


@pytest.fixture(scope="module")
def recorded(graph_server) -> str:
    """The research example, recorded once for the module's tests (they only read it)."""
    return run_mission(RESEARCH, home=graph_server.home).mission_id


def cassette_of(home: Path, mission_id: str) -> Path:
    return home / "missions" / mission_id / CASSETTE_FILE


def graph_dump(home: Path, mission_id: str) -> list[str]:
    """Every node and link of a mission's graph, its own id replaced, sorted: two missions with
    the same content dump the same."""
    with ContextGraph.open(name=mission_id, home=home) as graph:
        nodes = graph.read_cypher("MATCH (n) RETURN properties(n) AS p")
        links = graph.read_cypher("MATCH (a)-[r]->(b) RETURN a.id AS a, type(r) AS t, b.id AS b, properties(r) AS p")
    rows = [json.dumps({k: v for k, v in node["p"].items() if k not in NOT_CONTENT}, sort_keys=True, default=str)
            for node in nodes]
    rows += [json.dumps(link, sort_keys=True, default=str) for link in links]
    return sorted(row.replace(mission_id, "MISSION") for row in rows)


def cabal(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CABAL), *args], capture_output=True, text=True, cwd=cwd, timeout=120,
                          stdin=subprocess.DEVNULL)


# ------------------------------------------------------------------------------- recording


def test_every_call_is_recorded_with_its_place_hashes_and_reply_in_a_private_cassette(home: Path, recorded: str) -> None:
    path = cassette_of(home, recorded)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    cassette = Cassette.read(path)
    assert len(cassette.calls) == RESEARCH_CALLS
    first = cassette.calls[0]
    assert first.place == CallPlace(round=0, step="bootstrap", agent="chair-1", turn=0, attempt=1)
    assert first.model == "cabal-scripted" and first.tool_calls[0]["name"] == "final_output"
    # The hashes are those of the texts the cassette keeps (each written once).
    messages = [cassette.text(sha) for sha in first.message_hashes]
    assert [m["role"] for m in messages] == ["system", "human"]
    assert first.messages_sha256 == sha256_of(messages)
    assert first.tools_sha256 == sha256_of([cassette.text(sha) for sha in first.tool_hashes])
    for call in cassette.calls:  # every call's, the repeated prompts' too (a writer encodes each form once)
        assert call.messages_sha256 == sha256_of([cassette.text(sha) for sha in call.message_hashes])
        assert call.tools_sha256 == sha256_of([cassette.text(sha) for sha in call.tool_hashes])
        assert all(sha256_of(cassette.text(sha)) == sha for sha in call.message_hashes + call.tool_hashes)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    # Each line is the canonical JSON of its record (a text line is written around the text's own encoding).
    assert [canonical_json(line) for line in lines] == path.read_text().splitlines()
    assert Counter(line["kind"] for line in lines)["text"] == len(cassette.texts)
    # The usage recorded is the mission's, call for call.
    from cabal.rounds import mission_status

    usage = mission_status(recorded, home=home).usage
    assert sum(c.usage["input_tokens"] for c in cassette.calls) == usage.input_tokens
    assert sum(c.usage["output_tokens"] for c in cassette.calls) == usage.output_tokens
    # A call retried in its turn has its place: call 2 follows the answer sent back.
    assert any(c.place.attempt == 2 for c in cassette.calls)


def test_no_record_keeps_no_cassette(home: Path) -> None:
    result = run_mission(LAUNCH, home=home, record=False)
    assert not cassette_of(home, result.mission_id).exists()


def test_a_resumed_mission_appends_to_its_cassette_each_text_once(home: Path) -> None:
    first = run_mission(QUESTION, home=home)
    assert first.state == "halted"
    path = cassette_of(home, first.mission_id)
    before = Cassette.read(path)
    resumed = resume_mission(first.mission_id, answer="People installing tally.", home=home)
    after = Cassette.read(path)
    assert resumed.state == "done"
    assert after.calls[:len(before.calls)] == before.calls and len(after.calls) > len(before.calls)
    shas = [json.loads(line)["sha256"] for line in path.read_text().splitlines() if '"kind":"text"' in line]
    assert len(shas) == len(set(shas))
    # The Chair's turn after the answer is turn 1 of its key.
    assert any(c.place.turn == 1 for c in after.calls[len(before.calls):])


def test_a_cassette_stops_at_its_bound_and_its_replay_says_so(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CABAL_CASSETTE_MAX_BYTES", "40000")
    heard = []
    result = run_mission(RESEARCH, home=home, on_event=heard.append)
    assert result.state == "done"  # the bound ends the recording, not the mission
    warnings = [event.message for event in heard if event.kind == "warning"]
    assert len(warnings) == 1 and "reached its bound of 40,000 bytes at round " in warnings[0]
    assert "later model calls are not recorded" in warnings[0]
    path = cassette_of(home, result.mission_id)
    cassette = Cassette.read(path)
    assert cassette.full_at == 40000 and 0 < len(cassette.calls) < RESEARCH_CALLS
    assert path.stat().st_size < 40000 + 300
    monkeypatch.delenv("CABAL_CASSETTE_MAX_BYTES")
    replay = replay_mission(result.mission_id, home=home)
    assert replay.state == "diverged"
    assert "no call was recorded there (the recording stopped at the size bound of 40000 bytes)" in replay.detail


# ---------------------------------------------------------------------------------- replay


def test_a_replay_given_a_workspace_finds_the_cassette_in_that_workspace(home: Path, recorded: str, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # A batch's worker hands the engine its workspace and no home: the recorded mission's id is
    # looked up there, not in whatever CABAL_HOME says.
    from cabal.rounds.workspace import Workspace

    monkeypatch.setenv("CABAL_HOME", str(tmp_path / "elsewhere"))
    replay = run_mission(RESEARCH, model=f"replay:{recorded}", workspace=Workspace.at(home))

    assert (replay.state, replay.stop_reason) == ("done", "concluded"), replay.detail
    assert graph_dump(home, replay.mission_id) == graph_dump(home, recorded)


def test_a_strict_replay_reproduces_the_graph_node_for_node(home: Path, recorded: str) -> None:
    replay = replay_mission(recorded, home=home)
    assert replay.state == "done", replay.detail
    assert graph_dump(home, replay.mission_id) == graph_dump(home, recorded)
    # The replay records its own cassette: the same calls (operatives' in any order), the same hashes.
    original, again = Cassette.read(cassette_of(home, recorded)), Cassette.read(cassette_of(home, replay.mission_id))
    assert sorted((c.place, c.messages_sha256, c.tools_sha256) for c in again.calls) == \
        sorted((c.place, c.messages_sha256, c.tools_sha256) for c in original.calls)


def test_a_changed_prompt_line_stops_a_strict_replay_naming_the_message(home: Path, recorded: str, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "prompts", tmp_path / "prompts")
    system = tmp_path / "prompts" / "system.md"
    system.write_text(system.read_text().replace("work in rounds toward a mission for a user.",
                                                 "work in rounds toward a goal for a user."))
    result = cabal("replay", recorded, "--home", str(home), "--quiet", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "\nstate: diverged (a call the recording does not answer), round 0: replay of " in result.stdout
    assert "at round 0, step 'bootstrap', agent 'chair-1', call 1, message 1 (system) differs" in result.stdout
    assert ("\n--- recorded\n+++ now\n@@ -1,3 +1,3 @@\n You are an agent of a Cabal team: a Chair, operatives, a "
            "Watchdog and an Envoy who\n-work in rounds toward a mission for a user. The mission comes first below, "
            "then your role\n+work in rounds toward a goal for a user. The mission comes first below, then your role\n"
            " and step, then who you are, then what this call is about.\n"
            f"hint: to match calls by place only, replay leniently: cabal replay {recorded} --home {home} --quiet "
            "--replay lenient; or record the mission again\n") in result.stdout
    assert "Traceback" not in result.stderr and "During task" not in result.stdout
    # The replay that missed is removed once the miss is told; --keep keeps it (to read with cabal show).
    replay_id = result.stdout.split("mission: ", 1)[1].split("\n", 1)[0]
    assert result.stdout.endswith(f"usage: 0 in, 0 out, 0 cached, $0.0000\n"
                                  f"the diverged replay {replay_id} is removed (keep it with --keep)\n")
    assert not (home / "missions" / replay_id).exists()
    assert replay_id not in cabal("missions", "--home", str(home)).stdout
    kept = cabal("replay", recorded, "--home", str(home), "--quiet", "--keep", cwd=tmp_path)
    kept_id = kept.stdout.split("mission: ", 1)[1].split("\n", 1)[0]
    assert kept.returncode == 1 and "is removed" not in kept.stdout
    assert f"{kept_id}: diverged (a call the recording does not answer), round 0: replay of " in \
        cabal("missions", "--home", str(home)).stdout
    lenient = result.stdout.split("replay leniently: ", 1)[1].split("; or record", 1)[0]
    again = subprocess.run([str(CABAL), *shlex.split(lenient)[1:]], capture_output=True, text=True, cwd=tmp_path,
                           timeout=120, stdin=subprocess.DEVNULL)
    assert again.returncode == 0 and "\nstate: done (concluded), round 3\n" in again.stdout, again.stdout + again.stderr
    # The same project replays fine from the repository's own prompts.
    assert cabal("replay", recorded, "--home", str(home), "--quiet").returncode == 0


def test_a_mission_file_that_replays_diverging_is_told_the_whole_lenient_command_that_works(
        home: Path, recorded: str, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "prompts", tmp_path / "prompts")
    system = tmp_path / "prompts" / "system.md"
    system.write_text(system.read_text().replace("work in rounds toward a mission for a user.",
                                                 "work in rounds toward a goal for a user."))
    mission = tmp_path / "study.mission.yaml"
    mission.write_text(RESEARCH.read_text().replace("model: scripted:research.script.yaml", f"model: replay:{recorded}"))
    # --replay alone goes with a replayed model on the command line only: the old hint's advice.
    alone = cabal("run", str(mission), "--home", str(home), "--quiet", "--replay", "lenient", cwd=tmp_path)
    assert alone.returncode == 2 and "--replay and --fallback-model go with a replayed model" in alone.stderr

    strict = cabal("run", str(mission), "--home", str(home), "--quiet", cwd=tmp_path)

    assert strict.returncode == 1, strict.stdout + strict.stderr
    assert "\nstate: diverged (a call the recording does not answer), round 0: replay of " in strict.stdout
    lenient = (f"cabal run {mission} --home {home} --quiet --model "
               f"'replay:{cassette_of(home, recorded)}?mode=lenient'")
    assert f"\nhint: to match calls by place only, replay leniently: {lenient}; or record the mission again\n" \
        in strict.stdout
    followed = subprocess.run([str(CABAL), *shlex.split(lenient)[1:]], capture_output=True, text=True, cwd=tmp_path,
                              timeout=120, stdin=subprocess.DEVNULL)
    assert followed.returncode == 0 and "\nstate: done (concluded), round 3\n" in followed.stdout, \
        followed.stdout + followed.stderr


def test_a_lenient_replay_answers_missing_calls_with_the_fallback_and_records_them(home: Path, tmp_path: Path) -> None:
    launch = run_mission(LAUNCH, home=home)
    cassette = Cassette.read(cassette_of(home, launch.mission_id))
    # A cassette without its last four calls: the fallback (the launch script) answers those.
    lines = cassette_of(home, launch.mission_id).read_text().splitlines()
    calls = [i for i, line in enumerate(lines) if '"kind":"call"' in line]
    short = tmp_path / "short.jsonl"
    short.write_text("".join(line + "\n" for i, line in enumerate(lines) if i not in calls[-4:]))
    assert len(Cassette.read(short).calls) == len(cassette.calls) - 4
    script = ROOT / "examples" / "launch" / "launch.script.yaml"
    strict = run_mission(LAUNCH, home=home, model=replay_spec(str(short)))
    assert strict.state == "diverged" and "no call was recorded there" in strict.detail
    lenient = run_mission(LAUNCH, home=home, model=replay_spec(str(short), "lenient", f"scripted:{script}"))
    assert lenient.state == "done", lenient.detail
    assert graph_dump(home, lenient.mission_id) == graph_dump(home, launch.mission_id)
    assert len(Cassette.read(cassette_of(home, lenient.mission_id)).calls) == len(cassette.calls)


def test_a_replay_spec_names_its_options(home: Path) -> None:
    assert parse_replay_spec("m-a-1?mode=lenient&fallback=scripted:x.yaml") == ("m-a-1", "lenient", "scripted:x.yaml")
    assert replay_spec("m-a-1") == "replay:m-a-1"
    with pytest.raises(ModelError, match="mode 'loose' is not one of strict, lenient"):
        parse_replay_spec("m-a-1?mode=loose")
    with pytest.raises(ModelError, match=r"unknown option\(s\) \['speed'\]"):
        parse_replay_spec("m-a-1?speed=2")
    result = cabal("run", str(LAUNCH), "--home", str(home), "--model", "replay:m-nothing-000000", "--quiet")
    assert result.returncode == 2 and "no cassette for mission 'm-nothing-000000'" in result.stderr


# ---------------------------------------------------------------------------------- script


def test_a_recording_becomes_a_script_that_replays_the_mission(home: Path, recorded: str, tmp_path: Path) -> None:
    target = tmp_path / "recorded.script.yaml"
    result = cabal("script", recorded, "--home", str(home), "-o", str(target))
    assert result.returncode == 0, result.stderr
    assert f"wrote {target}: {RESEARCH_CALLS} scripted answer(s)" in result.stdout
    again = run_mission(RESEARCH, home=home, model=f"scripted:{target}")
    assert again.state == "done", again.detail
    assert graph_dump(home, again.mission_id) == graph_dump(home, recorded)


def test_a_run_through_the_claude_client_replays_offline_with_its_usage_and_cost(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Recorded through ChatAnthropic against the local fake Messages API (the launch example's
    script answering), replayed with the server's requests counted: none."""
    from cabal.rounds.mission import load_mission

    from .fake_anthropic import fake_api
    from .script_responder import script_responder

    model = "claude-sonnet-4-6"
    mission = load_mission(LAUNCH)[0].model_copy(update={"model": model})
    with fake_api(monkeypatch, "sk-ant-test-replay") as server:
        server.respond_with(script_responder(ROOT / "examples" / "launch" / "launch.script.yaml"))
        recorded = run_mission(mission, model=model, home=home)
        asked = len(server.requests)
        replayed = replay_mission(recorded.mission_id, home=home)
        assert len(server.requests) == asked  # the replay asked the provider nothing
    assert recorded.state == replayed.state == "done" and recorded.usage.cache_read_tokens > 0
    assert replayed.usage == recorded.usage and replayed.cost_usd == recorded.cost_usd > 0
    assert Cassette.read(cassette_of(home, recorded.mission_id)).model == model
    assert graph_dump(home, replayed.mission_id) == graph_dump(home, recorded.mission_id)


def test_a_replay_gives_the_chair_the_answers_the_user_gave(home: Path) -> None:
    halted = run_mission(QUESTION, home=home)
    answered = resume_mission(halted.mission_id, answer="People installing tally.", home=home)
    replayed = replay_mission(halted.mission_id, home=home)
    assert answered.state == replayed.state == "done", replayed.detail
    # The same work, and the same question answered the same (the recorded mission paused for it,
    # the replay did not: that, and where the answer came from, are all that differ in the graph).
    from cabal.report.diff import diff_missions
    from cabal.rounds import mission_report

    diff = diff_missions(mission_report(halted.mission_id, home=home), mission_report(replayed.mission_id, home=home))
    assert diff.same_content and [h.answer for h in diff.b_halts] == ["People installing tally."]


def test_a_line_cut_by_a_kill_is_dropped_before_the_cassette_goes_on(tmp_path: Path) -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    from cabal.llm.cassette import open_cassette

    path = tmp_path / CASSETTE_FILE
    reply = AIMessage(content="", tool_calls=[{"name": "final_output", "args": {}, "id": "t1"}],
                      usage_metadata={"input_tokens": 3, "output_tokens": 1, "total_tokens": 4})
    place = CallPlace(round=1, step="write", agent="operative-1")
    with open_cassette(path) as writer:
        writer.record(place, [HumanMessage("hello")], [], "cabal-scripted", reply)
    whole = path.read_text()
    path.write_text(whole + '{"v":1,"kind":"call","key":{"rou')  # killed in the middle of the next line
    assert len(Cassette.read(path).calls) == 1
    with open_cassette(path) as writer:
        writer.record(CallPlace(round=1, step="write", agent="operative-1", attempt=2), [HumanMessage("again")], [],
                      "cabal-scripted", reply)
    again = Cassette.read(path)
    assert [c.place.attempt for c in again.calls] == [1, 2] and path.read_text().startswith(whole)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize("seed", [2, 6])  # seeds whose missions draw replies without a readable tool call
def test_a_bad_models_mission_replays_strictly_with_every_bad_reply(home: Path, seed: int) -> None:
    """The chaos model's replies (text, unreadable arguments, unknown tools, cut-off answers,
    content blocks, NULs and lone surrogates) are recorded whole and given back the same."""
    from rounds.chaos import chaos_model  # tests/rounds/chaos.py

    from cabal.rounds.mission import parse_mission

    model, _ = chaos_model(seed, initial_products=3)
    mission = parse_mission({"name": "chaos", "request": "Write a short handbook for new volunteers.",
                             "team": {"operatives": 2}, "rounds": 3})
    recorded = run_mission(mission, model=model, home=home)
    cassette = Cassette.read(cassette_of(home, recorded.mission_id))
    assert any(c.invalid_tool_calls for c in cassette.calls) or any(not c.tool_calls for c in cassette.calls)
    replayed = replay_mission(recorded.mission_id, home=home)
    assert (replayed.state, replayed.failed_turns) == (recorded.state, recorded.failed_turns), replayed.detail
    assert graph_dump(home, replayed.mission_id) == graph_dump(home, recorded.mission_id)


def test_a_batch_records_its_missions_unless_told_not_to(home: Path) -> None:
    from cabal.batch.api import run_batch
    from cabal.batch.plan import parse_batch

    for record in (True, False):
        spec = parse_batch({"name": f"record-{record}", "mission": {"rounds": 2, "model": "py:cabal.rounds.simulated:team"},
                            "requests": ["Write a short guide to brewing tea."]})
        rows = run_batch(spec, workers=1, home=home, record=record).report.rows
        assert [row.state for row in rows] == ["done"]
        assert cassette_of(home, rows[0].mission_id).is_file() is record


def test_a_broken_cassette_is_named_with_its_line(tmp_path: Path) -> None:
    from cabal.errors import ConfigError

    path = tmp_path / CASSETTE_FILE
    path.write_text('{"v":1,"kind":"text","sha256":"a","value":"x"}\nnot json\n{"v":1,"kind":"full","limit":5}\n')
    with pytest.raises(ConfigError, match=r"cassette.jsonl, line 2: not a cassette record \(JSONDecodeError"):
        Cassette.read(path)
    path.write_text('{"v":2,"kind":"call"}\n')
    with pytest.raises(ConfigError, match=r"line 1: a cassette of format 2; this Cabal reads format 1"):
        Cassette.read(path)
    with pytest.raises(ConfigError, match=r"cannot read cassette .*missing.jsonl"):
        Cassette.read(tmp_path / "missing.jsonl")


def test_a_changed_tool_schema_is_named_with_its_diff(tmp_path: Path) -> None:
    from langchain_core.messages import HumanMessage, SystemMessage

    from cabal.errors import ReplayMismatch
    from cabal.llm import ScriptedChatModel, call_metadata, call_model
    from cabal.llm.cassette import recording
    from cabal.llm.replay import ReplayChatModel

    tool = {"name": "final_output", "description": "Your result.",
            "input_schema": {"type": "object", "properties": {"summary": {"type": "string"}}}}
    messages = [SystemMessage("You write."), HumanMessage("Write it.")]
    metadata = call_metadata(round=1, step="write", agent="operative-1")
    scripted = ScriptedChatModel.from_entries([{"tool": "final_output", "args": {"summary": "done"}}])
    with recording(tmp_path / CASSETTE_FILE):
        call_model(scripted, messages, [tool], metadata=metadata)
    replay = ReplayChatModel.from_cassette(tmp_path / CASSETTE_FILE)
    assert call_model(replay, messages, [tool], metadata=metadata).tool_calls[0]["args"] == {"summary": "done"}
    changed = {**tool, "input_schema": {"type": "object", "properties": {"summary": {"type": "integer"}}}}
    with pytest.raises(ReplayMismatch) as caught:
        call_model(replay, messages, [changed], metadata=metadata)
    assert caught.value.what == "tool schema 'final_output'"
    assert '-    "type": "string"' in caught.value.diff and '+    "type": "integer"' in caught.value.diff
    with pytest.raises(ReplayMismatch, match=r"at round 2, step 'write', agent 'operative-1', call 1, no call was recorded there$"):
        call_model(replay, messages, [tool], metadata=call_metadata(round=2, step="write", agent="operative-1"))


def test_a_replay_leaves_the_users_messages_where_the_user_did(home: Path) -> None:
    """`cabal say` while the Chair's question waited (read with the answer), and while the team
    worked in round 1 (read in round 2): a strict replay left neither, and missed at the first
    prompt that had one."""
    from cabal.rounds import say

    def say_in_round_one(event) -> None:
        if event.kind == "round_start" and event.round == 1:
            say(event.mission, "Mention the install line in the first sentence.", home=home)

    halted = run_mission(QUESTION, home=home)
    say(halted.mission_id, "Keep it to two sentences.", home=home)
    answered = resume_mission(halted.mission_id, answer="People installing tally.", home=home,
                              on_event=say_in_round_one)
    assert answered.state == "done", answered.detail

    replay = replay_mission(halted.mission_id, home=home)

    assert (replay.state, replay.round) == ("done", answered.round), replay.detail
    with ContextGraph.open(name=replay.mission_id, home=home) as graph:
        notes = graph.find("collab", {"author": "user"}, fields=["round", "comment"])
    assert sorted((n["id"], n["round"], n["comment"]) for n in notes) == [
        ("user.r0.note0", 0, "Keep it to two sentences."), ("user.r1.note1", 1, "Mention the install line in the "
                                                                                "first sentence.")]
    # The same prompts: the recorded calls, hash for hash.
    original, again = Cassette.read(cassette_of(home, halted.mission_id)), Cassette.read(cassette_of(home, replay.mission_id))
    assert sorted((c.place, c.messages_sha256) for c in again.calls) == \
        sorted((c.place, c.messages_sha256) for c in original.calls)


def test_a_continued_mission_replays_whole_strict_and_lenient(home: Path) -> None:
    # The replay starts with the round limit the mission started with (a prompt says "Round 1 of
    # 2"), then continues at round 2 with the user's direction, as the recorded mission did.
    from cabal.rounds.api import continue_mission

    first = run_mission(LAUNCH, home=home, model=BUSY, rounds=2)
    assert (first.state, first.stop_reason, first.round) == ("done", "noMoreRounds", 2), first.detail
    continued = continue_mission(first.mission_id, "Add a budget line to the launch brief.", rounds=1, home=home)
    assert (continued.state, continued.round) == ("done", 3), continued.detail
    for mode in ("strict", "lenient"):
        replay = replay_mission(first.mission_id, mode=mode, home=home)
        assert (replay.state, replay.stop_reason, replay.round) == ("done", "noMoreRounds", 3), replay.detail
        assert graph_dump(home, replay.mission_id) == graph_dump(home, first.mission_id)
        assert replay.usage == continued.usage


def test_a_mission_stopped_and_resumed_replays_whole(home: Path) -> None:
    from cabal.rounds import stop_mission

    def stop_in_round_one(event) -> None:
        if event.kind == "round_start" and event.round == 1:
            stop_mission(event.mission, home=home)

    # The busy team keeps work open in every round: the user's stop, not the Chair, ends round 1.
    first = run_mission(LAUNCH, home=home, model=BUSY, rounds=3, on_event=stop_in_round_one)
    assert (first.state, first.stop_reason, first.round) == ("done", "userHalt", 1)
    resumed = resume_mission(first.mission_id, home=home)
    assert (resumed.state, resumed.round) == ("done", 3), resumed.detail
    replay = replay_mission(first.mission_id, home=home)
    assert (replay.state, replay.stop_reason, replay.round) == ("done", "noMoreRounds", 3), replay.detail
    assert graph_dump(home, replay.mission_id) == graph_dump(home, first.mission_id)


def test_a_replay_reads_the_sources_the_mission_read_a_source_option_included(home: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("# Pricing notes\n\nStudents pay 3 dollars a month.\n")
    recorded = run_mission(LAUNCH, home=home, model="simulated", rounds=1, sources=[str(notes)])
    assert recorded.state == "done", recorded.detail
    notes.write_text("# Pricing notes\n\nEveryone pays 9 dollars a month.\n")  # changed since: the replay reads what was read
    replay = replay_mission(recorded.mission_id, home=home)
    assert replay.state == "done", replay.detail
    dump = graph_dump(home, replay.mission_id)
    assert dump == graph_dump(home, recorded.mission_id)
    chunks = [json.loads(row) for row in dump if '"node_type": "chunk"' in row]
    assert [chunk["text"] for chunk in chunks] == ["# Pricing notes\n\nStudents pay 3 dollars a month."]
