"""Is the team worth it? ``cabal baseline`` (one call of the model writes every document),
``cabal judge A B`` (two missions' documents judged blind, in both orders, with what each cost)
and ``cabal cost ID`` (what a run would cost at a named model's list prices)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cabal.cli.options import add_graph_options, add_model_option, add_record_option, add_replay_options, \
    replay_model_spec
from cabal.cli.output import chosen_format, write_report


def cmd_baseline(args: argparse.Namespace) -> int:
    from cabal.rounds.baseline import run_baseline

    result = run_baseline(args.mission, model=replay_model_spec(args.model, args), home=args.home, url=args.url,
                          record=not args.no_record)
    print(f"mission: {result.mission_id}")
    print(f"state: {result.state} (a baseline: one call of the model wrote every document)")
    print(f"usage: {result.usage.input_tokens:,} in, {result.usage.output_tokens:,} out, "
          f"{result.usage.calls} call(s)")
    print(f"next: cabal show {result.mission_id}   ·   cabal judge TEAM_MISSION {result.mission_id} "
          "--judge-model SPEC")
    return 0


def cmd_judge(args: argparse.Namespace) -> int:
    from cabal.evals.render import render_judgement
    from cabal.evals.versus import compare_missions

    target = Path(args.output) if args.output else None
    chosen = chosen_format(args.format, target)
    judge = replay_model_spec(args.judge_model, args)
    comparison = compare_missions(args.a, args.b, judge, price_as=args.price_as, home=args.home, url=args.url,
                                  record=not args.no_record)
    write_report(render_judgement(comparison, chosen), target, chosen)
    wins = comparison.wins
    print(f"overall: {comparison.overall} · deliverables A {wins['A']}, B {wins['B']}, tie {wins['tie']}",
          file=sys.stderr if target is None else sys.stdout)
    return 0


def cmd_cost(args: argparse.Namespace) -> int:
    from cabal.evals.versus import mission_cost

    cost = mission_cost(args.mission_id, args.model, home=args.home, url=args.url)
    if cost.usd_without_cache is None:
        priced = (f"not priced: no list price is known for {cost.model} (name a priced model with --model, "
                  "for example --model claude-sonnet-4-6)")
    else:
        priced = (f"${cost.usd_without_cache:.4f} without prompt caching, ${cost.usd_with_cache:.4f} with it "
                  f"(an estimate: {cost.cacheable_share:.0%} of the input repeats an earlier call's start)")
    # Cached: as the provider reported its cache reads, else as a prefix cache would serve them.
    print(f"{args.mission_id} at {cost.model}'s list prices: {cost.calls} calls, {cost.input_tokens:,} tokens in "
          f"({cost.cached_tokens:,} of them cached), {cost.output_tokens:,} out")
    print(priced)
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    baseline = add_record_option(add_replay_options(add_graph_options(commands.add_parser(
        "baseline", help="one call of the mission's model writes every document the request names (stored as a "
                         "mission of kind baseline, to judge a team against)"))))
    baseline.add_argument("mission", metavar="MISSION_FILE", help="the mission file (the team's)")
    add_model_option(baseline)
    baseline.set_defaults(func=cmd_baseline)

    judge = add_record_option(add_replay_options(add_graph_options(commands.add_parser(
        "judge", help="judge two missions' accepted documents blind, in both orders, beside what each cost"))))
    judge.add_argument("a", metavar="A", help="a mission id (a team's, say)")
    judge.add_argument("b", metavar="B", help="another mission id (its baseline, say)")
    judge.add_argument("--judge-model", required=True, metavar="SPEC",
                       help="the judge's model: any model spec (simulated, py:MODULE:FACTORY, replay:PATH, ...)")
    judge.add_argument("--price-as", metavar="SPEC",
                       help="price both sides' calls at this model's list prices (default: each at its own model's)")
    judge.add_argument("--format", choices=("md", "html", "json"), help="default: from -o, else md")
    judge.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE")
    judge.set_defaults(func=cmd_judge)

    cost = add_graph_options(commands.add_parser(
        "cost", help="what a mission's recorded calls would cost at a model's list prices, with and without caching"))
    cost.add_argument("mission_id", metavar="ID", help="a mission id (a team's, a baseline, a replay)")
    cost.add_argument("--model", metavar="SPEC", help="the model whose prices to use (default: the one it ran on)")
    cost.set_defaults(func=cmd_cost)
