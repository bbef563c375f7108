"""Batch commands: cabal batch PLAN | resume ID | status ID | report ID, and cabal batches.

``cabal batch`` takes either a PLAN (a folder of mission files, a glob, a mission file or a
*.batch.yaml file) or one of the words resume, status and report followed by a batch id. The
exit status of a run is the one ``cabal run`` gives for its missions' worst state (``exits``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cabal.cli import exits
from cabal.cli.options import add_graph_options, add_model_option, add_record_option
from cabal.errors import ConfigError
from cabal.exports import names as export_names

ACTIONS = ("resume", "status", "report")
RUN_ONLY = ("workers", "dask", "max_concurrent", "max_tokens", "max_cost", "retries", "events", "verbose", "quiet")
# Every option's default, to tell which ones a command line set.
DEFAULTS: dict[str, Any] = {name: None for name in RUN_ONLY + ("repeat", "model", "answer", "format", "output")} | {
    "retries": 2, "verbose": False, "quiet": False, "json": False}


def cmd_batch(args: argparse.Namespace) -> int:
    if args.target in ACTIONS:
        if args.batch_id is None:
            raise ConfigError(f"cabal batch {args.target} needs a batch id", hint="cabal batches lists them")
        _refuse_options(args, allowed={"resume": RUN_ONLY + ("answer",), "status": ("json",),
                                       "report": ("format", "output")}[args.target])
        return {"resume": _resume, "status": _status, "report": _report}[args.target](args)
    if args.batch_id is not None:
        raise ConfigError(f"cabal batch {args.target} {args.batch_id}: one PLAN at a time",
                          hint="quote a glob so the shell does not expand it: cabal batch 'missions/*.yaml'")
    _refuse_options(args, allowed=RUN_ONLY + ("repeat", "model"))
    return _run(args)


def cmd_batches(args: argparse.Namespace) -> int:
    from cabal.batch.api import batches

    found = batches(home=args.home, url=args.url)
    if args.json:
        print(json.dumps([report.to_wire()["batch"] | {"summary": report.summary()} for report in found], indent=2))
        return 0
    if not found:
        print("no batches in this workspace yet: cabal batch PLAN starts one")
    for report in found:
        print(f"{report.batch_id}: {report.summary()}" + (" (running)" if report.running else ""))
    return 0


# ------------------------------------------------------------------------------ the actions


def _run(args: argparse.Namespace) -> int:
    from cabal.batch.api import run_batch
    from cabal.batch.plan import load_plan

    plan = load_plan(args.target, repeat=args.repeat, model=args.model)  # planned here to say what it skips
    for name, why in plan.skipped:  # said before anything runs: a file the user meant may be among them
        print(f"skipped {name}: {why}")
    with _watching(args) as watch:
        result = run_batch(plan, workers=args.workers, dask=args.dask, max_concurrent=args.max_concurrent,
                           max_tokens=args.max_tokens, max_cost_usd=args.max_cost, repeat=args.repeat,
                           retries=args.retries, home=args.home, url=args.url, on_event=watch,
                           record=not args.no_record)
    return _conclude(result)


def _resume(args: argparse.Namespace) -> int:
    from cabal.batch.api import resume_batch

    with _watching(args) as watch:
        result = resume_batch(args.batch_id, workers=args.workers, dask=args.dask, max_concurrent=args.max_concurrent,
                              max_tokens=args.max_tokens, max_cost_usd=args.max_cost, retries=args.retries,
                              answers=_answers(args.answer), home=args.home, url=args.url, on_event=watch,
                              record=not args.no_record)
    return _conclude(result)


def _status(args: argparse.Namespace) -> int:
    from cabal.batch.api import batch_status
    from cabal.batch.render import rounds_text, state_text

    report = batch_status(args.batch_id, home=args.home, url=args.url)
    if args.json:
        print(json.dumps(report.to_wire(), indent=2))
        return 0
    totals = report.totals
    print(f"{report.batch_id}: {report.summary()}" + (" (running)" if report.running else ""))
    for row in report.rows:
        note = row.pending_question or (row.detail if row.state not in ("done", "halted") else None)
        print(f"  {row.key} {row.mission_id}: {state_text(row)}, round {rounds_text(row) or '-'}, "
              f"{row.products_accepted}/{row.products_total} accepted" + (f" · {note}" if note else ""))
    print(f"usage: {totals.tokens:,} tokens, ${totals.cost_usd:.4f}, {totals.failed_turns} failed turns")
    return 0


def _report(args: argparse.Namespace) -> int:
    from cabal.batch.api import batch_status
    from cabal.exports import DEFAULT_FORMAT, render_batch

    report = batch_status(args.batch_id, home=args.home, url=args.url)
    output = Path(args.output) if args.output else None
    text = render_batch(report, args.format or DEFAULT_FORMAT, page=output)
    if output is None:
        sys.stdout.write(text)
        return 0
    try:
        output.write_text(text)
    except OSError as error:
        raise ConfigError(f"cannot write the report to {output}: {error.strerror}") from None
    print(f"wrote {output}")
    return 0


def _conclude(result: Any) -> int:
    """What the run left, what needs the user, and an exit status that says it."""
    report = result.report
    totals = report.totals
    if result.ran == 0 and result.budget_spent is None:
        print(f"batch {report.batch_id}: nothing to run: {report.summary()}")
    else:
        print(f"batch {report.batch_id}: {report.summary()} · {totals.tokens:,} tokens · ${totals.cost_usd:.4f}")
    if result.budget_spent:
        print(f"{result.budget_spent}; raise it: cabal batch resume {report.batch_id} --max-tokens N / --max-cost USD")
    for row in report.pending_questions:
        print(f"waiting for you: {row.mission_id} ({row.key}): {row.pending_question}\n"
              f"  answer: cabal resume {row.mission_id} --answer '...'  (or: cabal batch resume {report.batch_id} "
              f"--answer {row.mission_id}='...')")
    for row in report.rows:
        if row.state in ("invalid", "refused", "failed", "diverged"):
            print(f"{row.state}: {row.key} ({row.mission_id}): {row.detail}")
    print(f"report: cabal batch report {report.batch_id} --format html --output report.html")
    return batch_exit(report)


def batch_exit(report: Any) -> int:
    """The exit status of the batch's worst mission, as ``cabal run`` would give it: failed (or
    diverged from its recording, or never able to run) over halted (an answer waits) over interrupted or not started (a budget,
    a kill, an outage) over done with failed turns over done."""
    states = report.totals.states
    if any(states.get(state) for state in ("failed", "diverged", "invalid", "refused")):
        return exits.FAILED
    if states.get("halted"):
        return exits.HALTED
    if states.get("done", 0) < report.totals.missions:
        return exits.INTERRUPTED
    return exits.FAILED_TURNS if report.totals.failed_turns else exits.DONE


# ------------------------------------------------------------------------------ helpers


@contextmanager
def _watching(args: argparse.Namespace) -> Iterator[Callable[[Any], None]]:
    """The live view, and the event file (--events) if asked for: every event one JSON line,
    the missions' own as ``cabal run --events`` writes them."""
    from cabal.batch.progress import BatchProgress
    from cabal.rounds.events import EventLog

    if args.quiet and args.verbose:
        raise ConfigError("--quiet and --verbose contradict each other: choose one")
    progress = None if args.quiet else BatchProgress(sys.stdout, verbose=args.verbose)
    try:
        events = open(args.events, "a") if args.events else None  # noqa: SIM115 - closed below
    except OSError as error:
        raise ConfigError(f"cannot write events to {args.events}: {error.strerror}") from None
    log = EventLog(events) if events is not None else None

    def watch(event: Any) -> None:
        if progress is not None:
            progress(event)
        if log is not None:
            log(event)

    try:
        yield watch
    finally:
        if events is not None:
            events.close()


