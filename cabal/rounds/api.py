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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command
from pydantic import ValidationError

from cabal.config import environment_number
from cabal.entities import HaltAnswer
from cabal.errors import (CabalError, CallRefused, ConfigError, GraphUnavailable, MissionError, ModelError,
                          ReplayMismatch)
from cabal.graph import ContextGraph
from cabal.limits import answer_problems
from cabal.llm import Budget, CallLimiter, ModelSettings, model_name
from cabal.llm.cassette import CASSETTE_FILE, recording
from cabal.llm.prices import price_of
from cabal.llm.providers.local import near_mission
from cabal.llm.usage import Usage
from cabal.membrane import Membrane
from cabal.membrane.validation import pydantic_problems
from cabal.private import write_private
from cabal.rounds.agent_models import OBJECT_PREFIX, AgentModels, build_agent_models
from cabal.rounds.context import PromptLibrary
from cabal.rounds.control import MissionResult, ask_again, leave_note, status_of
from cabal.rounds.engine import ANSWER_FROM_FILE, RoundGraph, build_graph
from cabal.rounds.gates import GATE_NAMES
from cabal.rounds.events import (GraphRestarted, MissionContinued, MissionEvent, MissionInterrupted, MissionResumed,
                                 MissionStarted, MissionStopped, RunEnded, Warned, fan_out)
from cabal.rounds.fork import FORKED_ROUND
from cabal.rounds.ids import continue_session
from cabal.rounds.mission import DEFAULT_KEY, MissionSpec, load_mission, parse_mission
from cabal.rounds.run import MissionRun
from cabal.rounds.settled import settled
from cabal.rounds.snapshot import mission_spend, model_output_switches
from cabal.rounds.library import with_memory
from cabal.rounds.sources import changed_sources, ingest_clusters, skipped_lines
from cabal.rounds.team import Team, load_role_cards
from cabal.rounds.tracing import recorder_from_environment
from cabal.rounds.transitions import Action, allows
from cabal.rounds.workspace import MISSION_ID, MISSION_PREFIX, Workspace, mission_node
from cabal.rounds.workspace import mission_graph as _mission_graph
from cabal.sources import Collected, Wanted, collect, latest_versions, typed_wanted
from cabal.tools.host import ToolHost
from cabal.vocabulary import BUDGET_HALT, USER_ID, MissionKind, MissionState, Role, StopReason, stop_phrase



RESTARTS_VARIABLE = "CABAL_GRAPH_RESTARTS"
DEFAULT_GRAPH_RESTARTS = 3


def _new_mission_id(spec: MissionSpec) -> str:
    slug = "".join(ch if ch.isalnum() else "-" for ch in (spec.name or "mission").lower()).strip("-")[:40] or "mission"
    return f"{MISSION_PREFIX}{slug}-{secrets.token_hex(3)}"


def _agent_models(spec: MissionSpec, model: Any, overrides: dict[str, Any], base: Path | None, team: Team,
                  stored: dict[str, ModelSettings] | None = None, switched: Sequence[str] = (), *,
                  home: str | Path | None = None) -> tuple[AgentModels, ModelSettings, str]:
    """Every agent's model, the default model's settings, and the default's spec to store for
    resuming (``object:NAME`` for a model passed in).

    Each agent's settings (``stored`` on resume, else the mission file's) take the
    environment's ``CABAL_MODEL*`` and then ``overrides`` (the caller's; ``model`` as a spec
    names the model of every agent); a relative ``scripted:`` path given here is found from
    ``base``, the mission file's folder; a replayed mission's id becomes its cassette's path (in
    the workspace at ``home``)."""
    if isinstance(model, str):
        overrides = {**overrides, "name": model}

    def resolved(settings: ModelSettings) -> ModelSettings:
        return resolved_settings(settings, overrides, base, home)

    chosen = stored or {DEFAULT_KEY: spec.model_settings(), **spec.agent_model_settings(_roster(team))}
    default = resolved(chosen[DEFAULT_KEY])
    in_process = model if model is not None and not isinstance(model, str) else None
    models = build_agent_models({agent_id: resolved(settings) for agent_id, settings in chosen.items()
                                 if agent_id != DEFAULT_KEY}, model=in_process, switched=switched)
    return models, default, f"{OBJECT_PREFIX}{model_name(in_process)}" if in_process is not None else default.name


def resolved_settings(settings: ModelSettings, overrides: dict[str, Any], base: Path | None,
                      home: str | Path | None) -> ModelSettings:
    """A model's settings as a run uses them: the environment's ``CABAL_MODEL*`` then
    ``overrides`` over ``settings``; a relative ``scripted:`` path found from ``base`` (the
    mission file's folder); a replayed mission's id made its cassette's path (in the workspace
    at ``home``)."""
    settings = settings.from_environment().with_overrides(**overrides)
    name = near_mission(settings.name, base)
    if name.startswith("replay:"):
        from cabal.llm.replay import resolved_replay_spec

        name = resolved_replay_spec(name, home)
    return settings.with_overrides(name=name)


