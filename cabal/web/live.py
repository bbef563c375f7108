"""Live pages: news of a mission reaches every page that shows it, as server-sent events.

News comes two ways. The runs this server drives tell the ``Hub`` at each of their events
(from their worker threads), so their pages move at once. A mission another process drives
(``cabal run``, ``cabal resume``, another server) tells nobody here: the ``Poller`` reads a
small fingerprint of each mission an open page shows (its mission node, how many nodes and
links its graph holds, whether a process drives it) every ``interval`` seconds, and only
while some page is open, and tells the hub when one changes.

A page's stream (``updates``) renders the page's parts again when told, and sends only the
parts whose text changed since it last sent them; bursts of news (the turns of a step) are
taken together after a short pause.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import anyio
from sse_starlette import ServerSentEvent

log = logging.getLogger("cabal.web")

EVERY_MISSION = ""  # the topic of the missions list: any mission's news, and missions coming and going
SETTLE_S = 0.15  # how long a stream waits for more news before it renders


class Hub:
    """Which pages wait for news of which mission; told from any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waiting: dict[str, set[asyncio.Event]] = defaultdict(set)

    def changed(self, mission_id: str) -> None:
        """Mission ``mission_id`` changed (or, with ``EVERY_MISSION``, the set of missions did).
        Safe to call from any thread, also once the server has stopped."""
        try:
            self._loop.call_soon_threadsafe(self._wake, mission_id)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            pass

    def _wake(self, mission_id: str) -> None:
        for topic in {mission_id, EVERY_MISSION}:
            for waiting in self._waiting.get(topic, ()):
                waiting.set()

    @contextmanager
    def listening(self, topic: str) -> Iterator[asyncio.Event]:
        """An event set at each piece of news of ``topic`` while the block runs."""
        news = asyncio.Event()
        self._waiting[topic].add(news)
        try:
            yield news
        finally:
            self._waiting[topic].discard(news)
            if not self._waiting[topic]:
                del self._waiting[topic]

    def topics(self) -> set[str]:
        """What open pages show now: mission ids, and ``EVERY_MISSION`` for the missions list."""
        return set(self._waiting)


class Poller:
    """Finds changes made by other processes: polls the fingerprints of what open pages show."""

    def __init__(self, hub: Hub, fingerprints: Callable[[set[str] | None], Mapping[str, Hashable]],
                 *, interval: float = 1.0) -> None:
        self.hub = hub
        self.interval = interval
        self._fingerprints = fingerprints  # of these missions (None: of every mission), read from the workspace
        self._seen: dict[str, Hashable] = {}

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            topics = self.hub.topics()
            if not topics:
                self._seen.clear()  # nobody looks: the next look starts afresh
                continue
            wanted = None if EVERY_MISSION in topics else topics
            try:
                now = dict(await asyncio.to_thread(self._fingerprints, wanted))
            except Exception as error:  # noqa: BLE001 - a poll that fails (the graph restarting) is tried again
                log.warning("could not read the workspace's missions: %s", error)
                continue
            for mission_id, fingerprint in now.items():
                # A mission seen for the first time counts as changed: it may have changed between
                # the page's render and this look, and a render that finds nothing new sends nothing.
                if self._seen.get(mission_id, _UNSEEN) != fingerprint:
                    self.hub.changed(mission_id)
            if wanted is None and set(now) != set(self._seen):
                self.hub.changed(EVERY_MISSION)  # missions came or went
            self._seen = now if wanted is None else {**self._seen, **now}


_UNSEEN = object()


@dataclass(frozen=True)
class Parts:
    """A page's live parts, rendered: each part's HTML by its name."""

    html: Mapping[str, str]

    @property
    def keys(self) -> dict[str, str]:
        return {name: digest(text) for name, text in self.html.items()}

    @property
    def key(self) -> str:
        """One key for the whole page: a stream whose page shows this key has nothing to send."""
        return digest(json.dumps(self.keys, sort_keys=True))


def digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=9).hexdigest()


async def updates(hub: Hub, topic: str, render: Callable[[], Awaitable[Parts]],
                  since: str | None, closing: anyio.Event) -> AsyncIterator[ServerSentEvent]:
    """The stream of one open page: an ``update`` event (JSON: each changed part's ``key`` and
    ``html``) every time what the page shows changes. ``since`` is the key of what the page
    shows already. It ends when ``closing`` is set (the server stops): the response then
    completes as any other, instead of being cancelled mid-stream."""
    sent: dict[str, str] = {}
    with hub.listening(topic) as news:
        while not closing.is_set():
            news.clear()
            parts = await render()
            keys = parts.keys
            if parts.key != since:
                changed = {name: {"key": keys[name], "html": html} for name, html in parts.html.items()
                           if sent.get(name) != keys[name]}
                yield ServerSentEvent(data=json.dumps({"parts": changed}), event="update", id=parts.key)
            sent, since = keys, parts.key
            await _first_of(news.wait, closing.wait)
            if not closing.is_set():
                await asyncio.sleep(SETTLE_S)


async def _first_of(*waits: Callable[[], Awaitable[object]]) -> None:
    """Return once any of ``waits`` has returned."""
    async with anyio.create_task_group() as group:
        async def wake(wait: Callable[[], Awaitable[object]]) -> None:
            await wait()
            group.cancel_scope.cancel()

        for wait in waits:
            group.start_soon(wake, wait)
