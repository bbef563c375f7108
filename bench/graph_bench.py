"""Context graph benchmark. Prints one `name value unit` line per figure.

- cluster_commit_throughput: clusters of 10 nodes + 15 links through create_cluster.
- find / related_to(depth=2) latency p50 and p95 on a 10,000-node, 30,000-link graph.
- embedded_cold_start: a new embedded server, start to first answered query.

Run: python bench/graph_bench.py  (uses a throwaway workspace; leaves nothing running)
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path

from cabal.graph import ContextGraph, EmbeddedServer

CLUSTERS = 400
GRAPH_NODES = 10_000
GRAPH_LINKS = 30_000
SAMPLES = 400


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def report(name: str, value: float, unit: str) -> None:
    print(f"{name} {value:.3f} {unit}", flush=True)


def cold_start(home: Path) -> float:
    server = EmbeddedServer(home / "cold")
    started = time.perf_counter()
    with ContextGraph.open(name="cold", home=server.home) as graph:
        graph.counts()
    elapsed = time.perf_counter() - started
    server.stop()
    return elapsed


def cluster(prefix: str) -> tuple[list[dict], list[dict]]:
    nodes = [
        {"id": f"{prefix}-{i}", "node_type": "narrative", "type": "behavior", "name": f"behavior {i}", "content": "x" * 80}
        for i in range(10)
    ]
    links = [{"type": "relates", "from": f"{prefix}-{i % 10}", "to": f"{prefix}-{(i * 3 + 1) % 10}",
              "properties": {"weight": i}} for i in range(15)]
    return nodes, links


def commit_throughput(graph: ContextGraph) -> float:
    batches = [cluster(f"c{n}") for n in range(CLUSTERS)]
    started = time.perf_counter()
    for nodes, links in batches:
        graph.create_cluster(nodes, links)
    elapsed = time.perf_counter() - started
    return CLUSTERS * 25 / elapsed


PER_SPACE = 10  # a module holds 9 narratives: depth-2 neighbourhoods stay mission-sized


def build_big_graph(graph: ContextGraph) -> None:
    rng = random.Random(7)
    spaces = GRAPH_NODES // PER_SPACE
    for first in range(0, spaces, 10):
        nodes, links = [], []
        for space in range(first, first + 10):
            nodes.append({"id": f"s{space}", "node_type": "space", "type": "module", "name": f"module {space}"})
            for i in range(PER_SPACE - 1):
                kind = rng.choice(["behavior", "goal", "validation"])
                nodes.append({"id": f"n{space}-{i}", "node_type": "narrative", "type": kind, "name": f"item {space}-{i}"})
                links.append({"type": "contains", "from": f"s{space}", "to": f"n{space}-{i}"})
        graph.create_cluster(nodes, links)
    # The remaining links join random narratives across spaces, all distinct.
    pairs: set[tuple[str, str]] = set()
    remaining = GRAPH_LINKS - spaces * (PER_SPACE - 1)
    while len(pairs) < remaining:
        a = f"n{rng.randrange(spaces)}-{rng.randrange(PER_SPACE - 1)}"
        b = f"n{rng.randrange(spaces)}-{rng.randrange(PER_SPACE - 1)}"
        if a != b:
            pairs.add((a, b))
    links = [{"type": "relates", "from": a, "to": b} for a, b in sorted(pairs)]
    for start in range(0, len(links), 1000):
        graph.create_cluster([], links[start:start + 1000])


def latencies(call, samples: int) -> list[float]:
    timings = []
    for index in range(samples):
        started = time.perf_counter()
        call(index)
        timings.append(time.perf_counter() - started)
    return timings


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="cabal-bench-") as tmp:
        home = Path(tmp)
        report("embedded_cold_start", cold_start(home) * 1000, "ms")

        server = EmbeddedServer(home / "ws")
        try:
            with ContextGraph.open(name="throughput", home=server.home) as graph:
                graph.counts()
                report("cluster_commit_throughput", commit_throughput(graph), "nodes+links/s")

                big = graph.select("big")
                build_big_graph(big)
                counts = big.counts()
                report("graph_nodes", counts["nodes"], "nodes")
                report("graph_links", counts["links"], "links")
                rng = random.Random(11)
                spaces = GRAPH_NODES // PER_SPACE

                def find(_: int) -> None:
                    big.find("narrative", {"name": f"item {rng.randrange(spaces)}-{rng.randrange(PER_SPACE - 1)}"})

                def related(_: int) -> None:
                    big.related_to(f"n{rng.randrange(spaces)}-{rng.randrange(PER_SPACE - 1)}", depth=2)

                def find_in_space(_: int) -> None:
                    big.find("narrative", {"type": "goal"}, in_space=f"s{rng.randrange(spaces)}")

                for name, call in (("find", find), ("find_in_space", find_in_space), ("related_to_depth2", related)):
                    timings = latencies(call, SAMPLES)
                    report(f"{name}_p50", statistics.median(timings) * 1000, "ms")
                    report(f"{name}_p95", percentile(timings, 0.95) * 1000, "ms")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
