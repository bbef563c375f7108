"""`cabal serve` speaks AG-UI 1.0 at POST /ag-ui: a real server on a free port (uvicorn in a
thread), runs posted as the protocol's ``RunAgentInput``, and every streamed event parsed with
the protocol package's own models. The team is the launch example's, scripted (the Chair asks
who Margin is for first)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import jsonpatch
import pytest
from ag_ui.core import (Event, EventType, RunAgentInput, RunErrorEvent, RunFinishedEvent, StateDeltaEvent,
                        StateSnapshotEvent, TextMessageContentEvent, TextMessageStartEvent, UserMessage)
from pydantic import TypeAdapter

from cabal.rounds import mission_report, mission_status, run_mission
from cabal.rounds.workspace import Workspace
from cabal.web.server import WebServer
from tests.web.conftest import serve_in_thread

ROOT = Path(__file__).resolve().parents[2]
EVENTS = TypeAdapter(Event)
REQUEST = "Plan the launch of Margin, our note-taking app, for next quarter."
QUESTION = ("Who is Margin for at launch, students or teachers? The brief, the price and the checklist all depend on "
            "it.")
ACCEPTED = ["Launch brief", "Pricing decision", "Launch-day checklist"]


@contextmanager
def serving(workspace: Workspace, host: str = "127.0.0.1") -> Iterator[WebServer]:
    server = WebServer(workspace, host, 0, poll_s=0.2)
    thread = serve_in_thread(server)
    try:
        yield server
    finally:
        server.stop()
        thread.join(timeout=20)


def run_input(thread_id: str, text: str | None, **fields: Any) -> dict:
    """A ``RunAgentInput`` as a client sends it (camelCase JSON), checked by the protocol's model."""
    messages = [UserMessage(id=str(uuid.uuid4()), content=text)] if text is not None else []
    chosen = RunAgentInput(thread_id=thread_id, run_id=str(uuid.uuid4()), messages=messages, state={}, tools=[],
                           context=[], **fields)
    return chosen.model_dump(mode="json", by_alias=True)


def post(server: WebServer, body: dict, *, host: str = "127.0.0.1", **headers: str) -> httpx.Response:
    return httpx.post(f"http://{host}:{server.port}/ag-ui", json=body, timeout=120,
                      headers={"accept": "text/event-stream", **headers})


def streamed(response: httpx.Response) -> list[Any]:
    """Every event of the stream, each parsed by the protocol's own models (one ``data:`` line each)."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    blocks = [block for block in response.text.split("\n\n") if block.strip()]
    assert all(block.startswith("data: ") and "\n" not in block for block in blocks), blocks
    return [EVENTS.validate_json(block.removeprefix("data: ")) for block in blocks]


def state_of(events: list[Any], start: dict | None = None) -> dict:
    """The client's state at the end: the snapshot, then every delta applied as JSON Patch."""
    state = start
    for event in events:
        if isinstance(event, StateSnapshotEvent):
            state = event.snapshot
        elif isinstance(event, StateDeltaEvent):
            state = jsonpatch.apply_patch(state, [op if isinstance(op, dict) else op.model_dump(by_alias=True)
                                                  for op in event.delta])
    assert state is not None
    return state


def texts(events: list[Any]) -> list[tuple[str | None, str]]:
    names = {e.message_id: e.name for e in events if isinstance(e, TextMessageStartEvent)}
    return [(names[e.message_id], e.delta) for e in events if isinstance(e, TextMessageContentEvent)]


def kinds(events: list[Any]) -> list[str]:
    return [event.type.value for event in events]


