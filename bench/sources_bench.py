"""Sources: ingest of a folder of 500 files / 10 MB, and search_sources over 10,000 chunks. Prints
one `name value unit` line per figure, with the goal beside it.

The corpus (generated, seeded): 500 files of 20 kB each, 10 MB in all: 300 Markdown files
(a heading every ~800 characters), 100 CSV files (40-row chunks of ~30-character rows) and 100
plain-text files (paragraphs of ~700 characters), words drawn from a 3,000-word vocabulary with
a Zipf-like skew, so a search word matches anything from a handful of chunks to thousands.

Figures:

- ingest_500_files_10mb: a mission file naming the folder, run with ``run_mission`` in a new
  workspace (``home=`` a temp dir, so its embedded FalkorDB server starts cold), from the call to
  the ``MissionStarted`` event: reading the mission file, finding and reading the 500 files,
  chunking them, preparing the ``add_source`` clusters through the membrane, starting the graph
  server and committing the mission's start with its sources (the full-text index included).
  The team then ends the mission at once (the model halts ``done`` at bootstrap). Median of RUNS
  runs. Goal (issue 22): <= 5 s.
- chunks: the chunks that ingest wrote (the search runs over them). Goal: >= 10,000.
- search_sources p50 / p95: the ``search_sources`` need as a turn answers it
  (``cabal.rounds.sources.search_text``: the full-text query, the current-version filter, the
  quoted result text), over QUERIES queries of 1 to 3 vocabulary words, after 20 warm-up
  queries. Goal (issue 22): p50 < 5 ms.

Run: python bench/sources_bench.py   (about a minute on the project's 2-core machine)
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from cabal.graph import ContextGraph
from cabal.llm import FunctionChatModel, ModelRequest
from cabal.rounds.api import run_mission
from cabal.rounds.events import MissionEvent, MissionStarted
from cabal.rounds.sources import search_text

FILES, FILE_BYTES = 500, 20_000
RUNS = 3
QUERIES = 500
SEED = 22


def vocabulary(rng: random.Random, size: int = 3000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return sorted({"".join(rng.choice(letters) for _ in range(rng.randint(4, 10))) for _ in range(size)})


def sentence(rng: random.Random, words: list[str], weights: list[float], length: int) -> str:
    return " ".join(rng.choices(words, weights, k=length)).capitalize() + "."


def fill(rng: random.Random, words: list[str], weights: list[float], size: int, kind: str) -> str:
    parts, used, n = [], 0, 0
    while used < size:
        n += 1
        if kind == "markdown":
            block = f"## Section {n}\n\n" + " ".join(sentence(rng, words, weights, 12) for _ in range(9))
        elif kind == "csv":
            block = f"{rng.choice(words)},{rng.choice(words)},{rng.randint(1, 999)},{rng.randint(1, 50)}"
        else:
            block = " ".join(sentence(rng, words, weights, 12) for _ in range(8))
        parts.append(block)
        used += len(block) + 2
    joiner = "\n" if kind == "csv" else "\n\n"
    text = ("name,plan,price,seats\n" if kind == "csv" else "") + joiner.join(parts)
    return text[:size]


def make_corpus(folder: Path) -> list[str]:
    rng = random.Random(SEED)
    words = vocabulary(rng)
    weights = [1 / (rank + 1) ** 0.8 for rank in range(len(words))]
    docs = folder / "docs"
    docs.mkdir()
    for index in range(FILES):
        kind, ext = ("markdown", "md") if index < 300 else ("csv", "csv") if index < 400 else ("text", "txt")
        (docs / f"doc{index:03d}.{ext}").write_text(fill(rng, words, weights, FILE_BYTES, kind))
    (folder / "bench.mission.yaml").write_text("request: Read the corpus.\nrounds: 1\nsources: [docs]\n")
    return words


def halt_at_once(request: ModelRequest) -> dict:
    return {"tool": "halt", "args": {"type": "done", "to": ["u:all"], "message": "Benchmark: nothing to do."}}


def ingest_once(folder: Path) -> tuple[float, str, Path]:
    home = Path(tempfile.mkdtemp(prefix="cabal-sources-bench-"))
    started: list[float] = []

    def heard(event: MissionEvent) -> None:
        if isinstance(event, MissionStarted):
            started.append(time.perf_counter())

    begin = time.perf_counter()
    result = run_mission(folder / "bench.mission.yaml", model=FunctionChatModel(halt_at_once), home=home,
                         on_event=heard)
    return started[0] - begin, result.mission_id, home


def stop_server(home: Path) -> None:
    with ContextGraph.open(home=home) as graph:
        if graph.server is not None:
            graph.server.stop()


def figure(name: str, value: float, unit: str, goal: str = "") -> None:
    print(f"{name} {value:.3f} {unit}" + (f"  # goal: {goal}" if goal else ""), flush=True)


def main() -> int:
    print(f"# machine: {os.cpu_count()} cores, 1-minute load average {os.getloadavg()[0]:.2f} at start", flush=True)
    with tempfile.TemporaryDirectory(prefix="cabal-sources-corpus-") as tmp:
        folder = Path(tmp)
        words = make_corpus(folder)
        timings, last = [], None
        for _ in range(RUNS):
            seconds, mission_id, home = ingest_once(folder)
            timings.append(seconds)
            if last is not None:
                stop_server(last[1])
            last = (mission_id, home)
        figure("ingest_500_files_10mb", statistics.median(timings), "s", "<= 5 s")
        mission_id, home = last
        with ContextGraph.open(name=mission_id, home=home) as graph:
            chunks = graph.counts()
            count = len(graph.read_cypher("MATCH (c:Chunk) RETURN c.id AS id"))
            figure("chunks", count, "chunks", ">= 10,000")
            rng = random.Random(SEED + 1)
            queries = [" ".join(rng.sample(words, rng.randint(1, 3))) for _ in range(QUERIES + 20)]
            found, times = 0, []
            for index, query in enumerate(queries):
                start = time.perf_counter()
                text = search_text(graph, query, 800)
                elapsed = time.perf_counter() - start
                if index >= 20:
                    times.append(elapsed * 1000)
                    found += not text.endswith("nothing found")
            times.sort()
            figure("search_sources_p50", statistics.median(times), "ms", "< 5 ms")
            figure("search_sources_p95", times[int(len(times) * 0.95)], "ms")
            figure("queries_with_results", found / QUERIES, "share")
            print(f"# graph: {chunks['nodes']:,} nodes, {chunks['links']:,} links", flush=True)
        stop_server(home)
    print(f"# 1-minute load average {os.getloadavg()[0]:.2f} at the end", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
