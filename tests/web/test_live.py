"""The live machinery without a browser: the hub, the poll of other processes' missions, the
stream of a page's changed parts, and what a run's events say it is doing."""

from __future__ import annotations

import asyncio
import json
import threading

import anyio

from cabal.rounds import events as ev
from cabal.vocabulary import Step, TurnOutcome
from cabal.web.live import EVERY_MISSION, Hub, Parts, Poller, updates
from cabal.web.runner import Activity


def test_the_hub_wakes_the_mission_page_and_the_list_from_any_thread() -> None:
    async def scenario() -> list[tuple[str, bool]]:
        hub = Hub(asyncio.get_running_loop())
        with hub.listening("m-a-000001") as page, hub.listening("m-b-000002") as other, \
                hub.listening(EVERY_MISSION) as listing:
            assert hub.topics() == {"m-a-000001", "m-b-000002", EVERY_MISSION}
            thread = threading.Thread(target=hub.changed, args=("m-a-000001",))
            thread.start()
            thread.join()
            await asyncio.sleep(0.01)
            woken = [("page", page.is_set()), ("other", other.is_set()), ("list", listing.is_set())]
        assert hub.topics() == set()
        return woken

    assert asyncio.run(scenario()) == [("page", True), ("other", False), ("list", True)]


def test_the_poller_tells_of_changes_first_looks_and_missions_coming() -> None:
    readings = iter([
        {"m-a-000001": 1},  # first look: counts as a change (it may have changed since the page rendered)
        {"m-a-000001": 1},  # nothing new
        {"m-a-000001": 2},  # the mission moved
        {"m-a-000001": 2, "m-b-000002": 7},  # a mission appeared
    ])
    asked: list[set[str] | None] = []

    def fingerprints(wanted):
        asked.append(wanted)
        return next(readings)

    async def scenario() -> list[str]:
        hub = Hub(asyncio.get_running_loop())
        told: list[str] = []
        hub._wake = told.append  # what the hub is told, in order
        with hub.listening(EVERY_MISSION):
            task = asyncio.create_task(Poller(hub, fingerprints, interval=0.01).run())
            while len(asked) < 4:
                await asyncio.sleep(0.005)
            await asyncio.sleep(0.02)
            task.cancel()
        return told

    told = asyncio.run(scenario())
    assert told[:5] == ["m-a-000001", EVERY_MISSION, "m-a-000001", "m-b-000002", EVERY_MISSION]
    assert asked[:4] == [None, None, None, None]  # the list is open: every mission is looked at


def test_the_poller_looks_only_while_a_page_is_open() -> None:
    asked: list = []

    async def scenario() -> None:
        hub = Hub(asyncio.get_running_loop())
        task = asyncio.create_task(Poller(hub, lambda wanted: asked.append(wanted) or {}, interval=0.01).run())
        await asyncio.sleep(0.05)
        assert asked == []
        with hub.listening("m-a-000001"):
            await asyncio.sleep(0.05)
        task.cancel()

    asyncio.run(scenario())
    assert asked and all(wanted == {"m-a-000001"} for wanted in asked)


def test_a_stream_sends_only_the_parts_that_changed() -> None:
    pages = iter([Parts({"head": "h1", "talk": "t1"}), Parts({"head": "h1", "talk": "t2"}),
                  Parts({"head": "h2", "talk": "t2"})])

    async def render() -> Parts:
        return next(pages)

    async def scenario() -> list[tuple[str, str, dict]]:
        hub = Hub(asyncio.get_running_loop())
        stream = updates(hub, "m-a-000001", render, since=Parts({"head": "h1", "talk": "t1"}).key,
                         closing=anyio.Event())
        sent = []
        waiting = asyncio.ensure_future(stream.__anext__())
        await asyncio.sleep(0.01)
        assert not waiting.done()  # the page shows this already: nothing to send
        hub.changed("m-a-000001")
        sent.append(await waiting)
        hub.changed("m-a-000001")
        sent.append(await stream.__anext__())
        await stream.aclose()
        return [(event.event, event.id, json.loads(event.data)) for event in sent]

    first, second = asyncio.run(scenario())
    assert first == ("update", Parts({"head": "h1", "talk": "t2"}).key,
                     {"parts": {"talk": {"key": Parts({"talk": "t2"}).keys["talk"], "html": "t2"}}})
    assert second == ("update", Parts({"head": "h2", "talk": "t2"}).key,
                      {"parts": {"head": {"key": Parts({"head": "h2"}).keys["head"], "html": "h2"}}})


def test_a_stream_ends_when_the_server_closes_it_while_it_waits_for_news() -> None:
    async def render() -> Parts:
        return Parts({"head": "h1"})

    async def scenario() -> list[str]:
        hub, closing = Hub(asyncio.get_running_loop()), anyio.Event()
        stream = updates(hub, "m-a-000001", render, since=None, closing=closing)
        sent = [(await stream.__anext__()).event]  # the page's first parts
        waiting = asyncio.ensure_future(stream.__anext__())
        await asyncio.sleep(0.01)
        assert not waiting.done()  # nothing new: it waits
        closing.set()
        try:
            await asyncio.wait_for(waiting, 1)
        except StopAsyncIteration:
            sent.append("ended")
        return sent

    assert asyncio.run(scenario()) == ["update", "ended"]


def test_a_runs_events_say_what_it_is_doing() -> None:
    m = "m-a-000001"
    activity = Activity()
    steps = [ev.RoundStarted(m, round=2, budget_tokens=None, budget_cost_usd=None),
             ev.StepStarted(m, round=2, step=Step.WRITE),
             ev.TurnStarted(m, round=2, step=Step.WRITE, agent="operative-1"),
             ev.TurnStarted(m, round=2, step=Step.WRITE, agent="operative-2"),
             ev.ModelRetried(m, round=2, step=Step.WRITE, agent="operative-2", retry=1, max_retries=4, wait_s=2.0,
                             reason="429 rate limited"),
             ev.TurnDone(m, round=2, step=Step.WRITE, agent="operative-1", outcome=TurnOutcome.FINAL, attempts=1,
                         calls=1, input_tokens=1, output_tokens=1, cache_read_tokens=0, cost_usd=0.0, problems=(),
                         summary="")]
    seen = []
    for event in steps:
        activity = activity.hearing(event)
        seen.append((activity.round, activity.step, activity.agents, activity.note))

    assert seen == [
        (2, None, (), None), (2, "write", (), None), (2, "write", ("operative-1",), None),
        (2, "write", ("operative-1", "operative-2"), None),
        (2, "write", ("operative-1", "operative-2"),
         "operative-2: the model is busy (429 rate limited); try 2 of 5 in 2 s"),
        (2, "write", ("operative-2",), None)]
