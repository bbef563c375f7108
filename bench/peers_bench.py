"""Cabal against the same team written in plain LangGraph, measured side by side in one run.
Prints one `name value unit` line per figure and side, then one `ratio_FIGURE` line per goal:
Cabal's value over the plain baseline's from the same run, the goal, and the ratio over the
durable baseline too (issue 26: on a shared, noisy machine only ratios from one run compare).

The workload: a chair, two operatives, a reviewer (Cabal's Watchdog) and an envoy over R rounds,
a fake model with zero latency.

- Cabal: ``run_mission`` with the simulated team (``cabal.rounds.simulated.simulated_team``,
  4 products at bootstrap, 2 more a round) in a throwaway workspace (``home=`` a temp dir; its
  embedded FalkorDB server is stopped at the end).
- Baselines: a plain LangGraph ``StateGraph``: a bootstrap node, then per round two operative
  Reflect nodes, a chair Plan node, two operative Write nodes, two operative Peer-Review nodes,
  a reviewer Inspect node and an envoy Present node (the same 9 calls a round as Cabal's team,
  operatives in parallel branches as Cabal runs them in parallel). All share ONE growing
  message history (``add_messages``); every call is
  ``model.with_structured_output(Schema).invoke(system + history + instruction)`` on a fake chat
  model whose ``bind_tools`` answers with a tool call; the schemas mirror Cabal's step outputs.
  Three checkpointers: ``baseline`` keeps checkpoints in memory (``MemorySaver``: the plain
  baseline every goal is set against), ``baseline_durable`` in a SQLite file (``SqliteSaver``,
  durable as Cabal, which checkpoints every superstep so a run can resume), and
  ``baseline_no_checkpointer`` none (for scale).

Figures:

- engine_overhead_per_call (R=20): wall time of the whole run minus the time spent inside the
  model function (the simulated team / the baseline's answer function, which also counts the
  prompt's characters on both sides), divided by the number of model calls. Median of RUNS runs,
  the sides interleaved, after one warm-up run each. Goal: Cabal <= 1.0x baseline.
- prompt_chars_per_call_r20: characters of everything sent in a call of round 20: every
  message's text (tool calls as JSON) and the JSON of the tool definitions offered. Goal: Cabal
  <= 0.05x baseline; and prompt_growth_r20_over_r2 (the same in tokens, chars / 4, round 20 over
  round 2): Cabal flat (<= 1.3x, as in rounds_bench).
- process_start_to_first_call: a fresh `python` subprocess (this script with --child) from its
  start to the first model call, median of STARTS interleaved starts. Cabal's child uses a new
  workspace each time, so it includes starting the embedded graph server (a cold `cabal run`).
  Goal: Cabal <= 1.0x baseline.
- peak_rss: the peak resident set of a subprocess that runs the R=20 workload, read as VmHWM
  from /proc (its ru_maxrss would start from this script's own peak: Linux carries a parent's
  maximum over fork and exec). Cabal's graph server is a separate process, reported on its own
  line (its VmHWM, read before it is stopped). Goal: Cabal <= 1.0x baseline.
- For reading, no goal: fixed_cost_per_mission (engine time before round 1, the first round's
  extra over a steady round, the time after the last round), first_round_over_steady_round
  (goal <= 1.2), and the wall time of ``cabal --help`` and ``cabal status ID``.

The graph's own goal (cluster commits over the server's bulk UNWIND) is graph_bench.py's.

Run: python bench/peers_bench.py   (about three minutes on the project's 2-core machine)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from pydantic import BaseModel, Field

# The baseline's child processes must not import cabal: the Cabal side imports it inside its functions.
ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 20
RUNS = 5
STARTS = 5
CHARS_PER_TOKEN = 4
OPERATIVES = ("operative-1", "operative-2")
REQUEST = ("Write the operations handbook of a volunteer-run food bank: intake, storage, "
           "distribution, volunteer shifts, safety and reporting.")
GOAL_GROWTH = 1.3
GOAL_FIRST_ROUND = 1.2


def report(name: str, value: float, unit: str, goal: str = "") -> None:
    print(f"{name} {value:.3f} {unit}" + (f"  # goal: {goal}" if goal else ""), flush=True)


# ------------------------------------------------------------------------------ the goals as ratios

SIDES = ("cabal", "baseline", "baseline_durable")


@dataclass(frozen=True)
class Goal:
    """A figure both sides report, and the most Cabal's value may be as a ratio of the plain
    baseline's, measured in the same run (issue 26: every goal is a ratio)."""

    figure: str
    unit: str
    at_most: float


