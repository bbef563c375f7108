"""The pages and what they change, through Starlette's test client (no socket, no browser): the
missions list, a mission's page, answering, say, stop, the exports, starting missions from the
form, an example or an uploaded file, and every bad request a clear 4xx."""

from __future__ import annotations

import importlib
import json
import re
from html import unescape
from pathlib import Path

import pytest
import yaml
from starlette.testclient import TestClient

from cabal import mission_status, run_mission
from cabal.exports import render_mission as render_report
from cabal.report.html import when
from cabal.batch.store import BatchMembers
from cabal.rounds.workspace import Workspace, mission_graph, mission_report
from cabal.web.app import MAX_BODY
from cabal.web.forms import MAX_UPLOAD, SIMULATED
from cabal.web.state import MissionGroup, MissionRow, WorkspaceReader, group_missions

from tests.polling import wait_until

from .conftest import QUESTION, QUESTION_SCRIPT

QUESTION_TEXT = "Who reads the README first, people installing tally or people contributing to it?"
REQUEST_TEXT = ("Write the opening paragraph of the README for tally, a command-line tool that counts lines of code "
                "per language.")


def text(response) -> str:
    """The page's text as a person reads it: tags dropped, entities decoded, spaces squeezed."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", response.text)).split())


def row_of(page: str, mission_id: str) -> str:
    return re.search(rf'<a class="mission-row[^"]*" href="/missions/{mission_id}".*?</a>', page, re.S).group(0)


@pytest.fixture
def asking(graph_server) -> str:
    """A mission halted at bootstrap on its Chair's question (as `cabal run` leaves it)."""
    return run_mission(QUESTION, home=graph_server.home).mission_id


def json_post(client: TestClient, path: str, security, **form: str):
    """A POST as the page's script sends it."""
    return client.post(path, data=form, headers={"accept": "application/json", "x-csrf-token": security.csrf})


def done(graph_server, mission_id: str):
    return wait_until(lambda: (s := mission_status(mission_id, home=graph_server.home)).state in ("done", "failed")
                      and s, what=f"{mission_id} to end")


# ------------------------------------------------------------------------------ reading


def test_the_missions_list_shows_state_round_question_and_spend(client: TestClient, asking: str, graph_server) -> None:
    status = mission_status(asking, home=graph_server.home)

    row = " ".join(unescape(re.sub(r"<[^>]+>", " ", row_of(client.get("/").text, asking))).split())

    started = when(mission_report(asking, home=graph_server.home).mission.started_at)
    assert row == (f"readme-intro {REQUEST_TEXT} {asking} · started {started} · model scripted:question.script.yaml "
                   f"halted waiting for your answer round 0 of 3 Waiting for you: {QUESTION_TEXT} "
                   f"{status.usage.total_tokens:,} tokens $0.0000 of $2.00")  # every mission has a budget: $2 by default


def _row(mission_id: str, active_at: float) -> MissionRow:
    return MissionRow(id=mission_id, name="x", request="r", model=None, started_at=None, state="done", stop_reason=None, round=1, rounds=2, question=None,
                      tokens=0, cost="$0.0000", budget_tokens=None, budget_cost_usd=None, driver=None, active_at=active_at)


def test_the_list_groups_a_batchs_missions_under_the_batch_and_the_rest_after() -> None:
    rows = [_row(mission_id, 9 - n) for n, mission_id in enumerate(["m-a-1", "m-loose-1", "m-b-1", "m-a-2", "m-b-2"])]
    old = BatchMembers("b-old-00000001", "old", ("m-b-1", "m-b-2", "m-gone-1"))
    new = BatchMembers("b-new-00000002", "new", ("m-a-1", "m-a-2", "m-b-2"))  # m-b-2 is the older batch's

    groups = group_missions(rows, [old, new])

    assert [(group.title, [row.id for row in group.rows]) for group in groups] == [
        ("Batch new (b-new-00000002)", ["m-a-1", "m-a-2"]),  # its newest mission is the list's first
        ("Batch old (b-old-00000001)", ["m-b-1", "m-b-2"]),
        (None, ["m-loose-1"]),
    ]
    assert group_missions(rows) == (MissionGroup(None, tuple(rows)),)
    assert group_missions([], [old]) == ()


