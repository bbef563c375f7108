"""How the web room and the reports look in a real headless Chromium, at a laptop's 1280 px and a
phone's 390 px: nothing wider than the screen, no text under 12 px, charts as wide as their card,
and what a person reads first (the missions list's request, start, model and state; the end of a
mission after its last round's lines). Every page and report: the missions list, a mission's page,
the library, its HTML export and a batch's HTML report."""

from __future__ import annotations

import shutil

import pytest

from cabal import run_mission
from cabal.batch.html import html_page
from cabal.batch.plan import BatchBudget
from cabal.batch.report import BatchReport
from cabal.evals.render import render_judgement
from cabal.evals.versus import compare_missions
from cabal.report.html import render_html
from cabal.rounds.workspace import mission_report
from cabal.web.forms import SIMULATED
from tests.batch.test_render import row

from .conftest import LAUNCH, ROOT
from .test_browser import browser, web  # noqa: F401 - the fixtures: Chromium, and `cabal serve` on a free port

WIDTHS = (1280, 390)
REQUEST = "Onboard a dental clinic's booking desk: the staff guide, the data migration, the go-live checklist.\nMore."

# What the page does wrong, as a list a failed test prints: the document wider than the window,
# text drawn under 12 px (an SVG's text at the size it is drawn), a chart narrower than its box.
PROBLEMS = """() => {
  const found = [];
  if (document.documentElement.scrollWidth > innerWidth)
    found.push(`the page is ${document.documentElement.scrollWidth} px wide in a ${innerWidth} px window`);
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const text = walker.currentNode, element = text.parentElement;
    if (!text.textContent.trim() || !element.getClientRects().length) continue;
    let size = parseFloat(getComputedStyle(element).fontSize);
    if (element instanceof SVGElement) { const m = element.getScreenCTM(); size *= Math.hypot(m.a, m.b); }
    if (size < 11.95) found.push(`${size.toFixed(1)} px: ${text.textContent.trim().slice(0, 40)}`);
  }
  if (innerWidth >= 1280)  // a laptop shows every column: no table scrolls a part of itself out of sight
    for (const table of document.querySelectorAll('table.data, .wide'))
      if (table.scrollWidth > table.clientWidth + 1)
        found.push(`a table shows ${table.clientWidth} px of its ${table.scrollWidth}: ${table.innerText.slice(0, 30)}`);
  for (const chart of document.querySelectorAll('svg.timeline, figure > svg, ul.tree')) {
    const box = chart.parentElement, style = getComputedStyle(box);
    const inner = box.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const width = chart.getBoundingClientRect().width;
    if (width < inner - 3) found.push(`a chart ${Math.round(width)} px wide in a ${Math.round(inner)} px box`);
    if (innerWidth >= 1280 && width > inner + 3) found.push(`a chart ${Math.round(width)} px wider than its box`);
  }
  return found;
}"""


@pytest.fixture(scope="module")
def concluded(workspace) -> str:
    return run_mission({"request": REQUEST, "name": "clinic-onboarding", "rounds": 3, "model": SIMULATED,
                        "team": {"operatives": 2, "names": {"operative-1": "Dana", "operative-2": "Eli"}},
                        "budget": {"tokens": 300000}}, home=workspace.home).mission_id