def test_a_thread_asks_its_question_as_an_interrupt_and_the_answer_after_a_restart_runs_it_to_its_end(
        workspace: Workspace) -> None:
    thread = str(uuid.uuid4())
    launch = {"cabal": {"example": "launch"}}
    with serving(workspace) as server:
        first = streamed(post(server, run_input(thread, REQUEST, forwarded_props=launch)))

    mission_id = f"m-{thread}"
    assert kinds(first)[:3] == ["RUN_STARTED", "STATE_SNAPSHOT", "STEP_STARTED"]
    assert (first[0].thread_id, first[1].snapshot["mission"]) == (thread, mission_id)
    assert [e.step_name for e in first if e.type == EventType.STEP_STARTED] == ["round 0: bootstrap"]
    assert kinds(first).count("STEP_STARTED") == kinds(first).count("STEP_FINISHED")
    assert [said for said in texts(first) if QUESTION in said[1]] == [
        ("chair-1", QUESTION + " (options: students, teachers, both)")]  # once, with its options
    end = first[-1]
    assert isinstance(end, RunFinishedEvent) and end.outcome is not None and end.outcome.type == "interrupt"
    (interrupt,) = end.outcome.interrupts
    assert (interrupt.reason, interrupt.message) == ("question", QUESTION)
    assert interrupt.response_schema == {"type": "string", "description": "your answer (the options are suggestions)",
                                         "examples": ["students", "teachers", "both"]}
    waiting = state_of(first)
    assert (waiting["state"], waiting["question"]) == ("halted", QUESTION)
    assert mission_report(mission_id, home=workspace.home).mission.request == REQUEST

    # The server stops and starts again: the thread's mission waits in the workspace, and the
    # interrupt's resume entry answers it.
    with serving(workspace) as restarted:
        resume = [{"interruptId": interrupt.id, "status": "resolved",
                   "payload": "Students first: university students who take lecture notes."}]
        second = streamed(post(restarted, run_input(thread, None, resume=resume)))

    assert kinds(second)[:2] == ["RUN_STARTED", "STATE_SNAPSHOT"]
    assert second[1].snapshot == waiting  # the snapshot is where the first run left the client
    steps = [e.step_name for e in second if e.type == EventType.STEP_STARTED]
    assert steps == ["round 0: bootstrap",  # the question was the Chair's at bootstrap, which goes on
                     "round 1: plan", "round 1: write", "round 1: peer_review", "round 1: inspect",
                     "round 1: close", "round 1: presentation", "round 2: reflect", "round 2: plan",
                     "round 2: write", "round 2: peer_review", "round 2: inspect", "round 2: close",
                     "round 2: presentation"]  # round 2's closing decisions accept the last products and end it
    assert kinds(second).count("STEP_STARTED") == kinds(second).count("STEP_FINISHED")
    end = second[-1]
    assert isinstance(end, RunFinishedEvent) and end.outcome is None  # absent: success
    assert end.result == {"mission": mission_id, "state": "done", "stop_reason": "concluded", "round": 2}
    speakers = {name for name, _ in texts(second)}
    assert {"Ada", "Brook"} <= speakers  # the operatives, by the team's own names
    final = state_of(second, waiting)
    report = mission_report(mission_id, home=workspace.home)
    assert final["state"] == "done" and final["question"] is None
    # The snapshot and every delta, applied, make the product tree the mission holds.
    assert {pid: (p["name"], p["status"], p["version"], p["content"]) for pid, p in final["products"].items()} == \
        {p.id: (p.name, p.status, p.latest.number if p.latest else None, p.shown.content if p.shown else None)
         for p in report.live_products}
    assert sorted(p["name"] for p in final["products"].values() if p["status"] == "accepted") == sorted(ACCEPTED)
    assert mission_status(mission_id, home=workspace.home).state == "done"


def test_a_cancelled_interrupt_stops_the_mission(workspace: Workspace) -> None:
    thread = f"m-agui-{uuid.uuid4().hex[:12]}"  # a mission id is its own thread id
    with serving(workspace) as server:
        first = streamed(post(server, run_input(thread, REQUEST, forwarded_props={"cabal": {"example": "launch"}})))
        interrupt = first[-1].outcome.interrupts[0]
        second = streamed(post(server, run_input(thread, None, resume=[{"interruptId": interrupt.id,
                                                                         "status": "cancelled"}])))
    assert kinds(second) == ["RUN_STARTED", "STATE_SNAPSHOT", "STATE_DELTA", "RUN_FINISHED"]
    assert second[1].snapshot["question"] == QUESTION
    assert sorted((op.op, op.path, op.value) for op in second[2].delta) == [
        ("replace", "/question", None), ("replace", "/state", "done"), ("replace", "/stop_reason", "userHalt")]
    assert second[-1].outcome.type == "cancelled"
    ended = mission_status(thread, home=workspace.home)
    assert (ended.state, ended.stop_reason) == ("done", "userHalt")


