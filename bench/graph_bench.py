"""Context graph benchmark. Prints one `name value unit` line per figure.

- cluster_commit_throughput: clusters of 10 nodes + 15 links, one create_cluster (one round
  trip) each.
- step_commit_throughput: the same clusters four at a time, as the round engine commits a
  step of four operatives' turns: one create_cluster for the four.
- recommit_throughput: clusters committed a second time (a replay after a crash): the
  idempotent form, after the fresh form refused.
- find / related_to(depth=2) latency p50 and p95 on a 10,000-node, 30,000-link graph.
- embedded_cold_start: a new embedded server, start to first answered query.
- server_ceiling_*: what the server itself does at best, for the goal's scale: 1,000 nodes of
  the clusters' shape in one ``UNWIND ... CREATE`` (no guard, no per-label clauses, one round
  trip), on a graph without indexes and on one with the schema's indexes (every node updates
  the index on ``id`` and its type's own: what a cluster commit must pay), then 1,000 links
  matched by id; ``server_ceiling_mixed`` is that bulk rate for the clusters' mix of 10 nodes
  and 15 links. A cluster commit cannot beat it.
- raw_same_size_throughput: the clusters written as bare ``UNWIND`` queries of the same size as
  Cabal's commits (one query per cluster, and per four clusters), no guard, no Python checks:
  what the server does with writes of that size; its ratio to Cabal's says what Cabal's own
  checks and guard cost, apart from the batch size.
- commit_python_share: of one cluster commit's time, the share spent in Python (checking the
  cluster, building the query and its parameter header) rather than sending it and waiting for
  the server.
- ratio_* lines (issue 26): Cabal's commits over the server's bulk ceiling measured in the same
  run (goal >= 0.8x), and over the raw writes of the same size.
- behind_step_commit_throughput (issue 32): the step commits sent through the run's writer
  (``cabal.graph.behind``) as a mission's steps are: the sender goes on at once, and the steps
  that queued while a write was in flight go out joined as one write. Here steps come as fast as
  the sender makes them (a best case: a mission's steps come once per model call, and its queue
  held 1 to 4); ``behind_writes`` is how many round trips the CLUSTERS/4 steps took.
- *_server_time (issue 32): the same comparison on the server's own clock (each reply's "internal
  execution time"): milliseconds per 25 items of a cluster or step commit against the bulk
  writes'. Wall rates on a shared machine move with its load; this says what the commit's query
  itself costs the server, apart from the client, the socket and the scheduler.

Run: python bench/graph_bench.py  (uses a throwaway workspace; leaves nothing running)
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from cabal.graph import ContextGraph, EmbeddedServer
from cabal.graph.behind import WriteBehind

CLUSTERS = 400
STEP_TURNS = 4
GOAL_CEILING_RATIO = 0.8  # cluster commits over the server's bulk ceiling, same run (issue 26)
GRAPH_NODES = 10_000
GRAPH_LINKS = 30_000
SAMPLES = 400


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def report(name: str, value: float, unit: str, goal: str = "") -> None:
    print(f"{name} {value:.3f} {unit}" + (f"  (goal {goal})" if goal else ""), flush=True)


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
    # 15 distinct links: a ring, then every other node to the one two ahead.
    links = [{"type": "relates", "from": f"{prefix}-{i % 10}", "to": f"{prefix}-{(i + 1 + i // 10) % 10}",
              "properties": {"weight": i}} for i in range(15)]
    return nodes, links


SERVER_MS: dict[str, float] = {}  # the server's own execution time (its query statistics) per figure


def commit_throughput(graph: ContextGraph, prefix: str, per_commit: int = 1, figure: str = "") -> float:
    """nodes+links/s committing CLUSTERS clusters, ``per_commit`` of them in each round trip;
    the server's own execution time of those commits is kept under ``figure``."""
    batches = [cluster(f"{prefix}{n}") for n in range(CLUSTERS)]
    commits = [batches[start:start + per_commit] for start in range(0, CLUSTERS, per_commit)]
    run = graph._run  # a bench's look inside: each reply's "internal execution time"
    server_ms = [0.0]

    def timed_run(text, params=None, *, read_only=False):
        result = run(text, params, read_only=read_only)
        server_ms[0] += result.run_time_ms
        return result

    graph._run = timed_run  # type: ignore[method-assign]
    try:
        started = time.perf_counter()
        for group in commits:
            graph.create_cluster([n for nodes, _ in group for n in nodes], [link for _, links in group for link in links])
        elapsed = time.perf_counter() - started
    finally:
        del graph._run
    if figure:
        SERVER_MS[figure] = server_ms[0]
    return CLUSTERS * 25 / elapsed


