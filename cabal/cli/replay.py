"""``cabal replay ID``: run a recorded mission again from its cassette; ``cabal script ID -o FILE``:
its calls as a scripted model's file, so a real run becomes an offline test in one command."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cabal import rounds
from cabal.cli.missions import exit_status, report, watching
from cabal.cli.options import add_graph_options, add_record_option, add_replay_options
from cabal.errors import ConfigError


def cmd_replay(args: argparse.Namespace) -> int:
    from cabal.rounds.replays import replay_mission

    if args.fallback_model and args.replay != "lenient":
        raise ConfigError("--fallback-model answers the calls a lenient replay lacks: add --replay lenient")
    with watching(args) as watch:
        result = replay_mission(args.mission_id, mode=args.replay or "strict", fallback=args.fallback_model,
                                home=args.home, url=args.url, record=not args.no_record, on_event=watch.listener())
    # A replay that missed the recording holds nothing the recording does not: once the miss is
    # told (where, and the diff), it is removed rather than left in `cabal missions` as a diverged
    # mission. A failure keeps it, for its traceback; --keep keeps it anyway.
    missed = result.state == "diverged" and not args.keep
    report(result, question_shown=watch.live, stream=watch.stream, home=args.home, url=args.url, args=args,
           removed=f"the diverged replay {result.mission_id} is removed (keep it with --keep)" if missed else None)
    if missed:
        rounds.remove_mission(result.mission_id, home=args.home, url=args.url)
    return exit_status(result)


def cmd_script(args: argparse.Namespace) -> int:
    import yaml

    from cabal.llm.cassette import Cassette, script_of
    from cabal.llm.replay import cassette_path

    rounds.mission_status(args.mission_id, home=args.home, url=args.url)  # an unknown id: the closest ones
    script = script_of(Cassette.read(cassette_path(args.mission_id, args.home)))
    target = Path(args.output)
    if target.suffix.lower() == ".json":
        text = json.dumps(script.entries, indent=1, ensure_ascii=False) + "\n"
    else:
        text = (f"# The model calls of mission {args.mission_id}, as a scripted model replays them:\n"
                f"#   cabal run MISSION.yaml --model scripted:{target.name}\n"
                + yaml.safe_dump(script.entries, sort_keys=False, allow_unicode=True, width=100))
    try:
        target.write_text(text, encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"cannot write {target}: {error.strerror}") from None
    print(f"wrote {target}: {len(script.entries)} scripted answer(s)")
    if script.unscriptable:
        places = "; ".join(map(str, script.unscriptable[:5])) + (" ..." if len(script.unscriptable) > 5 else "")
        print(f"left out {len(script.unscriptable)} call(s) a script cannot hold (a text answer or several tool "
              f"calls): {places}", file=sys.stderr)
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    replay = commands.add_parser("replay", help="run a recorded mission again from its cassette (offline)")
    add_graph_options(replay)
    add_replay_options(add_record_option(replay))
    replay.add_argument("mission_id", help="the recorded mission")
    replay.add_argument("--quiet", action="store_true", help="no live progress: only the outcome at the end")
    replay.add_argument("--events", metavar="FILE", help="append every event of the run to FILE as JSON lines")
    replay.add_argument("--keep", action="store_true",
                        help="keep a replay that missed the recording (by default it is removed once the miss is "
                             "told)")
    replay.set_defaults(func=cmd_replay)

    script = add_graph_options(commands.add_parser(
        "script", help="a recorded mission's model calls as a scripted model's file (scripted:FILE)"))
    script.add_argument("mission_id")
    script.add_argument("-o", "--output", metavar="FILE", required=True, help="the script to write (.yaml or .json)")
    script.set_defaults(func=cmd_script)