@pytest.mark.parametrize(("props", "error"), [
    ({"cabal": {"exmaple": "launch"}}, "forwardedProps.cabal: exmaple: Extra inputs are not permitted (it may "
                                       "hold example, mission and model)"),
    ({"cabal": {"example": "moon"}}, "no example named 'moon'; the examples are: foodbank, launch, research, "
                                     "sources, team"),
    ({"cabal": {"mission": {"rounds": "many"}}}, "forwardedProps.cabal.mission: invalid mission: rounds: Input "
                                                 "should be a valid integer, unable to parse string as an integer"),
])
def test_a_new_thread_with_settings_it_cannot_use_ends_in_a_run_error(workspace: Workspace, props: dict,
                                                                       error: str) -> None:
    with serving(workspace) as server:
        events = streamed(post(server, run_input(str(uuid.uuid4()), REQUEST, forwarded_props=props)))
    assert kinds(events) == ["RUN_STARTED", "RUN_ERROR"]
    assert isinstance(events[1], RunErrorEvent) and events[1].message == error


SCRIPT = f"scripted:{ROOT / 'examples' / 'launch' / 'launch.script.yaml'}"


@pytest.mark.parametrize(("props", "refused"), [
    ({"model": SCRIPT}, f"The model {SCRIPT!r} cannot be chosen here"),
    ({"mission": {"model": "py:os:getcwd"}}, "The model 'py:os:getcwd' cannot be chosen here"),
    ({"mission": {"team": {"cards": "/etc"}}}, "a mission started over AG-UI cannot name a folder of role cards"),
])
def test_a_client_may_not_make_the_server_read_its_files_or_run_its_code(workspace: Workspace, props: dict,
                                                                       refused: str) -> None:
    with serving(workspace) as server:
        events = streamed(post(server, run_input(str(uuid.uuid4()), REQUEST, forwarded_props={"cabal": props})))
    assert kinds(events) == ["RUN_STARTED", "RUN_ERROR"]
    assert events[1].message.startswith(refused)


def test_a_body_that_is_no_run_input_is_refused_naming_its_field(workspace: Workspace) -> None:
    with serving(workspace) as server:
        missing = post(server, {"threadId": "t", "messages": []})
        not_json = httpx.post(f"http://127.0.0.1:{server.port}/ag-ui", content=b"{}",
                              headers={"content-type": "text/plain"})
    assert (missing.status_code, missing.json()) == (400, {"ok": False, "error": "The body is not an AG-UI "
                                                           "RunAgentInput: runId: Field required."})
    assert not_json.status_code == 415


def test_the_endpoint_keeps_the_web_rooms_rule_loopback_or_its_token(workspace: Workspace) -> None:
    body = run_input(str(uuid.uuid4()), "")
    with serving(workspace, host="0.0.0.0") as server:
        assert (f"AG-UI clients (CopilotKit, ...) post runs to http://127.0.0.1:{server.port}/ag-ui with the header "
                "'Authorization: Bearer <the token>'") in server.banner().splitlines()
        assert post(server, body).status_code == 401
        assert post(server, body, authorization="Bearer wrong").status_code == 403
        with_token = post(server, body, authorization=f"Bearer {server.security.token}")
    assert kinds(streamed(with_token)) == ["RUN_STARTED", "RUN_ERROR"]  # let in: it has no request
    with serving(workspace) as local:
        assert f"AG-UI clients (CopilotKit, ...) post runs to http://127.0.0.1:{local.port}/ag-ui" in \
            local.banner().splitlines()
        assert post(local, body, host="127.0.0.1", Host="attacker.example").status_code == 400
        # Another site's page, in a browser, may not start a mission on this machine.
        assert post(local, body, origin="http://attacker.example").status_code == 403