GOALS = (
    Goal(f"engine_overhead_per_call_r{ROUNDS}", "ms", 1.0),
    Goal("process_start_to_first_call", "s", 1.0),
    Goal(f"peak_rss_r{ROUNDS}", "MiB", 1.0),
    Goal(f"prompt_chars_per_call_r{ROUNDS}", "chars", 0.05),
)
MEASURED: dict[tuple[str, str], float] = {}  # (figure, side) -> value, for the closing table


def measured(figure: str, side: str, value: float, unit: str) -> None:
    """Report one side's figure and keep it for the ratios."""
    MEASURED[figure, side] = value
    report(f"{side}_{figure}", value, unit)


def print_ratios() -> list[str]:
    """One line per goal: Cabal over the plain baseline (the goal) and over the durable one.
    Returns the goals not met."""
    unmet = []
    print("# Cabal over the baselines, measured in this run", flush=True)
    for goal in GOALS:
        cabal, plain = MEASURED.get((goal.figure, "cabal")), MEASURED.get((goal.figure, "baseline"))
        if cabal is None or not plain:
            continue
        ratio = cabal / plain
        durable = MEASURED.get((goal.figure, "baseline_durable"))
        met = ratio <= goal.at_most
        unmet += [] if met else [goal.figure]
        extra = f"; over the durable baseline {cabal / durable:.3f} x" if durable else ""
        print(f"ratio_{goal.figure} {ratio:.3f} x  # cabal {cabal:.3f} {goal.unit}, baseline {plain:.3f} "
              f"{goal.unit}; goal: <= {goal.at_most} x ({'met' if met else 'not met'}){extra}", flush=True)
    return unmet


# ------------------------------------------------------------------------------ measuring


def text_of(message: BaseMessage) -> str:
    content = message.content
    text = content if isinstance(content, str) else "".join(
        b if isinstance(b, str) else str(b.get("text", "")) for b in content if isinstance(b, (str, dict)))
    calls = getattr(message, "tool_calls", None) or []
    return text + "".join(json.dumps(c.get("args"), ensure_ascii=False) for c in calls)


def call_chars(messages: Sequence[BaseMessage], tools: Sequence[Any]) -> int:
    return sum(len(text_of(m)) for m in messages) + sum(len(json.dumps(t, ensure_ascii=False, default=str))
                                                        for t in tools)


