"""Round engine benchmark. Prints one `name value unit` line per figure.

Every mission is played by the simulated team (``cabal.rounds.simulated``), through the real
engine, the real membrane and a real embedded FalkorDB server in a throwaway workspace.

- engine_overhead_per_round: 4 operatives, 20 products at bootstrap (+4 a round), a model with
  no latency. Wall time of a round (rounds 2..N; a round ends when its presentation is
  committed) minus the time spent inside the model function. Goal: under 50 ms.
- round_wall / critical_path: the same team with 0.5 s per model call, 3 rounds. The critical
  path of a round is the sum over its steps of the longest chain of sequential calls of any
  one agent in that step, times 0.5 s (parallel operatives count once). Goal: ratio <= 1.10.
- prompt_tokens: a 20-round mission whose tree and history keep growing (6 products at
  bootstrap, +3 a round). Tokens = characters / 4 of everything sent in a call (system prompt
  and messages). The baseline is the same calls with a prompt that carries the whole history
  instead: the system prompt, the charter, the full tree, every version's content, every
  collab and every remark written before the round. Goal: round 20 <= 1.3 x round 2.

Run: python bench/rounds_bench.py [--profile]
(--profile: cProfile of the zero-latency runs, on stderr; main thread only)
"""

from __future__ import annotations

import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


from cabal.graph import ContextGraph, EmbeddedServer  # noqa: E402
from cabal.llm import FunctionChatModel, ModelRequest  # noqa: E402
from cabal.rounds.api import run_mission  # noqa: E402
from cabal.rounds.events import MissionEvent, StepStarted, TurnDone  # noqa: E402
from cabal.rounds.simulated import SimulatedTeam  # noqa: E402

LATENCY_S = 0.5
REPEATS = 3
CHARS_PER_TOKEN = 4
REQUEST = ("Write the operations handbook of a volunteer-run food bank: intake, storage, "
           "distribution, volunteer shifts, safety and reporting.")


def report(name: str, value: float, unit: str) -> None:
    print(f"{name} {value:.3f} {unit}", flush=True)


@dataclass
class Call:
    round: int
    step: str
    agent: str
    fn_s: float  # time inside the model function (the simulated team "thinking")
    chars: int  # everything sent: system prompt and messages
    system_chars: int  # the system prompt alone


@dataclass
class Recorder:
    """Wraps the simulated team: records every call, and the moments rounds end."""

    team: SimulatedTeam
    calls: list[Call] = field(default_factory=list)
    round_end: dict[int, float] = field(default_factory=dict)  # round -> perf_counter when it ended
    on_round_start: Any = None  # callable(mission_id, round) for the token baseline
    failed: int = 0  # turns without a valid answer (the simulated team should have none)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: ModelRequest) -> dict:
        started = time.perf_counter()
        answer = self.team(request)
        elapsed = time.perf_counter() - started
        chars = sum(len(m.text) for m in request.messages)
        with self._lock:
            self.calls.append(Call(request.key.round, request.key.step, request.key.agent, elapsed, chars,
                                   len(request.messages[0].text)))
        return answer

    def on_event(self, event: MissionEvent) -> None:
        now = time.perf_counter()
        if isinstance(event, TurnDone) and event.step in ("bootstrap", "presentation"):
            self.round_end[event.round] = now
        if isinstance(event, TurnDone) and event.outcome == "failed":
            self.failed += 1
            print(f"# failed turn: round {event.round} {event.step} {event.agent}: {event.problems[:2]}",
                  file=sys.stderr)
        if isinstance(event, StepStarted) and event.step == "reflect" and self.on_round_start:
            self.on_round_start(event.mission, event.round)

    def round_wall(self, round_number: int) -> float:
        return self.round_end[round_number] - self.round_end[round_number - 1]

    def model_time(self, round_number: int) -> float:
        return sum(c.fn_s for c in self.calls if c.round == round_number)

    def critical_path(self, round_number: int, latency_s: float) -> float:
        chains: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for call in self.calls:
            if call.round == round_number:
                chains[call.step][call.agent] += 1
        return sum(max(per_agent.values()) for per_agent in chains.values()) * latency_s


def mission(operatives: int, rounds: int) -> dict:
    return {"name": "bench", "request": REQUEST, "team": {"operatives": operatives}, "rounds": rounds}


def run(home: Path, recorder: Recorder, *, operatives: int, rounds: int, latency_s: float):
    model = FunctionChatModel(recorder, latency_s=latency_s)
    result = run_mission(mission(operatives, rounds), model=model, home=home, on_event=recorder.on_event)
    if result.state != "done" or result.round != rounds or recorder.failed:
        raise SystemExit(f"mission ended {result.state} ({result.stop_reason}) at round {result.round} "
                         f"with {recorder.failed} failed turn(s): {result.detail}")
    return result


# ---------------------------------------------------------------------------- 1. overhead


