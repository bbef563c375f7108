"""`cabal a2a`: the team as an A2A agent, driven with the SDK's own client against a real server on
127.0.0.1 (uvicorn in a thread), the Chair scripted by examples/launch (it asks a question first)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import (CancelTaskRequest, GetTaskRequest, Message, Part, Role, SendMessageRequest, StreamResponse,
                       TaskState)

from cabal.a2a.server import A2AServer
from cabal.rounds import mission_report, mission_status, stop_mission
from cabal.rounds.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = ROOT / "examples" / "launch"
SLOW = ROOT / "tests" / "rounds" / "data" / "slow_factory.py"
QUESTION = ("Who is Margin for at launch, students or teachers? The brief, the price and the checklist all depend on "
            "it. (options: students, teachers, both)")
REQUEST = "Plan the launch of Margin, our note-taking app, for next quarter."


@pytest.fixture(scope="module")
def home(graph_server) -> str:
    return str(graph_server.home)


@pytest.fixture(scope="module")
def mission(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The launch example without its unattended answer: the Chair's question reaches the caller."""
    text = (LAUNCH / "launch.mission.yaml").read_text()
    text = text.split("\nanswers:")[0].replace("scripted:launch.script.yaml", f"scripted:{LAUNCH / 'launch.script.yaml'}")
    path = tmp_path_factory.mktemp("a2a") / "launch.mission.yaml"
    path.write_text(text + "\n")
    return path


@contextmanager
def serving(home: str, mission: Path, **options) -> Iterator[A2AServer]:
    """A real server on a free port, in a thread, stopped on the way out."""
    server = A2AServer(Workspace.at(home), mission, port=0, **options)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield server
    finally:
        server.stop()
        thread.join(timeout=20)


def said(text: str, task: StreamResponse | None = None) -> SendMessageRequest:
    """A user's message: a new task's request, or (``task``: a task's last status update) its answer."""
    message = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text=text)])
    if task is not None:
        message.task_id, message.context_id = task.status_update.task_id, task.status_update.context_id
    return SendMessageRequest(message=message)


def texts(update: StreamResponse) -> str:
    return "\n".join(part.text for part in update.status_update.status.message.parts)


async def streamed(server: A2AServer, request: SendMessageRequest) -> list[StreamResponse]:
    client = await create_client(server.url, client_config=ClientConfig(streaming=True))
    async with client:
        return [update async for update in client.send_message(request)]


def states(updates: list[StreamResponse]) -> list[int]:
    return [u.status_update.status.state for u in updates if u.HasField("status_update")]