@dataclass
class Meter:
    """Every model call of one run: its round, prompt size and time inside the model function."""

    round: int = 0  # the round now running (set by the side's own progress signal)
    chars: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    fn_s: float = 0.0
    fn_in: dict[int, float] = field(default_factory=lambda: defaultdict(float))  # model time per round
    round_starts: dict[int, float] = field(default_factory=dict)  # perf_counter() as each round began
    started: float = 0.0  # perf_counter() around the whole run
    stopped: float | None = None  # perf_counter() as the last round ended (the mission stopped)
    ended: float = 0.0
    calls: int = 0
    first_call_at: float | None = None  # time.monotonic() of the first call
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def timed(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn(messages, tools, ...)`` measured: the prompt counted and the time spent inside it."""
        def measured(messages: Sequence[BaseMessage], tools: Sequence[Any], *rest: Any) -> Any:
            started = time.perf_counter()
            if self.first_call_at is None:
                self.first_call_at = time.monotonic()
            size = call_chars(messages, tools)
            answer = fn(messages, tools, *rest)
            elapsed = time.perf_counter() - started
            with self._lock:
                self.chars[self.round].append(size)
                self.fn_s += elapsed
                self.fn_in[self.round] += elapsed
                self.calls += 1
            return answer
        return measured

    def enter(self, round_number: int) -> None:
        """Round ``round_number`` begins now (round 0 is everything before round 1)."""
        self.round = round_number
        self.round_starts.setdefault(round_number, time.perf_counter())

    def stop(self) -> None:
        """The last round has ended; what follows is the run's closing work."""
        self.stopped = time.perf_counter()

    def engine_s(self, round_number: int) -> float:
        """A round's wall time outside the model function (round 0: everything before round 1)."""
        end = self.round_starts.get(round_number + 1, self.stopped or self.ended)
        return end - self.round_starts.get(round_number, self.started) - self.fn_in[round_number]

    def fixed_s(self, rounds: int) -> float:
        """What a mission costs whatever its length: everything before round 1 (start-up and the
        bootstrap, model time apart), the first round's extra over a steady one (the median of
        rounds 2 to ``rounds``) and everything after the last round (the end of the run). Rounds
        themselves are not in it, so missions whose rounds grow costlier do not inflate it."""
        steady = statistics.median(self.engine_s(r) for r in range(2, rounds + 1))
        closing = self.ended - (self.stopped or self.ended)
        return self.engine_s(0) + max(0.0, self.engine_s(1) - steady) + closing

    def first_over_steady(self, rounds: int) -> float:
        return self.engine_s(1) / statistics.median(self.engine_s(r) for r in range(2, rounds + 1))

    def tokens_per_call(self, round_number: int) -> float:
        return statistics.mean(self.chars[round_number]) / CHARS_PER_TOKEN

    def calls_in(self, round_number: int) -> int:
        return len(self.chars[round_number])


# ------------------------------------------------------------------------------ baseline


class Product(BaseModel):
    name: str
    type: Literal["Collection", "Content"]
    owner: str
    dod: str = Field(description="Definition of done")


class Bootstrap(BaseModel):
    """The Chair's charter: mission, objectives, constraints, first products."""

    interpretation: str
    mission: str
    objectives: list[str]
    constraints: list[str]
    personas: dict[str, str]
    products: list[Product]


class Reflection(BaseModel):
    product: str
    dod_status: Literal["met", "not_met"]
    next_version_delta: str


class Reflect(BaseModel):
    """An operative's reflections on its products."""

    reflections: list[Reflection]


class Directive(BaseModel):
    objective: str
    dod: str
    why: str
    importance: int = Field(ge=1, le=10)


class Assignment(BaseModel):
    product: str
    assignee: str
    directive: Directive


class Acceptance(BaseModel):
    product: str
    accepted: bool
    version: str


class Plan(BaseModel):
    """The Chair's round: strategy, new products, assignments, acceptance."""

    round_strategy: str
    acceptance_rationale: str
    new_products: list[Product]
    assignments: list[Assignment]
    acceptance: list[Acceptance]


class NewVersion(BaseModel):
    product: str
    title: str
    content: str
    change_summary: str


class Write(BaseModel):
    """An operative's new versions of its assigned products."""

    versions: list[NewVersion]


class Review(BaseModel):
    product: str
    version: str
    assessment: Literal["approved", "changes_requested"]
    summary: str


class Collab(BaseModel):
    product: str
    type: Literal["suggestion", "question", "concern"]
    importance: int = Field(ge=1, le=10)
    comment: str


class PeerReview(BaseModel):
    """An operative's reviews of its peers' new versions."""

    reviews: list[Review]
    collabs: list[Collab]


class Finding(BaseModel):
    category: str
    severity: int = Field(ge=1, le=5)
    issue: str
    recommendation: str


class InspectionItem(BaseModel):
    product: str
    version: str
    assessment: Literal["approved", "rejected"]
    findings: list[Finding]


class Inspect(BaseModel):
    """The reviewer's inspection of every new version."""

    inspections: list[InspectionItem]


class Spoken(BaseModel):
    speaker: str
    content: str


class Present(BaseModel):
    """The envoy's messages to the user about the round."""

    messages: list[Spoken]


SYSTEM = """You are {agent}, the {role} of a small team: a chair, two operatives, a reviewer and an
envoy, who work in rounds toward a mission for a user. Work is organised as products with an
owner and a definition of done; operatives write numbered versions of them, review each other
and answer the reviewer's findings; the chair plans each round, assigns work and accepts
products whose latest version passed inspection; the envoy tells the user what happened.

Everything the team has said so far is in the conversation below, in order. Read it before you
answer. Answer with the tool you are given, filling every field; be concrete and short.

Your step now: {step}. {instructions}"""

INSTRUCTIONS = {
    "bootstrap": "Turn the user's request into a mission, objectives, constraints and the first products.",
    "reflect": "For each of your products, say whether its definition of done is met and what the next version changes.",
    "plan": "Accept what is ready, add products where the mission has gaps, and assign each open product.",
    "write": "Write the next version of each product assigned to you this round.",
    "peer_review": "Review every new version your peers wrote this round.",
    "inspect": "Inspect every new version written this round.",
    "present": "Tell the user, in one message per speaker, what the team did this round.",
}


class TeamState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    round: int


class StructuredFakeChatModel(BaseChatModel):
    """Answers the one tool it is bound to (what ``with_structured_output`` binds) with ``answer``."""

    answer: Callable[[Sequence[BaseMessage], Sequence[Any], str], dict]

    @property
    def _llm_type(self) -> str:
        return "structured-fake"

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any):
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], tool_choice=tool_choice, **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        tools = kwargs.get("tools") or []
        name = tools[0]["function"]["name"]
        args = self.answer(messages, tools, name)
        message = AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call_{name}", "type": "tool_call"}])
        return ChatResult(generations=[ChatGeneration(message=message)])


