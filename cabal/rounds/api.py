"""The Python API of missions: run, resume and answer (``control`` has status, say and stop).

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
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.types import Command
from pydantic import ValidationError

from cabal.entities import HaltAnswer
from cabal.errors import CabalError, CallRefused, GraphUnavailable, MissionError, ModelError
from cabal.graph import ContextGraph
from cabal.limits import answer_problems
from cabal.llm import Budget, CallLimiter, ModelSettings, make_model, model_name
from cabal.llm.cassette import CASSETTE_FILE, recording
from cabal.llm.usage import price_per_mtok
from cabal.membrane import Membrane
from cabal.membrane.validation import pydantic_problems
from cabal.private import write_private
from cabal.rounds.context import PromptLibrary
from cabal.rounds.control import MissionResult, status_of
from cabal.rounds.engine import ANSWER_FROM_FILE, BUDGET_HALT, build_graph
from cabal.rounds.events import (MissionEvent, MissionInterrupted, MissionResumed, MissionStarted, MissionStopped,
                                 RunEnded, Warned, fan_out)
from cabal.rounds.mission import MissionSpec, load_mission, parse_mission
from cabal.rounds.run import MissionRun
from cabal.rounds.snapshot import mission_spend
from cabal.rounds.team import Team, load_role_cards
from cabal.rounds.transcript import render_transcript
from cabal.rounds.workspace import MISSION_ID, MISSION_PREFIX, Workspace
from cabal.rounds.workspace import mission_graph as _mission_graph
from cabal.tracing import recorder_from_environment
from cabal.vocabulary import USER_ID, MissionState, StopReason



def _new_mission_id(spec: MissionSpec) -> str:
    slug = "".join(ch if ch.isalnum() else "-" for ch in (spec.name or "mission").lower()).strip("-")[:40] or "mission"
    return f"{MISSION_PREFIX}{slug}-{secrets.token_hex(3)}"


def _chat_model(model: Any, settings: ModelSettings, base: Path | None,
                home: str | Path | None = None) -> tuple[Any, ModelSettings, str]:
    """The chat model to run, the settings it runs with, and the spec to store for resuming
    (a script's relative path made absolute, a replayed mission's id made its cassette's path;
    ``object:NAME`` for a model passed in)."""
    if model is not None and not isinstance(model, str):
        return model, settings, f"object:{model_name(model)}"
    if isinstance(model, str):
        settings = settings.with_overrides(name=model)
    chosen = settings.name
    if chosen.startswith("scripted:") and base is not None:
        path = Path(chosen.removeprefix("scripted:"))
        chosen = f"scripted:{(path if path.is_absolute() else base / path).resolve()}"
        settings = settings.with_overrides(name=chosen)
    if chosen.startswith("replay:"):
        from cabal.llm.replay import resolved_replay_spec

        chosen = resolved_replay_spec(chosen, home)
        settings = settings.with_overrides(name=chosen)
    return make_model(chosen, settings), settings, chosen


def _mission_run(workspace: Workspace, graph: ContextGraph, mission_id: str, spec: MissionSpec, model: Any,
                 settings: ModelSettings, on_event: Callable[[MissionEvent], None] | None,
                 answers: list[str], limiter: CallLimiter | None = None) -> MissionRun:
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
        budget=budget, settings=settings, answers=list(answers),
        on_event=fan_out(on_event, recorder_from_environment()) or (lambda event: None),  # traces if OTEL_* asks
        limiter=limiter,
    )


def run_mission(mission: str | Path | MissionSpec | dict, *, model: Any = None, home: str | Path | None = None,
                url: str | None = None, rounds: int | None = None, model_settings: dict[str, Any] | None = None,
                on_event: Callable[[MissionEvent], None] | None = None, mission_id: str | None = None,
                call_limiter: CallLimiter | None = None, record: bool = True) -> MissionResult:
    """Start a mission and run it until it ends or pauses.

    ``model``: a model spec (overriding the mission file's) or a chat model object;
    ``model_settings``: overrides of the model's settings (``timeout_s``, ``max_retries``, ...),
    applied over the mission file's and the ``CABAL_MODEL_*`` environment's. Nothing is written
    until the mission file, the settings and the model are known to be good. ``on_event``
    receives every event of the run (``cabal.rounds.events``) as it happens, from the thread of
    the turn that caused it.
    ``mission_id``: the id to give it (``m-`` then letters, digits, ``_`` and ``-``), for a
    caller that must know it before the mission runs (a batch); default: a new one.
    ``call_limiter``: limits on model calls shared with other missions (a batch's workers).
    ``record``: keep every model call in the mission's cassette (``llm/cassette.py``).
    """
    base = None
    if isinstance(mission, (str, Path)):
        spec, base = load_mission(mission)
    elif isinstance(mission, dict):
        spec = parse_mission(mission)
    else:
        spec = mission
    if rounds is not None:
        spec = parse_mission({**spec.model_dump(exclude_none=True), "rounds": rounds}, source="--rounds")
    settings = spec.model_settings().from_environment().with_overrides(**(model_settings or {}))
    chat_model, settings, model_spec = _chat_model(model, settings, base, home)
    workspace = Workspace.at(home, url)
    if mission_id is not None and not MISSION_ID.fullmatch(mission_id):
        raise MissionError(f"invalid mission id {mission_id!r}: use m- then up to 100 letters, digits, "
                           "underscores and hyphens")
    mission_id = mission_id or _new_mission_id(spec)
    with workspace.checkpointer():
        pass  # a checkpoint store that cannot be reached is an error now, before anything is written
    graph = workspace.graph(mission_id)
    try:
        if graph.exists(mission_id):
            raise MissionError(f"mission {mission_id} already exists", hint=f"cabal resume {mission_id}")
        run = _mission_run(workspace, graph, mission_id, spec, chat_model, settings, on_event, spec.answers,
                           call_limiter)
        for agent in run.team.agents:  # an unknown skill is an error now, not at its first prompt
            for skill in agent.skills:
                run.prompts.skill_text(skill)
        agents = [{"id": a.id, "role": a.role, "name": a.name, "persona": run.team.cards[a.role].persona,
                   "skills": list(a.skills)} for a in run.team.agents]
        run.write("start_mission", {
            "mission_id": mission_id, "name": spec.name or mission_id, "request": spec.request, "rounds": spec.rounds,
            "spec": spec.model_dump_json(), "model": model_spec, "model_settings": settings.model_dump_json(),
            "agents": agents, "budget_tokens": spec.budget.tokens, "budget_cost_usd": spec.budget.cost_usd,
        }, {}, session_id=f"{mission_id}.start")
        run.emit(MissionStarted(mission_id, name=spec.name or mission_id, request=spec.request,
                                operatives=spec.team.operatives, rounds=spec.rounds, model=model_spec,
                                budget_tokens=run.budget.max_tokens, budget_cost_usd=run.budget.max_cost_usd))
        if spec.budget.cost_usd is not None and price_per_mtok(model_name(chat_model)) is None:
            run.emit(Warned(mission_id, message=f"no prices are known for {model_name(chat_model)}: the cost budget "
                                                f"(${spec.budget.cost_usd}) cannot be enforced; the token budget "
                                                "still is"))
        return _drive(workspace, run, {"round": 0}, record=record)
    finally:
        graph.close()


def resume_mission(mission_id: str, *, answer: str | None = None, model: Any = None, rounds: int | None = None,
                   home: str | Path | None = None, url: str | None = None,
                   model_settings: dict[str, Any] | None = None,
                   on_event: Callable[[MissionEvent], None] | None = None,
                   call_limiter: CallLimiter | None = None, record: bool = True) -> MissionResult:
    """Continue a mission: answer its pending question, pick it up after a crash, a kill or a
    model outage, or continue one the user stopped or that ran out of rounds (``rounds``: the
    new round limit). The mission file's unattended answers not yet used are used again."""
    workspace = Workspace.at(home, url, reading=True)
    graph = _mission_graph(workspace, mission_id)
    try:
        node = graph.get(mission_id)
        spec = parse_mission(json.loads(node["spec"]), source=mission_id)
        status = status_of(workspace, graph, mission_id)
        if status.state == MissionState.RUNNING:
            raise MissionError(f"mission {mission_id} is being run by another process",
                               hint="wait for it to pause or finish, then resume")
        extend = _continuation(status, rounds, int(node.get("rounds") or spec.rounds))
        if status.state == MissionState.DONE and extend is None:
            if answer is not None:
                raise MissionError(f"mission {mission_id} has ended ({status.stop_reason}); there is no question "
                                   "to answer")
            return status  # it ended, and nothing asks it to go on
        stored = node.get("model") or ""
        if model is None and stored.startswith("object:"):
            raise MissionError(f"mission {mission_id} ran with an in-process model; pass model= to resume it")
        settings = ModelSettings.model_validate_json(node["model_settings"]) if node.get("model_settings") \
            else spec.model_settings()
        settings = settings.from_environment().with_overrides(**(model_settings or {}))
        chat_model, settings, _ = _chat_model(model if model is not None else stored, settings, None)
        used = sum(h.get("answer_source") == ANSWER_FROM_FILE for h in graph.find("halt"))
        run = _mission_run(workspace, graph, mission_id, spec, chat_model, settings, on_event, spec.answers[used:],
                           call_limiter)
        pending = status.pending_halt
        # A run killed between asking the Chair's question and taking the mission file's answer
        # left it pending: the file's next answer is still there to take, as a clean run would.
        from_file = pending is not None and bool(run.answers) and not BUDGET_HALT.fullmatch(str(pending["id"]))
        if pending is not None and answer is None and not from_file:
            raise MissionError(f"mission {mission_id} is waiting for an answer: {pending.get('message')}",
                               hint=f"cabal resume {mission_id} --answer '...'")
        if pending is None and answer is not None:
            raise MissionError(f"mission {mission_id} has no pending question to answer")
        if answer is not None:  # the user's answer is checked like any answer, before anything runs
            try:
                HaltAnswer(answer=answer)
                problems = answer_problems(answer)
            except ValidationError as error:
                problems = pydantic_problems(error)
            if problems:
                raise MissionError("the answer cannot be used: " + "; ".join(map(str, problems)))
        spend = mission_spend(graph)
        run.emit(MissionResumed(mission_id, name=str(node.get("name") or mission_id), round=int(node.get("round") or 0),
                                answer=answer, model=settings.name if model is None or isinstance(model, str)
                                else model_name(chat_model),
                                budget_tokens=run.budget.max_tokens, budget_cost_usd=run.budget.max_cost_usd,
                                spent_tokens=spend.usage.total_tokens, spent_cost_usd=round(spend.cost_usd, 6)))
        if extend is not None:
            run.write("continue_mission", {"mission_id": mission_id, "actor_id": USER_ID, "rounds": extend},
                      {}, session_id=f"{mission_id}.continue.r{status.round}.{extend}")
            return _drive(workspace, run, None, reopen=True, record=record)
        return _drive(workspace, run, Command(resume=answer) if answer is not None else None, record=record)
    finally:
        graph.close()


def _continuation(status: MissionResult, rounds: int | None, limit: int) -> int | None:
    """The round limit a mission that ended goes on with, or None when it does not go on.

    One the user stopped goes on (with ``rounds`` if given); one that ran out of rounds goes on
    only with more rounds; one that concluded, failed or ran out of budget does not."""
    if rounds is not None and rounds <= status.round:
        raise MissionError(f"--rounds {rounds} is not more than the {status.round} round(s) already run")
    if status.state != MissionState.DONE:
        if rounds is not None:
            raise MissionError(f"mission {status.mission_id} is {status.state}; --rounds continues a mission "
                               "that ended (stopped by the user or out of rounds)")
        return None
    if status.stop_reason == StopReason.USER_HALT:
        return rounds or limit
    if status.stop_reason == StopReason.NO_MORE_ROUNDS and rounds is not None:
        return rounds
    if rounds is not None:
        raise MissionError(f"mission {status.mission_id} ended ({status.stop_reason}); only a mission the user "
                           "stopped or one out of rounds can go on")
    return None


def _drive(workspace: Workspace, run: MissionRun, payload: Any, *, reopen: bool = False,
           record: bool = True) -> MissionResult:
    """Run the round graph from ``payload`` (a new mission's first state, an answer, or None to
    go on from the last checkpoint) until the mission ends or pauses; every way it stops is
    recorded honestly: a model outage or Ctrl-C pauses it ``interrupted``, any other error
    fails it with the message (and the traceback in the mission's error.log)."""
    config = {"configurable": {"thread_id": run.mission_id}, "recursion_limit": 10_000}
    with workspace.driving(run.mission_id), workspace.checkpointer() as saver, \
            recording(workspace.mission_dir(run.mission_id) / CASSETTE_FILE, record,
                      on_full=lambda message: run.emit(Warned(run.mission_id, message=message))):
        app = build_graph(saver)
        try:
            if reopen:  # an ended mission goes on: as if its last round's Presentation had just run
                app.update_state(config, {"stop": None, "detail": None, "halt": None}, as_node="presentation")
            elif payload is None and app.get_state(config).created_at is None:
                # Stopped after the mission was written but before its first checkpoint: start
                # the loop (turns already committed are skipped by their ids).
                payload = {"round": 0}
            app.invoke(payload, config, context=run)
        except CallRefused as refused:
            _pause(run, str(refused))
        except ModelError as error:
            _pause(run, f"the model is unavailable: {error}")
        except KeyboardInterrupt:
            run.close(wait=False)  # do not wait for model calls in flight
            _pause(run, "interrupted (Ctrl-C)")
            raise
        except GraphUnavailable:
            raise  # nothing can be recorded; the mission shows interrupted once its lock is free
        except Exception as error:  # noqa: BLE001 - an engine error must end the mission honestly
            _fail(workspace, run, error)
        run.close()
    workspace.private_mission_dir(run.mission_id)
    write_private(workspace.transcript_path(run.mission_id), render_transcript(run.graph, run.mission_id))
    result = status_of(workspace, run.graph, run.mission_id)
    run.emit(RunEnded(run.mission_id, state=result.state, stop_reason=result.stop_reason, round=result.round,
                      turns=result.turns, input_tokens=result.usage.input_tokens,
                      output_tokens=result.usage.output_tokens, cache_read_tokens=result.usage.cache_read_tokens,
                      cost_usd=result.cost_usd,
                      question=str(result.pending_halt.get("message")) if result.pending_halt else None))
    return result


def _round_of(run: MissionRun) -> int:
    return int((run.graph.get(run.mission_id) or {}).get("round") or 0)


def _pause(run: MissionRun, why: str) -> None:
    try:
        run.set_status(MissionState.INTERRUPTED, _round_of(run), detail=why)
    except CabalError:
        pass  # the graph is gone too: the mission shows interrupted once its lock is free
    run.emit(MissionInterrupted(run.mission_id, round=_round_of(run), detail=why, hint=f"cabal resume {run.mission_id}"))


def _fail(workspace: Workspace, run: MissionRun, error: Exception) -> None:
    summary = " ".join(str(error).split())[:500] or type(error).__name__
    detail = summary if isinstance(error, CabalError) else f"{type(error).__name__}: {summary}"
    workspace.private_mission_dir(run.mission_id)
    write_private(workspace.error_log_path(run.mission_id), "".join(traceback.format_exception(error)))
    run.set_status(MissionState.FAILED, _round_of(run), StopReason.ERROR, detail)
    run.emit(MissionStopped(run.mission_id, round=_round_of(run), reason=StopReason.ERROR, detail=detail))