@dataclass(frozen=True)
class StepClusters:
    """One step's clusters as a write the writer can join to the steps queued after it."""

    graph: ContextGraph
    nodes: tuple[dict, ...]
    links: tuple[dict, ...]

    def __call__(self) -> None:
        self.graph.create_cluster(list(self.nodes), list(self.links))

    def join(self, later: object) -> StepClusters | None:
        if not isinstance(later, StepClusters):
            return None
        return StepClusters(self.graph, self.nodes + later.nodes, self.links + later.links)


def behind_throughput(graph: ContextGraph, prefix: str) -> tuple[float, int]:
    """nodes+links/s of CLUSTERS clusters sent STEP_TURNS a step through a writer (joined
    where they queued), until the last is acknowledged; and how many writes went out."""
    started = time.perf_counter()
    writer = WriteBehind()
    graph.behind(writer)
    try:
        for start in range(0, CLUSTERS, STEP_TURNS):
            group = [cluster(f"{prefix}{n}") for n in range(start, min(start + STEP_TURNS, CLUSTERS))]
            writer.send(StepClusters(graph, tuple(n for nodes, _ in group for n in nodes),
                                     tuple(link for _, links in group for link in links)))
        writer.settle()
        elapsed = time.perf_counter() - started
    finally:
        writer.close()
        graph.behind(None)
    return CLUSTERS * 25 / elapsed, writer.sent - writer.joined


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


def server_ceiling(graph: ContextGraph) -> dict[str, float]:
    """Bulk rates of bare UNWIND writes (medians of 5 batches of 1,000), straight to the server."""
    rates: dict[str, list[float]] = {"nodes_no_index": [], "nodes_indexed": [], "links_indexed": []}
    server_ms: dict[str, list[float]] = {"nodes_indexed": [], "links_indexed": []}  # per 1,000 items
    plain = graph._db.select_graph("ceiling_plain")  # a bench's look past the API: raw Cypher writes
    indexed = graph.select("ceiling_indexed")
    indexed.counts()
    indexed._ensure_indexes()
    for batch in range(5):
        for name, target in (("nodes_no_index", plain), ("nodes_indexed", indexed._graph)):
            rows = [{"id": f"b{batch}-{i}", "props": {"node_type": "narrative", "type": "behavior",
                                                      "name": f"behavior {i}", "content": "x" * 80}}
                    for i in range(1000)]
            started = time.perf_counter()
            result = target.query("UNWIND $rows AS row CREATE (x:Node:Narrative {id: row.id}) SET x += row.props",
                                  {"rows": rows})
            rates[name].append(1000 / (time.perf_counter() - started))
            if name in server_ms:
                server_ms[name].append(result.run_time_ms)
        links = [{"from": f"b{batch}-{i}", "to": f"b{batch}-{(i + 1) % 1000}", "props": {"weight": i}}
                 for i in range(1000)]
        started = time.perf_counter()
        result = indexed._graph.query("UNWIND $rows AS row MATCH (a:Node {id: row.from}) MATCH (b:Node {id: row.to}) "
                                      "CREATE (a)-[e:RELATES]->(b) SET e += row.props", {"rows": links})
        rates["links_indexed"].append(1000 / (time.perf_counter() - started))
        server_ms["links_indexed"].append(result.run_time_ms)
    plain.delete()
    indexed.delete_graph()
    found = {name: statistics.median(values) for name, values in rates.items()}
    found["mixed"] = 25 / (10 / found["nodes_indexed"] + 15 / found["links_indexed"])
    # The server's own time for 25 items of the clusters' mix, in bulk (ms): no client, no round trip.
    found["mixed_server_ms_per_25"] = (10 * statistics.median(server_ms["nodes_indexed"])
                                       + 15 * statistics.median(server_ms["links_indexed"])) / 1000
    return found


