"""The web room shows a fork's lineage: in the missions list and on its page."""

from __future__ import annotations

from html import unescape
import re

from starlette.testclient import TestClient

from cabal.rounds.api import fork_mission, run_mission

SIMULATED = "py:cabal.rounds.simulated:team"


def test_a_forks_row_and_page_say_where_it_came_from(client: TestClient, graph_server) -> None:
    original = run_mission({"request": "Plan a picnic.", "team": {"operatives": 1}, "rounds": 2, "model": SIMULATED},
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
