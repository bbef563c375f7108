"""Replay bench: the research example recorded with a model that takes 0.2 s a call, then
replayed from its cassette; and `cabal eval` of a 10-request batch, 3 runs each, on 4 workers.

Prints ``name value unit`` lines:

    record_calls 47 count
    record_wall 12.3 s                  # the research example at 0.2 s a model call
    replay_wall 0.45 s                  # the same mission, strictly replayed from its cassette
    replay_speedup 27 x                 # record_wall / replay_wall (goal: >= 20 x)
    scripted_wall_no_latency 0.40 s     # the script again without latency: the engine's own time
    cassette_bytes_per_call 6300 B
    eval_missions 30 count
    eval_wall 58 s
    eval_missions_per_minute 31 /min

The replay is checked, not only timed: its graph must equal the recording's (the script stops
otherwise). Everything runs in one fresh workspace with its own embedded graph server.

Usage: python bench/replay_bench.py [--latency 0.2] [--requests 10] [--repeat 3] [--workers 4]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RESEARCH = ROOT / "examples" / "research"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2, help="seconds the recorded model sleeps per call")
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=4)
    options = parser.parse_args()

    from cabal.graph import EmbeddedServer

    folder = Path(tempfile.mkdtemp(prefix="cabal-replay-bench-"))
    home = folder / ".cabal"
    server = EmbeddedServer(home)
    server.start()
    try:
        replay_figures(home, options.latency)
        eval_figures(home, folder, options.requests, options.repeat, options.workers)
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


def replay_figures(home: Path, latency: float) -> None:
    from cabal.llm.cassette import CASSETTE_FILE, Cassette
    from cabal.llm.scripted import ScriptedChatModel
    from cabal.rounds import mission_report, run_mission
    from cabal.rounds.replays import replay_mission

    model = ScriptedChatModel.from_file(RESEARCH / "research.script.yaml", latency_s=latency)
    started = time.perf_counter()
    recorded = run_mission(RESEARCH / "research.mission.yaml", model=model, home=home)
    record_wall = time.perf_counter() - started
    started = time.perf_counter()
    replayed = replay_mission(recorded.mission_id, home=home)
    replay_wall = time.perf_counter() - started
    if replayed.state != "done":
        raise SystemExit(f"the replay did not reproduce the mission: {replayed.state}: {replayed.detail}")
    products = [(p.name, p.status, p.shown.content if p.shown else None)
                for p in mission_report(recorded.mission_id, home=home).products]
    again = [(p.name, p.status, p.shown.content if p.shown else None)
             for p in mission_report(replayed.mission_id, home=home).products]
    if products != again or recorded.usage.total_tokens != replayed.usage.total_tokens:
        raise SystemExit("the replay's products or usage differ from the recording's")
    started = time.perf_counter()  # the engine's own floor: the same script without any latency
    run_mission(RESEARCH / "research.mission.yaml", home=home, record=False)
    floor_wall = time.perf_counter() - started
    path = home / "missions" / recorded.mission_id / CASSETTE_FILE
    calls = len(Cassette.read(path).calls)
    print(f"record_calls {calls} count")
    print(f"record_wall {record_wall:.2f} s")
    print(f"replay_wall {replay_wall:.2f} s")
    print(f"replay_speedup {record_wall / replay_wall:.1f} x")
    print(f"scripted_wall_no_latency {floor_wall:.2f} s")
    print(f"cassette_bytes {path.stat().st_size} B")
    print(f"cassette_bytes_per_call {path.stat().st_size / calls:.0f} B")


def eval_figures(home: Path, folder: Path, requests: int, repeat: int, workers: int) -> None:
    import yaml

    from cabal.evals.run import run_eval, summarize

    batch = folder / "bench.batch.yaml"
    batch.write_text(yaml.safe_dump({
        "name": "replay-bench", "mission": {"rounds": 3, "model": "py:cabal.rounds.simulated:team"},
        "expect": {"state": "done", "accepted_at_least": 1, "max_rounds": 3},
        "requests": [f"Write a one-page guide number {n} for new volunteers." for n in range(1, requests + 1)]}))
    started = time.perf_counter()
    result = run_eval(batch, repeat=repeat, workers=workers, home=home)
    wall = time.perf_counter() - started
    rates = [rate.rate for summary in summarize(result) for rate in summary.expectations]
    print(f"eval_missions {len(result.runs)} count")
    print(f"eval_wall {wall:.1f} s")
    print(f"eval_missions_per_minute {len(result.runs) / wall * 60:.1f} /min")
    print(f"eval_lowest_pass_rate {min(rates):.2f} rate")


if __name__ == "__main__":
    main()
