"""The Python API of missions: run, resume, answer, say, stop, status.

    from cabal import run_mission, resume_mission
    result = run_mission("examples/launch/launch.mission.yaml", model="scripted:...")
    if result.state == "halted":
        result = resume_mission(result.mission_id, answer="Students first.")

Each mission is its own named graph (its id) on the workspace's graph server; the round loop's
position is checkpointed in ``<workspace>/checkpoints.sqlite``, so any process can resume it.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph.types import Command

from cabal.entities import USER_COLLAB_TYPE
from cabal.errors import AnswerRejected, MissionError
from cabal.graph import ContextGraph
from cabal.llm import DEFAULT_MODEL, Budget, Usage, make_model, model_name
from cabal.membrane import Membrane
from cabal.rounds.context import PromptLibrary
from cabal.rounds.engine import build_graph
from cabal.rounds.ids import item_id
from cabal.rounds.mission import MissionSpec, load_mission, parse_mission
from cabal.rounds.events import MissionEvent, MissionResumed, MissionStarted, RunEnded, fan_out
from cabal.rounds.run import MissionRun
from cabal.rounds.snapshot import mission_spend
from cabal.rounds.team import Team, load_role_cards
from cabal.rounds.workspace import MISSION_PREFIX, Workspace
from cabal.rounds.workspace import mission_graph as _mission_graph
from cabal.rounds.transcript import render_transcript
from cabal.tracing import recorder_from_environment
from cabal.vocabulary import USER_ID, MissionState, StopReason

@dataclass(frozen=True)
class MissionResult:
    mission_id: str
    state: MissionState
    stop_reason: StopReason | None
    round: int
    usage: Usage
    cost_usd: float
    pending_halt: dict | None
    transcript_path: Path | None
    detail: str | None = None


def _new_mission_id(spec: MissionSpec) -> str:
    slug = "".join(ch if ch.isalnum() else "-" for ch in (spec.name or "mission").lower()).strip("-")[:40] or "mission"
    return f"{MISSION_PREFIX}{slug}-{secrets.token_hex(3)}"


def _resolve_model(model: Any, spec: MissionSpec, base: Path | None) -> tuple[Any, str]:
    """A chat model and the spec string to store for resuming (relative scripts made absolute)."""
    if model is not None and not isinstance(model, str):
        return model, f"object:{model_name(model)}"
    chosen = model or spec.model or DEFAULT_MODEL
    if chosen.startswith("scripted:") and base is not None:
        path = Path(chosen.removeprefix("scripted:"))
        chosen = f"scripted:{(path if path.is_absolute() else base / path).resolve()}"
    return make_model(chosen), chosen


def _mission_run(workspace: Workspace, graph: ContextGraph, mission_id: str, spec: MissionSpec, model: Any,
                 on_event: Callable[[MissionEvent], None] | None, answers: list[str]) -> MissionRun:
    cards = load_role_cards(workspace.extra_dirs.get("agents", []))
    team = Team.build(spec.team.operatives, cards, spec.team.names, spec.team.skills)
    mission = graph.get(mission_id)
    # The mission node keeps the budget once it exists (a user may have raised it since).
    budget = (Budget(max_tokens=mission.get("budget_tokens"), max_cost_usd=mission.get("budget_cost_usd"))
              if mission else spec.budget.to_budget())
    return MissionRun(
        mission_id=mission_id, spec=spec, graph=graph,
        membrane=Membrane(graph, protocol_dirs=workspace.extra_dirs.get("protocols", [])),
        model=model, team=team,
        prompts=PromptLibrary(workspace.extra_dirs.get("prompts", []), skill_dirs=workspace.extra_dirs.get("skills", [])),
        budget=budget, answers=list(answers),
        on_event=fan_out(on_event, recorder_from_environment()) or (lambda event: None),  # traces if OTEL_* asks
    )


def run_mission(mission: str | Path | MissionSpec | dict, *, model: Any = None, home: str | Path | None = None,
                url: str | None = None, rounds: int | None = None,
                on_event: Callable[[MissionEvent], None] | None = None) -> MissionResult:
    """Start a mission and run it until it ends or pauses for the user.

    ``on_event`` receives every event of the run (``cabal.rounds.events``) as it happens, from
    the thread of the turn that caused it.
    """
    base = None
    if isinstance(mission, (str, Path)):
        spec, base = load_mission(mission)
    elif isinstance(mission, dict):
        spec = parse_mission(mission)
    else:
        spec = mission
    if rounds is not None:
        spec = spec.model_copy(update={"rounds": rounds})
    workspace = Workspace.at(home, url)
    chat_model, model_spec = _resolve_model(model, spec, base)
    mission_id = _new_mission_id(spec)
    graph = workspace.graph(mission_id)
    try:
        run = _mission_run(workspace, graph, mission_id, spec, chat_model, on_event, spec.answers)
        for agent in run.team.agents:  # an unknown skill is an error now, not at its first prompt
            for skill in agent.skills:
                run.prompts.skill_text(skill)
        agents = [{"id": a.id, "role": a.role, "name": a.name, "persona": run.team.cards[a.role].persona,
                   "skills": list(a.skills)} for a in run.team.agents]
        run.write("start_mission", {
            "mission_id": mission_id, "name": spec.name or mission_id, "request": spec.request, "rounds": spec.rounds,
            "spec": spec.model_dump_json(), "model": model_spec, "agents": agents,
            "budget_tokens": spec.budget.tokens, "budget_cost_usd": spec.budget.cost_usd,
        }, {}, session_id=f"{mission_id}.start")
        run.emit(MissionStarted(mission_id, name=spec.name or mission_id, request=spec.request,
                                operatives=spec.team.operatives, rounds=spec.rounds, model=model_spec,
                                budget_tokens=run.budget.max_tokens, budget_cost_usd=run.budget.max_cost_usd))
        return _drive(workspace, run, None)
    finally:
        graph.close()


def resume_mission(mission_id: str, *, answer: str | None = None, model: Any = None,
                   home: str | Path | None = None, url: str | None = None,
                   on_event: Callable[[MissionEvent], None] | None = None) -> MissionResult:
    """Continue a mission: answer its pending question, or pick it up after a crash."""
    workspace = Workspace.at(home, url)
    graph = _mission_graph(workspace, mission_id)
    try:
        node = graph.get(mission_id)
        spec = parse_mission(json.loads(node["spec"]), source=mission_id)
        if node.get("status") in (MissionState.DONE, MissionState.FAILED):
            return status_of(workspace, graph, mission_id)
        stored = node.get("model") or ""
        chosen = model if model is not None else (None if stored.startswith("object:") else stored)
        if chosen is None:
            raise MissionError(f"mission {mission_id} ran with an in-process model; pass model= to resume it")
        chat_model, _ = _resolve_model(chosen, spec, None)
        run = _mission_run(workspace, graph, mission_id, spec, chat_model, on_event, [])
        pending = _pending_halt(graph)
        if pending is not None and answer is None:
            raise MissionError(f"mission {mission_id} is waiting for an answer: {pending.get('message')}",
                               hint=f"cabal resume {mission_id} --answer '...'")
        if pending is None and answer is not None:
            raise MissionError(f"mission {mission_id} has no pending question to answer")
        spent, cost = mission_spend(graph)
        run.emit(MissionResumed(mission_id, name=str(node.get("name") or mission_id), round=int(node.get("round") or 0),
                                answer=answer, model=str(chosen) if isinstance(chosen, str) else model_name(chat_model),
                                budget_tokens=run.budget.max_tokens, budget_cost_usd=run.budget.max_cost_usd,
                                spent_tokens=spent.total_tokens, spent_cost_usd=round(cost, 6)))
        return _drive(workspace, run, answer)
    finally:
        graph.close()


def _drive(workspace: Workspace, run: MissionRun, answer: str | None) -> MissionResult:
    config = {"configurable": {"thread_id": run.mission_id}, "recursion_limit": 10_000}
    with workspace.driving(run.mission_id), workspace.checkpointer() as saver:
        app = build_graph(saver)
        started = app.get_state(config).values
        if answer is not None:
            payload: Any = Command(resume=answer)
        elif started:
            payload = None  # continue from the last checkpoint (after a crash)
        else:
            payload = {"round": 0}
        try:
            app.invoke(payload, config, context=run)
        finally:
            run.close()
    path = workspace.transcript_path(run.mission_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_transcript(run.graph, run.mission_id))
    result = status_of(workspace, run.graph, run.mission_id)
    run.emit(RunEnded(run.mission_id, state=result.state, stop_reason=result.stop_reason, round=result.round,
                      turns=result.usage.calls, input_tokens=result.usage.input_tokens,
                      output_tokens=result.usage.output_tokens, cache_read_tokens=result.usage.cache_read_tokens,
                      cost_usd=result.cost_usd,
                      question=str(result.pending_halt.get("message")) if result.pending_halt else None))
    return result


def _pending_halt(graph: ContextGraph) -> dict | None:
    pending = graph.find("halt", {"status": "pending"})
    return pending[-1] if pending else None


def status_of(workspace: Workspace, graph: ContextGraph, mission_id: str) -> MissionResult:
    node = graph.get(mission_id) or {}
    usage, cost = mission_spend(graph)
    path = workspace.transcript_path(mission_id)
    return MissionResult(
        mission_id=mission_id, state=MissionState(node["status"]),
        stop_reason=StopReason(node["stop_reason"]) if node.get("stop_reason") else None,
        round=int(node.get("round") or 0), usage=usage, cost_usd=round(cost, 6), pending_halt=_pending_halt(graph),
        transcript_path=path if path.exists() else None, detail=node.get("detail") or None,
    )


def mission_status(mission_id: str, *, home: str | Path | None = None, url: str | None = None) -> MissionResult:
    workspace = Workspace.at(home, url)
    with _mission_graph(workspace, mission_id) as graph:
        return status_of(workspace, graph, mission_id)


def say(mission_id: str, text: str, *, product: str | None = None, home: str | Path | None = None,
        url: str | None = None) -> str:
    """Leave a user message between rounds; it becomes a collab the team reads next round."""
    workspace = Workspace.at(home, url)
    with _mission_graph(workspace, mission_id) as graph:
        node = graph.get(mission_id)
        notes = len(graph.find("collab", {"author": "user"}))
        note_id = item_id(f"user.r{node.get('round', 0)}", "note", notes)
        membrane = Membrane(graph)
        try:  # the user's text is checked by the protocol like any answer
            note = membrane.prepare("user_message", {
                "mission_id": mission_id, "round": int(node.get("round") or 0), "item_id": note_id,
                "actor_id": USER_ID, "collab_type": "feedback" if product else USER_COLLAB_TYPE,
            }, {"item": {"content": text, "productId": product}}, session_id=note_id)
        except AnswerRejected as rejected:
            raise MissionError(f"cannot leave the message: {rejected}") from None
        membrane.commit([note])
        return note_id


def stop_mission(mission_id: str, *, home: str | Path | None = None, url: str | None = None) -> None:
    """Ask the team to stop at the next round (stop reason userHalt)."""
    workspace = Workspace.at(home, url)
    with _mission_graph(workspace, mission_id) as graph:
        Membrane(graph).run("request_stop", {"mission_id": mission_id, "actor_id": USER_ID}, {},
                            session_id=f"{mission_id}.stop")


def transcript(mission_id: str, *, home: str | Path | None = None, url: str | None = None) -> str:
    workspace = Workspace.at(home, url)
    with _mission_graph(workspace, mission_id) as graph:
        return render_transcript(graph, mission_id)