def test_a_batch_run_in_the_workspace_is_a_titled_group_of_the_list(client: TestClient, workspace: Workspace,
                                                                   tmp_path: Path) -> None:
    from cabal.batch import run_batch

    plan = tmp_path / "grouped.batch.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "grouped", "requests": ["Write the README's opening.", "Write the README's install section."],
        "mission": {"team": {"operatives": 1}, "rounds": 3, "model": f"scripted:{QUESTION_SCRIPT}",
                    "answers": ["People installing it."]}}))
    batch = run_batch(plan, workers=2, home=workspace.home)
    alone = run_mission(QUESTION, home=workspace.home).mission_id
    reader = WorkspaceReader(workspace, lambda mission_id: False)
    try:
        groups = group_missions(reader.rows(), reader.batches())
    finally:
        reader.close()

    members = {row.mission_id for row in batch.report.rows}
    titled = [group for group in groups if group.title == f"Batch grouped ({batch.batch_id})"]
    assert len(titled) == 1 and {row.id for row in titled[0].rows} == members
    assert groups[-1].title is None and alone in {row.id for row in groups[-1].rows}
    assert not members & {row.id for row in groups[-1].rows}
    # The page shows the same: the batch's heading, then its missions' rows in its section.
    page = client.get("/").text
    section = re.search(r'<section class="group">\s*<h2>Batch grouped \(' + batch.batch_id + r'\)</h2>(.*?)</section>',
                        page, re.S)
    assert section is not None
    assert set(re.findall(r'data-mission="([^"]+)"', section.group(1))) == members


def test_a_missions_page_shows_the_question_the_conversation_and_the_usage(client: TestClient, asking: str,
                                                                           security) -> None:
    page = client.get(f"/missions/{asking}")

    assert page.status_code == 200
    assert page.headers["cache-control"] == "no-store"
    read = text(page)
    assert f"chair-1 asks you {QUESTION_TEXT}" in read
    assert f'<input type="hidden" name="csrf" value="{security.csrf}">' in page.text
    assert re.findall(r'name="option" value="([^"]+)"', page.text) == ["users", "contributors"]
    assert f"Round 0 chair-1 asks you: {QUESTION_TEXT} (users / contributors)" in read
    assert "Usage and cost" in read and "Products No products yet: the Chair sets them out in round 0" in read
    assert f'data-live="/live/missions/{asking}"' in page.text


def test_the_exports_are_the_reports_own(client: TestClient, asking: str, graph_server) -> None:
    report = mission_report(asking, home=graph_server.home)
    for chosen in ("html", "md", "json"):
        response = client.get(f"/missions/{asking}/report.{chosen}")
        assert response.status_code == 200
        assert response.text == render_report(report, chosen)
        assert response.headers["content-disposition"] == f'attachment; filename="{asking}.{chosen}"'
    assert json.loads(client.get(f"/missions/{asking}/report.json").text)["mission"]["id"] == asking
    for chosen, start in (("docx", b"PK\x03\x04"), ("pdf", b"%PDF-")):  # the accepted documents, for readers
        response = client.get(f"/missions/{asking}/report.{chosen}")
        assert (response.status_code, response.content[:len(start)]) == (200, start)


# ---------------------------------------------------------------------------- changing


def test_an_answer_sent_by_a_plain_form_resumes_the_mission(client: TestClient, asking: str, security,
                                                            graph_server) -> None:
    sent = client.post(f"/missions/{asking}/answer", data={"csrf": security.csrf, "option": "users"},
                       follow_redirects=False)

    assert (sent.status_code, sent.headers["location"]) == (303, f"/missions/{asking}")
    ended = done(graph_server, asking)
    assert (ended.state, ended.stop_reason, ended.round) == ("done", "concluded", 1)  # closed in the round it passed
    report = mission_report(asking, home=graph_server.home)
    assert [(q.status, q.answer) for q in report.questions] == [("answered", "users")]


def test_say_stop_and_answer_from_the_pages_script(client: TestClient, asking: str, security, graph_server) -> None:
    said = json_post(client, f"/missions/{asking}/say", security, text="Keep it under <b>80</b> words.")
    stopped = json_post(client, f"/missions/{asking}/stop", security)  # it waits for an answer: it ends now
    stopping = mission_report(asking, home=graph_server.home)
    answered = json_post(client, f"/missions/{asking}/answer", security, answer="People installing it.")

    assert said.json() == {"ok": True, "mission": asking,
                           "message": "Message left: the team reads it at the start of its next round."}
    assert stopped.json() == {"ok": True, "mission": asking,
                              "message": "Stopped: the mission ends here; resume it to go on."}
    assert answered.status_code == 409  # its question was withdrawn with the stop
    assert stopping.mission.stop_requested is True
    assert [q.status for q in stopping.questions] == ["withdrawn"]
    assert [(line.kind, line.speaker, line.text) for line in stopping.conversation if line.kind == "note"] == [
        ("note", "you", "Keep it under <b>80</b> words.")]
    ended = done(graph_server, asking)
    assert (ended.state, ended.stop_reason) == ("done", "userHalt")
    page = client.get(f"/missions/{asking}").text
    assert "Keep it under &lt;b&gt;80&lt;/b&gt; words." in page and "<b>80</b>" not in page
    assert "/say" not in page and "/stop" not in page and "/resume" not in page  # an ended mission takes none


