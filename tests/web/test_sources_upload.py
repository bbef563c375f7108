"""The new-mission form takes the user's files as sources: bounded, with the page's CSRF token, kept
private in the workspace, read, searched and cited like any mission file's sources."""

from __future__ import annotations

import stat

import pytest
from starlette.testclient import TestClient

from cabal.rounds.workspace import mission_graph, mission_report
from cabal.web.forms import MAX_SOURCE_BYTES, MAX_SOURCE_FILES, UPLOADS
from tests.web.test_app import done, text

FORM = {"request": "Price our app for students from the interview notes.", "name": "priced", "operatives": "1",
        "rounds": "2", "model": "simulated"}
NOTES = (b"# Interviews\n\nStudents would pay about 4 USD a month, <script>alert(1)</script> said one.\n\n"
         b"## Quotes\n\nNothing else.\n")


def test_files_uploaded_with_the_form_become_the_missions_sources_and_are_cited(client: TestClient, security,
                                                                              graph_server, workspace) -> None:
    started = client.post("/missions", data={"csrf": security.csrf, **FORM}, follow_redirects=False, files=[
        ("sources", ("../../notes.md", NOTES, "text/markdown")),
        ("sources", ("prices.csv", b"competitor,usd\nNotion,10\n", "text/csv")),
        ("sources", ("logo.png", b"\x89PNG\x00\x00", "image/png")),
    ])

    assert started.status_code == 303, text(started)
    mission_id = started.headers["location"].removeprefix("/missions/")
    assert done(graph_server, mission_id).state == "done"
    with mission_graph(workspace, mission_id) as graph:
        sources = sorted((s["source_id"], s["name"], s["path"]) for s in graph.find("source"))
    # The names are their last part only; the skipped PNG took no id.
    assert [(source_id, name) for source_id, name, _ in sources] == [("s1", "notes.md"), ("s2", "prices.csv")]
    folder = (workspace.home / UPLOADS).resolve()
    kept = [path for _, _, path in sources]
    assert all(path.startswith(str(folder) + "/") for path in kept)
    assert stat.S_IMODE((folder / kept[0].split("/")[-2]).stat().st_mode) == 0o700
    report = mission_report(mission_id, home=graph_server.home)
    # The simulated writer cites the source it read (s1) and the best section its search found (s1#1).
    assert [(s.source_id, s.cited, [c.id for c in s.cited_sections]) for s in report.sources] == [
        ("s1", True, ["s1#1"]), ("s2", False, [])]
    page = client.get(f"/missions/{mission_id}")
    assert 'id="cited-s1"' in page.text and 'href="#cited-s1"' in page.text
    assert 'id="cited-s1-1"' in page.text and 'href="#cited-s1-1"' in page.text
    assert "<script>alert(1)</script>" not in page.text  # a source's text leaves escaped
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text


@pytest.mark.parametrize(("files", "said"), [
    ([("sources", (f"f{n}.md", b"x", "text/markdown")) for n in range(MAX_SOURCE_FILES + 1)],
     f"{MAX_SOURCE_FILES + 1} files were uploaded as sources; at most {MAX_SOURCE_FILES} are taken."),
    ([("sources", ("big.txt", b"x" * (MAX_SOURCE_BYTES + 1), "text/plain"))],
     f"The uploaded sources hold {MAX_SOURCE_BYTES + 1:,} bytes; at most {MAX_SOURCE_BYTES:,} in all are taken."),
])
def test_uploads_past_the_bounds_are_refused_before_anything_starts(client: TestClient, security, files,
                                                                   said: str) -> None:
    refused = client.post("/missions", data={"csrf": security.csrf, **FORM}, files=files)

    assert refused.status_code == 400
    assert said in text(refused)
    assert "The mission was not started." in text(refused)


def test_an_upload_without_the_csrf_token_is_refused(client: TestClient, workspace) -> None:
    before = sorted((workspace.home / UPLOADS).glob("*")) if (workspace.home / UPLOADS).exists() else []
    refused = client.post("/missions", data=FORM, files=[("sources", ("notes.md", NOTES, "text/markdown"))])

    assert refused.status_code == 403
    after = sorted((workspace.home / UPLOADS).glob("*")) if (workspace.home / UPLOADS).exists() else []
    assert after == before  # nothing kept


def test_the_sources_example_starts_from_the_page_with_its_own_files(client: TestClient, security, graph_server,
                                                                    workspace) -> None:
    started = client.post("/missions/example", data={"csrf": security.csrf, "example": "sources"},
                          follow_redirects=False)

    assert started.status_code == 303, text(started)
    mission_id = started.headers["location"].removeprefix("/missions/")
    assert (done(graph_server, mission_id).state, done(graph_server, mission_id).stop_reason) == ("done", "concluded")
    report = mission_report(mission_id, home=graph_server.home)
    assert [(s.source_id, s.name, s.note, s.cited) for s in report.sources] == [
        ("s1", "docs/product-brief.md", "What we promise and the price ceiling", True),
        ("s2", "docs/interview-notes.md", "Twelve student interviews from October", True),
        ("s3", "docs/competitor-prices.csv", "Monthly prices of the apps students use today", True)]
