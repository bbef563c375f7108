"""Mission commands: run, resume, continue, chat, say, status, transcript, stop, missions, schema.

The engine (LangGraph, the model clients) is imported when a command runs, not when the
parser is built, so `cabal --help` and the graph commands start in a blink.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from cabal import rounds  # the engine loads at the first call, not at import
from cabal.cli import exits
from cabal.cli.options import (add_graph_options, add_model_option, add_record_option, add_replay_options,
                               replay_model_spec)
from cabal.cli.pipes import reader_may_leave
from cabal.errors import ConfigError, GraphUnavailable, ReplayMismatch, ResourceNotFound
from cabal.limits import printable
from cabal.private import open_private
from cabal.vocabulary import BUDGET_HALT, StopReason, price_hint, state_phrase

if TYPE_CHECKING:
    from cabal.cli.progress import Progress
    from cabal.report import Product
    from cabal.rounds import MissionResult
    from cabal.rounds.events import MissionEvent



_MISMATCH_LINE = f"{ReplayMismatch.__module__}.{ReplayMismatch.__qualname__}: "  # how error.log names it


def exit_status(result: MissionResult) -> int:
    """How a mission that ran is told to the shell: done, done with failed turns, waiting for
    an answer, interrupted (resume it), or failed."""
    if result.state == "done":
        return exits.FAILED_TURNS if result.failed_turns else exits.DONE
    return {"halted": exits.HALTED, "interrupted": exits.INTERRUPTED}.get(result.state, exits.FAILED)


def outcome(result: MissionResult) -> str:
    """``state (reason), round N``, and what a user must know beyond it: turns whose work is
    missing, why a mission failed or paused."""
    text = f"{state_phrase(result.state, result.stop_reason)}, round {result.round}"
    if result.failed_turns:
        text += f", {result.failed_turns} failed turn{'s' if result.failed_turns > 1 else ''} (their work is missing)"
    if result.state in ("failed", "interrupted", "diverged") and result.detail:
        text += f": {result.detail}"
    return text


def next_steps(result: MissionResult) -> list[str]:
    """What to run or read next for a mission that paused or failed (a question is told apart; a
    replay that diverged is told by ``report``)."""
    if result.state == "interrupted":
        return [f"resume with: cabal resume {result.mission_id}"]
    return [f"traceback: {result.error_log}"] if result.error_log and result.state == "failed" else []


def what_to_run_next(result: MissionResult) -> list[str]:
    """What ``cabal status`` says to run next, for every state a mission can be in."""
    mission = result.mission_id
    if result.state == "running":
        return [f"it is running: leave the team a message with: cabal say {mission} \"...\"   "
                f"(stop it with: cabal stop {mission})"]
    if result.state == "halted" and result.pending_halt is not None:
        if BUDGET_HALT.fullmatch(str(result.pending_halt.get("id"))):
            return [f"raise the budget with: cabal resume {mission} --answer continue   (doubles it; --answer N: "
                    f"a budget of N tokens; --answer stop: end here)"]
        return [f"answer with: cabal chat {mission}   (or: cabal resume {mission} --answer '...')"]
    if result.state == "done":
        go_on = {
            StopReason.NO_MORE_ROUNDS: f"more rounds: cabal resume {mission} --rounds N   (N above {result.round}; "
                                       f"or with a new direction: cabal continue {mission} \"...\" --rounds N)",
            StopReason.USER_HALT: f"go on with: cabal resume {mission}   (or with a new direction: "
                                  f"cabal continue {mission} \"...\")",
            # An ended mission's budget cannot be raised (a budget question can: see halted above).
            StopReason.BUDGET: "the budget is spent: run the mission again with a larger one (cabal run FILE "
                               "--budget-usd USD, or budget: in the mission file)",
        }.get(StopReason(result.stop_reason) if result.stop_reason else StopReason.CONCLUDED,
              f"take it further with: cabal continue {mission} \"a new direction\"")
        return [go_on, f"the whole of it: cabal export {mission} --format html -o report.html"]
    if result.state == "diverged" and result.error_log:
        return [f"where the replay diverged, and how: {result.error_log}"]
    return next_steps(result)  # interrupted: resume; failed: its traceback


def mismatch_of(error_log: str | Path | None) -> str | None:
    """A replay mismatch's whole explanation (its diff spans lines the mission's one-line detail
    cannot hold), from the error log the failed mission kept."""
    if not error_log or not Path(error_log).is_file():
        return None
    text = Path(error_log).read_text(encoding="utf-8", errors="replace")
    start = text.rfind("\n" + _MISMATCH_LINE)
    if start < 0:
        return None
    headline, *rest = text[start + 1 + len(_MISMATCH_LINE):].splitlines()
    diff = []
    for line in rest:  # the diff's lines; what follows them is the traceback's notes
        if not (line[:1] in (" ", "-", "+", "@") or line.startswith("... (")):
            break
        diff.append(line)
    return "\n".join([headline, *diff]).rstrip()


_LENIENT_REPLACES = ("--model", "--replay")  # the options the lenient command sets anew


def lenient_command(args: argparse.Namespace, explanation: str) -> str | None:
    """The command that replays leniently (by place alone) what ``args`` replayed strictly: the
    command as typed, ``cabal replay`` with ``--replay lenient``, one that makes a new mission
    (``run``, ``fork``) with its replayed model in lenient mode; None for a command that went on
    with a mission (a diverged one goes no further)."""
    if args.command not in ("replay", "run", "fork") or getattr(args, "argv", None) is None:
        return None
    typed, skipping = [], False
    for word in args.argv:
        if skipping:
            skipping = False
        elif word.split("=", 1)[0] in _LENIENT_REPLACES:
            skipping = "=" not in word
        else:
            typed.append(word)
    if args.command == "replay":
        return shlex.join(["cabal", *typed, "--replay", "lenient"])
    from cabal.llm.replay import parse_replay_spec, replay_spec

    if args.model and args.model.startswith("replay:"):  # the recording as the user named it
        ref, _, fallback = parse_replay_spec(args.model.removeprefix("replay:"))
    else:  # the mission file's: the cassette the replay read
        ref, fallback = explanation.removeprefix("replay of ").split(": at ", 1)[0], None
    return shlex.join(["cabal", *typed, "--model", replay_spec(ref, "lenient", fallback)])


def print_conversation(mission_id: str, home: str | None, url: str | None, stream: IO[str] | None = None) -> None:
    """The conversation so far, as the live display prints it (``cabal chat``)."""
    from cabal.cli.progress import round_heading
    from cabal.report.markdown import conversation_line

    out = stream or sys.stdout
    current = None
    mission = rounds.mission_report(mission_id, home=home, url=url)
    for line in mission.conversation:
        if line.round != current:
            current = line.round
            print(round_heading(current), file=out)
        print(printable(conversation_line(line, speaker=mission.who(line.speaker))), file=out)


def report(result: MissionResult, *, question_shown: bool, stream: IO[str] | None = None, home: str | None = None,
           url: str | None = None, removed: str | None = None, args: argparse.Namespace | None = None) -> None:
    """The outcome of a run: state, usage, what was accepted and how to read it, what to do next.
    ``removed``: the mission is gone after this report (a diverged replay), said instead of how to
    read it. ``args``: the command that ran it, given back changed where a hint says how to go on."""
    out = stream or sys.stdout
    print(f"\nmission: {result.mission_id}", file=out)
    print(f"state: {outcome(result)}", file=out)
    for line in next_steps(result) if removed is None else []:
        print(line, file=out)
    explanation = mismatch_of(result.error_log) if result.state == "diverged" else None
    if explanation:  # a strict replay that missed: where, and what changed
        print(printable(explanation), file=out)
        lenient = lenient_command(args, explanation) if args is not None else None
        print(printable(f"hint: to match calls by place only, replay leniently: {lenient}; or record the mission again"
                        if lenient else f"hint: {ReplayMismatch.hint}"), file=out)
    print(f"usage: {result.usage.input_tokens:,} in, {result.usage.output_tokens:,} out, "
          f"{result.usage.cache_read_tokens:,} cached, {result.cost}", file=out)
    if result.unpriced_models:
        print(printable(price_hint(result.unpriced_models)), file=out)
    if removed is not None:
        print(removed, file=out)
        return
    try:
        mission = rounds.mission_report(result.mission_id, home=home, url=url)
    except GraphUnavailable:  # the mission paused because the graph is gone: its outcome says so
        mission = None
    accepted = [p.name for p in mission.live_products if p.status == "accepted"] if mission else []
    if accepted:
        print(printable("accepted: " + ", ".join(accepted)), file=out)
    if result.pending_halt:
        if not question_shown:
            print(printable(f"waiting for you: {result.pending_halt.get('message')}"), file=out)
        print(f"answer with: cabal resume {result.mission_id} --answer '...'   (or: cabal chat {result.mission_id})",
              file=out)
    print(f"read the work: cabal show {result.mission_id}   (all of it: cabal export {result.mission_id} "
          "--format html -o report.html)", file=out)
    if mission is not None:  # the report just read, written for people (a run writes none itself)
        from cabal.rounds.transcripts import write_transcript
        from cabal.rounds.workspace import Workspace

        print(f"transcript: {write_transcript(Workspace.at(home, url, reading=True), result.mission_id, mission)}",
              file=out)


@contextmanager
def watching(args: argparse.Namespace) -> Iterator[Watch]:
    """The listeners of a run: live progress (unless ``--quiet``) and the ``--events`` log."""
    from cabal.cli.progress import Progress
    from cabal.rounds.events import EventLog, fan_out

    # A reader that goes away (`cabal run FILE | head`) takes the lines, never the run: they are dropped.
    stdout = reader_may_leave(sys.stdout)
    human = sys.stderr if args.events == "-" else stdout  # stdout carries the JSON lines then
    progress = None if args.quiet else Progress(human)
    log_file = None
    log = None
    if args.events == "-":
        log = EventLog(stdout)
    elif args.events:
        try:
            log_file = open_private(args.events)  # noqa: SIM115 - closed below; the whole run: private
        except OSError as error:
            raise ConfigError(f"cannot write events to {args.events}: {error.strerror}") from None
        log = EventLog(log_file)
    watch = Watch(fan_out(progress, log), human, progress is not None, progress=progress)
    try:
        yield watch
    finally:
        if progress is not None:
            progress.close()
        if log_file is not None:
            log_file.close()


@dataclass
class Watch:
    on_event: Callable[[MissionEvent], None] | None
    stream: IO[str]  # where lines for people go
    live: bool  # whether the conversation (and so a question) is printed as it happens
    mission_id: str | None = None  # the mission being run, once its first event says so
    progress: Progress | None = None  # the live display, if any

    def listener(self) -> Callable[[MissionEvent], None]:
        """``on_event`` that also remembers the mission, to say how to resume it after Ctrl-C."""
        def heard(event: MissionEvent) -> None:
            self.mission_id = event.mission
            if self.on_event is not None:
                self.on_event(event)

        return heard


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    """The model settings given on the command line (they override the mission file's and the
    environment's)."""
    return {"timeout_s": args.timeout, "max_retries": args.max_retries, "max_tokens": args.max_tokens,
            "temperature": args.temperature, "output": args.output}


def _interrupted(watch: Watch, mission_id: str | None) -> int:
    """After Ctrl-C: the live display is cleared, and the pause is said once (the display said it
    when the mission paused, unless there is none or the mission had not started)."""
    if watch.progress is not None:
        watch.progress.close()
        if watch.progress.interrupted:
            return exits.CTRL_C
    print("\ncabal: interrupted (Ctrl-C)" + (f"; the mission is paused. Go on with: cabal resume {mission_id}"
                                           if mission_id else ""), file=sys.stderr)
    return exits.CTRL_C


def _driven(args: argparse.Namespace, drive: Callable[[Watch], MissionResult], mission_id: str | None = None) -> int:
    """Run ``drive(watch)`` (a run of the engine) under the command's listeners, then report it;
    after Ctrl-C, say how to go on with ``mission_id`` (default: the mission the run named)."""
    with watching(args) as watch:
        try:
            result = drive(watch)
        except KeyboardInterrupt:
            return _interrupted(watch, mission_id or watch.mission_id)
    report(result, question_shown=watch.live, stream=watch.stream, home=args.home, url=args.url, args=args)
    return exit_status(result)


def cmd_run(args: argparse.Namespace) -> int:
    return _driven(args, lambda watch: rounds.run_mission(
        args.mission, model=replay_model_spec(args.model, args), home=args.home, url=args.url, rounds=args.rounds,
        model_settings=_settings(args), on_event=watch.listener(), budget_usd=args.budget_usd, sources=args.source,
        record=not args.no_record, gates=args.gate))


def cmd_resume(args: argparse.Namespace) -> int:
    return _driven(args, lambda watch: rounds.resume_mission(
        args.mission_id, answer=args.answer, model=replay_model_spec(args.model, args), rounds=args.rounds,
        home=args.home, url=args.url, model_settings=_settings(args), on_event=watch.listener(),
        record=not args.no_record), args.mission_id)


def cmd_continue(args: argparse.Namespace) -> int:
    return _driven(args, lambda watch: rounds.continue_mission(
        args.mission_id, " ".join(args.direction), rounds=args.rounds, model=replay_model_spec(args.model, args),
        home=args.home,
        url=args.url, model_settings=_settings(args), on_event=watch.listener(), record=not args.no_record),
        args.mission_id)


def cmd_chat(args: argparse.Namespace) -> int:
    with watching(args) as watch:
        print_conversation(args.mission_id, args.home, args.url, watch.stream)
        result = rounds.mission_status(args.mission_id, home=args.home, url=args.url)
        while result.pending_halt is not None:
            if args.answer is None and not sys.stdin.isatty():  # piped: each line answers the next question
                line = sys.stdin.readline()
                if not line:  # nothing (more) on standard input: the question keeps
                    print(f"\nwaiting for your answer: cabal resume {args.mission_id} --answer '...'",
                          file=watch.stream)
                    return exits.HALTED
                args.answer = line.strip()
            if args.answer is None:  # the prompt goes where people's lines go (stdout may carry --events -)
                print("\nyou> ", end="", file=watch.stream, flush=True)
            try:
                answer = args.answer if args.answer is not None else input().strip()
            except EOFError:  # Ctrl-D: no answer now; the question keeps
                print(f"\nno answer given; answer later with: cabal chat {args.mission_id}", file=watch.stream)
                return exits.HALTED
            args.answer = None
            if not answer:
                continue
            try:
                result = rounds.resume_mission(args.mission_id, answer=answer,
                                               model=replay_model_spec(args.model, args), home=args.home,
                                               url=args.url, model_settings=_settings(args),
                                               on_event=watch.listener(), record=not args.no_record)
            except KeyboardInterrupt:
                return _interrupted(watch, args.mission_id)
    report(result, question_shown=True, stream=watch.stream, home=args.home, url=args.url)
    return exit_status(result)


def cmd_say(args: argparse.Namespace) -> int:
    rounds.say(args.mission_id, " ".join(args.text), product=args.product, home=args.home, url=args.url)
    print("message left for the team; it reads it at the next Reflect and Plan & Assign")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    result, mission = rounds.mission_overview(args.mission_id, home=args.home, url=args.url)
    tree: list[dict[str, Any]] = [
        {"depth": p.depth, "id": p.id, "name": p.name, "type": p.type, "status": p.status, "owner": p.owner,
         "version": p.latest.number if p.latest else None, "content": _content(p)} for p in mission.live_products]
    data = {
        "mission": result.mission_id, "state": result.state, "stop_reason": result.stop_reason, "round": result.round,
        "detail": result.detail, "turns": result.turns, "failed_turns": result.failed_turns,
        "pending_halt": {"message": result.pending_halt.get("message"), "options": result.pending_halt.get("options") or []}
        if result.pending_halt else None,
        "usage": {"input_tokens": result.usage.input_tokens, "output_tokens": result.usage.output_tokens,
                  "cache_read_tokens": result.usage.cache_read_tokens, "calls": result.usage.calls,
                  "cost_usd": result.cost_usd, "unpriced_models": list(result.unpriced_models),
                  "by_model": [{"model": row.model, **row.spend.model_dump()} for row in mission.usage.by_model]},
        "output_switches": [{"model": switch.model, "agent": switch.agent, "round": switch.round, "output": "json",
                             "reason": switch.reason} for switch in result.output_switches],
        "products": tree,
        "sources": [{"id": s.source_id, "version": s.version, "name": s.name, "round": s.round, "cited": s.cited}
                    for s in mission.sources if not s.superseded],
    }
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    print(f"{result.mission_id}: {outcome(result)}")
    if result.lineage:
        print(result.lineage)
    for line in what_to_run_next(result):
        print(line)
    if result.pending_halt:
        print(printable(f"waiting for you: {result.pending_halt.get('message')}"))
    for switch in result.output_switches:
        print(printable(f"model {switch.model} answers in JSON text since round {switch.round} "
                        f"(its provider refused tools at {switch.agent}'s call: {switch.reason})"))
    for row in tree:
        print(printable(f"{'  ' * row['depth']}- {row['name']} [{row['type']}] {row['status']}"
                        f" · {'v' + str(row['version']) if row['version'] else 'no version'} · {mission.who(row['owner'])}"))
    current = [s for s in mission.sources if not s.superseded]
    if current:
        print(f"sources: {len(current)}, {len({s.source_id for s in mission.sources if s.cited})} cited")
    for source in (s for s in current if s.version > 1):
        print(printable(f"  {source.source_id} {source.name} changed: now version {source.version} "
                        f"(read again at round {source.round}; what cited version {source.version - 1} still does)"))
    print(f"usage: {result.usage.calls} calls, {result.usage.input_tokens + result.usage.output_tokens:,} tokens, "
          f"{result.cost}")
    if len(mission.usage.by_model) > 1:  # a model per role or agent: what each one spent
        for spent in mission.usage.by_model:
            print(printable(f"  {spent.model}: {spent.spend.turns} turns, {spent.spend.total_tokens:,} tokens, "
                            f"{spent.spend.cost}"))
    if result.unpriced_models:
        print(printable(price_hint(result.unpriced_models)))
    print(f"read the products: cabal show {result.mission_id}")
    return 0


def _content(product: Product) -> dict | None:
    """A product's accepted version (else its latest) in ``cabal status --json``."""
    shown = product.shown
    if shown is None:
        return None
    return {"version": shown.number, "accepted": shown.accepted, "title": shown.title, "text": shown.content}


def cmd_transcript(args: argparse.Namespace) -> int:
    print(rounds.transcript(args.mission_id, home=args.home, url=args.url), end="")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    result = rounds.stop_mission(args.mission_id, home=args.home, url=args.url)
    if result.state == "done":  # nothing ran it: it stopped now
        print(f"{args.mission_id} stopped at round {result.round}; go on later with: cabal resume {args.mission_id}")
        return 0
    print(f"{args.mission_id} will stop at the start of its next round")
    return 0


MISSION_ORDERS = ("newest", "active", "id")
"""How ``cabal missions --sort`` may order the list."""


def cmd_missions(args: argparse.Namespace) -> int:
    from cabal.rounds.workspace import Workspace

    if args.missions_command == "rm":
        return _remove_missions(args)
    workspace = Workspace.at(args.home, args.url, reading=True)
    found = []
    for mission_id in workspace.missions():
        try:
            found.append(rounds.mission_status(mission_id, home=args.home, url=args.url))
        except ResourceNotFound:  # a graph named like a mission that holds none
            continue
    orders: dict[str, Callable[[MissionResult], Any]] = {
        "newest": lambda result: (result.started_at or "", result.mission_id),  # one recorded before: last
        "active": lambda result: (workspace.active_at(result.mission_id), result.mission_id),
        "id": lambda result: result.mission_id,
    }
    for result in sorted(found, key=orders[args.sort], reverse=args.sort != "id"):
        print(f"{result.mission_id}: {outcome(result)}" + (f" · {result.lineage}" if result.lineage else ""))
    return 0


def _remove_missions(args: argparse.Namespace) -> int:
    """``cabal missions rm ID...``: every id is checked first (known, not running), so a wrong
    one removes nothing; then each is removed under its lock."""
    from cabal.errors import MissionBusy
    from cabal.rounds.workspace import Workspace

    workspace = Workspace.at(args.home, args.url, reading=True)
    for mission_id in args.mission_ids:
        rounds.mission_status(mission_id, home=args.home, url=args.url)  # an unknown id: the closest ones
        if workspace.is_driven(mission_id):
            raise MissionBusy(mission_id, "remove")
    for mission_id in dict.fromkeys(args.mission_ids):
        rounds.remove_mission(mission_id, home=args.home, url=args.url)
        print(f"removed {mission_id} (its graph, checkpoints, cassette and transcript)")
    return 0


SCHEMAS = ("mission", "batch", "export", "events")


def cmd_schema(args: argparse.Namespace) -> int:
    print(json.dumps(schema_of(args.what), indent=2))
    return 0


def schema_of(what: str) -> dict:
    """The JSON Schema ``cabal schema WHAT`` prints (the docs site's reference tables read it too)."""
    if what == "export":
        from cabal.report.schema import report_schema as schema
    elif what == "events":
        from cabal.rounds.event_schema import events_schema as schema
    elif what == "batch":
        from cabal.batch.plan import BatchSpec

        schema = BatchSpec.model_json_schema
    else:
        from cabal.rounds.mission import MissionSpec

        schema = MissionSpec.model_json_schema
    return schema()


def common(parser: argparse.ArgumentParser, *, model: bool = False, runs: bool = False) -> argparse.ArgumentParser:
    """The options a mission command shares: the graph's; the model's (``model``); a run's (``runs``)."""
    add_graph_options(parser)
    if model:
        add_model_option(parser)
        add_replay_options(parser)
        parser.add_argument("--timeout", type=float, metavar="SECONDS", help="how long one model call may take")
        parser.add_argument("--max-retries", type=int, metavar="N",
                            help="retries of a failed model call (rate limit, overload, timeout) before pausing")
        parser.add_argument("--max-tokens", type=int, metavar="N", help="the longest answer a call may give")
        parser.add_argument("--temperature", type=float, metavar="T", help="sampling temperature (0 to 1)")
        parser.add_argument("--output", choices=("tools", "json"),
                            help="how the model answers: by calling tools (default), or with a JSON object in its "
                                 "text, for models that call tools badly")
    if runs:  # the commands that drive a mission
        add_record_option(parser)
        parser.add_argument("--quiet", action="store_true",
                            help="no live progress and no conversation: only the outcome at the end")
        parser.add_argument("--events", metavar="FILE",
                            help="append every event of the run to FILE as JSON lines ('-': stdout, and people's "
                                 "lines go to stderr)")
    return parser


def register(commands: argparse._SubParsersAction) -> None:
    run = common(commands.add_parser("run", help="run a mission file"), model=True, runs=True)
    run.add_argument("mission", help="mission file (YAML)")
    run.add_argument("--rounds", type=int, help="override the mission's round limit")
    run.add_argument("--budget-usd", metavar="USD", help="the mission's cost budget in dollars, or 'none' for no budget "
                                                         "(default: the mission file's, else CABAL_BUDGET_USD, else 2)")
    run.add_argument("--source", action="append", default=[], metavar="PATH",
                     help="a file or folder the team reads and cites, beside the mission file's sources "
                          "(repeatable)")
    run.add_argument("--gate", action="append", default=[], choices=["plan"],
                     help="wait for your sign-off: plan (after Bootstrap: the charter, the team and the product tree; "
                          "as the mission file's gates: {plan: ask})")
    run.set_defaults(func=cmd_run)

    resume = common(commands.add_parser("resume", help="answer a pending question, or continue after a crash"),
                    model=True, runs=True)
    resume.add_argument("mission_id")
    resume.add_argument("--answer", help="your answer to the pending question: the Chair's; approve, changes or stop "
                                         "for a plan; approve or deny for a tool call")
    resume.add_argument("--rounds", type=int, help="a new round limit: continues a mission that ran out of rounds "
                                                   "or that you stopped")
    resume.set_defaults(func=cmd_resume)

    go_on = common(commands.add_parser("continue", help="take a mission that ended further, with a new direction"),
                   model=True, runs=True)
    go_on.add_argument("mission_id")
    go_on.add_argument("direction", nargs="+", help="what the team should do next (the Chair reads it at the next Plan)")
    go_on.add_argument("--rounds", type=int, metavar="N", help="how many more rounds (default: the mission file's rounds)")
    go_on.set_defaults(func=cmd_continue)

    chat = common(commands.add_parser("chat", help="the team's conversation; answer a pending question"),
                  model=True, runs=True)
    chat.add_argument("mission_id")
    chat.add_argument("--answer", help="answer without a prompt (a line piped on standard input answers too)")
    chat.set_defaults(func=cmd_chat)

    say = common(commands.add_parser("say", help="leave the team a message between rounds"))
    say.add_argument("mission_id")
    say.add_argument("text", nargs="+")
    say.add_argument("--product", help="the product id the message is about")
    say.set_defaults(func=cmd_say)

    status = common(commands.add_parser("status", help="a mission's state, product tree and usage"))
    status.add_argument("mission_id")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)

    transcript = common(commands.add_parser("transcript", help="print a mission's transcript"))
    transcript.add_argument("mission_id")
    transcript.set_defaults(func=cmd_transcript)

    stop = common(commands.add_parser("stop", help="stop a mission: a running one at its next round, one waiting "
                                                   "for an answer or paused now"))
    stop.add_argument("mission_id")
    stop.set_defaults(func=cmd_stop)

    missions = common(commands.add_parser("missions", help="list the missions of the workspace; "
                                                           "rm ID...: remove missions"))
    missions.add_argument("--sort", choices=MISSION_ORDERS, default="newest",
                          help="newest (default): the most recently started first; active: the most recently "
                               "run first, as cabal serve lists them; id: by id")
    missions.set_defaults(func=cmd_missions, missions_command=None)
    remove = common(missions.add_subparsers(dest="missions_command", title="commands", metavar="{rm}").add_parser(
        "rm", help="remove missions: each one's graph, checkpoints, cassette, transcript and logs (a running "
                   "mission is refused)"))
    remove.add_argument("mission_ids", nargs="+", metavar="ID", help="the missions to remove (cabal missions lists them)")

    schema = commands.add_parser("schema", help="print a JSON Schema: of a mission file (default), of a batch "
                                                "file, of `cabal export --format json`, or of the --events lines")
    schema.add_argument("what", nargs="?", choices=SCHEMAS, default="mission")
    schema.set_defaults(func=cmd_schema)
