"""Worth bench: what a team spends against one call of the same model, on the same mission files.

For each example mission file, the simulated team runs it and the simulated baseline (one call)
writes its documents, in one fresh workspace; both are priced at one model's list prices from
their cassettes, with and without prompt caching (``cabal.llm.costing``). Then the recorded
example's comparison is replayed offline (the team, its recorded baseline and its recorded
blind judges) and its verdicts printed. Prints ``name value unit`` lines:

    launch_team_tokens 41000 tokens
    launch_baseline_tokens 2300 tokens
    launch_token_ratio 17.8 x           # team / baseline, measured in this run
    launch_usd_ratio 12.1 x             # at --price-as list prices, without caching
    launch_usd_ratio_cached 9.0 x       # with the estimated prompt caching
    launch_team_cacheable 0.51 share    # of the team's input a provider's cache could serve
    foodbank_verdict_overall B          # A: the recorded team, B: its recorded baseline
    foodbank_token_ratio 30.1 x

The simulated models write no real content: their ratios measure what the engine spends around
the calls, not what a real model writes (the recorded example's figures do).

Usage: python bench/worth_bench.py [--price-as claude-sonnet-4-6]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MISSIONS = {"launch": "examples/launch/launch.mission.yaml", "sources": "examples/sources/sources.mission.yaml",
            "research": "examples/research/research.mission.yaml"}
FOODBANK = ROOT / "examples" / "foodbank"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--price-as", default="claude-sonnet-4-6", help="the model whose list prices both sides pay")
    options = parser.parse_args()

    from cabal.evals.versus import compare_missions, mission_cost
    from cabal.graph import EmbeddedServer
    from cabal.rounds import run_mission
    from cabal.rounds.baseline import run_baseline

    folder = Path(tempfile.mkdtemp(prefix="cabal-worth-bench-"))
    home = folder / ".cabal"
    server = EmbeddedServer(home)
    server.start()
    try:
        for name, path in MISSIONS.items():
            team = run_mission(ROOT / path, model="simulated", home=home, budget_usd="none")
            baseline = run_baseline(ROOT / path, model="simulated", home=home)
            costs = [mission_cost(m, options.price_as, home=home) for m in (team.mission_id, baseline.mission_id)]
            _ratios(name, *costs)
        team = run_mission(FOODBANK / "foodbank.mission.yaml", home=home)
        baseline = run_baseline(FOODBANK / "foodbank.mission.yaml",
                                model=f"replay:{FOODBANK / 'baseline.cassette.jsonl'}", home=home)
        comparison = compare_missions(team.mission_id, baseline.mission_id,
                                      f"replay:{FOODBANK / 'judge.cassette.jsonl'}", price_as=options.price_as,
                                      home=home)
        print(f"foodbank_verdict_overall {comparison.overall} side")
        for side in ("A", "B", "tie"):
            print(f"foodbank_deliverables_{side} {comparison.wins[side]} count")
        assert comparison.a.cost is not None and comparison.b.cost is not None
        _ratios("foodbank", comparison.a.cost, comparison.b.cost)
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _ratios(name: str, team: object, baseline: object) -> None:
    from cabal.llm.costing import RunCost

    assert isinstance(team, RunCost) and isinstance(baseline, RunCost)
    print(f"{name}_team_calls {team.calls} count")
    print(f"{name}_team_tokens {team.total_tokens} tokens")
    print(f"{name}_baseline_tokens {baseline.total_tokens} tokens")
    print(f"{name}_token_ratio {team.total_tokens / baseline.total_tokens:.1f} x")
    if team.usd_without_cache and baseline.usd_without_cache and team.usd_with_cache and baseline.usd_with_cache:
        print(f"{name}_team_usd {team.usd_without_cache:.4f} usd")
        print(f"{name}_team_usd_cached {team.usd_with_cache:.4f} usd")
        print(f"{name}_usd_ratio {team.usd_without_cache / baseline.usd_without_cache:.1f} x")
        print(f"{name}_usd_ratio_cached {team.usd_with_cache / baseline.usd_with_cache:.1f} x")
    print(f"{name}_team_cacheable {team.cacheable_share:.2f} share")


if __name__ == "__main__":
    main()
