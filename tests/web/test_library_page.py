"""The web room's library page: this workspace's accepted work and standing facts, behind the
room's guard, text from missions and the user escaped."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from cabal.rounds.api import run_mission
from cabal.rounds.library import keep_facts
from cabal.rounds.workspace import Workspace
from cabal.web.app import create_app
from cabal.web.security import Security
from tests.web.conftest import LAUNCH


@pytest.fixture(scope="module")
def room(graph_server, tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """A workspace of its own on the session's server: one launch mission, one fact with markup in it."""
    workspace = Workspace.at(tmp_path_factory.mktemp("room") / ".cabal", f"unix://{graph_server.socket_path}")
    run_mission(LAUNCH, workspace=workspace)
    keep_facts(workspace, [("Priya <script>alert(1)</script> signs off every plan", "typed", "")])
    return workspace


def test_the_library_page_lists_the_accepted_work_and_the_facts(room: Workspace) -> None:
    security = Security.for_address("127.0.0.1", 8765)
    with TestClient(create_app(room, security), base_url="http://127.0.0.1:8765") as client:
        page = client.get("/library")
        found = client.get("/library", params={"q": "checklist"})
        nothing = client.get("/library", params={"q": "zeppelin"})

    assert page.status_code == 200
    text = page.text
    assert [text.index(name) < text.index(after) for name, after in (
        ("Pricing decision", "Launch-day checklist"), ("Launch-day checklist", "Launch brief"))] == [True, True]
    assert "Priya &lt;script&gt;alert(1)&lt;/script&gt; signs off every plan" in text
    assert "<script>alert" not in text
    assert '<a href="/library">Library</a>' in text
    assert "Launch-day checklist" in found.text and "Launch brief</b>" not in found.text
    assert "Nothing in the library matches." in nothing.text and "No fact matches." in nothing.text


def test_the_library_page_is_behind_the_rooms_token(room: Workspace) -> None:
    security = Security.for_address("0.0.0.0", 8765)
    with TestClient(create_app(room, security), base_url="http://192.0.2.2:8765") as client:
        client.cookies.clear()
        refused = client.get("/library")
        wrong = client.get("/library", params={"q": "Priya"}, headers={"authorization": "Bearer " + "x" * 43})
        opened = client.get("/library", headers={"authorization": f"Bearer {security.token}"})

    assert (refused.status_code, wrong.status_code, opened.status_code) == (401, 403, 200)
    assert "Priya" not in refused.text + wrong.text
    assert "Priya" in opened.text