def baseline_answer(messages: Sequence[BaseMessage], tools: Sequence[Any], schema: str) -> dict:
    """What each role answers: deterministic, about the size of the simulated team's answers."""
    instruction = text_of(messages[-1])
    round_number = int(instruction.split("Round ", 1)[1].split(":", 1)[0]) if "Round " in instruction else 0
    agent = instruction.rsplit("You are ", 1)[-1].split(".", 1)[0] if "You are " in instruction else "chair"
    mine = [f"p{n}" for n in range(1, 5 + 2 * round_number)][(0 if agent == OPERATIVES[0] else 1)::2]
    recent = [f"p{3 + 2 * round_number - k}" for k in (1, 0)]
    if schema == "Bootstrap":
        return {"interpretation": f"The user asks: {REQUEST}", "mission": f"Deliver, as accepted products: {REQUEST}",
                "objectives": ["Every product meets its definition of done and passes inspection",
                               "Each round ends with accepted work the user can read"],
                "constraints": ["Plain text only", "One owner per product"],
                "personas": {a: f"A careful {a} who keeps work small and checkable" for a in ("chair", *OPERATIVES)},
                "products": [{"name": f"Section {n}", "type": "Content", "owner": OPERATIVES[n % 2],
                              "dod": "A complete section, concrete enough to act on, with two specific points."}
                             for n in range(1, 5)]}
    if schema == "Reflect":
        return {"reflections": [{"product": p, "dod_status": "met" if n else "not_met",
                                 "next_version_delta": "Answer the inspection and the feedback in a new version."}
                                for n, p in enumerate(mine[-2:])]}
    if schema == "Plan":
        return {"round_strategy": f"Round {round_number}: two assignments, two new products.",
                "acceptance_rationale": "Accepting the products whose latest version passed inspection.",
                "new_products": [{"name": f"Section r{round_number}-{k}", "type": "Content", "owner": OPERATIVES[k],
                                  "dod": f"A complete section added in round {round_number}, with two specific points."}
                                 for k in (0, 1)],
                "assignments": [{"product": recent[k], "assignee": OPERATIVES[k], "directive": {
                    "objective": f"Write the next version of {recent[k]}.", "dod": "The product's definition of done.",
                    "why": f"It is open work for round {round_number}.", "importance": 6}} for k in (0, 1)],
                "acceptance": [{"product": p, "accepted": True, "version": f"v{round_number}"} for p in recent]}
    if schema == "Write":
        product = mine[-1]
        content = (f"Section {product}, written by {agent} in round {round_number}. It states who it serves and "
                   "what they get, in one concrete sentence, then lists the first action, its owner and the day "
                   "it happens. Point one: intake volunteers greet each household and record its size. Point two: "
                   "storage leads check the cold room every morning and log the temperature. ")
        return {"versions": [{"product": product, "title": f"Section {product} v{round_number}", "content": content,
                              "change_summary": "Answers the inspection and the feedback."}]}
    if schema == "PeerReview":
        return {"reviews": [{"product": p, "version": f"v{round_number}", "assessment": "approved",
                             "summary": "Meets its definition of done; clear and concrete."} for p in recent[:1]],
                "collabs": [{"product": recent[0], "type": "suggestion", "importance": 3,
                             "comment": "Name the owner of the first action explicitly."}] if round_number % 3 == 0 else []}
    if schema == "Inspect":
        return {"inspections": [{"product": p, "version": f"v{round_number}", "assessment": "approved", "findings": [
            {"category": "quality", "severity": 2, "issue": "One sentence could be shorter.",
             "recommendation": "Tighten it in a later version."}]} for p in recent]}
    if schema == "Present":
        return {"messages": [{"speaker": "chair", "content": "I accepted two products and made two assignments."},
                             *({"speaker": op, "content": f"I wrote a new version of {recent[k]} this round."}
                               for k, op in enumerate(OPERATIVES))]}
    raise ValueError(f"no answer for {schema}")