def test_the_example_client_runs_a_mission_and_answers_its_question(workspace: Workspace) -> None:
    with serving(workspace) as server:
        client = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "agui" / "client.py"), f"http://127.0.0.1:{server.port}/ag-ui",
             REQUEST, "--example", "launch"],
            input="Students first.\n", capture_output=True, text=True, timeout=300,
            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert client.returncode == 0, client.stderr
    lines = client.stdout.splitlines()
    assert f"chair-1: {QUESTION} (options: students, teachers, both)" in lines
    assert lines[lines.index(f"chair-1: {QUESTION} (options: students, teachers, both)") + 1] == \
        f"? {QUESTION} (students / teachers / both)"
    assert "-- round 2: presentation" in lines
    assert lines[-2:] == ["run finished: done (concluded), round 2", "accepted: " + ", ".join(ACCEPTED)]


def test_a_mission_file_s_settings_start_a_thread_and_its_next_message_takes_it_further(
        workspace: Workspace) -> None:
    thread = str(uuid.uuid4())
    props = {"cabal": {"mission": {"name": "picnic", "team": {"operatives": 1}, "rounds": 1}, "model": "simulated"}}
    with serving(workspace) as server:
        first = streamed(post(server, run_input(thread, "Plan a picnic.", forwarded_props=props)))
        second = streamed(post(server, run_input(thread, "Add a rain plan.")))

    mission_id = f"m-{thread}"
    # The simulated team's round 1 closing decisions accept every product and end the mission.
    assert first[-1].result == {"mission": mission_id, "state": "done", "stop_reason": "concluded", "round": 1}
    assert first[1].snapshot["name"] == "picnic"
    assert second[1].snapshot == state_of(first)  # the thread goes on from where the client was left
    assert [e.step_name for e in second if e.type == EventType.STEP_STARTED][0] == "round 2: plan"  # the direction
    assert isinstance(second[-1], RunFinishedEvent) and second[-1].result["round"] == 2
    conversation = mission_report(mission_id, home=workspace.home).conversation
    assert [line.text for line in conversation if line.kind == "direction"] == ["Add a rain plan."]


def test_a_paused_mission_resumes_on_its_thread(workspace: Workspace) -> None:
    flaky_team = importlib.import_module("tests.web.flaky_team")  # the module the model spec names
    flaky_team.failures_left = 1
    paused = run_mission({"request": "Plan a picnic.", "team": {"operatives": 1}, "rounds": 1},
                         model="py:tests.web.flaky_team:team", home=workspace.home)
    with serving(workspace) as server:
        resumed = streamed(post(server, run_input(paused.mission_id, "Go on.")))

    assert paused.state == "interrupted"
    assert resumed[1].snapshot["state"] == "interrupted"
    assert resumed[-1].result == {"mission": paused.mission_id, "state": "done", "stop_reason": "concluded",
                                  "round": 1}
    assert state_of(resumed)["state"] == "done"


def test_a_run_that_fails_ends_in_a_run_error(workspace: Workspace) -> None:
    flaky_team = importlib.import_module("tests.web.flaky_team")
    flaky_team.failures_left = 1
    paused = run_mission({"request": "Plan a picnic.", "team": {"operatives": 1}, "rounds": 1},
                         model="py:tests.web.flaky_team:team", home=workspace.home)
    flaky_team.failures_left = 10  # it stays down through the resumed run's retries
    with serving(workspace) as server:
        again = streamed(post(server, run_input(paused.mission_id, "Go on.")))
    assert isinstance(again[-1], RunErrorEvent)
    assert (again[-1].code, again[-1].message) == (
        "interrupted", f"mission {paused.mission_id} is interrupted: the model is unavailable: the provider is down "
                       "(a test)")


def test_without_the_agui_extra_the_endpoint_says_how_to_install_it(client, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("cabal.web.agui", "cabal.web.agui_events", "ag_ui.core", "ag_ui.encoder"):
        monkeypatch.delitem(sys.modules, name, raising=False)  # imported again, at the first run
    monkeypatch.setitem(sys.modules, "ag_ui", None)  # as if the package were not installed
    refused = client.post("/ag-ui", json=run_input("t", "Plan a picnic."))
    assert (refused.status_code, refused.json()) == (501, {"ok": False, "error": (
        "This server speaks AG-UI once the ag-ui-protocol package is installed: pip install 'cabal-agents[agui]', "
        "then start it again.")})
