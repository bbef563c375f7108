"""Reading the work: the report read from a mission's graph, `cabal show`, `cabal export`, `cabal status`."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import jsonschema
import pytest

from cabal.report.html import render_html
from cabal.report.markdown import render_markdown
from cabal.report.schema import report_schema
from cabal.rounds.event_schema import events_schema
from cabal.rounds.api import run_mission
from cabal.rounds.workspace import mission_report

from .players import LAUNCH_MISSION
from .test_cli import ROOT, assert_plain, cabal, cabal_all

BRIEF_TEXT = ("Audience: university students who take notes in lectures and revise from them. Promise: Margin turns "
              "your lecture notes into a revision plan you will actually use. Proof points: notes sync from phone to "
              "laptop in under two seconds; every note links to the slide it was taken on; a weekly revision digest "
              "picks the notes you have not opened in a week.")
SCHEMAS = ROOT / "docs" / "schemas"


@pytest.fixture(scope="module")
def home(graph_server) -> str:
    return str(graph_server.home)


@pytest.fixture(scope="module")
def launch(home: str) -> str:
    return run_mission(LAUNCH_MISSION, home=home).mission_id


def test_the_report_joins_every_version_review_inspection_decision_and_collab(launch: str, home: str) -> None:
    report = mission_report(launch, home=home)

    assert [(p.depth, p.name, p.status, p.shown.number, p.shown.accepted) for p in report.products] == [
        (0, "Launch brief", "accepted", 1, True), (0, "Pricing decision", "accepted", 2, True),
        (0, "Launch-day checklist", "accepted", 1, True)]
    assert report.product("launch brief").shown.content.strip() == BRIEF_TEXT
    pricing = report.product("Pricing")
    v1, v2 = pricing.versions
    assert [(r.author, r.assessment) for r in v1.reviews] == [("operative-1", "needs_revision")]
    assert [(i.author, i.verdict, [(f.severity, f.category) for f in i.findings]) for i in v1.inspections] == [
        ("watchdog-1", "blocked", [(8, "completeness")])]
    assert [(i.verdict, i.findings) for i in v2.inspections] == [("approved", ())]
    assert [(d.round, d.accepted, d.reason) for d in pricing.decisions] == [
        (2, False, "Blocked by inspection until the comparison is added."), (2, True, None)]
    (collab,) = pricing.collabs
    assert (collab.author, collab.importance, collab.addressed) == ("operative-1", 6, True)
    assert [(r.by, r.round, r.action) for r in collab.responses] == [("operative-2", 2, "accept")]
    assert [(q.asker, q.status, q.answer) for q in report.questions] == [
        ("chair-1", "answered", "Students first: university students who take lecture notes. Teachers come later.")]
    # Usage adds up: by agent and by round to the total, the total to what the run reported.
    total = report.usage.total
    assert (total.turns, total.input_tokens, total.output_tokens) == (19, 29872, 2841)
    assert sum(row.spend.input_tokens for row in report.usage.by_agent) == total.input_tokens
    assert sum(row.spend.turns for row in report.usage.by_round) == 19
    assert [row.agent for row in report.usage.by_agent] == ["chair-1", "envoy-1", "operative-1", "operative-2",
                                                            "watchdog-1"]
    assert report.failed_turns == ()


# ------------------------------------------------------------------------------ cabal show


def test_show_prints_the_accepted_launch_briefs_text(launch: str, home: str) -> None:
    result = cabal("show", launch, "Launch brief", "--home", home)

    assert result.returncode == 0, result.stderr
    assert_plain(result)
    assert result.stdout == (
        "### Launch brief\n\nContent · accepted · owner Ada (operative-1) · added in round 0\n\n"
        "Definition of done: Names the audience, the promise in one sentence and three proof points a student would "
        "believe.\n\n#### v1 (accepted): Margin launch brief\n\nWritten in round 1 by Ada (operative-1). First version of "
        f"the brief.\n\n{BRIEF_TEXT}\n")


def test_show_the_tree_a_version_and_the_history(launch: str, home: str) -> None:
    whole, version, history = cabal_all([["show", launch, "--home", home],
                                         ["show", launch, "pricing", "--version", "1", "--home", home],
                                         ["show", launch, "Pricing decision", "--history", "--home", home]])

    assert whole.stdout.startswith(
        f"# launch-plan ({launch})\n\nState: done, round 2, stopped: concluded (The launch plan is complete: brief, "
        "pricing and launch-day checklist are all accepted.)\n\n## Products\n\n"
        "- Launch brief [Content] accepted · v1 accepted · owner Ada (operative-1)\n"
        "- Pricing decision [Decision] accepted · v2 accepted · owner Brook (operative-2)\n"
        "- Launch-day checklist [Content] accepted · v1 accepted · owner Ada (operative-1)\n")
    assert re.findall(r"^#### .*$", whole.stdout, re.MULTILINE) == [
        "#### v1 (accepted): Margin launch brief", "#### v2 (accepted): Margin pricing, with comparison",
        "#### v1 (accepted): Launch-day checklist"]
    assert "#### History" not in whole.stdout
    assert "#### v1 (not accepted): Margin pricing\n\nWritten in round 1 by Brook (operative-2). First pricing proposal." in (
        version.stdout)
    assert "Comparison" not in version.stdout  # v1 had none: that is why it was blocked
    assert ("- v1, round 1, by Brook (operative-2): First pricing proposal.\n"
            "  - review by Ada (operative-1): needs_revision. The plans and the discount are clear, but the comparison the "
            "DoD asks for is missing.\n"
            "  - inspection by watchdog-1: blocked\n"
            "    - finding, severity 8, completeness: The DoD asks for at least one comparison; there is none, so the "
            "reasoning cannot be checked. Recommendation: Compare with one competitor's student plan.\n") in history.stdout
    # Rejected at round 2's Plan, accepted at its closing decisions: told in the order the steps ran.
    assert ("- round 2: the Chair rejected v1: Blocked by inspection until the comparison is added.\n"
            "- round 2: the Chair accepted v2\n") in history.stdout
    assert ("- feedback by Ada (operative-1), round 1, importance 6: Add the comparison with one competitor's student price "
            "so the reasoning can be checked. [addressed: accept by Brook (operative-2) in round 2 (Compare with a "
            "competitor's student plan.)]") in history.stdout


def test_show_and_export_answer_bad_input_in_one_line(launch: str, home: str) -> None:
    mistyped = launch[:-1] + ("0" if launch[-1] != "0" else "1")
    product, mission, version, orphan, export = cabal_all([
        ["show", launch, "Pricing plan", "--home", home], ["show", mistyped, "--home", home],
        ["show", launch, "Launch brief", "--version", "7", "--home", home],
        ["show", launch, "--version", "1", "--home", home], ["export", mistyped, "--format", "json", "--home", home]])

    assert product.stderr == ("cabal: product not found: 'Pricing plan' (known: Pricing decision, Launch-day checklist, "
                              "Launch brief)\n")
    assert mission.stderr.startswith(f"cabal: mission not found: '{mistyped}' (known: {launch}")  # closest first
    assert export.stderr == mission.stderr
    assert version.stderr == "cabal: version of 'Launch brief' not found: '7' (known: 1)\n"
    assert orphan.stderr == "cabal: --version needs a PRODUCT: cabal show ID PRODUCT --version N\n"
    for result in (product, mission, version, orphan, export):
        assert result.stdout == "" and "Traceback" not in result.stderr
    assert [r.returncode for r in (product, mission, version, export)] == [1, 1, 1, 1]  # nothing found
    assert orphan.returncode == 2  # a usage error: the arguments do not fit


# ---------------------------------------------------------------------------- cabal export


def test_export_md_is_the_transcript_and_json_follows_the_published_schema(launch: str, home: str,
                                                                           tmp_path: Path) -> None:
    md, transcript, exported = cabal_all([["export", launch, "--format", "md", "--home", home],
                                          ["transcript", launch, "--home", home],
                                          ["export", launch, "-o", str(tmp_path / "launch.json"), "--home", home]])

    assert md.stdout == transcript.stdout
    for section in ("## Request", "## Mission", "## Products", "## Conversation", "## Questions and answers",
                    "## Usage", "## Failed turns", "## Turns"):
        assert f"\n{section}\n" in md.stdout
    assert "| Ada (operative-1) | 4 | 6,457 | 577 | 0 | $0.0000 |" in md.stdout
    assert exported.stdout == f"wrote {tmp_path / 'launch.json'} (json, {(tmp_path / 'launch.json').stat().st_size:,} bytes)\n"
    data = json.loads((tmp_path / "launch.json").read_text())
    jsonschema.Draft202012Validator(json.loads((SCHEMAS / "mission-report.schema.json").read_text())).validate(data)
    assert (data["format"], data["format_version"], data["mission"]["id"]) == ("cabal.mission-report", 1, launch)
    assert data["products"][0]["versions"][0]["content"].strip() == BRIEF_TEXT


def test_the_published_schemas_are_the_generated_ones() -> None:
    assert json.loads((SCHEMAS / "mission-report.schema.json").read_text()) == report_schema()
    assert json.loads((SCHEMAS / "events.schema.json").read_text()) == events_schema()


def test_status_json_carries_each_products_content(launch: str, home: str) -> None:
    status = json.loads(cabal("status", launch, "--json", "--home", home).stdout)

    assert [(p["name"], p["content"]["version"], p["content"]["accepted"], p["content"]["title"])
            for p in status["products"]] == [("Launch brief", 1, True, "Margin launch brief"),
                                             ("Pricing decision", 2, True, "Margin pricing, with comparison"),
                                             ("Launch-day checklist", 1, True, "Launch-day checklist")]
    assert status["products"][0]["content"]["text"].strip() == BRIEF_TEXT


def test_status_names_each_owner_as_the_team_named_it(launch: str, home: str) -> None:
    status = cabal("status", launch, "--home", home)

    # The tree follows the outcome and the two lines of what to run next.
    assert status.stdout.splitlines()[3:6] == ["- Launch brief [Content] accepted · v1 · Ada (operative-1)",
                                               "- Pricing decision [Decision] accepted · v2 · Brook (operative-2)",
                                               "- Launch-day checklist [Content] accepted · v1 · Ada (operative-1)"]


def test_the_html_export_names_the_agents_beside_their_ids(launch: str, home: str) -> None:
    page = render_html(mission_report(launch, home=home))

    assert '<span class="speaker">Brook (operative-2):</span> Pricing now compares' in page
    assert "<tr><td>Ada (operative-1)</td>" in page  # usage by agent
    assert "owner Brook (operative-2)" in page
    assert "chair-1 (chair-1)" not in page  # an agent without a name of its own keeps its id alone


# ------------------------------------------------------------------------------------ HTML


HOSTILE = '<script>alert("x")</script> <img src="http://example.com/t.png"> ![t](http://example.com/i.png)'


def test_the_html_escapes_what_agents_wrote_and_loads_nothing(launch: str, home: str) -> None:
    report = mission_report(launch, home=home)
    brief = report.products[0]
    hostile_version = brief.versions[0].model_copy(update={"content": HOSTILE + " see [[p:" + report.products[1].id + "]]",
                                                           "title": "<b>t</b>"})
    hostile = report.model_copy(update={
        "products": (brief.model_copy(update={"versions": (hostile_version,), "name": '<svg onload="x">'}),
                     *report.products[1:]),
        "mission": report.mission.model_copy(update={"request": "</blockquote><script>x()</script>"})})

    page = render_html(hostile)

    assert "<script" not in page and "<img" not in page and "<b>t</b>" not in page and '<svg onload' not in page
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page or "&lt;script&gt;alert(&quot;x&quot;)" in page
    assert "&lt;/blockquote&gt;&lt;script&gt;x()&lt;/script&gt;" in page
    assert '<a href="#product-2">Pricing decision</a>' in page  # a reference links to the product
    # Nothing is fetched: no URL in a src, and a policy that forbids loading anything.
    assert not re.search(r"""\bsrc=["']?https?:""", page)
    assert "default-src 'none'" in page