@pytest.fixture(scope="module")
def scripted_from_afar(workspace, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A mission whose model is a script deep in a project's folders: a long path the report's
    header names, with no hyphen or space to break it at."""
    folder = tmp_path_factory.mktemp("acme").joinpath(
        "acme_corporation", "teams", "customer_onboarding", "missions", "launch_scripts")
    folder.mkdir(parents=True)
    script = folder / "launch_plan_for_the_new_student_product.script.yaml"
    shutil.copy(LAUNCH.with_name("launch.script.yaml"), script)
    return run_mission(LAUNCH, model=f"scripted:{script}", home=workspace.home).mission_id


@pytest.fixture(scope="module")
def pages(web, concluded: str, scripted_from_afar: str, workspace,  # noqa: F811
          tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("layout")
    export = folder / "export.html"
    export.write_text(render_html(mission_report(concluded, home=workspace.home)))
    long_path = folder / "export-long-path.html"
    long_path.write_text(render_html(mission_report(scripted_from_afar, home=workspace.home)))
    batch = folder / "batch.html"
    batch.write_text(html_page(BatchReport("b-clinics-1234abcd", "clinics", "/plans/clinics", False, BatchBudget(), tuple(
        row(key, state, 0.0, seconds, products_accepted=3, products_total=4, round=3,
            request=f"Onboard the {key} clinic's booking desk to our system, with a staff guide and a checklist.",
            model="py:cabal.rounds.simulated:team", stop_reason="noMoreRounds" if state == "done" else None,
            input_tokens=12_000, output_tokens=3_000)
        for key, state, seconds in [("north-side-dental.mission.yaml", "done", 41.0),
                                    ("riverside-family-practice.mission.yaml", "done", 12.5),
                                    ("south.mission.yaml", "interrupted", 3.0)])), batch))
    judgement = folder / "judgement.html"  # cabal judge's page: the mission against its baseline
    baseline = run_baseline(mission_report(concluded, home=workspace.home).mission.request, home=workspace.home)
    judgement.write_text(render_judgement(compare_missions(concluded, baseline, "simulated", home=workspace.home,
                                                           price_as="claude-sonnet-4-6"), "html"))
    # A capable model's documents carry Markdown tables wider than a phone (one pushed the page to
    # 541 px) and the Chair's record of decisions: the recorded example's report, replayed.
    recorded = folder / "recorded.html"
    recorded_id = run_mission(ROOT / "examples" / "foodbank" / "foodbank.mission.yaml", home=workspace.home).mission_id
    recorded.write_text(render_html(mission_report(recorded_id, home=workspace.home)))
    return {"missions": f"{web}/", "mission": f"{web}/missions/{concluded}", "export": export.as_uri(),
            "export-long-path": long_path.as_uri(), "batch": batch.as_uri(), "judgement": judgement.as_uri(),
            "library": f"{web}/library", "recorded": recorded.as_uri(), "recorded-page": f"{web}/missions/{recorded_id}"}


def run_baseline(request: str, *, home) -> str:
    from cabal.rounds.baseline import run_baseline as baseline_of

    return baseline_of({"request": request, "model": SIMULATED}, home=home).mission_id


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", ["missions", "mission", "export", "export-long-path", "batch", "judgement", "library",
                                  "recorded", "recorded-page"])
def test_every_page_fits_its_screen_with_readable_text_and_charts_that_fill_their_box(
        browser, pages: dict[str, str], name: str, width: int) -> None:  # noqa: F811
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    try:
        page.goto(pages[name])
        found = page.evaluate(PROBLEMS)
    finally:
        context.close()

    assert found == []


@pytest.mark.parametrize("width", WIDTHS)
def test_the_missions_list_tells_missions_apart(browser, pages: dict[str, str], concluded: str, width: int) -> None:  # noqa: F811
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    try:
        page.goto(pages["missions"])
        mission = page.locator(f'a.mission-row[href="/missions/{concluded}"]')
        request = mission.locator(".request").inner_text()
        facts = mission.locator(".facts").inner_text()
        state = mission.locator(".badge").first.inner_text()
        # A figure is one phrase: its lines on screen, one.
        spend_lines = mission.locator(".spend .nowrap").evaluate_all("spans => spans.map(s => s.getClientRects().length)")
        spend = mission.locator(".spend").inner_text()
    finally:
        context.close()

    assert request == "Onboard a dental clinic's booking desk: the staff guide, the data migration, the go-live checklist."
    assert facts.startswith(f"{concluded} · started 20") and facts.endswith(" UTC · model simulated")
    assert state == "done"
    assert "tokens of 300,000" in spend and spend_lines == [1, 1]


def test_the_last_rounds_lines_come_before_the_missions_end_as_in_the_terminal(
        browser, pages: dict[str, str]) -> None:  # noqa: F811
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(pages["mission"])
        lines = page.locator("#part-conversation .chat p").all_inner_texts()
    finally:
        page.close()

    # Round 1's closing decisions end the mission; its presentation still comes first, as in the terminal.
    assert lines[-4:] == ["chair-1: I accepted 3 products and gave out 3 assignments this round.",
                          "Dana (operative-1): I wrote 2 new versions: Overview, Risks and open questions.",
                          "Eli (operative-2): I wrote 1 new version: Plan of action.",
                          "chair-1: Every product is accepted; the mission is met. (mission concluded)"]


def test_the_batch_reports_table_shows_every_column_at_1280_and_its_chart_labels_whole(
        browser, pages: dict[str, str]) -> None:  # noqa: F811
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(pages["batch"])
        table = page.locator(".wide").evaluate("box => [box.scrollWidth, box.clientWidth]")
        labels = page.locator("figure svg text[text-anchor=end]").evaluate_all(
            "texts => texts.map(t => [t.textContent, t.getBBox().x])")
    finally:
        page.close()

    assert table[0] <= table[1]  # nothing hidden to the right: the duration column is on screen
    assert [text for text, _ in labels][:3] == ["north-side-dental.mission.yaml", "riverside-family-practice.missio…",
                                                "south.mission.yaml"]
    assert all(x >= 0 for _, x in labels), labels  # no label starts left of its chart
