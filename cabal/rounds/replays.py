"""Replaying a recorded mission: the same request, sources, team and answers, and the same
continuations, with a model that answers from the recording's cassette (``llm/replay.py``).
``cabal replay ID`` is this module.

The replay is a new mission (its own id, graph and cassette) on the current project, rebuilt
as the recorded one was run: its mission file with the round limit it started with, the sources
as its graph holds them (a ``--source`` included, and the text it read then, whatever the
files hold now), the answers the user gave its Chair, then each ``cabal continue`` (or
``cabal resume --rounds``) at the round it was given. A strict replay on an unchanged project
reproduces the recorded mission's graph; a change to a prompt, a role card or a protocol that
alters what a model is asked stops it where the call differs.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cabal.graph import ContextGraph
from cabal.llm.cassette import CASSETTE_FILE
from cabal.llm.replay import replay_spec
from cabal.rounds.control import MissionResult, say
from cabal.rounds.events import MissionEvent, MissionStarted, RoundStarted, TurnDone, fan_out
from cabal.rounds.ids import continue_session, status_session, turn_id
from cabal.rounds.workspace import Workspace, mission_graph, mission_node
from cabal.sources import Chunk, Collected, SourceText
from cabal.vocabulary import ANSWER_FROM_FILE, USER_DIRECTION_TYPE, USER_ID, MissionState


# The engine's write of a round's start (``status_session``): where a run reads the user's notes.
ROUND_STARTED = re.compile(re.escape(status_session("running", 0).removesuffix("0")) + r"([1-9]\d*)")


@dataclass(frozen=True)
class Continuation:
    """A mission that ended taken further: after round ``after_round``, up to round ``rounds``,
    with the user's new direction (``cabal continue``) or without (``cabal resume --rounds``)."""

    after_round: int
    rounds: int
    direction: str | None


@dataclass(frozen=True)
class RecordedNote:
    """A message the user left the team (``cabal say``), and where: after what the engine did last."""

    after: str | None  # the last turn committed before it (its id), or a round's start (``round N``); None: first
    text: str
    product: str | None  # the product it is feedback on, if any


@dataclass(frozen=True)
class RecordedMission:
    """How a recorded mission was run: what a replay runs again."""

    spec: dict  # the mission file as started: its round limit then, every answer its Chair was given, no sources
    sources: Collected  # the files it read at its start, as its graph holds them
    continuations: tuple[Continuation, ...]
    withdrawn: frozenset[int] = frozenset()  # the rounds where the user stopped it instead of answering its question
    notes: tuple[RecordedNote, ...] = ()  # what the user said with `cabal say`, in order


def recorded_mission(mission_id: str, *, home: str | Path | None = None, url: str | None = None) -> RecordedMission:
    """How mission ``mission_id`` was run, read from its graph."""
    workspace = Workspace.at(home, url, reading=True)
    with mission_graph(workspace, mission_id) as graph:
        node = mission_node(graph, mission_id)
        every_halt = graph.find("halt")
        # A gate's answer (a plan signed off, a tool call decided) is asked again of whoever replays.
        halts = [h for h in every_halt if h.get("status") == "answered" and h.get("answer") is not None
                 and not h.get("gate")]
        withdrawn = frozenset(int(h.get("withdrawn_round") or 0) for h in every_halt if h.get("status") == "withdrawn")
        sources = _sources_read_at_start(graph)
        continuations = _continuations(graph, mission_id)
        notes = _notes(graph)
    spec = json.loads(node["spec"])
    halts.sort(key=lambda h: (int(h.get("answered_round") or 0), str(h["id"])))
    # The mission file's answers stay what they were (the team read those no question took as the
    # user's words); the ones the user gave in chat come after them, never shown before asked for.
    # (A replay gives its chat answers from its file: a replay of it keeps them as they were.)
    spec["chat_answers"] = [*spec.get("chat_answers", []),
                            *(str(h["answer"]) for h in halts if h.get("answer_source") != ANSWER_FROM_FILE)]
    spec.pop("model", None)
    spec.pop("sources", None)  # read from the graph instead: the files may have changed or gone since
    spec.pop("memory", None)  # likewise the library and the facts it read: they too may have changed since
    return RecordedMission(spec, sources, continuations, withdrawn, notes)


def _notes(graph: ContextGraph) -> tuple[RecordedNote, ...]:
    """The user's messages (a continuation's direction aside: ``_continuations`` has it), each
    with what the engine did last before it (a turn committed, a round started: where the run
    reads the user's notes again), in the order the graph created them."""
    nodes, _ = graph.history()
    notes, last = [], None
    for _, node in nodes:
        if node.get("node_type") == "moment" and node.get("type") == "turn":
            last = str(node["id"])
        elif node.get("node_type") == "moment" and (started := ROUND_STARTED.fullmatch(str(node.get("session")))):
            last = f"round {started[1]}"
        elif node.get("node_type") == "collab" and node.get("author") == USER_ID \
                and node.get("type") != USER_DIRECTION_TYPE:
            notes.append(RecordedNote(last, str(node.get("comment") or ""), node.get("product_id") or None))
    return tuple(notes)


