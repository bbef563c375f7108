"""A mission's run told in AG-UI's own events (``ag-ui-protocol``): steps, text messages, the
product tree as state, and the run's end.

``RunTelling`` turns the engine's events (``cabal.rounds.events``) into AG-UI events as they
come: each step of a round is a step (closed when the next begins, or the run ends), each
committed turn is a text message from its agent (its summary), the Envoy's lines and a
question to the user are text messages too. ``tree_state`` is what the client's state holds:
the mission, where it stands, and its product tree, each product by its id (so a change is a
JSON Patch of one field, not of a list's positions); ``tree_delta`` is the patch from one
state to the next. ``run_end`` is the last event: finished (with the question as an
interrupt the next run answers, or cancelled when the user stopped the mission) or an error.
"""

from __future__ import annotations

import itertools
from typing import Any

import jsonpatch
from ag_ui.core import (BaseEvent, Interrupt, RunErrorEvent, RunFinishedCancelledOutcome, RunFinishedEvent,
                        RunFinishedInterruptOutcome, StepFinishedEvent, StepStartedEvent, TextMessageContentEvent,
                        TextMessageEndEvent, TextMessageStartEvent)

from cabal.rounds import events as ev
from cabal.vocabulary import MissionState, StopReason
from cabal.web.state import MissionView

QUESTION = "question"  # an interrupt's reason when the Chair asks (a gate's is the gate: plan, tool)


def tree_state(view: MissionView) -> dict[str, Any]:
    """The client's state: the mission, where it stands, its question, and its product tree."""
    report, status = view.report, view.status
    return {
        "mission": status.mission_id,
        "name": report.mission.name,
        "state": str(status.state),
        "stop_reason": str(status.stop_reason) if status.stop_reason else None,
        "round": status.round,
        "question": str(status.pending_halt.get("message")) if status.pending_halt else None,
        "products": {product.id: {
            "name": product.name,
            "type": product.type,
            "status": product.status,
            "owner": product.owner,
            "parent": product.parent_id,
            "version": product.latest.number if product.latest else None,
            "accepted_version": product.accepted_version.number if product.accepted_version else None,
            "content": product.shown.content if product.shown else None,
        } for product in report.live_products},
    }


def tree_delta(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON Patch (RFC 6902) that makes ``before`` into ``after``; empty when nothing changed."""
    return list(jsonpatch.make_patch(before, after).patch)


def touches_tree(event: ev.MissionEvent) -> bool:
    """Whether the state may have changed with ``event`` (a committed turn, a question, an end)."""
    return isinstance(event, (ev.TurnDone, ev.HaltRaised, ev.Answered, ev.MissionStopped, ev.RunEnded,
                              ev.RoundStarted))


class RunTelling:
    """The AG-UI events of one run's engine events, in order. Not thread-safe: the stream calls
    it from its one task."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.step: str | None = None  # the step open now
        self.names: dict[str, str] = {}  # the team's own names by agent id
        self._ids = itertools.count(1)

    def told(self, event: ev.MissionEvent) -> list[BaseEvent]:
        if isinstance(event, (ev.MissionStarted, ev.MissionResumed)):
            self.names.update(event.names)
            return []
        if isinstance(event, ev.StepStarted):
            name = f"round {event.round}: {event.step}"
            return [*self.close_step(), StepStartedEvent(step_name=self._opened(name))]
        if isinstance(event, (ev.RoundStarted, ev.RunEnded)):
            return self.close_step()
        if isinstance(event, ev.TurnDone) and event.summary.strip() and event.halt != QUESTION:
            return self.message(event.agent, event.summary)  # (a question comes whole with HaltRaised)
        if isinstance(event, ev.Presented):
            return [told for line in event.lines if line.text.strip() for told in self.message(line.speaker, line.text)]
        if isinstance(event, ev.HaltRaised):
            options = f" (options: {', '.join(event.options)})" if event.options else ""
            return self.message(event.asker, event.message + options)
        return []

    def _opened(self, name: str) -> str:
        self.step = name
        return name

    def close_step(self) -> list[BaseEvent]:
        if self.step is None:
            return []
        closed, self.step = self.step, None
        return [StepFinishedEvent(step_name=closed)]

    def message(self, agent: str, text: str) -> list[BaseEvent]:
        """One whole text message of the team (its agent's own name as the speaker's)."""
        message_id = f"{self.run_id}-{next(self._ids)}"
        return [TextMessageStartEvent(message_id=message_id, role="assistant", name=self.names.get(agent, agent)),
                TextMessageContentEvent(message_id=message_id, delta=text),
                TextMessageEndEvent(message_id=message_id)]


def run_end(thread_id: str, run_id: str, view: MissionView) -> BaseEvent:
    """The run's last event, from where its mission stands once it stopped driving it."""
    status = view.status
    state = tree_state(view)
    result = {key: state[key] for key in ("mission", "state", "stop_reason", "round")}
    if status.state == MissionState.HALTED and status.pending_halt:
        halt = status.pending_halt
        options = [str(option) for option in halt.get("options") or []]
        schema: dict[str, Any] = {"type": "string", "description": "your answer (the options are suggestions)"}
        if options:
            schema["examples"] = options
        interrupt = Interrupt(id=str(halt["id"]), reason=str(halt.get("gate") or QUESTION),
                              message=str(halt.get("message")), response_schema=schema)
        return RunFinishedEvent(thread_id=thread_id, run_id=run_id, result=result,
                                outcome=RunFinishedInterruptOutcome(interrupts=[interrupt]))
    if status.state == MissionState.DONE and status.stop_reason == StopReason.USER_HALT:
        return RunFinishedEvent(thread_id=thread_id, run_id=run_id, result=result,
                                outcome=RunFinishedCancelledOutcome())
    if status.state == MissionState.DONE:
        return RunFinishedEvent(thread_id=thread_id, run_id=run_id, result=result)
    detail = f": {status.detail}" if status.detail else ""
    return RunErrorEvent(message=f"mission {status.mission_id} is {status.state}{detail}", code=str(status.state))