def _team(workspace: Workspace, spec: MissionSpec) -> Team:
    """The mission's team: the built-in role cards, the project's, then the mission's own folder."""
    card_dirs: list[str | Path] = [*workspace.extra_dirs.get("agents", []),
                                   *([spec.team.cards] if spec.team.cards else [])]
    return Team.build(spec.team.operatives, load_role_cards(card_dirs), spec.team.names, spec.team.skills)


def _names(team: Team) -> dict[str, str]:
    """The names the team gave its agents (an agent without one is shown by its id)."""
    return {agent.id: agent.name for agent in team.agents if agent.name and agent.name != agent.id}


def _roster(team: Team) -> dict[str, tuple[Role, str | None]]:
    """The team's agents as the mission's model settings read them: id, role, the card's model."""
    return {agent.id: (Role(agent.role), agent.model) for agent in team.agents}


def _tool_host(workspace: Workspace, mission_id: str, spec: MissionSpec) -> ToolHost:
    """The mission's MCP servers, not yet connected (``start()``); a stdio server's stderr goes to
    a private file in the mission's folder."""
    log_dir = workspace.private_mission_dir(mission_id) if any(s.command for s in spec.tools) else None
    return ToolHost(spec.tools, timeout_s=spec.tool_timeout_s, log_dir=log_dir)


def _mission_run(workspace: Workspace, graph: ContextGraph, mission_id: str, spec: MissionSpec, team: Team,
                 models: AgentModels, on_event: Callable[[MissionEvent], None] | None,
                 answers: list[str], limiter: CallLimiter | None = None, *,
                 starting: Budget | None = None, tools: ToolHost | None = None) -> MissionRun:
    mission = graph.get(mission_id)
    # The mission node keeps the budget once it exists (a user may have raised it since);
    # ``starting`` is a new mission's (MissionSpec.starting_budget).
    budget = (Budget(max_tokens=mission.get("budget_tokens"), max_cost_usd=mission.get("budget_cost_usd"))
              if mission else starting or spec.starting_budget().budget)
    return MissionRun(
        mission_id=mission_id, spec=spec, graph=graph,
        membrane=Membrane(graph, protocol_dirs=workspace.extra_dirs.get("protocols", [])),
        models=models, team=team,
        prompts=PromptLibrary(workspace.extra_dirs.get("prompts", []), skill_dirs=workspace.extra_dirs.get("skills", [])),
        budget=budget, answers=list(answers),
        on_event=fan_out(on_event, recorder_from_environment()) or (lambda event: None),  # traces if OTEL_* asks
        limiter=limiter, tools=tools,
    )


