"""The user's gates in the page, in headless Chromium: a plan to sign off, then a tool call to
approve or deny, at desktop (1280 px) and phone (390 px) widths; screenshots in $CABAL_SCREENSHOTS."""

from __future__ import annotations

import yaml
from pathlib import Path

from cabal import mission_status, run_mission
from cabal.graph import ContextGraph
from cabal.rounds.simulated import simulated_team
from tests.tools.test_tools import mission

from .test_browser import PHONE, browser, page, shoot, web  # noqa: F401 - the browser's fixtures

DESKTOP = {"width": 1280, "height": 850}


def gated(tmp_path: Path) -> Path:
    """The tools mission, its plan signed off by the user and its tool's calls approved by them."""
    path = mission(tmp_path, "prices", server={"approve": "ask"})
    data = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**data, "gates": {"plan": "ask"}}))
    return path


def test_the_plan_is_signed_off_and_a_tool_call_denied_from_the_page(page, web, workspace, tmp_path) -> None:  # noqa: F811
    from playwright.sync_api import expect

    halted = run_mission(gated(tmp_path), home=workspace.home)
    assert halted.pending_halt["id"] == "r0.plan.gate1"
    page.set_viewport_size(DESKTOP)
    page.goto(f"{web}/missions/{halted.mission_id}")
    question = page.locator("#question")
    expect(question).to_contain_text("Sign off the plan before the team starts work.")
    readme = question.locator(".plan > .plan-tree > li")  # the plan's product tree, drawn as a tree
    expect(readme.locator(":scope > .plan-name")).to_have_text("README intro")
    expect(readme.locator(":scope > .muted")).to_have_text("Content · owner Ada")
    expect(readme.locator(":scope > .plan-dod")).to_contain_text("Done when Says what tally does")
    expect(question.get_by_label("Or write the changes you want: the Chair revises the plan and asks you again")
           ).to_be_visible()
    shoot(page, "plan-signoff-desktop", full=True)
    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]  # nothing runs off a phone
    question.scroll_into_view_if_needed()
    shoot(page, "plan-signoff-phone")
    page.set_viewport_size(DESKTOP)

    question.get_by_role("button", name="approve", exact=True).click()

    expect(page.locator("#toast")).to_have_text("Answered: the team goes on.", timeout=60_000)  # a tool server starts
    expect(page.locator("#question")).to_contain_text("May I call prices__lookup with {\"product\": \"notely\"}?",
                                                      timeout=60_000)
    expect(page.locator("#question").get_by_label("Or deny it with a reason the agent reads")).to_be_visible()
    shoot(page, "tool-approval-desktop", full=True)
    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    page.locator("#question").get_by_role("button", name="deny", exact=True).scroll_into_view_if_needed()
    shoot(page, "tool-approval-phone")

    page.locator("#question").get_by_role("button", name="deny", exact=True).click()

    expect(page.locator("#part-head .badge").first).to_have_text("done", timeout=60_000)
    assert mission_status(halted.mission_id, home=workspace.home).stop_reason == "concluded"
    with ContextGraph.open(name=halted.mission_id, home=workspace.home) as graph:
        decided = {h["id"]: (h["answer"], h["answer_source"]) for h in graph.find("halt") if h.get("gate")}
        [call] = graph.find("moment", {"type": "tool_call"})
    assert decided == {"r0.plan.gate1": ("approve", "user"),
                       "r1.write.operative-1.tool1.approval": ("deny", "user")}
    assert (call["outcome"], call["digest"]) == ("denied", "the user denied this call")
    page.set_viewport_size(DESKTOP)
    expect(page.locator("#part-conversation")).to_contain_text("deny")
    shoot(page, "gates-done-desktop", full=True)


ON_CALL = ("We need three things: a revised on-call policy, a rota for the holidays, and a one-page guide for new "
           "staff.")


def test_the_plan_to_sign_off_is_drawn_once_as_a_tree(page, web, workspace) -> None:  # noqa: F811
    from playwright.sync_api import expect

    halted = run_mission({"request": ON_CALL, "team": {"operatives": 2}, "rounds": 3}, model=simulated_team(),
                         gates=["plan"], home=workspace.home)
    page.set_viewport_size(DESKTOP)
    page.goto(f"{web}/missions/{halted.mission_id}")

    question = page.locator("#question")
    expect(question.locator(".message")).to_have_text("Sign off the plan before the team starts work.")
    library = question.locator(".plan > .plan-tree > li")
    expect(library).to_have_count(1)
    expect(library.locator(":scope > .plan-name")).to_have_text("Library")
    expect(library.locator(":scope > .plan-tree > li > .plan-name")).to_have_text(
        ["Revised on-call policy", "Rota for the holidays", "One-page guide for new staff"])
    rota = library.locator(":scope > .plan-tree > li").nth(1)
    expect(rota.locator(":scope > .muted")).to_have_text("Content · owner operative-2")
    expect(rota.locator(":scope > .plan-dod")).to_have_text(
        f"Done when The rota for the holidays the user asked for in: \"{ON_CALL}\" Done when the user can act on it "
        "without asking back.")
    assert rota.locator(":scope > .plan-dod").evaluate("node => getComputedStyle(node).fontWeight") == "400"  # not bold
    expect(question.locator("h3")).to_have_text(["Mission", "Objectives", "Constraints", "Team", "Products"])
    # Once: the plan is in the question's card; the head, the conversation and the questions' table point to it
    # (the products' own section shows each definition of done too, as it always does).
    for elsewhere in ("#part-head", "#part-conversation", "#part-usage"):
        expect(page.locator(elsewhere)).not_to_contain_text("Objectives")
    expect(page.locator("#part-conversation")).to_contain_text(
        "cabal asks you: Sign off the plan before the team starts work. The plan is above.")
    expect(page.locator("#part-usage")).to_contain_text("Sign off the plan before the team starts work. The plan is "
                                                        "above. (approve / stop)")
    shoot(page, "plan-tree-desktop", full=True)
    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]  # nothing runs off a phone
    question.locator(".plan > .plan-tree").scroll_into_view_if_needed()
    shoot(page, "plan-tree-phone")