def test_what_cannot_be_done_now_is_a_409_with_the_reason(client: TestClient, asking: str, security,
                                                          graph_server) -> None:
    json_post(client, f"/missions/{asking}/answer", security, answer="users")
    done(graph_server, asking)

    again = json_post(client, f"/missions/{asking}/answer", security, answer="contributors")
    stop = json_post(client, f"/missions/{asking}/stop", security)

    assert again.status_code == 409
    assert again.json() == {"ok": False, "error": f"mission {asking} has no pending question to answer"}
    assert stop.status_code == 409
    assert stop.json()["error"] == f"mission {asking} has already ended: done (concluded)"


def test_bad_answers_and_messages_are_400s(client: TestClient, asking: str, security, graph_server) -> None:
    empty = json_post(client, f"/missions/{asking}/answer", security, answer="   ")
    long = json_post(client, f"/missions/{asking}/say", security, text="x" * 20_001)
    product = json_post(client, f"/missions/{asking}/say", security, text="Hello", product="p-elsewhere")

    # What no answer may hold (cabal.limits), refused before the mission is resumed or written to.
    escape = json_post(client, f"/missions/{asking}/answer", security, answer="Users\x1b[2J first")
    nul = json_post(client, f"/missions/{asking}/say", security, text="a note\x00")
    c1 = json_post(client, f"/missions/{asking}/say", security, text="a note \x9b31m")  # a lone surrogate cannot be posted

    assert [r.status_code for r in (empty, long, product, escape, nul, c1)] == [400] * 6
    assert [r.json()["error"] for r in (empty, long, product, escape, nul, c1)] == [
        "Write an answer (or pick an option) first.",
        "The message is 20,001 characters long; at most 20,000 are taken.",
        "That product is not in this mission's tree.",
        "The answer cannot be used: contains an escape character (ESC) at position 5; write plain text.",
        "The message cannot be used: contains a NUL character at position 6; write plain text.",
        "The message cannot be used: contains a control character (U+009B) at position 7; write plain text."]
    status = mission_status(asking, home=graph_server.home)
    assert (status.state, status.pending_halt["message"]) == ("halted", QUESTION_TEXT)
    with mission_graph(Workspace.at(graph_server.home), asking) as graph:
        assert graph.find("collab", {"author": "user"}) == []


# ------------------------------------------------------------------------------ starting


def test_starting_from_the_form_runs_the_simulated_team(client: TestClient, security, graph_server) -> None:
    started = client.post("/missions", data={
        "csrf": security.csrf, "request": "Write a packing list for a week of hiking.", "name": "hike",
        "operatives": "2", "rounds": "2", "budget_tokens": "90000", "budget_cost_usd": "", "model": "simulated",
        "model_name": ""}, follow_redirects=False)

    assert started.status_code == 303
    mission_id = started.headers["location"].removeprefix("/missions/")
    assert re.fullmatch(r"m-hike-[0-9a-f]{6}", mission_id)
    ended = done(graph_server, mission_id)
    report = mission_report(mission_id, home=graph_server.home)
    assert (report.mission.request, report.mission.rounds, report.mission.budget_tokens, report.mission.model) == (
        "Write a packing list for a week of hiking.", 2, 90000, SIMULATED)
    assert [a.id for a in report.agents] == ["chair-1", "envoy-1", "operative-1", "operative-2", "watchdog-1"]
    # Round 1's closing decisions accept every product and end the mission before its limit.
    assert (ended.state, ended.stop_reason, ended.round) == ("done", "concluded", 1)