# The baseline's checkpointers: "memory" is the plain baseline the goals are set against (issue
# 26), "sqlite" the durable one (a file on disk, as Cabal's own checkpoints), "none" for scale.
CHECKPOINTERS = ("memory", "sqlite", "none")


def checkpointer_of(kind: str, folder: Path | None) -> Any:
    if kind == "memory":
        return MemorySaver()
    if kind == "sqlite":
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        assert folder is not None, "a durable baseline needs a folder for its database"
        return SqliteSaver(sqlite3.connect(folder / "baseline.sqlite", check_same_thread=False))
    return None


def build_baseline(model: BaseChatModel, rounds: int, checkpointer: str = "memory", folder: Path | None = None):
    structured = {schema.__name__: model.with_structured_output(schema)
                  for schema in (Bootstrap, Reflect, Plan, Write, PeerReview, Inspect, Present)}

    def turn(step: str, schema: type[BaseModel], agent: str, role: str) -> Callable[[TeamState], dict]:
        def node(state: TeamState) -> dict:
            round_number = state["round"]
            prompt = [SystemMessage(SYSTEM.format(agent=agent, role=role, step=step, instructions=INSTRUCTIONS[step])),
                      *state["messages"],
                      HumanMessage(f"Round {round_number}: {INSTRUCTIONS[step]} You are {agent}.")]
            answer = structured[schema.__name__].invoke(prompt)
            said = AIMessage(content=answer.model_dump_json(), name=agent.replace("-", "_"))
            update: dict[str, Any] = {"messages": [said]}
            if step in ("bootstrap", "present"):
                update["round"] = round_number + 1
            return update
        return node

    graph = StateGraph(TeamState)
    graph.add_node("bootstrap", turn("bootstrap", Bootstrap, "chair", "chair"))
    graph.add_node("plan", turn("plan", Plan, "chair", "chair"))
    graph.add_node("inspect", turn("inspect", Inspect, "reviewer", "reviewer"))
    graph.add_node("present", turn("present", Present, "envoy", "envoy"))
    for step, schema in (("reflect", Reflect), ("write", Write), ("peer_review", PeerReview)):
        for n, agent in enumerate(OPERATIVES, 1):
            graph.add_node(f"{step}_{n}", turn(step, schema, agent, "operative"))

    def pair(step: str) -> list[str]:
        return [f"{step}_{n}" for n in range(1, len(OPERATIVES) + 1)]

    graph.add_edge(START, "bootstrap")
    for node in pair("reflect"):
        graph.add_edge("bootstrap", node)
    graph.add_edge(pair("reflect"), "plan")
    for node in pair("write"):
        graph.add_edge("plan", node)
    for node in pair("peer_review"):
        graph.add_edge(pair("write"), node)
    graph.add_edge(pair("peer_review"), "inspect")
    graph.add_edge("inspect", "present")
    graph.add_conditional_edges("present", lambda state: pair("reflect") if state["round"] <= rounds else END,
                                [*pair("reflect"), END])
    return graph.compile(checkpointer=checkpointer_of(checkpointer, folder))


def run_baseline(rounds: int, meter: Meter, checkpointer: str = "memory") -> float:
    """Wall seconds of one baseline run of ``rounds`` rounds; ``meter`` sees every call."""
    with tempfile.TemporaryDirectory(prefix="cabal-peers-baseline-") as folder:
        return _run_baseline(rounds, meter, checkpointer, Path(folder))


def _run_baseline(rounds: int, meter: Meter, checkpointer: str, folder: Path) -> float:
    answer = meter.timed(baseline_answer)
    model = StructuredFakeChatModel(answer=answer)
    graph = build_baseline(model, rounds, checkpointer, folder)
    config = {"configurable": {"thread_id": "baseline"}, "recursion_limit": 10_000}
    meter.started = started = time.perf_counter()
    for update in graph.stream({"messages": [HumanMessage(REQUEST)], "round": 0}, config,
                               stream_mode="updates"):
        if "bootstrap" in update:
            meter.enter(1)
        if "present" in update and update["present"]["round"] <= rounds:
            meter.enter(update["present"]["round"])
    meter.ended = time.perf_counter()
    return meter.ended - started


# ------------------------------------------------------------------------------ Cabal


