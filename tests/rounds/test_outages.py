"""The model's API fails (rate limits, overload, 5xx, a hang, a dropped connection, a body that is
not a message): the mission retries, then pauses ``interrupted``, and resumes to the same
result as an undisturbed run. Through the real Claude client, against the local fake API.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from pathlib import Path

import pytest

from cabal.errors import ModelError
from cabal.graph import ContextGraph
from cabal.llm import FunctionChatModel, ModelRequest
from cabal.rounds.api import resume_mission, run_mission
from cabal.rounds.control import mission_status
from cabal.rounds.events import MissionInterrupted, ModelRetried
from cabal.rounds.mission import load_mission
from tests.llm.fake_anthropic import (
    CannedResponse, Disconnect, FakeAnthropic, Hang, error_body, failure_headers, fake_api,
)
from tests.llm.script_responder import script_responder

from .players import LAUNCH_MISSION, LAUNCH_SCRIPT, ScriptPlayer

MODEL = {"name": "claude-sonnet-4-6", "max_retries": 2, "timeout_s": 0.5}  # three tries a call, half a second each


def overloaded(status: int, error: str, retry_after: float | None = 0.01) -> CannedResponse:
    return CannedResponse(status, error_body(error, "try later"), failure_headers(retry_after))


class Outages:
    """A responder that, before its n-th real answer, serves a burst of failures (one per request)."""

    def __init__(self, plan: dict[int, list], responder=None) -> None:
        self.answer = responder or script_responder(LAUNCH_SCRIPT)
        self.plan = plan
        self.answers = 0
        self.burst: deque = deque()
        self.lock = threading.Lock()

    def __call__(self, body: dict):
        with self.lock:
            if not self.burst and self.answers + 1 in self.plan:
                self.burst.extend(self.plan.pop(self.answers + 1))
            if self.burst:
                return self.burst.popleft()
            self.answers += 1
        return self.answer(body)


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    with fake_api(monkeypatch, "sk-ant-test-outages") as server:
        yield server


def the_work(home: Path, mission_id: str) -> dict:
    """What a mission produced: products and their fate, versions and their text, decisions, the
    conversation. Ids are deterministic, so two runs of one mission compare as they are."""
    with ContextGraph.open(name=mission_id, home=home) as graph:
        return {
            "products": sorted((p["id"], p["status"], p.get("accepted_version")) for p in graph.find("product")),
            "versions": sorted((v["id"], v["product_id"], v["number"], v["content"]) for v in graph.find("version")),
            "decisions": sorted((a["id"], a["accepted"]) for a in graph.find("acceptance")),
            "messages": sorted((m["id"], m["as_agent"], m["content"]) for m in graph.find("message")),
            "turns": sorted(t["id"] for t in graph.find("moment", {"type": "turn"})
                            if t.get("outcome") != "interrupted"),
        }


def launch() -> object:
    spec, _ = load_mission(LAUNCH_MISSION)
    return spec.model_copy(update={"model": None})


def test_outages_pause_the_mission_and_resume_finishes_it_as_if_nothing_happened(api: FakeAnthropic,
                                                                                  graph_server) -> None:
    home = graph_server.home
    api.respond_with(Outages({}))
    calm = run_mission(launch(), model="claude-sonnet-4-6", home=home, model_settings=MODEL)
    assert (calm.state, calm.stop_reason) == ("done", "concluded")

    # Before the 3rd answer (round 1's plan: round 1 has nothing to reflect on) three rate limits
    # and overloads; before the 12th (round 2's plan) a hang past the timeout, a dropped connection
    # and a body that is no message.
    api.respond_with(Outages({
        3: [overloaded(429, "rate_limit_error"), overloaded(529, "overloaded_error"),
            overloaded(500, "api_error", retry_after=None)],
        12: [Hang(seconds=1.5), Disconnect("before_response"), CannedResponse(200, b"<html>502 Bad Gateway</html>")],
    }))
    events: list = []

    first = run_mission(launch(), model="claude-sonnet-4-6", home=home, model_settings=MODEL, on_event=events.append)

    assert (first.state, first.stop_reason, first.round) == ("interrupted", None, 1)
    assert first.detail.startswith("the model is unavailable: anthropic returned 500 api_error: try later")
    assert mission_status(first.mission_id, home=home).state == "interrupted"
    retries = [(e.step, e.retry, e.wait_s) for e in events if isinstance(e, ModelRetried)]
    assert retries == [("plan", 1, 0.01), ("plan", 2, 0.01)]  # the server's retry-after was honoured
    assert [e.hint for e in events if isinstance(e, MissionInterrupted)] == [f"cabal resume {first.mission_id}"]

    second = resume_mission(first.mission_id, home=home, model_settings=MODEL)

    assert (second.state, second.round) == ("interrupted", 2)
    assert second.detail.startswith("the model is unavailable: the model's reply could not be read (JSONDecodeError")

    third = resume_mission(first.mission_id, home=home, model_settings=MODEL)

    assert (third.state, third.stop_reason, third.round) == ("done", "concluded", 2)
    assert the_work(home, first.mission_id) == the_work(home, calm.mission_id)


def test_a_step_replayed_after_an_outage_gives_each_turn_the_prompt_of_the_first_run(graph_server) -> None:
    # Round 1's Write: operative-2's call fails for good; operative-1 finishes its turn, and its
    # version commits with the step before the outage stops the mission. The step is then
    # partly committed, and operative-2's turn runs again on resume.
    home = graph_server.home
    first = ScriptPlayer()

    def outage_for_one(request: ModelRequest):
        answer = first(request)  # recorded with its prompt, as a real provider would have received it
        if (request.key.round, request.key.step, request.key.agent) == (1, "write", "operative-2"):
            raise ModelError("the provider went away", transient=True)
        return answer

    stopped = run_mission(launch(), model=FunctionChatModel(outage_for_one), home=home)

    assert (stopped.state, stopped.round) == ("interrupted", 1)
    with ContextGraph.open(name=stopped.mission_id, home=home) as graph:
        assert graph.exists("r1.write.operative-1.write_version0") and not graph.exists("r1.write.operative-2")

    again = ScriptPlayer()
    resumed = resume_mission(stopped.mission_id, model=again.model(), home=home)

    assert (resumed.state, resumed.stop_reason) == ("done", "concluded")
    assert again.calls_of(1, "write", "operative-1") == []  # committed: not run again
    replayed, original = again.calls_of(1, "write", "operative-2")[0], first.calls_of(1, "write", "operative-2")[0]
    assert replayed.messages == original.messages  # byte for byte: the sibling's new version is not in it