@pytest.mark.parametrize(("fields", "said"), [
    ({"request": " "}, "Say what you want the team to do: the request is empty."),
    ({"request": "x", "operatives": "two"}, "Team size must be a whole number; got 'two'."),
    ({"request": "x", "operatives": "13"}, "team.operatives: Input should be less than or equal to 12"),
    ({"request": "x", "rounds": "0"}, "rounds: Input should be greater than or equal to 1"),
    ({"request": "x", "budget_cost_usd": "-1"}, "budget.cost_usd: Input should be greater than 0"),
    ({"request": "x", "model_name": "scripted:/etc/passwd"},
     "The model 'scripted:/etc/passwd' cannot be chosen here"),
    ({"request": "x", "model": "py:os:system"}, "The model 'py:os:system' cannot be chosen here"),
    ({"request": "Plan\x1b[2J it"}, "request: Value error, contains an escape character (ESC) at position 4; "
                                     "write plain text"),
])
def test_a_form_that_cannot_start_comes_back_with_the_reason_and_the_values(client: TestClient, security, fields,
                                                                            said: str) -> None:
    refused = client.post("/missions", data={"csrf": security.csrf, "model": "simulated", **fields})

    assert refused.status_code == 400
    assert said in text(refused)
    assert "The mission was not started." in text(refused)
    if fields["request"].strip():
        assert f'>{fields["request"]}</textarea>' in refused.text  # the form refilled


def test_an_example_starts_without_its_files_answers_when_the_person_answers(client: TestClient, security,
                                                                             graph_server) -> None:
    started = client.post("/missions/example", data={"csrf": security.csrf, "example": "launch",
                                                     "answer_myself": "yes"}, follow_redirects=False)

    mission_id = started.headers["location"].removeprefix("/missions/")
    halted = wait_until(lambda: (s := mission_status(mission_id, home=graph_server.home)).state == "halted" and s,
                        what="the launch example's question")
    assert halted.pending_halt["message"] == ("Who is Margin for at launch, students or teachers? The brief, the price "
                                              "and the checklist all depend on it.")


def test_an_uploaded_mission_file_starts_as_cabal_run_reads_it(client: TestClient, security, graph_server) -> None:
    mission = (f"request: Plan a picnic for ten.\nteam: {{operatives: 1}}\nrounds: 1\nmodel: '{SIMULATED}'\n").encode()

    started = client.post("/missions/upload", data={"csrf": security.csrf},
                          files={"mission": ("../../Picnic Plan.mission.yaml", mission, "text/yaml")},
                          follow_redirects=False)

    assert started.status_code == 303
    mission_id = started.headers["location"].removeprefix("/missions/")
    assert re.fullmatch(r"m-picnic-plan-[0-9a-f]{6}", mission_id)  # named after the file, its folders dropped
    assert done(graph_server, mission_id).state == "done"


@pytest.mark.parametrize(("content", "said"), [
    (b"", "The mission file is empty."),
    (b"request: [unclosed", "mission file picnic.yaml:1: invalid YAML: expected ',' or ']'"),
    (b"- a list", "picnic.yaml: a mission file is a mapping with at least `request:`"),
    (b"request: hi\nrounds: lots\n", "picnic.yaml:2: invalid mission: rounds: Input should be a valid integer"),
    (b"request: hi\nmodel: scripted:../../secret.yaml\n",
     "The model 'scripted:../../secret.yaml' cannot be chosen here"),
    (b"request: hi\nmodel: {name: 'py:os:system'}\n", "The model 'py:os:system' cannot be chosen here"),
    (b"request: hi\nteam: {cards: /etc}\n", "A mission started from this page cannot name a folder of role cards"),
    (b"\xff\xfe", "The mission file is not UTF-8 text."),
    (b'request: &r "hi"\nanswers: [*r, *r]\n',
     "picnic.yaml:2: invalid YAML: an alias (*r) is not allowed here; write the value out"),
    (b"request: '" + b"x" * MAX_UPLOAD + b"'", "The mission file is over 65,536 bytes, the most this page takes."),
])
def test_an_upload_that_cannot_start_says_why(client: TestClient, security, content: bytes, said: str) -> None:
    refused = client.post("/missions/upload", data={"csrf": security.csrf},
                          files={"mission": ("picnic.yaml", content, "text/yaml")})

    assert refused.status_code == 400
    assert said in text(refused)
    assert "/tmp/" not in text(refused).split("workspace")[0]  # the server's temporary path is not shown


def test_a_body_over_the_limit_is_413(client: TestClient, security) -> None:
    refused = client.post("/missions/upload", data={"csrf": security.csrf},
                          files={"mission": ("big.yaml", b"x" * (MAX_BODY + 1), "text/yaml")})

    assert (refused.status_code, refused.text) == (413, "Content Too Large")


def test_errors_are_pages_not_tracebacks(client: TestClient, monkeypatch, asking: str) -> None:
    room = client.app.state.room
    monkeypatch.setattr(room.reader, "view", lambda mission_id: 1 / 0)

    broken = client.get(f"/missions/{asking}")
    missing = client.get("/missions/m-nothing-here-000000")
    wrong_method = client.put("/")

    assert broken.status_code == 500
    assert "Something went wrong" in broken.text and "ZeroDivisionError" not in broken.text
    assert "Traceback" not in broken.text
    assert missing.status_code == 404 and "mission not found: 'm-nothing-here-000000'" in text(missing)
    assert wrong_method.status_code == 405