def _answers(given: list[str] | None) -> dict[str, str]:
    answers = {}
    for item in given or []:
        mission_id, sep, text = item.partition("=")
        if not sep or not mission_id.strip() or not text.strip():
            raise ConfigError(f"--answer {item!r}: expected MISSION_ID=TEXT")
        answers[mission_id.strip()] = text.strip()
    return answers


def _refuse_options(args: argparse.Namespace, *, allowed: tuple[str, ...]) -> None:
    """An option that means nothing for this form is an error, not silently ignored."""
    for name, default in DEFAULTS.items():
        if name not in allowed and getattr(args, name) != default:
            form = f"batch {args.target}" if args.target in ACTIONS else "batch PLAN"
            raise ConfigError(f"--{name.replace('_', '-')} does not apply to cabal {form}")


def _whole(least: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"{value} is not at least {least}")
        return value

    return parse


_positive = _whole(1)


def _cost(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of dollars") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} is not more than 0")
    return value


def register(commands: argparse._SubParsersAction) -> None:
    batch = commands.add_parser(
        "batch", help="run many missions at once, locally or on Dask; see, resume and report a batch",
        usage="cabal batch PLAN [options]\n       cabal batch resume|status|report BATCH_ID [options]",
        description="Run a batch: PLAN is a folder of *.mission.yaml files, a glob (quoted), a mission file or a "
                    "*.batch.yaml file (cabal schema batch). Running the same PLAN again skips finished missions "
                    "and resumes interrupted ones. Exit status: the worst mission's, as for cabal run: 0 all done, "
                    "1 something failed or is broken, 3 a question waits, 4 done with failed turns, "
                    "5 something is interrupted or not started (a budget, a kill).")
    batch.add_argument("target", metavar="PLAN|resume|status|report", help="a plan to run, or what to do with a batch")
    batch.add_argument("batch_id", nargs="?", metavar="BATCH_ID", help="the batch (resume, status, report)")
    add_graph_options(batch)
    run = batch.add_argument_group("running (PLAN, resume)")
    run.add_argument("--workers", type=_positive, help="local worker processes (default: 2 per core, at most 16)")
    run.add_argument("--dask", metavar="ADDRESS", help="run on Dask: tcp://HOST:8786 (a scheduler) or local:N")
    run.add_argument("--max-concurrent", type=_positive, help="model calls in flight across all workers")
    run.add_argument("--max-tokens", type=_positive, help="the batch's token budget (on top of each mission's)")
    run.add_argument("--max-cost", type=_cost, metavar="USD", help="the batch's cost budget in US dollars")
    run.add_argument("--repeat", type=_positive, help="PLAN: run each mission N times")
    add_model_option(run)  # PLAN: every mission's model, over its file's
    run.add_argument("--retries", type=_whole(0), default=2, help="local: new processes for a mission whose process died")
    run.add_argument("--answer", action="append", metavar="MISSION_ID=TEXT", help="resume: answer a pending question")
    run.add_argument("--events", metavar="FILE", help="append every event (JSON lines) to FILE")
    add_record_option(run)
    run.add_argument("--verbose", action="store_true", help="print every mission's events, tagged with its id")
    run.add_argument("--quiet", action="store_true", help="no live counts: only the outcome at the end (as cabal run)")
    shown = batch.add_argument_group("status, report")
    shown.add_argument("--json", action="store_true", help="status: as JSON")
    shown.add_argument("--format", choices=export_names("batch"), help="report: the format (default md)")
    shown.add_argument("--output", metavar="FILE", help="report: write to FILE (default: standard output)")
    batch.set_defaults(func=cmd_batch)

    listing = add_graph_options(commands.add_parser("batches", help="list the batches of the workspace"))
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=cmd_batches)
