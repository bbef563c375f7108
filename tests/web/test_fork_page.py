"""The web room shows a fork's lineage: in the missions list and on its page."""

from __future__ import annotations

from html import unescape
import re

from starlette.testclient import TestClient

from cabal.rounds.api import fork_mission, run_mission
from cabal.rounds.control import mission_status
from cabal.rounds.workspace import mission_report

from tests.polling import wait_until
from .test_app import json_post

# The simulated team with a Chair that adds a product every round: no round's closing decisions
# end the mission, so it reaches round 2 to be forked at.
BUSY = "py:tests.rounds.data.busy_factory:team"


def test_a_forks_row_and_page_say_where_it_came_from(client: TestClient, graph_server) -> None:
    original = run_mission({"request": "Plan a picnic.", "team": {"operatives": 1}, "rounds": 2, "model": BUSY},
                           home=graph_server.home)
    fork = fork_mission(original.mission_id, round=2, home=graph_server.home)

    listed = client.get("/").text
    row = re.search(rf'<a class="mission-row[^"]*" href="/missions/{fork.mission_id}".*?</a>', listed, re.S).group(0)
    page = client.get(f"/missions/{fork.mission_id}").text

    lineage = f"forked from {original.mission_id} at round 2"
    assert f'· <span class="lineage">{lineage}</span>' in row
    assert f'<p class="lineage muted">{lineage}</p>' in page
    original_row = re.search(rf'<a class="mission-row[^"]*" href="/missions/{original.mission_id}".*?</a>',
                             listed, re.S).group(0)
    assert "forked from" not in unescape(original_row)


def test_a_mission_is_forked_from_its_page(client: TestClient, security, graph_server) -> None:
    original = run_mission({"request": "Plan a picnic.", "team": {"operatives": 1}, "rounds": 2, "model": BUSY},
                           home=graph_server.home)
    page = client.get(f"/missions/{original.mission_id}").text

    too_far = json_post(client, f"/missions/{original.mission_id}/fork", security, round="3")
    forked = json_post(client, f"/missions/{original.mission_id}/fork", security, round="2",
                       direction="Add a rain plan.")

    assert f'action="/missions/{original.mission_id}/fork"' in page
    assert '<option value="2" selected>2</option>' in page
    assert (too_far.status_code, too_far.json()["error"]) == (400, "Fork from a round from 1 to 2.")
    answer = forked.json()
    fork_id = answer["mission"]
    assert answer["ok"] and fork_id != original.mission_id and answer["message"] == (
        f"Forked from {original.mission_id} at the start of round 2: a new mission runs on from there; the "
        "original is unchanged.")
    ended = wait_until(lambda: (s := mission_status(fork_id, home=graph_server.home)).state == "done" and s,
                       what="the fork to end")
    assert ended.lineage == f"forked from {original.mission_id} at round 2"
    directions = [line.text for line in mission_report(fork_id, home=graph_server.home).conversation
                  if line.kind == "direction"]
    assert directions == ["Add a rain plan."]