def test_an_empty_mission_says_so_in_each_card_instead_of_a_bare_header(launch: str, home: str) -> None:
    report = mission_report(launch, home=home)
    empty = report.model_copy(update={"products": (), "turns": (), "conversation": (), "questions": (),
                                      "usage": report.usage.model_copy(update={"by_agent": (), "by_round": ()})})

    text = " ".join(re.sub(r"<[^>]+>", " ", render_html(empty)).split())

    for said in ("Product tree No products yet: the Chair sets them out in round 0, from the request.",
                 "Products No products yet: the Chair sets them out in round 0, and each one's work appears here",
                 "By agent No turn has ended yet", "By round No round has spent anything yet",
                 "Timeline No turns yet.", "Conversation Nothing said yet."):
        assert said in text, said


def test_the_html_pictures_hold_every_product_and_every_turn(launch: str, home: str) -> None:
    report = mission_report(launch, home=home)

    page = render_html(report)

    tree = re.search(r'<ul class="tree".*?</ul>\s*</li>\s*</ul>', page, re.S).group(0)
    timeline = re.search(r'<svg class="timeline".*?</svg>', page, re.S).group(0)
    assert re.findall(r'href="#(product-\d)"', tree) == ["product-1", "product-2", "product-3"]
    assert tree.count('class="node"') == 3
    assert timeline.count("<circle") == len(report.turns) == 19
    assert re.findall(r"<title>accepted: ([^<]*)</title>", timeline) == ["Launch brief", "Pricing decision, Launch-day checklist"]
    for product in report.products:
        assert f'id="product-{report.products.index(product) + 1}"' in page