def cabal_mission(rounds: int) -> dict:
    return {"name": "peers", "request": REQUEST, "team": {"operatives": len(OPERATIVES)}, "rounds": rounds}


def run_cabal(rounds: int, meter: Meter, home: Path) -> float:
    """Wall seconds of one Cabal mission of ``rounds`` rounds, through the public API only."""
    from cabal.llm import FunctionChatModel
    from cabal.rounds.api import run_mission
    from cabal.rounds.events import MissionEvent, MissionStopped, RoundStarted, TurnDone
    from cabal.rounds.simulated import simulated_team

    team = simulated_team(initial_products=4, products_per_round=2)
    answer = meter.timed(lambda messages, tools, request: team.fn(request))
    # Keeping no calls, as the baseline's fake model keeps none (Cabal's keeps them for tests).
    model = FunctionChatModel(lambda request: answer(request.messages, request.tools, request), keep_calls=False)

    def on_event(event: MissionEvent) -> None:
        if isinstance(event, RoundStarted):
            meter.enter(event.round)
        if isinstance(event, MissionStopped):
            meter.stop()
        if isinstance(event, TurnDone) and event.outcome == "failed":
            raise SystemExit(f"failed turn: {event}")

    meter.started = started = time.perf_counter()
    result = run_mission(cabal_mission(rounds), model=model, home=home, on_event=on_event)
    meter.ended = time.perf_counter()
    wall = meter.ended - started
    if result.state != "done" or result.round != rounds:
        raise SystemExit(f"Cabal mission ended {result.state} ({result.stop_reason}) at round {result.round}")
    return wall


def stop_graph_server(home: Path) -> int | None:
    """Stop the workspace's embedded server; its peak RSS in KiB (None if it was not running)."""
    from cabal.graph import EmbeddedServer

    server = EmbeddedServer(home)
    pid = server.pid()
    peak = peak_rss_kib(str(pid)) if pid is not None else None
    server.stop()
    return peak


