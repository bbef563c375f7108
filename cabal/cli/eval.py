"""``cabal eval BATCH``: run each request of a batch file K times and report how often each of its
expectations held; ``cabal eval --compare A B``: two evaluations side by side.

The exit status is 0 only when every expectation's pass rate reaches ``--min-pass``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cabal.cli import exits
from cabal.cli.options import add_graph_options
from cabal.cli.output import chosen_format, write_report
from cabal.errors import ConfigError


def cmd_eval(args: argparse.Namespace) -> int:
    from cabal.evals import run as evals
    from cabal.evals.render import render_comparison, render_eval, verdict

    target = Path(args.output) if args.output else None
    chosen = chosen_format(args.format, target, ("md", "json", "html", "csv"))
    if args.compare:
        if args.batch:
            raise ConfigError("--compare takes two stored evaluations, not a batch file")
        a, b = (evals.load(reference, args.home) for reference in args.compare)
        if chosen not in ("md", "json"):
            raise ConfigError("--compare writes md or json")
        write_report(render_comparison(a, b, evals.compare(a, b), chosen), target, chosen)
        return exits.DONE
    if not args.batch:
        raise ConfigError("cabal eval needs a batch file (or --compare EVAL_A EVAL_B)")
    if not 0 <= args.min_pass <= 1:
        raise ConfigError(f"--min-pass {args.min_pass} is not between 0 and 1")
    from cabal.batch.progress import BatchProgress

    progress = None if args.quiet else BatchProgress(sys.stderr)  # stderr: stdout may carry the report
    if args.baseline and not args.judge_model:
        raise ConfigError("--baseline needs --judge-model SPEC: the model that judges each team against its baseline")
    result = evals.run_eval(args.batch, repeat=args.repeat, min_pass=args.min_pass, workers=args.workers,
                            dask=args.dask, home=args.home, url=args.url, on_event=progress,
                            baseline_judge=args.judge_model if args.baseline else None)
    write_report(render_eval(result, chosen), target, chosen)
    print(f"evaluation {result.eval_id}: {verdict(result)}", file=sys.stderr if target is None else sys.stdout)
    return exits.DONE if not evals.failing(result) else exits.FAILED


def register(commands: argparse._SubParsersAction) -> None:
    from cabal.cli.batch import _positive  # the batch command's own check of --repeat and --workers

    parser = add_graph_options(commands.add_parser(
        "eval", help="run a batch file's requests K times and report how often each expectation held"))
    parser.add_argument("batch", nargs="?", metavar="BATCH", help="a batch file whose requests carry expect:")
    parser.add_argument("--repeat", type=_positive, default=1, metavar="K", help="runs of each request (default 1)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--workers", type=_positive, help="local worker processes")
    where.add_argument("--dask", metavar="ADDRESS", help="run on Dask: tcp://HOST:8786 or local:N")
    parser.add_argument("--min-pass", type=float, default=0.8, metavar="RATE",
                        help="the pass rate every expectation must reach for exit status 0 (default 0.8)")
    parser.add_argument("--compare", nargs=2, metavar=("EVAL_A", "EVAL_B"),
                        help="two stored evaluations (ids or JSON files) side by side")
    parser.add_argument("--format", choices=("md", "html", "json", "csv"), help="default: from -o, else md")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE")
    parser.add_argument("--quiet", action="store_true", help="no progress of the runs on stderr")
    parser.add_argument("--baseline", action="store_true",
                        help="also run each mission's baseline (one call of its model) and judge the team against it")
    parser.add_argument("--judge-model", metavar="SPEC", help="with --baseline: the blind judge's model")
    parser.set_defaults(func=cmd_eval)
