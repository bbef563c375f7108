"""What a user asks of a mission outside a run: where it is (``mission_status``; with all of it,
``mission_overview``), what was said (``transcript``), a message for the team (``say``), a
request to stop (``stop_mission``) and its removal (``remove_mission``).

These read or write the mission's graph only, never the round engine: ``cabal status`` and
its siblings start without importing LangGraph or a model client.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cabal.errors import AnswerRejected, MissionError
from cabal.graph import ContextGraph
from cabal.llm.usage import Usage
from cabal.rounds.ids import item_id
from cabal.rounds.snapshot import mission_spend, model_output_switches
from cabal.rounds.transcripts import render_transcript
from cabal.rounds.transitions import Action, allows
from cabal.rounds.workspace import Workspace
from cabal.rounds.workspace import mission_graph as _mission_graph
from cabal.rounds.workspace import mission_node
from cabal.vocabulary import (
    USER_COLLAB_TYPE, USER_DIRECTION_TYPE, USER_ID, MissionKind, MissionState, Step, StopReason, cost_phrase,
    state_phrase,
    stop_phrase,
)

if TYPE_CHECKING:
    from cabal.membrane import Membrane
    from cabal.report import MissionReport


@dataclass(frozen=True)
class OutputSwitch:
    """A model moved to JSON answers because its provider refused tools."""

    model: str
    agent: str  # the agent whose call met the refusal
    round: int
    reason: str  # what the provider said


@dataclass(frozen=True)
class MissionResult:
    mission_id: str
    state: MissionState
    stop_reason: StopReason | None
    round: int
    usage: Usage
    cost_usd: float
    pending_halt: dict | None
    transcript_path: Path | None  # transcript.md if written (cabal run and resume write it; transcript() renders it)
    detail: str | None = None
    turns: int = 0  # turns committed (a turn stopped early counts once more, for what it spent)
    failed_turns: int = 0  # turns that found no valid answer: their work is missing
    error_log: Path | None = None  # the whole account of why it failed or diverged (a traceback, a replay's diff)
    output_switches: tuple[OutputSwitch, ...] = ()  # models that answer in JSON text since their provider refused tools
    forked_from: str | None = None  # the mission this one was forked from (cabal fork), and at which round
    forked_round: int | None = None
    kind: MissionKind = MissionKind.TEAM  # a baseline: one call wrote every document (cabal baseline)
    started_at: str | None = None  # when it started (ISO 8601, UTC), for a mission that records it
    unpriced_turns: int = 0  # turns on a model no price is known for: cost_usd leaves them out
    unpriced_models: tuple[str, ...] = ()  # those models

    @property
    def cost(self) -> str:
        """What it cost, as people read it (``$0.0123``, or "not priced")."""
        return cost_phrase(self.cost_usd, unpriced=self.unpriced_turns, of=self.turns)

    @property
    def lineage(self) -> str | None:
        """``forked from m-... at round N``, for a fork; ``a baseline ...`` for a baseline."""
        if self.kind == MissionKind.BASELINE:
            return "a baseline: one call of the model wrote every document"
        return f"forked from {self.forked_from} at round {self.forked_round}" if self.forked_from else None


def _pending_halt(graph: ContextGraph) -> dict | None:
    pending = graph.find("halt", {"status": "pending"})
    return pending[-1] if pending else None


def status_of(workspace: Workspace, graph: ContextGraph, mission_id: str) -> MissionResult:
    """Where a mission is. ``running`` only while a live process drives it: a mission whose
    process died (its lock is free) is ``interrupted``."""
    node = graph.get(mission_id) or {}
    spend = mission_spend(graph)
    path, log = workspace.transcript_path(mission_id), workspace.error_log_path(mission_id)
    state, detail = MissionState(node["status"]), node.get("detail") or None
    if state == MissionState.RUNNING and not workspace.is_driven(mission_id):
        state, detail = MissionState.INTERRUPTED, "the process running it stopped (killed or crashed)"
    return MissionResult(
        mission_id=mission_id, state=state,
        stop_reason=StopReason(node["stop_reason"]) if node.get("stop_reason") else None,
        round=int(node.get("round") or 0), usage=spend.usage, cost_usd=round(spend.cost_usd, 6),
        pending_halt=_pending_halt(graph), transcript_path=path if path.exists() else None, detail=detail,
        turns=spend.turns, failed_turns=spend.failed_turns,
        error_log=log if state in (MissionState.FAILED, MissionState.DIVERGED) and log.exists() else None,
        output_switches=tuple(OutputSwitch(str(switch.get("model")), str(switch.get("agent")),
                                           int(switch.get("round") or 0), str(switch.get("prose") or ""))
                              for switch in model_output_switches(graph)),
        forked_from=node.get("forked_from") or None, forked_round=node.get("forked_round"),
        kind=MissionKind.BASELINE if node.get("kind") == MissionKind.BASELINE else MissionKind.TEAM,
        started_at=node.get("started_at") or None, unpriced_turns=spend.unpriced_turns,
        unpriced_models=spend.unpriced_models,
    )


def mission_status(mission_id: str, *, home: str | Path | None = None, url: str | None = None) -> MissionResult:
    workspace = Workspace.at(home, url, reading=True)
    with _mission_graph(workspace, mission_id) as graph:
        return status_of(workspace, graph, mission_id)


def mission_overview(mission_id: str, *, home: str | Path | None = None,
                     url: str | None = None) -> tuple[MissionResult, MissionReport]:
    """Where a mission is and everything about it (``mission_status`` and ``mission_report``),
    read over one opening of the workspace and its graph: what ``cabal status`` shows."""
    from cabal.report import read_report

    workspace = Workspace.at(home, url, reading=True)
    with _mission_graph(workspace, mission_id) as graph:
        return status_of(workspace, graph, mission_id), read_report(graph, mission_id)


def say(mission_id: str, text: str, *, product: str | None = None, home: str | Path | None = None,
        url: str | None = None) -> str:
    """Leave a user message between rounds; it becomes a collab the team reads next round. A
    mission that has ended reads no more messages: ``MissionError`` says how to continue it."""
    workspace = Workspace.at(home, url, reading=True)
    with _mission_graph(workspace, mission_id) as graph:
        status = status_of(workspace, graph, mission_id)
        if status.state == MissionState.DONE:
            raise MissionError(f"mission {mission_id} has ended ({stop_phrase(status.stop_reason)}): the team reads no more "
                               "messages", hint=f'cabal continue {mission_id} "a new direction" [--rounds N]')
        return leave_note(graph, mission_id, text, product=product)


def leave_note(graph: ContextGraph, mission_id: str, text: str, *, product: str | None = None,
               direction: bool = False) -> str:
    """Write the user's note (or, ``direction``, the new direction of a mission continued after
    it ended) through its protocol; returns its id."""
    node = mission_node(graph, mission_id)
    notes = len(graph.find("collab", {"author": "user"}))
    note_id = item_id(f"user.r{node.get('round', 0)}", "note", notes)
    from cabal.membrane import Membrane  # here: status and transcript need no membrane (start-up)

    membrane = Membrane(graph)
    try:  # the user's text is checked by the protocol like any answer
        note = membrane.prepare("user_message", {
            "mission_id": mission_id, "round": int(node.get("round") or 0), "item_id": note_id,
            "actor_id": USER_ID,
            "collab_type": USER_DIRECTION_TYPE if direction else "feedback" if product else USER_COLLAB_TYPE,
        }, {"item": {"content": text, "productId": product}}, session_id=note_id)
    except AnswerRejected as rejected:
        raise MissionError(f"cannot leave the message: {rejected}") from None
    membrane.commit([note])
    return note_id


def stop_mission(mission_id: str, *, home: str | Path | None = None, url: str | None = None) -> MissionResult:
    """Stop the team (stop reason userHalt), and return where the mission is after. A mission a
    process runs stops at the start of its next round; one that no process runs (waiting for an
    answer, or paused) stops now: it ends ``done``, and a question it waited on is withdrawn,
    unanswered. Either way ``resume`` (or ``continue``) takes it further later (one stopped at the
    Chair's first question waits for its answer again: ``ask_again``)."""
    workspace = Workspace.at(home, url, reading=True)
    with _mission_graph(workspace, mission_id) as graph:
        status = status_of(workspace, graph, mission_id)
        if not allows(Action.STOP, status.state):
            raise MissionError(f"mission {mission_id} has already ended: "
                               f"{state_phrase(status.state, status.stop_reason)}")
        from cabal.membrane import Membrane

        membrane = Membrane(graph)
        membrane.run("request_stop", {"mission_id": mission_id, "actor_id": USER_ID}, {},
                     session_id=f"{mission_id}.stop")
        if status.state != MissionState.RUNNING:
            try:
                with workspace.driving(mission_id):  # no run may start while it is ended here
                    _end_stopped(membrane, graph, workspace, mission_id)
            except MissionError:
                pass  # a run started meanwhile: it reads the request at its next round, as any run does
        return status_of(workspace, graph, mission_id)


def _end_stopped(membrane: Membrane, graph: ContextGraph, workspace: Workspace, mission_id: str) -> None:
    """End a mission no process runs, as the engine ends one the user stopped: one commit of its
    state and its withdrawn question."""
    status = status_of(workspace, graph, mission_id)
    if status.state not in (MissionState.HALTED, MissionState.INTERRUPTED):
        return
    node = mission_node(graph, mission_id)
    clusters = [membrane.prepare("mission_status", {
        "mission_id": mission_id, "actor_id": USER_ID, "status": MissionState.DONE, "round": status.round,
        "stop_reason": StopReason.USER_HALT, "detail": "the user asked the team to stop",
        "budget_tokens": node.get("budget_tokens"), "budget_cost_usd": node.get("budget_cost_usd"),
    }, {}, session_id=f"{mission_id}.stopped.r{status.round}")]
    if status.pending_halt is not None:
        clusters.append(membrane.prepare("withdraw_halt", {
            "halt_id": status.pending_halt["id"], "actor_id": USER_ID, "round": status.round}, {},
            session_id=f"{mission_id}.withdraw.{status.pending_halt['id']}"))
    membrane.commit(clusters)


def ask_again(graph: ContextGraph, workspace: Workspace, mission_id: str) -> bool:
    """A mission the user stopped while the Chair's first question waited has no charter: going
    on as a stopped mission goes on (from its last round's end) would start round 1 without one.
    Its question stands again instead, and the mission waits for the answer, as before the stop:
    ``resume`` then takes an answer (``--answer``, or the mission file's next). True when it did."""
    status = status_of(workspace, graph, mission_id)
    node = mission_node(graph, mission_id)
    if status.state != MissionState.DONE or status.stop_reason != StopReason.USER_HALT or node.get("charter"):
        return False
    withdrawn = [halt for halt in graph.find("halt", {"status": "withdrawn"}) if halt.get("step") == Step.BOOTSTRAP]
    if not withdrawn:
        return False
    from cabal.membrane import Membrane

    question = withdrawn[-1]
    times = len(graph.find("moment", {"type": "question_again"}, fields=["id"]))  # each write its own moments
    Membrane(graph).run("reinstate_halt", {
        "mission_id": mission_id, "actor_id": USER_ID, "halt_id": question["id"], "round": status.round,
        "detail": str(question.get("message") or ""),
    }, {}, session_id=f"{mission_id}.ask_again.{question['id']}.{times}")
    return True


def remove_mission(mission_id: str, *, home: str | Path | None = None, url: str | None = None) -> None:
    """Remove a mission and everything the workspace holds for it: its graph, checkpoints,
    cassette, transcript and logs. An unknown id is ``ResourceNotFound`` (the closest ids
    listed); a mission a live process runs is refused with ``MissionBusy``, nothing removed."""
    workspace = Workspace.at(home, url, reading=True)
    _mission_graph(workspace, mission_id).close()  # a mission of this workspace, else the closest ids
    workspace.remove(mission_id)


def transcript(mission_id: str, *, home: str | Path | None = None, url: str | None = None) -> str:
    workspace = Workspace.at(home, url, reading=True)
    with _mission_graph(workspace, mission_id) as graph:
        return render_transcript(graph, mission_id)