def run_mission(mission: str | Path | MissionSpec | dict, *, model: Any = None, home: str | Path | None = None,
                url: str | None = None, rounds: int | None = None, model_settings: dict[str, Any] | None = None,
                on_event: Callable[[MissionEvent], None] | None = None, mission_id: str | None = None,
                call_limiter: CallLimiter | None = None, budget_usd: float | str | None = None,
                sources: list[str | Wanted] | Collected | None = None, record: bool = True,
                workspace: Workspace | None = None, request: str | None = None,
                gates: Sequence[str] = ()) -> MissionResult:
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
    ``budget_usd``: the mission's cost budget in dollars, or ``"none"`` for no budget at all,
    over the mission file's; without either, ``CABAL_BUDGET_USD``, else $2.
    ``sources``: files or folders to read beside the mission file's ``sources:`` (``--source``),
    relative to the current folder, or entries already made (``cabal.sources.folder_wanted``);
    or files already read (a ``Collected``: what a replay gives, the sources as the recorded
    mission read them).
    ``record``: keep every model call in the mission's cassette. ``workspace``: the workspace
    already resolved (a batch's worker keeps one for all its missions), over ``home`` and ``url``.
    ``request``: the mission's request, over the mission file's (a served team runs each request
    it is given on one mission file: ``cabal a2a``).
    ``gates``: gates to ask at beside the mission file's (``--gate plan``: ``gates=["plan"]``, the
    plan's sign-off, as ``gates: {plan: ask}``).
    """
    spec, base = _loaded(mission)
    spec = _as_asked(spec, request=request, rounds=rounds, gates=gates)
    workspace = workspace or Workspace.at(home, url)
    collected = _sources_of(spec, base, sources, workspace)  # refused now, before any write
    starting = spec.starting_budget(budget_usd)
    spec = _with_paths_anchored(spec, base)
    team = _team(workspace, spec)
    models, settings, model_spec = _agent_models(spec, model, model_settings or {}, base, team,
                                                 home=workspace.home)
    if mission_id is not None and not MISSION_ID.fullmatch(mission_id):
        raise MissionError(f"invalid mission id {mission_id!r}: use m- then up to 100 letters, digits, "
                           "underscores and hyphens")
    mission_id = mission_id or _new_mission_id(spec)
    with workspace.checkpointer():
        pass  # a checkpoint store that cannot be reached is an error now, before anything is written
    graph = workspace.graph(mission_id)
    tools = None
    try:
        if graph.exists(mission_id):
            raise MissionError(f"mission {mission_id} already exists", hint=f"cabal resume {mission_id}")
        tools = _tool_host(workspace, mission_id, spec).start()  # a required server that fails: nothing written
        run = _mission_run(workspace, graph, mission_id, spec, team, models, on_event, spec.queued_answers(), call_limiter,
                           starting=starting.budget, tools=tools)
        for agent in run.team.agents:  # an unknown skill is an error now, not at its first prompt
            for skill in agent.skills:
                run.prompts.skill_text(skill)
        agents = [{"id": a.id, "role": a.role, "name": a.name, "persona": a.persona or run.team.cards[a.role].persona,
                   "skills": list(a.skills)} for a in run.team.agents]
        start = run.membrane.prepare("start_mission", {
            "mission_id": mission_id, "name": spec.name or mission_id, "request": spec.request, "rounds": spec.rounds,
            "spec": spec.model_dump_json(), "model": model_spec, "model_settings": settings.model_dump_json(),
            "agent_models": json.dumps({a: s.model_dump(mode="json") for a, s in models.settings().items()}),
            "agents": agents, "budget_tokens": run.budget.max_tokens, "budget_cost_usd": run.budget.max_cost_usd,
            "kind": MissionKind.TEAM}, {}, session_id=f"{mission_id}.start")
        # One write: the mission exists with all its sources, or not at all.
        clusters = [start, *(ingest_clusters(run.membrane, mission_id, collected) if collected else [])]
        run.membrane.commit(clusters)
        run.committed(clusters)
        run.emit(MissionStarted(mission_id, name=spec.name or mission_id, request=spec.request,
                                operatives=len(run.team.ids(Role.OPERATIVE)), rounds=spec.rounds, model=model_spec,
                                budget_tokens=run.budget.max_tokens, budget_cost_usd=run.budget.max_cost_usd,
                                budget_source=starting.source, names=_names(run.team)))
        _tell_tool_problems(run, tools)
        _warn_at_start(run, starting.source, collected)
        return _drive(workspace, run, {"round": 0}, record=record)
    finally:
        if tools is not None:
            tools.close()
        graph.close()


def _as_asked(spec: MissionSpec, *, request: str | None, rounds: int | None, gates: Sequence[str]) -> MissionSpec:
    """The mission file's spec with what the call says over it: the request, the round limit, gates."""
    if request is not None:
        spec = parse_mission({**spec.model_dump(exclude_none=True), "request": request}, source="the request")
    if rounds is not None:
        spec = parse_mission({**spec.model_dump(exclude_none=True), "rounds": rounds}, source="--rounds")
    return _with_gates(spec, gates) if gates else spec


def _sources_of(spec: MissionSpec, base: Path | None, sources: list[str | Wanted] | Collected | None,
                workspace: Workspace) -> Collected | None:
    """What the mission reads: its file's sources and the call's (``--source``), read now, then the
    workspace's memory its file asks for (earlier missions, the library, the standing facts); or
    files already read (a replay's ``Collected``: the sources as the recorded mission read them,
    its memory among them)."""
    read, typed = (sources, []) if isinstance(sources, Collected) else (None, list(sources or []))
    wanted = spec.wanted_sources(base) + typed_wanted(typed)
    collected = collect(wanted, spec.source_limits) if wanted else None
    if read is not None and read.files:
        return Collected((collected.files if collected else ()) + read.files)
    return with_memory(workspace, spec, collected)


def _with_gates(spec: MissionSpec, gates: Sequence[str]) -> MissionSpec:
    """``spec`` asking at ``gates`` too (``--gate``): each one asked of the user."""
    unknown = [gate for gate in gates if gate not in GATE_NAMES]
    if unknown:
        raise ConfigError(f"--gate: unknown gate {unknown[0]!r}; known: {', '.join(GATE_NAMES)}")
    return spec.model_copy(update={"gates": spec.gates.model_copy(update={"plan": "ask"})})


def _loaded(mission: str | Path | MissionSpec | dict) -> tuple[MissionSpec, Path | None]:
    """The mission's spec, and the folder of its file (None for a spec given in code)."""
    if isinstance(mission, (str, Path)):
        return load_mission(mission)
    return (parse_mission(mission) if isinstance(mission, dict) else mission), None


def _with_paths_anchored(spec: MissionSpec, base: Path | None) -> MissionSpec:
    """``spec`` with its role cards' folder and its scripts' paths made absolute (a mission file's
    are relative to it), as stored for resuming from anywhere."""
    if spec.team.cards and not Path(spec.team.cards).is_absolute():
        folder = (base or Path.cwd()) / spec.team.cards
        spec = spec.model_copy(update={"team": spec.team.model_copy(update={"cards": str(folder.resolve())})})
    return spec.anchored(base) if base is not None else spec


def _warn_at_start(run: MissionRun, budget_source: str, collected: Collected | None) -> None:
    """What a new mission's user should know before round 1: sources skipped, a cost budget
    that cannot be enforced."""
    for line in skipped_lines(collected) if collected else []:
        run.emit(Warned(run.mission_id, message=line))
    # A default budget on a model without prices costs nothing and needs no warning; one the
    # user set there cannot do what they meant.
    chosen = budget_source in ("mission file", "--budget-usd")
    unpriced = [name for name in run.models.names().split(", ") if price_of(name) is None]
    if chosen and run.budget.max_cost_usd is not None and unpriced:
        run.emit(Warned(run.mission_id, message=f"no prices are known for {', '.join(unpriced)}: the cost budget "
                                                f"(${run.budget.max_cost_usd}) cannot be enforced; the token budget "
                                                "still is"))


def resume_mission(mission_id: str, *, answer: str | None = None, model: Any = None, rounds: int | None = None,
                   home: str | Path | None = None, url: str | None = None,
                   model_settings: dict[str, Any] | None = None,
                   on_event: Callable[[MissionEvent], None] | None = None,
                   call_limiter: CallLimiter | None = None, record: bool = True,
                   workspace: Workspace | None = None) -> MissionResult:
    """Continue a mission: answer its pending question, pick it up after a crash, a kill or a
    model outage, or continue one the user stopped or that ran out of rounds (``rounds``: the
    new round limit). The mission file's unattended answers not yet used are used again.
    ``workspace``: as ``run_mission`` takes it."""
    return _resume(mission_id, answer=answer, model=model, rounds=rounds, home=home, url=url,
                   model_settings=model_settings, on_event=on_event, call_limiter=call_limiter, record=record,
                   workspace=workspace)


def continue_mission(mission_id: str, direction: str, *, rounds: int | None = None, model: Any = None,
                     home: str | Path | None = None, url: str | None = None,
                     model_settings: dict[str, Any] | None = None,
                     on_event: Callable[[MissionEvent], None] | None = None,
                     call_limiter: CallLimiter | None = None, record: bool = True) -> MissionResult:
    """Take a mission that ended (concluded, out of rounds or budget, stopped) further with a new
    direction: it reopens, the Chair reads ``direction`` at the next Plan and may add, change or
    reopen products, and the team goes on for ``rounds`` more rounds (default: the mission
    file's ``rounds``). Versions go on from the old numbers; the report shows both parts.
    ``record``: as ``run_mission`` takes it."""
    if rounds is not None and rounds < 1:
        raise MissionError(f"--rounds {rounds}: continue for at least one more round")
    problems = answer_problems(direction) if direction.strip() else ["it is empty"]
    if problems:
        raise MissionError("the direction cannot be used: " + "; ".join(map(str, problems)))
    return _resume(mission_id, model=model, rounds=rounds, home=home, url=url, model_settings=model_settings,
                   on_event=on_event, call_limiter=call_limiter, direction=direction.strip(), record=record)


def fork_mission(mission_id: str, *, round: int, direction: str | None = None, model: Any = None,
                 rounds: int | None = None, home: str | Path | None = None, url: str | None = None,
                 model_settings: dict[str, Any] | None = None,
                 on_event: Callable[[MissionEvent], None] | None = None, record: bool = True,
                 workspace: Workspace | None = None,
                 on_forked: Callable[[str], None] | None = None) -> MissionResult:
    """A new mission that starts where ``mission_id`` stood at the start of round ``round`` (its
    graph and its round loop's checkpoint as they were then, under a new id whose mission node
    names the original and the round: ``forked_from``, ``forked_round``) and runs on from there:
    with ``direction`` given to the Chair as ``continue_mission`` gives one, with ``model`` (a
    spec or a chat model object, as ``run_mission`` takes it) for every agent, up to round
    ``rounds``. The original is only read. ``on_forked`` is told the new id before it runs.

    A round the mission never started (0, or after its last) is a ``ConfigError``."""
    from cabal.rounds.fork import graph_at_round

    if direction is not None:
        problems = answer_problems(direction) if direction.strip() else ["it is empty"]
        if problems:
            raise MissionError("the direction cannot be used: " + "; ".join(map(str, problems)))
    if rounds is not None and rounds < round:
        raise ConfigError(f"--rounds {rounds} ends before round {round}, where the fork starts")
    workspace = workspace or Workspace.at(home, url, reading=True)
    graph = _mission_graph(workspace, mission_id)
    try:
        node = mission_node(graph, mission_id)
        spec = parse_mission(json.loads(node["spec"]), source=mission_id)
        fork_id = _new_mission_id(spec)
        library = Membrane(graph, protocol_dirs=workspace.extra_dirs.get("protocols", [])).library
        nodes, links = graph.history()
        forked = graph_at_round(nodes, links, original=mission_id, fork=fork_id, round_number=round,
                                is_update=lambda moment: _is_update(library, moment))
        team = _team(workspace, spec)
        stored = _stored_models(node, spec, team)
    finally:
        graph.close()
    state = _checkpoint_at_round(workspace, mission_id, round)
    head = next(n for n in forked.nodes if n["id"] == fork_id)
    if rounds is not None:
        head["rounds"] = rounds
    if model is not None:  # the fork's own model, kept for its resumes as run_mission keeps it
        spec_name = model if isinstance(model, str) else f"{OBJECT_PREFIX}{model_name(model)}"
        head["model"] = spec_name
        if isinstance(model, str):
            head["agent_models"] = json.dumps({agent: settings.with_overrides(name=model).model_dump(mode="json")
                                               for agent, settings in stored.items() if agent != DEFAULT_KEY})
    with workspace.checkpointer() as saver:  # the loop's position first: a graph without it would start over
        config: RunnableConfig = {"configurable": {"thread_id": fork_id}}
        build_graph(saver).update_state(config, state, as_node="presentation")
    fork_graph = workspace.graph(fork_id)
    try:
        fork_graph.write_in_order(forked.nodes, forked.links)
        if direction is not None:
            leave_note(fork_graph, fork_id, direction.strip(), direction=True)
    except BaseException:
        fork_graph.delete_graph()  # a fork half written is no fork
        raise
    finally:
        fork_graph.close()
    if on_forked is not None:
        on_forked(fork_id)
    return _resume(fork_id, model=model, home=home, url=url, model_settings=model_settings, on_event=on_event,
                   record=record, workspace=workspace)


def _is_update(library: Any, moment: dict) -> bool:
    """Whether ``moment`` was recorded by an update step of its protocol."""
    from cabal.membrane.protocol import UpdateStep

    try:
        protocol = library.get(str(moment.get("protocol")))
    except CabalError:
        return False
    return isinstance(protocol.steps.get(str(moment.get("step", "")).rsplit(".", 1)[-1]), UpdateStep)


def _checkpoint_at_round(workspace: Workspace, mission_id: str, round_number: int) -> dict[str, Any]:
    """The round loop's state at the start of round ``round_number`` of ``mission_id``, from the
    checkpointer's history: the newest checkpoint whose next node is that round's start."""
    with workspace.checkpointer() as saver:
        config: RunnableConfig = {"configurable": {"thread_id": mission_id}}
        for snapshot in build_graph(saver).get_state_history(config):
            values = snapshot.values
            if snapshot.next == ("round_start",) and values.get("round") == round_number - 1 and not values.get("stop"):
                return {"round": round_number - 1, "halt": None, "stop": None, "detail": None,
                        "after": values.get("after")}
    raise ConfigError(f"cannot fork {mission_id} at round {round_number}: its checkpoints hold no start of that round",
                      hint=f"CABAL_CHECKPOINTS must name the store {mission_id} ran with")


def _resume(mission_id: str, *, answer: str | None = None, model: Any = None, rounds: int | None = None,
            home: str | Path | None = None, url: str | None = None, model_settings: dict[str, Any] | None = None,
            on_event: Callable[[MissionEvent], None] | None = None, call_limiter: CallLimiter | None = None,
            direction: str | None = None, record: bool = True,
            workspace: Workspace | None = None) -> MissionResult:
    workspace = workspace or Workspace.at(home, url, reading=True)
    graph = _mission_graph(workspace, mission_id)
    tools = None
    try:
        node = mission_node(graph, mission_id)
        if node.get("kind") == MissionKind.BASELINE:
            raise MissionError(f"mission {mission_id} is a baseline: one call wrote it whole, so nothing is left to "
                               "resume or continue", hint="run `cabal baseline MISSION_FILE` again for another")
        spec = parse_mission(json.loads(node["spec"]), source=mission_id)
        status = status_of(workspace, graph, mission_id)
        if status.state == MissionState.RUNNING:
            raise MissionError(f"mission {mission_id} is being run by another process",
                               hint="wait for it to pause or finish, then resume")
        if ask_again(graph, workspace, mission_id):  # stopped before it had a charter: its question first
            node, status = mission_node(graph, mission_id), status_of(workspace, graph, mission_id)
        extend = (_directed(status, rounds or spec.rounds) if direction is not None
                  else _continuation(status, rounds, int(node.get("rounds") or spec.rounds)))
        if status.state == MissionState.DONE and extend is None:
            if answer is not None:
                raise MissionError(f"mission {mission_id} has ended ({stop_phrase(status.stop_reason)}); there is no question "
                                   "to answer")
            return status  # it ended, and nothing asks it to go on
        stored = node.get("model") or ""
        if model is None and stored.startswith("object:"):
            raise MissionError(f"mission {mission_id} ran with an in-process model; pass model= to resume it")
        team = _team(workspace, spec)
        models, settings, _ = _agent_models(spec, model, model_settings or {}, None, team,
                                            _stored_models(node, spec, team),
                                            [switch["model"] for switch in model_output_switches(graph)],
                                            home=workspace.home)
        used = sum(h.get("answer_source") == ANSWER_FROM_FILE for h in graph.find("halt"))
        tools = _tool_host(workspace, mission_id, spec).start()  # connected again, as at the start
        run = _mission_run(workspace, graph, mission_id, spec, team, models, on_event, spec.queued_answers()[used:],
                           call_limiter, tools=tools)
        pending = status.pending_halt
        # A run killed between asking the Chair's question and taking the mission file's answer
        # left it pending: the file's next answer is still there to take, as a clean run would.
        from_file = (pending is not None and bool(run.answers) and not BUDGET_HALT.fullmatch(str(pending["id"]))
                     and not pending.get("gate"))
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
        going_on, at_start = _resumed_round(node, extend)
        run.emit(MissionResumed(mission_id, name=str(node.get("name") or mission_id), round=going_on, at_start=at_start,
                                answer=answer, model=settings.name if model is None or isinstance(model, str)
                                else model_name(model),
                                budget_tokens=run.budget.max_tokens, budget_cost_usd=run.budget.max_cost_usd,
                                spent_tokens=spend.usage.total_tokens, spent_cost_usd=round(spend.cost_usd, 6),
                                spent_turns=spend.turns, spent_unpriced_turns=spend.unpriced_turns,
                                names=_names(run.team)))
        _tell_tool_problems(run, tools)
        _recheck_sources(run, int(node.get("round") or 0))
        if direction is not None and extend is not None:  # a direction always gives the new round limit
            leave_note(graph, mission_id, direction, direction=True)
            run.emit(MissionContinued(mission_id, round=status.round, direction=direction, rounds=extend))
        if extend is not None:
            run.write("continue_mission", {"mission_id": mission_id, "actor_id": USER_ID, "rounds": extend},
                      {}, session_id=continue_session(mission_id, status.round, extend))
            return _drive(workspace, run, None, reopen=True, record=record)
        return _drive(workspace, run, Command(resume=answer) if answer is not None else None, record=record)
    finally:
        if tools is not None:
            tools.close()
        graph.close()


def _resumed_round(node: dict, extend: int | None) -> tuple[int, bool]:
    """The round a resumed run goes on in, and whether it begins that round. The mission node
    holds the last round begun: a fork that has not run yet holds the round before the one it
    was forked at, and an ended mission given more rounds goes on with the next one."""
    last = int(node.get("round") or 0)
    if extend is not None or int(node.get(FORKED_ROUND) or 0) == last + 1:
        return last + 1, True
    return last, False


def _stored_models(node: dict, spec: MissionSpec, team: Team) -> dict[str, ModelSettings]:
    """The settings a mission ran with: the default's (key ``default``) and each agent's; a
    mission from before models per agent ran every agent with the default's."""
    default = ModelSettings.model_validate_json(node["model_settings"]) if node.get("model_settings") \
        else spec.model_settings()
    if node.get("model") and not str(node["model"]).startswith(OBJECT_PREFIX):
        default = default.with_overrides(name=node["model"])
    agents = {agent_id: ModelSettings.model_validate(settings)
              for agent_id, settings in json.loads(node.get("agent_models") or "{}").items()}
    return {DEFAULT_KEY: default, **{agent_id: agents.get(agent_id, default) for agent_id in team.ids()}}


def _tell_tool_problems(run: MissionRun, tools: ToolHost) -> None:
    """The servers left out at the start, then each later problem, as warnings of the run."""
    for line in tools.problems:
        run.emit(Warned(run.mission_id, message=line))
    tools.on_problem = lambda line: run.emit(Warned(run.mission_id, message=line))


def _recheck_sources(run: MissionRun, round_number: int) -> None:
    """The hash check of a resume: a source whose file changed gets its new version now."""
    current = latest_versions(run.graph.find("source"))
    clusters, lines = changed_sources(run.membrane, run.mission_id, current, round_number,
                                      max_bytes=run.spec.source_limits.file_bytes)
    if clusters:
        run.membrane.commit(clusters)
        run.committed(clusters)
    for line in lines:
        run.emit(Warned(run.mission_id, message=line))


def _directed(status: MissionResult, more: int) -> int:
    """The round limit of a mission the user continues with a new direction: ``more`` rounds
    after the last; only a mission that ended can be continued."""
    if status.state != MissionState.DONE:
        how = {MissionState.HALTED: f"answer its question: cabal chat {status.mission_id}",
               MissionState.RUNNING: "it is running; leave the team a message: cabal say"}.get(
            status.state, f"go on with: cabal resume {status.mission_id}")
        raise MissionError(f"mission {status.mission_id} has not ended ({status.state}); {how}")
    return status.round + more


def _continuation(status: MissionResult, rounds: int | None, limit: int) -> int | None:
    """The round limit a mission that ended goes on with, or None when it does not go on.

    One the user stopped goes on (with ``rounds`` if given); one that ran out of rounds goes on
    only with more rounds; one that concluded, failed or ran out of budget does not."""
    if rounds is not None and rounds <= status.round:
        raise MissionError(f"--rounds {rounds} is not more than the {status.round} round(s) already run")
    if not allows(Action.CONTINUE, status.state, status.stop_reason):
        if rounds is None:
            return None
        if status.state != MissionState.DONE:
            raise MissionError(f"mission {status.mission_id} is {status.state}; --rounds continues a mission "
                               "that ended (stopped by the user or out of rounds)")
        raise MissionError(f"mission {status.mission_id} ended ({stop_phrase(status.stop_reason)}); only a mission the user "
                           "stopped or one out of rounds can go on")
    if status.stop_reason == StopReason.USER_HALT:
        return rounds or limit
    return rounds  # out of rounds: it goes on only when given more


def _drive(workspace: Workspace, run: MissionRun, payload: Any, *, reopen: bool = False,
           record: bool = True) -> MissionResult:
    """Run the round graph from ``payload`` (a new mission's first state, an answer, or None to
    go on from the last checkpoint) until the mission ends or pauses; every way it stops is
    recorded honestly: a model outage or Ctrl-C pauses it ``interrupted``, any other error
    fails it with the message (and the traceback in the mission's error.log)."""
    config: RunnableConfig = {"configurable": {"thread_id": run.mission_id}, "recursion_limit": 10_000}
    with workspace.driving(run.mission_id), workspace.checkpointer() as saver, \
            recording(workspace.mission_dir(run.mission_id) / CASSETTE_FILE, record,
                      on_full=lambda message: run.emit(Warned(run.mission_id, message=message))):
        # A transcript written before this run is stale once it runs; the run writes none itself
        # (rounds/transcripts.py: cabal run writes it from the report it reads anyway).
        workspace.transcript_path(run.mission_id).unlink(missing_ok=True)
        app = build_graph(settled(saver, run.writer))
        try:
            if reopen:  # an ended mission goes on: as if its last round's Presentation had just run
                app.update_state(config, {"stop": None, "detail": None, "halt": None}, as_node="presentation")
            elif payload is None and app.get_state(config).created_at is None:
                # Stopped after the mission was written but before its first checkpoint: start
                # the loop (turns already committed are skipped by their ids).
                payload = {"round": 0}
            _invoke_restarting_the_graph(app, payload, config, run)
        except GraphUnavailable as lost:
            _pause(run, f"the graph server is unavailable: {lost.reason}")
            run.close()
            return _unreachable(run, f"the graph server is unavailable: {lost.reason}")
        except CallRefused as refused:
            _pause(run, str(refused))
        except ModelError as error:
            _pause(run, f"the model is unavailable: {error}")
        except KeyboardInterrupt:
            run.close(wait=False)  # do not wait for model calls in flight
            _pause(run, "the user pressed Ctrl-C")
            raise
        except ReplayMismatch as mismatch:  # the replay's verdict, not Cabal's fault
            _fail(workspace, run, mismatch, MissionState.DIVERGED, StopReason.REPLAY_DIVERGED)
        except Exception as error:  # noqa: BLE001 - an engine error must end the mission honestly
            _fail(workspace, run, error)
        run.close()
    result = status_of(workspace, run.graph, run.mission_id)
    run.emit(RunEnded(run.mission_id, state=result.state, stop_reason=result.stop_reason, round=result.round,
                      turns=result.turns, input_tokens=result.usage.input_tokens,
                      output_tokens=result.usage.output_tokens, cache_read_tokens=result.usage.cache_read_tokens,
                      cost_usd=result.cost_usd,
                      question=str(result.pending_halt.get("message")) if result.pending_halt else None))
    return result


def graph_restarts() -> int:
    """How many times one run starts a dead embedded graph server again: ``CABAL_GRAPH_RESTARTS``, else 3."""
    return int(environment_number(RESTARTS_VARIABLE, DEFAULT_GRAPH_RESTARTS, what="restarts", whole=True))


def _invoke_restarting_the_graph(app: RoundGraph, payload: Any, config: RunnableConfig, run: MissionRun) -> None:
    """Run the round graph. When the embedded graph server dies under it (killed, out of memory),
    start it again and replay from the last checkpoint, up to ``graph_restarts()`` times: the
    turns already committed are skipped by their ids, the others run again on the mission as
    the graph holds it, so nothing is lost or written twice. Past that (or for a server Cabal
    does not run), ``GraphUnavailable`` goes up and the mission pauses. Steps send their graph
    writes behind them (``cabal.graph.behind``): the run returns once all of them landed."""
    limit, restarts = graph_restarts(), 0
    while True:
        try:
            app.invoke(payload, config, context=run)
            run.settle()  # the last step's write acknowledged before the run says how it ended
            return
        except GraphUnavailable as lost:
            run.finish_writes()
            if restarts >= limit or run.graph.server is None:
                raise
            restarts += 1
            run.graph.recover()  # raises GraphUnavailable if it cannot be started
            run.reload()
            _fresh_model(run)
            run.emit(GraphRestarted(run.mission_id, round=_round_of(run), restart=restarts, max_restarts=limit,
                                    detail=lost.reason))
            state = app.get_state(config)
            # An answer that had not yet reached a checkpoint is given again; anything else goes
            # on from the last checkpoint (a new mission's first one may not exist yet).
            payload = (payload if isinstance(payload, Command) and state.interrupts
                       else {"round": 0} if state.created_at is None else None)
        except BaseException:
            # Another error stops the run (a model outage, Ctrl-C, an engine error): the writes
            # already sent land first, and a write's own failure no longer stands in the way of
            # recording how the run stopped.
            run.finish_writes()
            raise


def _fresh_model(run: MissionRun) -> None:
    """Every agent's model built again, as a resume in a new process would build them (a
    script's cursor starts afresh); a model object the caller passed is kept."""
    run.models = run.models.rebuilt()


def _unreachable(run: MissionRun, detail: str) -> MissionResult:
    """The outcome of a run whose graph cannot be read: paused, and nothing more is known."""
    result = MissionResult(mission_id=run.mission_id, state=MissionState.INTERRUPTED, stop_reason=None, round=0,
                           usage=Usage(), cost_usd=0.0, pending_halt=None, transcript_path=None, detail=detail)
    run.emit(RunEnded(run.mission_id, state=result.state, stop_reason=None, round=0, turns=0, input_tokens=0,
                      output_tokens=0, cache_read_tokens=0, cost_usd=0.0, question=None))
    return result


def _round_of(run: MissionRun) -> int:
    return int((run.graph.get(run.mission_id) or {}).get("round") or 0)


def _pause(run: MissionRun, why: str) -> None:
    round_number = 0
    try:
        round_number = _round_of(run)
        run.set_status(MissionState.INTERRUPTED, round_number, detail=why)
    except CabalError:
        pass  # the graph is gone too: the mission shows interrupted once its lock is free
    run.emit(MissionInterrupted(run.mission_id, round=round_number, detail=why, hint=f"cabal resume {run.mission_id}"))


def _fail(workspace: Workspace, run: MissionRun, error: Exception, state: MissionState = MissionState.FAILED,
          reason: StopReason = StopReason.ERROR) -> None:
    """End the mission ``state`` for ``error``: its one-line summary is the detail, and its whole
    account (a replay's diff, an engine error's traceback) the mission's error.log."""
    summary = " ".join(str(error).split())[:500] or type(error).__name__
    detail = summary if isinstance(error, CabalError) else f"{type(error).__name__}: {summary}"
    workspace.private_mission_dir(run.mission_id)
    write_private(workspace.error_log_path(run.mission_id), "".join(traceback.format_exception(error)))
    run.set_status(state, _round_of(run), reason, detail)
    run.emit(MissionStopped(run.mission_id, round=_round_of(run), reason=reason, detail=detail))
