"""Batch bench: the same 24 missions on 1, 2, 4 and 8 local worker processes and on a Dask
LocalCluster of 4 workers.

Each mission is the launch example (two operatives, four rounds, the Chair's question answered
from the mission file) played by its scripted team through a model that sleeps 0.5 s per call,
standing in for a real model: the work waits on the model, so more workers than cores pays.
Each configuration runs its own batch in one fresh workspace (its own embedded graph server).

Start-up is measured apart, once: a first one-mission batch starts the local fork server (it
imports the engine once for every later mission process); the Dask cluster is started (its
workers importing the engine) before its batch is submitted to it, as to a running scheduler.

Prints ``name value unit`` lines:

    missions 24 count
    first_batch_start 3.6 s             # the fork server's start, paid once per batch process
    mission_time_mean 11.9 s            # one mission, inside its worker
    wall_1_workers 290.1 s
    speedup_2_workers 1.98 x            # wall_1 / wall_2 (goal: >= 0.9 x workers)
    overhead_per_mission_1_workers 0.08 s   # (wall x workers - time inside missions) / missions
    peak_memory_per_worker_8_workers 131.0 MB
    ...

Usage: python bench/batch_bench.py [--missions 24] [--latency 0.5] [--workers 1,2,4,8] [--dask 4]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]  # worker processes import the slow model (batch_models) from here

LAUNCH = ROOT / "examples" / "launch" / "launch.mission.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--missions", type=int, default=24)
    parser.add_argument("--latency", type=float, default=0.5, help="seconds the model sleeps per call")
    parser.add_argument("--workers", default="1,2,4,8", help="local worker counts to run, comma-separated")
    parser.add_argument("--dask", type=int, default=4, help="workers of the Dask LocalCluster (0: skip)")
    options = parser.parse_args()
    os.environ["CABAL_BENCH_LATENCY"] = str(options.latency)  # before any worker process starts

    from cabal.batch import run_batch
    from cabal.graph import EmbeddedServer

    folder = Path(tempfile.mkdtemp(prefix="cabal-batch-bench-"))
    home = folder / ".cabal"
    server = EmbeddedServer(home)
    server.start()
    try:
        print(f"missions {options.missions} count", flush=True)
        print(f"model_latency {options.latency} s", flush=True)
        started = time.monotonic()
        run_batch(_batch_file(folder, "warm-up", 1), home=home, workers=1)
        print(f"first_batch_start {time.monotonic() - started - _inside(home, 'warm-up'):.1f} s", flush=True)
        walls: dict[str, float] = {}
        runs = [(f"{n}_workers", {"workers": n}, n) for n in map(int, options.workers.split(","))]
        if options.dask:
            runs.append((f"dask_{options.dask}_workers", {"dask": options.dask}, options.dask))
        for label, where, workers in runs:
            if "dask" in where:
                cluster, where = _dask_cluster(where["dask"]), {"dask": ""}
                where["dask"] = cluster.scheduler_address
            plan = _batch_file(folder, label, options.missions)
            started = time.monotonic()
            result = run_batch(plan, home=home, **where)
            wall = time.monotonic() - started
            walls[label] = wall
            rows = result.report.rows
            if result.report.summary() != f"{options.missions} missions: {options.missions} done":
                raise SystemExit(f"{label}: {result.report.summary()}")
            inside = sum(row.duration_s for row in rows)
            outcomes = _outcomes(home, result.batch_id)
            print(f"wall_{label} {wall:.1f} s", flush=True)
            if label == "1_workers":
                print(f"mission_time_mean {inside / len(rows):.2f} s", flush=True)
            elif "1_workers" in walls:
                speedup = walls["1_workers"] / wall
                print(f"speedup_{label} {speedup:.2f} x", flush=True)
                print(f"speedup_per_worker_{label} {speedup / workers:.2f} ratio", flush=True)
            print(f"overhead_per_mission_{label} {(wall * workers - inside) / len(rows):.2f} s", flush=True)
            print(f"peak_memory_per_worker_{label} {max(o.peak_rss_mb or 0 for o in outcomes):.1f} MB", flush=True)
            print(f"cpu_per_mission_{label} {sum(o.cpu_s or 0 for o in outcomes) / len(outcomes):.2f} s", flush=True)
            if "dask" in label:
                cluster.close()
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _batch_file(folder: Path, label: str, missions: int) -> Path:
    """A batch of ``missions`` runs of the launch example through the slow model."""
    path = folder / f"bench-{label}.batch.yaml"
    path.write_text(
        f"name: bench-{label}\n"
        "mission:\n"
        "  team: {operatives: 2, names: {operative-1: Ada, operative-2: Brook}}\n"
        "  rounds: 4\n"
        "  model: py:batch_models:launch\n"
        "  answers: ['Students first: university students who take lecture notes. Teachers come later.']\n"
        f"requests: [{_request()!r}]\n"
        f"repeat: {missions}\n")
    return path


def _dask_cluster(workers: int):
    """A LocalCluster whose workers have imported the engine, as a long-running one has."""
    from distributed import Client, LocalCluster

    started = time.monotonic()
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                           silence_logs=40)
    with Client(cluster) as client:
        client.run(lambda: __import__("cabal.batch.worker"))
    print(f"dask_cluster_start_{workers}_workers {time.monotonic() - started:.1f} s", flush=True)
    return cluster


def _inside(home: Path, label: str) -> float:
    from cabal.batch.store import batch_ids

    batch_id = next(b for b in batch_ids(home) if b.startswith(f"b-bench-{label}-"))
    return sum(o.elapsed_s for o in _outcomes(home, batch_id))


def _request() -> str:
    from cabal.rounds.mission import load_mission

    return load_mission(LAUNCH)[0].request


def _outcomes(home: Path, batch_id: str):
    from cabal.batch.store import BatchStore

    return BatchStore(home, batch_id).outcomes()


if __name__ == "__main__":
    main()
