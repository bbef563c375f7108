"""`cabal diff`: a mission against its replay (no difference in content), and the same request
by teams of one and two operatives (the differences), in md, json and html, and in `cabal serve`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from cabal.report.diff import Piece, ProductChange, diff_missions, word_diff
from cabal.report.diff_render import diff_html
from cabal.rounds import mission_report, run_mission
from cabal.rounds.replays import replay_mission
from cabal.rounds.workspace import Workspace
from cabal.web.app import create_app
from cabal.web.security import Security

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = ROOT / "examples" / "launch" / "launch.mission.yaml"
CABAL = Path(sys.executable).with_name("cabal")
TEA = {"request": "For our tea shop we need a shopping list, a brewing guide and a tasting card.", "rounds": 3,
       "model": "py:cabal.rounds.simulated:team"}


@pytest.fixture(scope="module")
def recorded_and_replayed(graph_server) -> tuple[str, str]:
    recorded = run_mission(LAUNCH, home=graph_server.home).mission_id
    return recorded, replay_mission(recorded, home=graph_server.home).mission_id


@pytest.fixture(scope="module")
def team_sizes(graph_server) -> tuple[str, str]:
    return tuple(run_mission({**TEA, "team": {"operatives": n}}, home=graph_server.home).mission_id for n in (1, 2))


def cabal(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CABAL), *args], capture_output=True, text=True, cwd=ROOT, timeout=60,
                          stdin=subprocess.DEVNULL)


def test_a_word_diff_rebuilds_both_texts() -> None:
    pieces = word_diff("Qdrant wins on cost.", "Milvus wins on recall and cost.")
    assert [(p.op, p.text) for p in pieces] == [("-", "Qdrant"), ("+", "Milvus"), ("=", " wins on "),
                                                ("+", "recall and "), ("=", "cost.")]
    assert "".join(p.text for p in pieces if p.op != "+") == "Qdrant wins on cost."
    assert "".join(p.text for p in pieces if p.op != "-") == "Milvus wins on recall and cost."


def test_a_mission_and_its_replay_differ_in_no_content(graph_server, recorded_and_replayed) -> None:
    a, b = recorded_and_replayed
    result = cabal("diff", a, b, "--home", str(graph_server.home), "--format", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["same_content"] is True and data["counts"]["same"] == len(data["products"]) > 0
    assert data["a_figures"] == data["b_figures"]
    markdown = cabal("diff", a, b, "--home", str(graph_server.home)).stdout
    assert "no difference in content" in markdown and "[-" not in markdown


def test_two_team_sizes_show_their_differences(graph_server, team_sizes) -> None:
    a, b = team_sizes
    diff = diff_missions(mission_report(a, home=graph_server.home), mission_report(b, home=graph_server.home))
    assert not diff.same_content
    assert (diff.a_figures.turns, diff.b_figures.turns) == (6, 9)
    changed = [p for p in diff.products if p.change == "changed"]
    assert [p.name for p in changed] == ["Brewing guide"]  # the second operative wrote it
    assert [(p.op, p.text) for p in changed[0].text if p.op != "="] == [("-", "operative-1"), ("+", "operative-2")]
    markdown = cabal("diff", a, b, "--home", str(graph_server.home)).stdout
    assert "| turns | 6 | 9 |" in markdown
    assert "Brewing guide, version 1, by [-operative-1-]{+operative-2+} in round 1" in markdown


def test_the_html_diff_is_offline_and_escaped(graph_server, team_sizes, tmp_path: Path) -> None:
    a, b = team_sizes
    target = tmp_path / "diff.html"
    assert cabal("diff", a, b, "--home", str(graph_server.home), "-o", str(target)).returncode == 0
    page = target.read_text()
    assert "default-src 'none'" in page and "<script" not in page and not re.search(r'(src|href)="http', page)
    assert "<del>operative-1</del><ins>operative-2</ins>" in page
    # Whatever a model wrote is escaped: a product's name and text.
    diff = diff_missions(mission_report(a, home=graph_server.home), mission_report(b, home=graph_server.home))
    hostile = ProductChange(change="changed", name="<i>plan</i>", a_name="<i>plan</i>", b_name="<i>plan</i>",
                            text=(Piece(op="+", text="<script>alert(1)</script>"),))
    page = diff_html(diff.model_copy(update={"products": (hostile,)}))
    assert "<script" not in page and "<i>plan" not in page
    assert "<ins>&lt;script&gt;alert(1)&lt;/script&gt;</ins>" in page and "&lt;i&gt;plan&lt;/i&gt;" in page


def test_cabal_serve_compares_two_missions_of_its_list(graph_server, team_sizes) -> None:
    a, b = team_sizes
    app = create_app(Workspace.at(graph_server.home), Security.for_address("127.0.0.1", 8765), poll_s=0.2)
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        listing = client.get("/").text
        assert '<form class="card compare" method="get" action="/diff">' in listing
        assert f'<option value="{a}"' in listing
        page = client.get(f"/diff?a={a}&b={b}")
        assert page.status_code == 200
        assert "<del>operative-1</del><ins>operative-2</ins>" in page.text
        assert client.get(f"/diff?a={a}&b=m-nothing-1").status_code == 404
        assert client.get("/diff?a=" + a).status_code == 400