def test_the_html_report_opens_offline_in_chromium(launch: str, home: str, tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(chromium).exists():
        pytest.skip("no Chromium on this machine")
    from playwright.sync_api import sync_playwright

    page_file = tmp_path / "launch.html"
    assert cabal("export", launch, "--format", "html", "-o", str(page_file), "--home", home).returncode == 0
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"])
        try:
            page = browser.new_context(offline=True).new_page()
            requests: list[str] = []
            page.on("request", lambda request: requests.append(request.url))
            page.goto(page_file.as_uri())
            boxes = page.locator("ul.tree .node").count()
            dots = page.locator("svg.timeline circle").count()
            brief = page.locator("#product-1 .content").inner_text()
            tree_width = page.locator("ul.tree").bounding_box()["width"]
        finally:
            browser.close()
    assert requests == [page_file.as_uri()]
    assert (boxes, dots) == (3, 19)
    assert brief.strip() == BRIEF_TEXT
    assert tree_width > 500


def test_a_bigger_mission_renders_every_format(home: str) -> None:
    result = run_mission(ROOT / "examples" / "research" / "research.mission.yaml", home=home)
    report = mission_report(result.mission_id, home=home)

    markdown, page = render_markdown(report), render_html(report)

    assert [p.name for p in report.products if p.status == "removed"] == ["Vendor shortlist"]
    assert "### Removed products\n\n- Vendor shortlist [Content], added in round 0" in markdown
    assert "total 100" in report.product("Evaluation criteria").shown.content
    assert "[[" not in markdown  # references are shown as names
    assert page.count('<section class="product"') == 8