def raw_same_size_throughput(graph: ContextGraph, prefix: str, per_commit: int = 1) -> float:
    """nodes+links/s writing the clusters as bare UNWIND queries of Cabal's commit sizes."""
    target = graph.select(f"raw_{prefix}")
    target.counts()
    target._ensure_indexes()
    batches = [cluster(f"{prefix}{n}") for n in range(CLUSTERS)]
    commits = [batches[start:start + per_commit] for start in range(0, CLUSTERS, per_commit)]
    query = ("UNWIND $nodes AS row CREATE (x:Node:Narrative {id: row.id}) SET x += row.props "
             "WITH count(*) AS made UNWIND $links AS row MATCH (a:Node {id: row.from}) MATCH (b:Node {id: row.to}) "
             "CREATE (a)-[e:RELATES]->(b) SET e += row.props")
    params = [{"nodes": [{"id": n["id"], "props": {k: v for k, v in n.items() if k != "id"}}
                         for nodes, _ in group for n in nodes],
               "links": [{"from": link["from"], "to": link["to"], "props": link["properties"]}
                         for _, links in group for link in links]} for group in commits]
    started = time.perf_counter()
    for values in params:
        target._graph.query(query, values)
    elapsed = time.perf_counter() - started
    target.delete_graph()
    return CLUSTERS * 25 / elapsed


def commit_python_share(graph: ContextGraph, prefix: str) -> float:
    """The share of a cluster commit's wall time spent in Python before the query is sent."""
    from cabal.graph import schema
    from cabal.graph.writes import build_cluster_query

    batches = [cluster(f"{prefix}{n}") for n in range(CLUSTERS)]
    started = time.perf_counter()
    for nodes, links in batches:
        query = build_cluster_query(nodes, links)
        schema.cypher_header(query.params)
    python_s = time.perf_counter() - started
    started = time.perf_counter()
    for nodes, links in [cluster(f"{prefix}w{n}") for n in range(CLUSTERS)]:
        graph.create_cluster(nodes, links)
    return python_s / (time.perf_counter() - started)


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
                commits = {"cluster": commit_throughput(graph, "c", figure="cluster"),
                           "step": commit_throughput(graph, "s", STEP_TURNS, figure="step")}
                report("cluster_commit_throughput", commits["cluster"], "nodes+links/s")
                report("step_commit_throughput", commits["step"], "nodes+links/s")
                commits["behind_step"], writes = behind_throughput(graph, "b")
                report("behind_step_commit_throughput", commits["behind_step"], "nodes+links/s")
                report("behind_writes", writes, f"round trips for {CLUSTERS // STEP_TURNS} steps")
                report("recommit_throughput", commit_throughput(graph, "c"), "nodes+links/s")
                raw = {"cluster": raw_same_size_throughput(graph, "rc"),
                       "step": raw_same_size_throughput(graph, "rs", STEP_TURNS)}
                report("raw_same_size_cluster_throughput", raw["cluster"], "nodes+links/s")
                report("raw_same_size_step_throughput", raw["step"], "nodes+links/s")
                report("commit_python_share", commit_python_share(graph, "p"), "of a commit's wall time")
                ceiling = server_ceiling(graph)
                report("server_ceiling_nodes_no_index", ceiling["nodes_no_index"], "nodes/s")
                report("server_ceiling_nodes_indexed", ceiling["nodes_indexed"], "nodes/s")
                report("server_ceiling_links_indexed", ceiling["links_indexed"], "links/s")
                report("server_ceiling_mixed", ceiling["mixed"], "nodes+links/s")
                print("# Cabal's commits over the server's own writes, measured in this run", flush=True)
                for kind, rate in commits.items():
                    ratio = rate / ceiling["mixed"]
                    met = "met" if ratio >= GOAL_CEILING_RATIO else "not met"
                    report(f"ratio_{kind}_commits_over_server_ceiling", ratio, "x",
                           f">= {GOAL_CEILING_RATIO} ({met})")
                    if kind in raw:
                        report(f"ratio_{kind}_commits_over_raw_same_size", rate / raw[kind], "x")
                # The same comparison on the server's own clock (its query statistics): what the
                # commit's query costs the server, apart from the client and the machine's load.
                per_25 = ceiling["mixed_server_ms_per_25"]
                report("server_ceiling_mixed_server_time", per_25, "ms per 25 items")
                for kind, spent in SERVER_MS.items():
                    own = spent / CLUSTERS
                    report(f"{kind}_commit_server_time", own, "ms per 25 items")
                    report(f"ratio_{kind}_commits_over_server_ceiling_server_time", per_25 / own, "x")

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