class NotesAsRecorded:
    """A replay's listener that leaves each of the user's recorded messages where the user did:
    once the replay has done again what the engine did last before it (a turn committed, its id
    counting the Chair's turns after each answer as the engine names them; a round started). A
    message left while a question waited is then read with the answer; one left while the team
    worked, at the next round: as it was."""

    def __init__(self, notes: tuple[RecordedNote, ...], home: str | Path | None, url: str | None) -> None:
        self.due = list(notes)
        self.home, self.url = home, url
        self._turns: Counter[str] = Counter()

    def __call__(self, event: MissionEvent) -> None:
        if isinstance(event, MissionStarted):
            self._leave(event.mission, None)
        elif isinstance(event, RoundStarted):
            self._leave(event.mission, f"round {event.round}")
        elif isinstance(event, TurnDone):
            first = turn_id(event.round, event.step, event.agent)
            done = turn_id(event.round, event.step, event.agent, self._turns[first])
            self._turns[first] += 1
            self._leave(event.mission, done)

    def _leave(self, mission_id: str, after: str | None) -> None:
        while self.due and self.due[0].after == after:
            note = self.due.pop(0)
            say(mission_id, note.text, product=note.product, home=self.home, url=self.url)


def _sources_read_at_start(graph: ContextGraph) -> Collected:
    """The first versions of the sources a mission read at its start, in ingest order, with their text."""
    first = sorted((s for s in graph.find("source") if int(s.get("version") or 1) == 1 and not s.get("round")),
                   key=lambda s: int(str(s["source_id"])[1:]))
    files = []
    for source in first:
        chunks = sorted(graph.find("chunk", {"source_id": source["id"]}), key=lambda c: int(c["position"]))
        files.append(SourceText(
            path=str(source["path"]), name=str(source["name"]), note=source.get("note") or None,
            size=int(source["size"]), sha256=str(source["sha256"]), format=str(source["type"]),
            chunks=tuple(Chunk(int(c["position"]), str(c.get("heading") or ""), str(c["text"])) for c in chunks),
            origin=source.get("origin") or None))
    return Collected(tuple(files))


def _continuations(graph: ContextGraph, mission_id: str) -> tuple[Continuation, ...]:
    directions = {int(note.get("round") or 0): str(note["comment"])
                  for note in graph.find("collab", {"type": USER_DIRECTION_TYPE})}
    prefix = continue_session(mission_id, 0, 0).removesuffix("0.0")
    found = []
    for moment in graph.find("moment", {"type": "user_continue"}):
        after_round, _, rounds = str(moment.get("session") or "").removeprefix(prefix).partition(".")
        if after_round.isdigit() and rounds.isdigit():
            found.append(Continuation(int(after_round), int(rounds), directions.get(int(after_round))))
    return tuple(sorted(found, key=lambda c: (c.after_round, c.rounds)))


def replay_mission(mission_id: str, *, mode: str = "strict", fallback: str | None = None,
                   home: str | Path | None = None, url: str | None = None, record: bool = True,
                   on_event: Callable[[MissionEvent], None] | None = None) -> MissionResult:
    """Run mission ``mission_id`` again from its cassette, as a new mission: its first part, then
    each continuation where the recorded one was continued. A part the user stopped before its
    round limit is stopped where it was (a part that does not end where the recorded one did is
    where the replay stops)."""
    from cabal.rounds.api import continue_mission, resume_mission, run_mission
    from cabal.rounds.control import stop_mission

    recorded = recorded_mission(mission_id, home=home, url=url)
    cassette = Workspace.at(home, url, reading=True).mission_dir(mission_id) / CASSETTE_FILE
    on_event = fan_out(on_event, NotesAsRecorded(recorded.notes, home, url))
    limit = int(recorded.spec.get("rounds") or 1)
    ends = [step.after_round for step in recorded.continuations]

    def stopping_at(limit: int, part: int) -> Callable[[MissionEvent], None] | None:
        """A listener that stops the replay where the user stopped this part of the recorded mission."""
        end = ends[part] if part < len(ends) else None
        if end is None or end >= limit or end == 0:
            return on_event

        def stop(event: MissionEvent) -> None:
            if event.kind == "round_start" and getattr(event, "round", None) == end:
                stop_mission(event.mission, home=home, url=url)  # as the user did: it ends at the next round

        return fan_out(on_event, stop)

    result = run_mission(recorded.spec, model=replay_spec(str(cassette), mode, fallback), home=home, url=url,
                         on_event=stopping_at(limit, 0), record=record, sources=recorded.sources)
    for part, step in enumerate(recorded.continuations, start=1):
        if result.state == MissionState.HALTED and result.round == step.after_round \
                and step.after_round in recorded.withdrawn:
            result = stop_mission(result.mission_id, home=home, url=url)  # stopped instead of answered
        if result.state != MissionState.DONE or result.round != step.after_round:
            break
        listener = stopping_at(step.rounds, part)
        if step.direction is not None:
            result = continue_mission(result.mission_id, step.direction, rounds=step.rounds - step.after_round,
                                      home=home, url=url, on_event=listener, record=record)
        else:
            result = resume_mission(result.mission_id, rounds=step.rounds, home=home, url=url, on_event=listener,
                                    record=record)
    return result
