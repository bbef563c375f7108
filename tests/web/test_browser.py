"""`cabal serve` in a real headless Chromium: what a person does in the page, seen as they see it.

Debian's Chromium (or $CABAL_CHROMIUM) driven by Playwright (`executable_path`; Playwright's own
browser download needs the network). Where Chromium is missing, every test here is skipped with
the reason.
Screenshots land in $CABAL_SCREENSHOTS (default: <tmp>/cabal-web-screenshots), laptop
(1366x850) and phone (390x844) sizes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from cabal import mission_status, run_mission
from cabal.rounds.workspace import mission_report
from cabal.web.server import WebServer

from tests.polling import wait_until

from .conftest import LAUNCH, QUESTION_SCRIPT, ROOT, serve_in_thread

CHROMIUM = (os.environ.get("CABAL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
            or "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
SHOTS = Path(os.environ.get("CABAL_SCREENSHOTS") or Path(tempfile.gettempdir()) / "cabal-web-screenshots")
LAPTOP, PHONE = {"width": 1366, "height": 850}, {"width": 390, "height": 844}
CABAL = Path(sys.executable).with_name("cabal")
BRIEF_TEXT = ("Audience: university students who take notes in lectures and revise from them. Promise: Margin turns "
              "your lecture notes into a revision plan you will actually use. Proof points: notes sync from phone to "
              "laptop in under two seconds; every note links to the slide it was taken on; a weekly revision digest "
              "picks the notes you have not opened in a week.")


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: the browser tests need it (Debian: `apt-get install chromium`, "
                    "or point CABAL_CHROMIUM at one; see the README)")
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def web(workspace):
    server = WebServer(workspace, "127.0.0.1", 0, poll_s=0.3)
    thread = serve_in_thread(server)
    yield f"http://127.0.0.1:{server.port}"
    server.stop()
    thread.join(10)


@pytest.fixture
def page(browser, web):
    """A fresh page at laptop size; it fails the test on any script error or dialog, and on any
    request that leaves the server."""
    context = browser.new_context(viewport=LAPTOP)
    opened = context.new_page()
    problems: list[str] = []
    opened.on("pageerror", lambda error: problems.append(f"script error: {error}"))
    opened.on("dialog", lambda dialog: (problems.append(f"dialog: {dialog.message}"), dialog.dismiss()))
    opened.on("request", lambda request: request.url.startswith(web) or problems.append(f"request: {request.url}"))
    yield opened
    context.close()
    assert problems == []


def shoot(page, name: str, *, full: bool = False) -> Path:
    path = SHOTS / f"{name}.png"
    page.screenshot(path=path, full_page=full)
    return path


def round_headings(page) -> list[str]:
    return [text.strip() for text in page.locator("#part-conversation .round").all_text_contents()]


# ---------------------------------------------------------------------------------- tests


def test_an_example_started_in_the_page_asks_and_the_answer_brings_its_rounds_in_live(page, web) -> None:
    """The issue's "done when": start the launch example, answer its Chair in the page, watch the
    rounds come in, read the accepted content; laptop and phone screenshots."""
    from playwright.sync_api import expect

    page.goto(f"{web}/missions/new")
    shoot(page, "new-mission-laptop", full=True)
    page.set_viewport_size(PHONE)
    shoot(page, "new-mission-phone", full=True)
    page.set_viewport_size(LAPTOP)
    page.locator("form.example", has_text="launch-plan").get_by_role("button", name="Start launch-plan").click()
    page.wait_for_url(re.compile(r"/missions/m-launch-plan-[0-9a-f]{6}$"))
    mission_id = page.url.rsplit("/", 1)[1]
    expect(page.locator("#question")).to_contain_text("Who is Margin for at launch, students or teachers?")
    shoot(page, "question-laptop")
    page.evaluate("window.sameDocument = true")  # gone if the page reloads
    page.get_by_label("Or answer in your own words").fill(
        "Students first: university students who take lecture notes. Teachers come later.")
    page.get_by_role("button", name="Answer and go on").click()

    expect(page.locator("#toast")).to_have_text("Answered: the team goes on.")
    expect(page.locator("#part-head .badge").first).to_have_text("done", timeout=30_000)
    assert page.evaluate("window.sameDocument") is True
    assert round_headings(page) == ["Round 0", "Round 1", "Round 2"]  # round 2's closing decisions end it
    expect(page.locator("#question")).to_have_count(0)
    expect(page.locator("#part-conversation p.answer")).to_have_text(
        "you: Students first: university students who take lecture notes. Teachers come later.")
    assert page.locator("#product-1 .content").inner_text().strip() == BRIEF_TEXT
    assert page.locator("#part-products section.product > .head .badge").all_text_contents() == ["accepted"] * 3
    assert page.locator("ul.tree .node").count() == 3 and page.locator("svg.timeline circle").count() == 19
    assert mission_report(mission_id).usage.total.turns == 19
    shoot(page, "done-laptop")
    shoot(page, "done-laptop-full", full=True)
    page.set_viewport_size(PHONE)
    shoot(page, "done-phone")
    shoot(page, "done-phone-full", full=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]  # nothing wider than a phone
    page.goto(web)
    expect(page.locator(f'a.mission-row[href="/missions/{mission_id}"]')).to_contain_text("done")
    shoot(page, "missions-phone")


def test_a_cli_run_shows_live_and_say_and_stop_reach_it(page, web, workspace, tmp_path: Path) -> None:
    """`cabal run` in another process, slowed down: the page follows it by polling the graph,
    leaves it a message and stops it, all without a reload. Its team adds work every round, so
    only the stop ends it before its round limit (the launch example's script ends in round 2)."""
    from playwright.sync_api import expect

    events = tmp_path / "events.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "CABAL_TEST_LATENCY": "0.5"}
    run = subprocess.Popen([str(CABAL), "run", str(LAUNCH), "--model", "py:tests.web.slow_busy_team:team", "--quiet",
                            "--events", str(events), "--home", str(workspace.home)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
    try:
        first = wait_until(lambda: events.exists() and events.read_text().partition("\n")[0], timeout=60,
                           what="the CLI run to start")
        mission_id = json.loads(first)["mission"]
        page.goto(f"{web}/missions/{mission_id}")
        page.evaluate("""const talk = document.getElementById('part-conversation');
            window.seenRounds = [talk.querySelectorAll('.round').length];
            new MutationObserver(() => window.seenRounds.push(talk.querySelectorAll('.round').length))
              .observe(talk, {childList: true, subtree: true});""")
        expect(page.locator("#part-head .activity")).to_contain_text("Running in another process")
        expect(page.locator("#part-conversation .round", has_text="Round 1")).to_have_count(1, timeout=30_000)
        page.get_by_label("Leave the team a message").fill("Mention the student discount in the brief.")
        page.get_by_role("button", name="Send").click()
        expect(page.locator("#toast")).to_have_text("Message left: the team reads it at the start of its next round.")
        expect(page.locator("#part-conversation p.note")).to_have_text(
            "you: Mention the student discount in the brief.")
        page.get_by_role("button", name="Stop the mission").click()
        expect(page.locator("#part-head")).to_contain_text("You asked the team to stop", timeout=10_000)
        shoot(page, "cli-run-stopping-laptop")
        expect(page.locator("#part-head .badge").nth(1)).to_have_text("stopped at your request", timeout=40_000)
        assert run.wait(timeout=30) == 0, run.stderr.read()
    finally:
        if run.poll() is None:
            run.kill()
    seen = page.evaluate("window.seenRounds")
    assert seen == sorted(seen) and len(set(seen)) >= 3  # the rounds came in one after another
    status = mission_status(mission_id)
    assert (status.state, status.stop_reason) == ("done", "userHalt")
    expect(page.locator("form[action$='/stop'], form[action$='/say']")).to_have_count(0)  # it has ended


HOSTILE_NAME = '<script>window.pwned = "name"</script>Readme'
HOSTILE_CONTENT = ('<script>window.pwned = "content"</script> <img src=x onerror="window.pwned = \'img\'"> '
                   '<b>bold?</b> [click](javascript:window.pwned=1)')


def hostile_script(folder: Path) -> Path:
    """The question mission's script with markup wherever a model writes text."""
    script = yaml.safe_load(QUESTION_SCRIPT.read_text())
    script[0]["args"]["message"] = 'Who reads it? <img src=x onerror="window.pwned = \'question\'">'
    script[1]["args"]["initialProducts"][0]["name"] = HOSTILE_NAME
    write = next(entry for entry in script if entry["step"] == "write")
    write["args"]["versions"][0]["newVersion"]["content"] = HOSTILE_CONTENT
    write["args"]["versions"][0]["newVersion"]["contentTitle"] = "<svg onload=\"window.pwned = 'title'\">"
    speak = next(entry for entry in script if entry["step"] == "presentation")
    speak["args"]["messages"][0]["content"] = "<iframe src=\"javascript:window.pwned = 'frame'\"></iframe> Written."
    path = folder / "hostile.script.yaml"
    path.write_text(yaml.safe_dump(script, sort_keys=False))
    return path


def test_markup_that_models_and_people_write_renders_inert(page, web, workspace, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    mission_id = run_mission({"name": "<img src=x onerror=alert(1)>", "request": "<script>alert(2)</script>",
                              "team": {"operatives": 1}, "rounds": 3},
                             model=f"scripted:{hostile_script(tmp_path)}", home=workspace.home).mission_id
    page.goto(f"{web}/missions/{mission_id}")
    page.get_by_label("Leave the team a message").fill('<img src=x onerror="window.pwned = \'note\'">')
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#part-conversation p.note")).to_have_count(1)
    page.get_by_label("Or answer in your own words").fill("<script>window.pwned = 'answer'</script>")
    page.get_by_role("button", name="Answer and go on").click()
    expect(page.locator("#part-head .badge").first).to_have_text("done", timeout=30_000)

    assert page.evaluate("window.pwned") is None
    assert page.locator("main script, main img, main iframe, main svg[onload], a[href^='javascript']").count() == 0
    assert page.locator("h1").first.inner_text() == "<img src=x onerror=alert(1)>"
    content = page.locator("#product-1 .content").inner_text()
    assert content.strip() == ('<script>window.pwned = "content"</script> <img src=x onerror="window.pwned = \'img\'"> '
                               "<b>bold?</b> [click](javascript:window.pwned=1)")
    assert page.locator("#product-1 h3").inner_text() == HOSTILE_NAME
    assert "<iframe src=\"javascript:window.pwned = 'frame'\"></iframe> Written." in page.locator(
        "#part-conversation").inner_text()
    shoot(page, "inert-markup-laptop")
    page.goto(web)
    assert page.locator(f'a.mission-row[href="/missions/{mission_id}"] .what b').inner_text() == (
        "<img src=x onerror=alert(1)>")
    assert page.evaluate("window.pwned") is None


def non_loopback_address() -> str:
    """This machine's address on its network (the wall does not depend on it: it guards whatever
    the server listens on beyond loopback; 127.0.0.1 reaches a server on 0.0.0.0 just as well)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing interface
            address = probe.getsockname()[0]
    except OSError:
        return "127.0.0.1"
    return address if not address.startswith("127.") else "127.0.0.1"


def test_a_server_beyond_loopback_asks_for_its_token(browser, workspace) -> None:
    """The real command, `cabal serve --host 0.0.0.0`: the token it prints opens the wall; no
    token gives 401, a wrong one 403, pages and streams alike; the token never reaches its log."""
    server = subprocess.Popen([str(CABAL), "serve", "--host", "0.0.0.0", "--port", "0", "--home", str(workspace.home)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        banner = [server.stdout.readline() for _ in range(4)]
        printed = re.search(r"http://127\.0\.0\.1:(\d+)/\?token=([\w-]{43})$", banner[3].strip())
        assert printed, banner
        port, token = printed.groups()
        base = f"http://{non_loopback_address()}:{port}"
        context = browser.new_context(viewport=LAPTOP)
        page = context.new_page()

        refused = page.goto(base + "/")
        assert refused.status == 401
        assert page.locator("h1").inner_text() == "Token needed"
        shoot(page, "token-wall-laptop")
        assert page.goto(base + "/?token=" + "x" * 43).status == 403
        stream = "fetch('/live').then(r => { const s = r.status; r.body.cancel(); return s; })"
        assert page.evaluate(stream) == 401
        page.locator("input[name=token]").fill(token)
        page.get_by_role("button", name="Open").click()

        page.wait_for_url(base + "/")  # the token taken out of the address bar
        assert page.locator("h1").inner_text() == "Missions"
        assert page.evaluate(stream) == 200
        page.get_by_role("link", name="New mission").click()
        assert page.locator("h1").inner_text() == "Start a mission"
        context.close()
    finally:
        server.send_signal(signal.SIGINT)
        output = "".join(banner) + server.communicate(timeout=20)[0]
    assert output.count(token) == 2  # in the two addresses of the banner, and nowhere else
    assert "cabal: stopped serving" in output and "Traceback" not in output


def test_starting_a_mission_from_the_form(page, web) -> None:
    from playwright.sync_api import expect

    page.goto(f"{web}/missions/new")
    page.get_by_label("What should the team do?").fill("Write a short guide to composting at home.")
    page.get_by_label("Name").fill("compost")
    page.get_by_label("Operatives").fill("2")
    page.get_by_label("Rounds").fill("2")
    page.get_by_label("Token budget").fill("120000")
    page.locator("select[name=model]").select_option("simulated")
    page.get_by_role("button", name="Start the mission").click()

    page.wait_for_url(re.compile(r"/missions/m-compost-[0-9a-f]{6}$"))
    # The simulated team's round 1 closing decisions accept every product: it ends before its 2 rounds.
    expect(page.locator("#part-head .badge").nth(1)).to_have_text("concluded", timeout=30_000)
    assert page.locator("#part-request blockquote").inner_text() == "Write a short guide to composting at home."
    assert page.locator("#part-products section.product h3").all_text_contents() == [
        "Library", "Short guide to composting at home"]  # the request's one deliverable, under the Library
    assert round_headings(page) == ["Round 1"]
    shoot(page, "form-mission-laptop")
    page.set_viewport_size(PHONE)
    shoot(page, "form-mission-phone")


def test_a_batchs_missions_are_listed_under_the_batch(page, web, workspace, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    from cabal.batch import run_batch

    plan = tmp_path / "listed.batch.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "listed", "requests": ["Write the README's opening.", "Write the README's usage section."],
        "mission": {"team": {"operatives": 1}, "rounds": 3, "model": f"scripted:{QUESTION_SCRIPT}",
                    "answers": ["People installing it."]}}))
    batch = run_batch(plan, workers=2, home=workspace.home)

    page.goto(web)
    heading = page.get_by_role("heading", name=f"Batch listed ({batch.batch_id})")
    expect(heading).to_be_visible()
    rows = page.locator("section.group", has=heading).locator("a.mission-row")
    expect(rows).to_have_count(2)
    assert {rows.nth(n).get_attribute("data-mission") for n in range(2)} == {r.mission_id for r in batch.report.rows}
    shoot(page, "batch-group-laptop")