def engine_overhead(home: Path, profile: bool) -> None:
    """Best of REPEATS missions: the machine is shared, and noise only ever adds time."""
    rounds, best = 10, None
    for _ in range(REPEATS):
        recorder = Recorder(SimulatedTeam(initial_products=20, products_per_round=4))
        profiler = cProfile.Profile() if profile else None
        if profiler:
            profiler.enable()
        run(home, recorder, operatives=4, rounds=rounds, latency_s=0.0)
        if profiler:
            profiler.disable()
            pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(40)
        measured = range(2, rounds + 1)
        walls = [recorder.round_wall(r) for r in measured]
        models = [recorder.model_time(r) for r in measured]
        overheads = [w - m for w, m in zip(walls, models)]
        if best is None or statistics.mean(overheads) < statistics.mean(best[2]):
            best = (recorder, walls, overheads, models)
    recorder, walls, overheads, models = best
    report("round1_wall_zero_latency", recorder.round_wall(1) * 1000, "ms")
    report("round_wall_zero_latency_mean", statistics.mean(walls) * 1000, "ms")
    report("model_fn_time_per_round_mean", statistics.mean(models) * 1000, "ms")
    report("engine_overhead_per_round_mean", statistics.mean(overheads) * 1000, "ms")
    report("engine_overhead_per_round_max", max(overheads) * 1000, "ms")
    report("calls_per_round_mean", statistics.mean(sum(c.round == r for c in recorder.calls) for r in measured), "calls")


# ----------------------------------------------------------------------- 2. critical path


def critical_path(home: Path) -> None:
    rounds = 3
    recorder = Recorder(SimulatedTeam(initial_products=20, products_per_round=4))
    run(home, recorder, operatives=4, rounds=rounds, latency_s=LATENCY_S)
    measured = range(1, rounds + 1)
    walls = [recorder.round_wall(r) for r in measured]
    paths = [recorder.critical_path(r, LATENCY_S) for r in measured]
    report("round_wall_latency_0.5s_mean", statistics.mean(walls), "s")
    report("critical_path_per_round_mean", statistics.mean(paths), "s")
    report("round_wall_over_critical_path", sum(walls) / sum(paths), "x")
    report("round_wall_over_critical_path_worst", max(w / p for w, p in zip(walls, paths)), "x")


# ------------------------------------------------------------------------ 3. prompt tokens


def history_chars(home: Path, mission_id: str) -> int:
    """Everything written so far, as a prompt that sends the whole history would carry it."""
    with ContextGraph.open(name=mission_id, home=home) as graph:
        node = graph.get(mission_id) or {}
        charter = len(str(node.get("charter") or node.get("request") or "")) + sum(
            len(str(item)) for key in ("objectives", "constraints") for item in node.get(key) or [])
        tree = sum(len(f"p00 [{p['type']}] {p['name']} · owner {p.get('owner')} · {p.get('status')} · v0")
                   for p in graph.find("product"))
        versions = sum(len(v.get("content") or "") + len(v.get("change_summary") or "")
                       for v in graph.find("version", fields=["content", "change_summary"]))
        collabs = sum(len(c.get("comment") or "") for c in graph.find("collab", fields=["comment"]))
        remarks = sum(len(r.get("content") or "") for r in graph.find("remark", fields=["content"]))
    return charter + tree + versions + collabs + remarks


def prompt_tokens(home: Path) -> None:
    rounds = 20
    recorder = Recorder(SimulatedTeam(initial_products=6, products_per_round=3))
    history: dict[int, int] = {}
    recorder.on_round_start = lambda mission_id, r: history.setdefault(r, history_chars(home, mission_id))
    run(home, recorder, operatives=4, rounds=rounds, latency_s=0.0)

    def per_call(r: int) -> tuple[float, float]:
        calls = [c for c in recorder.calls if c.round == r]
        cabal = statistics.mean(c.chars for c in calls) / CHARS_PER_TOKEN
        # The same calls, each with the whole history in place of Cabal's context.
        system = statistics.mean(c.system_chars for c in calls)
        baseline = (system + history[r]) / CHARS_PER_TOKEN
        return cabal, baseline

    cabal2, base2 = per_call(2)
    cabal20, base20 = per_call(20)
    report("prompt_tokens_per_call_round2", cabal2, "tokens")
    report("prompt_tokens_per_call_round20", cabal20, "tokens")
    report("prompt_tokens_round20_over_round2", cabal20 / cabal2, "x")
    report("baseline_tokens_per_call_round2", base2, "tokens")
    report("baseline_tokens_per_call_round20", base20, "tokens")
    report("baseline_round20_over_round2", base20 / base2, "x")
    for r in (5, 10, 15):
        cabal, base = per_call(r)
        report(f"prompt_tokens_per_call_round{r}", cabal, "tokens")
        report(f"baseline_tokens_per_call_round{r}", base, "tokens")


def main() -> None:
    profile = "--profile" in sys.argv
    os.environ.pop("FALKORDB_URL", None)
    with tempfile.TemporaryDirectory(prefix="cabal-rounds-bench-") as tmp:
        home = Path(tmp)
        try:
            engine_overhead(home, profile)
            critical_path(home)
            prompt_tokens(home)
        finally:
            EmbeddedServer(home).stop()


if __name__ == "__main__":
    main()
