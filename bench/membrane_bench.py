"""Membrane benchmark: per-step overhead without graph I/O, and a whole protocol with its commit.

Runs against a real embedded FalkorDB server in a temporary workspace. Every query the graph
sends is counted and timed by wrapping the FalkorDB graph object underneath ``ContextGraph``
(``query`` for writes, ``ro_query`` for reads), so round trips are counted, not guessed, and
graph time can be subtracted from a call's wall time.

Prints one figure per line, ``name value unit``:

    step_overhead_p50 / _p95        ms     one answered ask step (a middle one, or the one that
                                           completes and commits), membrane time only
    protocol_end_to_end_p50 / _p95  ms     start + ask + ask + create, commit included
    run_end_to_end_p50 / _p95       ms     the same protocol in one run() call
    create_round_trips              count  queries sent by the call that completes and commits
    create_writes                   count  of which writes (the cluster)
    run_round_trips                 count  queries sent by a whole one-shot run()

Usage: python bench/membrane_bench.py [iterations]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cabal.graph import ContextGraph, EmbeddedServer  # noqa: E402
from cabal.membrane import Membrane  # noqa: E402

PROTOCOL = """
protocol: bench_note
steps:
  title:
    type: ask
    question: Title of the note?
    expects: {type: string, min_length: 3, max_length: 80}
  body:
    type: ask
    question: What does the note say about {title}?
    expects: {type: string, min_length: 10}
    moment: {type: note}
  write:
    type: create
    nodes:
      - id: "note-{prefix}"
        node_type: narrative
        type: note
        name: "{title}"
        content: "{body}"
    links:
      - {type: contains, from: "{space_id}", to: "note-{prefix}"}
output:
  summary: "note {title} recorded"
"""
BODY = {"answer": "the ledger balances to zero each day", "description": "noted", "reasoning": "seen in logs"}


class Meter:
    """Counts and times every query the graph sends to the server."""

    def __init__(self, graph: ContextGraph) -> None:
        self.reads = self.writes = 0
        self.seconds = 0.0
        falkor = graph._graph  # the falkordb Graph: the one place queries leave the process
        for name in ("query", "ro_query"):
            setattr(falkor, name, self._wrap(getattr(falkor, name), write=name == "query"))

    def _wrap(self, send, *, write: bool):
        def timed(*args, **kwargs):
            if write:
                self.writes += 1
            else:
                self.reads += 1
            started = time.perf_counter()
            try:
                return send(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started

        return timed

    def snapshot(self) -> tuple[int, int, float]:
        return self.reads, self.writes, self.seconds


def measure(meter: Meter, call):
    """(result, wall seconds, graph seconds, reads, writes) of one call."""
    reads, writes, graph_seconds = meter.snapshot()
    started = time.perf_counter()
    result = call()
    wall = time.perf_counter() - started
    after = meter.snapshot()
    return result, wall, after[2] - graph_seconds, after[0] - reads, after[1] - writes


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def emit(name: str, value: float, unit: str) -> None:
    print(f"{name} {value:.3f} {unit}" if isinstance(value, float) else f"{name} {value} {unit}")


def main(iterations: int = 300) -> None:
    home = tempfile.mkdtemp(prefix="cabal-bench-")
    server = EmbeddedServer(Path(home))
    server.start()
    graph = ContextGraph.open(name="membrane_bench", home=home)
    try:
        graph.create_cluster(
            [
                {"id": "space-1", "node_type": "space", "type": "module", "name": "bench"},
                {"id": "agent-1", "node_type": "actor", "type": "agent", "name": "bench agent"},
            ]
        )
        meter = Meter(graph)
        membrane = Membrane(graph)
        membrane.load_string(PROTOCOL)

        step_overhead, end_to_end, run_wall = [], [], []
        create_reads = create_writes = run_trips = 0
        for i in range(iterations):
            context = {"actor_id": "agent-1", "space_id": "space-1", "prefix": f"s{i}"}
            started = time.perf_counter()
            sid = membrane.start("bench_note", context).session_id
            _, wall, io, _, _ = measure(meter, lambda: membrane.continue_session(sid, "Daily ledger"))
            step_overhead.append(wall - io)
            result, wall, io, create_reads, create_writes = measure(meter, lambda: membrane.continue_session(sid, BODY))
            step_overhead.append(wall - io)
            end_to_end.append(time.perf_counter() - started)
            assert result.status == "complete", result

            answers = {"title": "Daily ledger", "body": BODY}
            context = {**context, "prefix": f"r{i}"}
            result, wall, _, reads, writes = measure(meter, lambda: membrane.run("bench_note", context, answers))
            assert result.status == "complete", result
            run_wall.append(wall)
            run_trips = reads + writes

        ms = 1000.0
        emit("step_overhead_p50", percentile(step_overhead, 0.50) * ms, "ms")
        emit("step_overhead_p95", percentile(step_overhead, 0.95) * ms, "ms")
        emit("protocol_end_to_end_p50", percentile(end_to_end, 0.50) * ms, "ms")
        emit("protocol_end_to_end_p95", percentile(end_to_end, 0.95) * ms, "ms")
        emit("run_end_to_end_p50", percentile(run_wall, 0.50) * ms, "ms")
        emit("run_end_to_end_p95", percentile(run_wall, 0.95) * ms, "ms")
        emit("create_round_trips", create_reads + create_writes, "count")
        emit("create_writes", create_writes, "count")
        emit("run_round_trips", run_trips, "count")
        emit("iterations", iterations, "count")
    finally:
        graph.delete_graph()
        graph.close()
        server.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