def test_an_interrupted_mission_resumes_from_its_page(client: TestClient, security, graph_server) -> None:
    flaky_team = importlib.import_module("tests.web.flaky_team")  # the module the model spec names
    flaky_team.failures_left = 1
    paused = run_mission({"request": "Plan a picnic.", "team": {"operatives": 1}, "rounds": 1},
                         model="py:tests.web.flaky_team:team", home=graph_server.home)
    page = client.get(f"/missions/{paused.mission_id}").text

    resumed = json_post(client, f"/missions/{paused.mission_id}/resume", security)

    assert (paused.state, paused.detail) == ("interrupted", "the model is unavailable: the provider is down (a test)")
    assert f'action="/missions/{paused.mission_id}/resume"' in page
    assert resumed.json() == {"ok": True, "mission": paused.mission_id, "message": "The team goes on."}
    ended = done(graph_server, paused.mission_id)
    assert (ended.state, ended.stop_reason, ended.round) == ("done", "concluded", 1)


def test_only_an_interrupted_mission_resumes(client: TestClient, asking: str, security) -> None:
    refused = json_post(client, f"/missions/{asking}/resume", security)

    assert refused.status_code == 409
    assert refused.json() == {"ok": False, "error": f"mission {asking} is not interrupted: there is nothing to resume"}


def test_a_mission_that_ended_continues_from_its_page(client: TestClient, security, graph_server) -> None:
    ended = run_mission({"request": "Plan a picnic.", "team": {"operatives": 1}, "rounds": 2, "model": SIMULATED},
                        home=graph_server.home)
    page = client.get(f"/missions/{ended.mission_id}").text

    empty = json_post(client, f"/missions/{ended.mission_id}/continue", security, direction=" ")
    went_on = json_post(client, f"/missions/{ended.mission_id}/continue", security,
                        direction="Add a rain plan.", rounds="1")

    assert (ended.state, ended.round) == ("done", 1)  # round 1's closing decisions ended it
    assert f'action="/missions/{ended.mission_id}/continue"' in page and "Continue the mission" in page
    assert (empty.status_code, empty.json()["error"]) == (400, "Write the new direction first.")
    assert went_on.json() == {"ok": True, "mission": ended.mission_id,
                              "message": "The mission continues with your new direction."}
    again = wait_until(lambda: (s := mission_status(ended.mission_id, home=graph_server.home)).round == 2
                       and s.state == "done" and s, what="the continued mission to end")
    assert again.stop_reason is not None
    conversation = mission_report(ended.mission_id, home=graph_server.home).conversation
    assert [line.text for line in conversation if line.kind == "direction"] == ["Add a rain plan."]


def test_a_server_running_all_it_may_says_busy(workspace, security) -> None:
    from cabal.web.app import create_app

    with TestClient(create_app(workspace, security, max_runs=0), base_url="http://127.0.0.1:8765") as full:
        refused = full.post("/missions/example", data={"csrf": security.csrf, "example": "launch"},
                            headers={"accept": "application/json"})

    assert refused.status_code == 429
    assert refused.json() == {"ok": False, "error": "this server already runs 0 missions (wait for one to pause or end "
                                                    "(or start the server with a higher --max-runs))"}


def test_a_graph_named_like_a_mission_that_is_not_one_is_left_out_of_the_list(client: TestClient,
                                                                               graph_server) -> None:
    from cabal.graph import ContextGraph

    with ContextGraph.open(name="m-not-a-mission-000000", home=graph_server.home) as other:
        other.create_cluster([{"id": "x", "node_type": "space", "type": "module", "name": "Someone else's"}])
        try:
            listing = client.get("/")
        finally:
            other.delete_graph()

    assert listing.status_code == 200
    assert "m-not-a-mission-000000" not in listing.text


def test_a_claude_model_without_a_key_is_refused_before_anything_is_written(client: TestClient, security,
                                                                          monkeypatch, graph_server) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    before = set(client.app.state.room.reader.mission_ids())

    refused = client.post("/missions", data={"csrf": security.csrf, "request": "Plan a picnic.", "name": "no-key",
                                             "model": "claude-sonnet-4-6"})

    assert refused.status_code == 400
    assert "model 'claude-sonnet-4-6' needs an Anthropic API key: set ANTHROPIC_API_KEY" in text(refused)
    assert set(client.app.state.room.reader.mission_ids()) == before
