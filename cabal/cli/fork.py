"""``cabal fork``: a new mission from the start of one of a mission's rounds, run on from there."""

from __future__ import annotations

import argparse

from cabal import rounds  # the engine loads at the first call, not at import
from cabal.cli.missions import _driven, _settings, common
from cabal.cli.options import replay_model_spec


def cmd_fork(args: argparse.Namespace) -> int:
    def told(fork_id: str) -> None:
        print(f"forked {args.mission_id} at the start of round {args.round}: {fork_id}", flush=True)

    return _driven(args, lambda watch: rounds.fork_mission(
        args.mission_id, round=args.round, direction=args.direction, model=replay_model_spec(args.model, args),
        rounds=args.rounds, home=args.home, url=args.url, model_settings=_settings(args), on_event=watch.listener(),
        record=not args.no_record, on_forked=told))


def register(commands: argparse._SubParsersAction) -> None:
    fork = common(commands.add_parser(
        "fork", help="a new mission from the start of a round of another, run on another way (the original stays)"),
        model=True, runs=True)
    fork.add_argument("mission_id", help="the mission to fork (it is only read)")
    fork.add_argument("--round", type=int, required=True, metavar="N",
                      help="the round the fork starts from: the mission as it stood when round N began")
    fork.add_argument("--direction", metavar="TEXT",
                      help="a new direction the Chair reads at the fork's first Plan (as `cabal continue` gives one)")
    fork.add_argument("--rounds", type=int, metavar="M", help="the fork's round limit (default: the original's)")
    fork.set_defaults(func=cmd_fork)