def test_a_task_asks_its_question_then_completes_with_the_accepted_products(home: str, mission: Path) -> None:
    with serving(home, mission) as server:
        first = asyncio.run(streamed(server, said(REQUEST)))
        assert first[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
        task_id = first[0].task.id
        assert states(first) == [TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_INPUT_REQUIRED]
        assert texts(first[-1]) == QUESTION

        second = asyncio.run(streamed(server, said("Students first: university students who take lecture notes.",
                                                   first[-1])))

    # Every round's start and the Envoy's lines stream as they happen, then the artifacts, then done.
    working = [texts(u) for u in second if u.HasField("status_update")
               and u.status_update.status.state == TaskState.TASK_STATE_WORKING and texts(u)]
    assert [line for line in working if line.startswith("round ")] == ["round 1 begins", "round 2 begins"]
    assert len(working) > 3  # and the Envoy's lines between them
    assert states(second)[-1] == TaskState.TASK_STATE_COMPLETED
    report = mission_report(task_id, home=home)  # the task's id is the mission's
    assert report.mission.request == REQUEST
    accepted = [(p.id, p.name, p.shown.content) for p in report.live_products if p.status == "accepted"]
    assert [p[1] for p in accepted] == ["Launch brief", "Pricing decision", "Launch-day checklist"]
    artifacts = [(u.artifact_update.artifact.artifact_id, u.artifact_update.artifact.name,
                  u.artifact_update.artifact.parts[0].text) for u in second if u.HasField("artifact_update")]
    assert artifacts == accepted
    assert mission_status(task_id, home=home).state == "done"


def test_a_task_waiting_for_its_answer_is_answerable_after_the_server_restarts(home: str, mission: Path) -> None:
    with serving(home, mission) as server:
        first = asyncio.run(streamed(server, said(REQUEST)))
    task_id, context_id = first[0].task.id, first[0].task.context_id

    with serving(home, mission) as restarted:
        async def read() -> tuple:
            client = await create_client(restarted.url, client_config=ClientConfig(streaming=True))
            async with client:
                return await client.get_task(GetTaskRequest(id=task_id))

        waiting = asyncio.run(read())
        assert (waiting.context_id, waiting.status.state) == (context_id, TaskState.TASK_STATE_INPUT_REQUIRED)
        assert "\n".join(p.text for p in waiting.status.message.parts) == QUESTION
        answered = asyncio.run(streamed(restarted, said("Students first.", first[-1])))

    assert states(answered)[-1] == TaskState.TASK_STATE_COMPLETED
    assert [u.artifact_update.artifact.name for u in answered if u.HasField("artifact_update")] == \
        ["Launch brief", "Pricing decision", "Launch-day checklist"]


@pytest.mark.parametrize("how", ["a2a cancel", "cabal stop"])
def test_a_running_task_is_canceled_and_its_mission_stops(home: str, mission: Path, how: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CABAL_TEST_LATENCY", "0.2")  # each call takes a while: the mission is running
    with serving(home, mission, model=f"py:{SLOW}:launch_model") as server:
        first = asyncio.run(streamed(server, said(REQUEST)))
        task_id = first[0].task.id

        async def answer_then_stop() -> tuple[list[StreamResponse], object]:
            client = await create_client(server.url, client_config=ClientConfig(streaming=True))
            seen: list[StreamResponse] = []
            canceled = None
            async with client:
                async for update in client.send_message(said("Students first.", first[-1])):
                    seen.append(update)
                    if update.HasField("status_update") and texts(update) == "round 1 begins":
                        if how == "a2a cancel":
                            canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
                            break
                        await asyncio.to_thread(stop_mission, task_id, home=home)
                if canceled is None:
                    canceled = await client.get_task(GetTaskRequest(id=task_id))
            return seen, canceled

        seen, task = asyncio.run(answer_then_stop())
        assert task.status.state == TaskState.TASK_STATE_CANCELED
        deadline = time.monotonic() + 60  # the team stops at the start of its next round
        while mission_status(task_id, home=home).state != "done":
            assert time.monotonic() < deadline, "the mission did not stop"
            time.sleep(0.2)
    ended = mission_status(task_id, home=home)
    assert (ended.stop_reason, ended.round) == ("userHalt", 1)
    if how == "cabal stop":  # the stream itself ends canceled
        assert states(seen)[-1] == TaskState.TASK_STATE_CANCELED


def test_beyond_loopback_the_server_asks_for_its_token(home: str, mission: Path) -> None:
    with serving(home, mission, host="0.0.0.0") as server:
        card = f"http://127.0.0.1:{server.port}/.well-known/agent-card.json"
        assert httpx.get(card).status_code == 401
        assert httpx.get(card, headers={"Authorization": "Bearer wrong"}).status_code == 403
        shown = httpx.get(card, headers={"Authorization": f"Bearer {server.security.token}"})
    assert shown.status_code == 200
    assert shown.json()["securitySchemes"] == {"bearer": {"httpAuthSecurityScheme": {
        "scheme": "Bearer", "description": "the token `cabal a2a` printed when it started"}}}
    with serving(home, mission) as local:  # on loopback: no token, but only loopback Host names
        url = f"http://127.0.0.1:{local.port}/.well-known/agent-card.json"
        assert httpx.get(url).json()["name"] == "Cabal team: launch-plan"
        assert httpx.get(url, headers={"Host": "attacker.example"}).status_code == 400


def test_cabal_a2a_refuses_a_mission_file_it_cannot_read(tmp_path: Path, home: str) -> None:
    from tests.rounds.test_cli import cabal

    broken = tmp_path / "team.mission.yaml"
    broken.write_text("request: Plan it.\nrounds: many\n")

    refused = cabal("a2a", str(broken), "--home", home, "--port", "0")

    assert refused.returncode == 2
    assert refused.stderr == (f"cabal: {broken}:2: invalid mission: rounds: Input should be a valid integer, unable "
                              "to parse string as an integer\n")


def test_a_task_canceled_while_it_waits_stays_canceled_and_its_mission_ends_at_once(home: str,
                                                                                          mission: Path) -> None:
    with serving(home, mission) as server:
        first = asyncio.run(streamed(server, said(REQUEST)))
        task_id = first[0].task.id

        async def cancel() -> object:
            client = await create_client(server.url, client_config=ClientConfig(streaming=True))
            async with client:
                return await client.cancel_task(CancelTaskRequest(id=task_id))

        assert asyncio.run(cancel()).status.state == TaskState.TASK_STATE_CANCELED
    with serving(home, mission) as restarted:
        async def read() -> object:
            client = await create_client(restarted.url, client_config=ClientConfig(streaming=True))
            async with client:
                return await client.get_task(GetTaskRequest(id=task_id))

        assert asyncio.run(read()).status.state == TaskState.TASK_STATE_CANCELED
    # The mission was stopped with its task: it ended at once, its question withdrawn, unanswered.
    from cabal.rounds import mission_status

    ended = mission_status(task_id, home=home)
    assert (ended.state, ended.stop_reason, ended.round) == ("done", "userHalt", 0)
