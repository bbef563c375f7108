"""Load-independent figures for comparing two versions of Cabal on a busy machine (issue 26).

Wall times on a shared 2-core machine move by 2x between minutes; the process's own CPU time
(``resource.getrusage``) and counts move far less. Each figure runs in a fresh child process
per sample, so two code trees can be compared A/B, interleaved, in the same minutes:

    python bench/cpu_figures.py --tree /tmp/base --tree . --samples 4

(each ``--tree`` is put first on the children's ``PYTHONPATH``; its ``cabal/__init__.py`` is
printed, so a run says which code it measured). Figures, one ``name value unit`` line per tree:

- first_call_cpu: process CPU from start to the first model call of a new mission (imports
  included; the simulated team through ``run_mission``, as peers_bench's Cabal side), with the
  CPU already spent when ``run_mission`` was entered and the modules loaded by the first call.
- per_call_cpu: process CPU per model call of a R=20 mission, after a warm-up mission in the
  same process (the graph server's CPU is its own process's, not counted).
- commit_client_cpu: client CPU of one commit (``build_cluster_query`` and the parameter
  header) over the clusters a R=20 mission commits, captured once from a real run; best of 7.

Run: python bench/cpu_figures.py --tree DIR [--tree DIR ...]  (about a minute per tree and sample)
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STARTED = time.monotonic()


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# ------------------------------------------------------------------------------ children


def child_first_call() -> dict:
    sys.path.insert(0, str(HERE))
    import peers_bench

    seen: dict = {}
    timed = peers_bench.Meter.timed

    def first_call_noted(meter, fn):
        inner = timed(meter, fn)

        def call(*args):
            if "first_call_cpu" not in seen:
                seen.update(first_call_cpu=cpu_s(), first_call_wall=time.monotonic() - STARTED,
                            modules=len(sys.modules))
            return inner(*args)
        return call

    peers_bench.Meter.timed = first_call_noted
    import cabal.rounds.api as api

    run_mission = api.run_mission

    def entered(*args, **kwargs):
        seen.setdefault("cpu_at_run_mission", cpu_s())
        return run_mission(*args, **kwargs)

    api.run_mission = entered
    with tempfile.TemporaryDirectory(prefix="cabal-cpu-") as tmp:
        try:
            peers_bench.run_cabal(1, peers_bench.Meter(), Path(tmp))
        finally:
            peers_bench.stop_graph_server(Path(tmp))
    return seen


def child_per_call(clusters_to: str | None = None) -> dict:
    sys.path.insert(0, str(HERE))
    import peers_bench
    from cabal.graph import context_graph

    captured: list = []
    if clusters_to:
        create_cluster = context_graph.ContextGraph.create_cluster

        def capturing(graph, nodes, links=None, *, updates=None, unlinks=None):
            captured.append(pickle.dumps((nodes, links, updates, unlinks)))
            return create_cluster(graph, nodes, links, updates=updates, unlinks=unlinks)

        context_graph.ContextGraph.create_cluster = capturing
    with tempfile.TemporaryDirectory(prefix="cabal-cpu-") as tmp:
        home = Path(tmp)
        try:
            peers_bench.run_cabal(2, peers_bench.Meter(), home)  # warm-up: imports, caches
            captured.clear()
            meter = peers_bench.Meter()
            before = cpu_s()
            peers_bench.run_cabal(peers_bench.ROUNDS, meter, home)
            spent = cpu_s() - before
        finally:
            peers_bench.stop_graph_server(home)
    if clusters_to:
        Path(clusters_to).write_bytes(pickle.dumps([pickle.loads(c) for c in captured]))
    return {"per_call_cpu_ms": spent * 1000 / meter.calls, "calls": meter.calls}


def child_commit(clusters_from: str) -> dict:
    from cabal.graph.schema import cypher_header
    from cabal.graph.writes import build_cluster_query

    clusters = pickle.loads(Path(clusters_from).read_bytes())

    def commit_all() -> None:
        for nodes, links, updates, unlinks in clusters:
            cypher_header(build_cluster_query(nodes, links or [], updates, unlinks).params)

    commit_all()
    best = min(_timed(commit_all) for _ in range(7))
    return {"commit_client_cpu_ms": best * 1000 / len(clusters), "clusters": len(clusters)}


def _timed(work) -> float:
    started = time.process_time()
    work()
    return time.process_time() - started


# ------------------------------------------------------------------------------ driver


def run_child(tree: Path, *args: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "FALKORDB_URL")}
    env["PYTHONPATH"] = os.pathsep.join([str(tree), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", *args],
                         capture_output=True, text=True, env=env, cwd=tree)
    if out.returncode:
        raise SystemExit(f"{tree}: the {args[0]} child failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", type=Path, help="a folder holding a cabal/ package")
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        found = {"first-call": child_first_call, "per-call": child_per_call, "commit": child_commit}[kind](*rest)
        import cabal

        print(json.dumps({**found, "code": cabal.__file__}), flush=True)
        return
    trees = [tree.resolve() for tree in args.tree or [HERE.parent]]
    samples: dict[Path, list[dict]] = {tree: [] for tree in trees}
    with tempfile.TemporaryDirectory(prefix="cabal-cpu-clusters-") as tmp:
        clusters = str(Path(tmp) / "clusters.pickle")
        for sample in range(args.samples):
            for tree in trees:  # interleaved: every tree sees the same minutes
                first = run_child(tree, "first-call")
                per_call = run_child(tree, "per-call", *([clusters] if sample == 0 and tree == trees[0] else []))
                samples[tree].append({**first, **per_call, **run_child(tree, "commit", clusters)})
    print(f"# 1-minute load average {os.getloadavg()[0]:.2f} at the end", flush=True)
    for tree, found in samples.items():
        print(f"# {tree}: {found[0]['code']}")
        for name, unit in (("first_call_cpu", "s"), ("cpu_at_run_mission", "s"), ("first_call_wall", "s"),
                           ("modules", "modules"), ("per_call_cpu_ms", "ms"), ("commit_client_cpu_ms", "ms")):
            values = [sample[name] for sample in found]
            print(f"{name} {statistics.median(values):.4f} {unit}  # {' / '.join(f'{v:.4g}' for v in values)}",
                  flush=True)


if __name__ == "__main__":
    main()