def peak_rss_kib(pid: str) -> int | None:
    """A process's peak resident set (VmHWM), in KiB."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return None
    return next((int(line.split()[1]) for line in lines if line.startswith("VmHWM:")), None)


# ------------------------------------------------------------------------------ figures


def overhead_and_growth(home: Path) -> None:
    runs: dict[str, Callable[[Meter], float]] = {
        "cabal": lambda meter: run_cabal(ROUNDS, meter, home),
        "baseline": lambda meter: run_baseline(ROUNDS, meter),
        "baseline_durable": lambda meter: run_baseline(ROUNDS, meter, checkpointer="sqlite"),
        "baseline_no_checkpointer": lambda meter: run_baseline(ROUNDS, meter, checkpointer="none"),
    }
    run_cabal(2, Meter(), home)  # warm-up: imports, the graph server, caches
    run_baseline(2, Meter())
    per_call: dict[str, list[float]] = {side: [] for side in runs}
    meters: dict[str, Meter] = {}
    all_meters: dict[str, list[Meter]] = {side: [] for side in runs}
    for _ in range(RUNS):
        for side, run in runs.items():
            meter = Meter()
            wall = run(meter)
            per_call[side].append((wall - meter.fn_s) / meter.calls)
            meters[side] = meter
            all_meters[side].append(meter)
    overhead = {side: statistics.median(values) * 1000 for side, values in per_call.items()}
    for side in runs:
        report(f"{side}_calls_per_round", statistics.mean(meters[side].calls_in(r) for r in range(2, ROUNDS + 1)),
               "calls")
    for side in runs:
        measured(f"engine_overhead_per_call_r{ROUNDS}", side, overhead[side], "ms")
    fixed = {side: statistics.median(m.fixed_s(ROUNDS) for m in all_meters[side]) * 1000 for side in runs}
    first = {side: statistics.median(m.first_over_steady(ROUNDS) for m in all_meters[side]) for side in runs}
    for side in ("cabal", "baseline"):
        report(f"{side}_fixed_cost_per_mission", fixed[side], "ms")
        report(f"{side}_first_round_over_steady_round", first[side], "x",
               f"<= {GOAL_FIRST_ROUND}" if side == "cabal" else "")
    for side in ("cabal", "baseline", "baseline_durable"):
        meter = meters[side]
        measured(f"prompt_chars_per_call_r{ROUNDS}", side, meter.tokens_per_call(ROUNDS) * CHARS_PER_TOKEN, "chars")
    for side in ("cabal", "baseline"):
        meter = meters[side]
        report(f"{side}_prompt_tokens_per_call_r2", meter.tokens_per_call(2), "tokens")
        report(f"{side}_prompt_tokens_per_call_r{ROUNDS}", meter.tokens_per_call(ROUNDS), "tokens")
        report(f"{side}_prompt_growth_r{ROUNDS}_over_r2", meter.tokens_per_call(ROUNDS) / meter.tokens_per_call(2),
               "x", f"<= {GOAL_GROWTH}" if side == "cabal" else "")


def child(side: str, what: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--child", what, "--side", side]


def run_child_process(side: str, what: str) -> dict[str, Any]:
    # Bytecode caches allowed, as after a pip install (this machine sets PYTHONDONTWRITEBYTECODE).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = subprocess.run(child(side, what), capture_output=True, text=True, check=True, cwd=ROOT, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def first_call() -> None:
    samples: dict[str, list[float]] = {side: [] for side in SIDES}
    for side in samples:  # warm-up: bytecode caches written, files in the page cache
        run_child_process(side, "first-call")
    for _ in range(STARTS):
        for side in samples:
            started = time.monotonic()
            samples[side].append(run_child_process(side, "first-call")["first_call_at"] - started)
    for side, values in samples.items():
        measured("process_start_to_first_call", side, statistics.median(values), "s")


def cli_start(home: Path) -> None:
    """Wall time of ``cabal --help`` and of ``cabal status ID`` on a finished mission (its graph
    server already up, as after a run), process start to exit."""
    cabal = Path(sys.executable).with_name("cabal")
    mission_id = next(home.rglob("cassette.jsonl")).parent.name  # a mission the runs above left
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for name, args in (("help", ["--help"]), ("status", ["status", mission_id, "--home", str(home)])):
        samples = []
        for run in range(STARTS + 1):  # the first run writes bytecode caches
            started = time.monotonic()
            subprocess.run([str(cabal), *args], capture_output=True, check=True, cwd=ROOT, env=env)
            if run:
                samples.append(time.monotonic() - started)
        report(f"cabal_{name}_command", statistics.median(samples), "s")


def peak_rss() -> None:
    for side in SIDES:
        child_figures = run_child_process(side, "peak-rss")
        measured(f"peak_rss_r{ROUNDS}", side, child_figures["peak_rss_kib"] / 1024, "MiB")
        if child_figures.get("graph_server_kib"):
            report(f"{side}_graph_server_peak_rss_r{ROUNDS}", child_figures["graph_server_kib"] / 1024, "MiB")


# ------------------------------------------------------------------------------ children


def run_child(side: str, what: str) -> None:
    rounds = 1 if what == "first-call" else ROUNDS
    meter = Meter()
    result: dict[str, Any] = {}
    if side == "cabal":
        with tempfile.TemporaryDirectory(prefix="cabal-peers-") as tmp:
            home = Path(tmp)
            try:
                run_cabal(rounds, meter, home)
            finally:
                result["graph_server_kib"] = stop_graph_server(home)
    else:
        run_baseline(rounds, meter, checkpointer="sqlite" if side == "baseline_durable" else "memory")
    result["first_call_at"] = meter.first_call_at
    # VmHWM, not ru_maxrss: on Linux a child's ru_maxrss starts from its parent's peak at fork
    # (the kernel carries it over exec), so it would report this bench's own peak.
    result["peak_rss_kib"] = peak_rss_kib("self")
    print(json.dumps(result), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", choices=["first-call", "peak-rss"])
    parser.add_argument("--side", choices=SIDES)
    args = parser.parse_args()
    os.environ.pop("FALKORDB_URL", None)
    sys.path.insert(0, str(ROOT))
    if args.child:
        run_child(args.side, args.child)
        return
    # Other processes on the machine slow both sides: the load average says how quiet it was.
    print(f"# machine: {os.cpu_count()} cores, 1-minute load average {os.getloadavg()[0]:.2f} at start", flush=True)
    with tempfile.TemporaryDirectory(prefix="cabal-peers-bench-") as tmp:
        home = Path(tmp)
        try:
            overhead_and_growth(home)
            cli_start(home)
        finally:
            stop_graph_server(home)
    first_call()
    peak_rss()
    print_ratios()
    print(f"# 1-minute load average {os.getloadavg()[0]:.2f} at the end", flush=True)


if __name__ == "__main__":
    main()
