"""Mission commands: run, resume, chat, say, status, transcript, stop, schema.

The engine (LangGraph, the model clients) is imported when a command runs, not when the
parser is built, so `cabal --help` and the graph commands start in a blink.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Any

from cabal import rounds  # the engine loads at the first call, not at import
from cabal.cli.options import add_graph_options

if TYPE_CHECKING:
    from cabal.rounds import MissionResult


# Exit statuses of the commands that run a mission (the README has the table).
EXIT_DONE, EXIT_FAILED, EXIT_USAGE, EXIT_HALTED, EXIT_FAILED_TURNS, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 5
EXIT_CTRL_C = 130


def exit_status(result: MissionResult) -> int:
    """How a mission that ran is told to the shell: done, done with failed turns, waiting for
    an answer, interrupted (resume it), or failed."""
    if result.state == "done":
        return EXIT_FAILED_TURNS if result.failed_turns else EXIT_DONE
    return {"halted": EXIT_HALTED, "interrupted": EXIT_INTERRUPTED}.get(result.state, EXIT_FAILED)


class Progress:
    """Live progress: one updating line on a terminal, plain lines otherwise."""

    def __init__(self, stream=None) -> None:
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty()
        self.tokens = 0
        self.cost = 0.0
        self.started = time.monotonic()
        self.where = ""
        self.mission_id: str | None = None  # the mission being run, to say how to resume it

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event["kind"]
        self.mission_id = event.get("mission") or self.mission_id
        if kind == "start":
            self._line(f"mission {event['mission']}: {event['operatives']} operatives, up to {event['rounds']} rounds, "
                       f"model {event['model']}")
        elif kind == "step":
            self.where = f"round {event['round']} · {event['step']}"
            self._status(self.where)
        elif kind == "turn_start":
            self._status(f"{self.where} · {event['agent']} thinking")
        elif kind == "turn_done":
            self.tokens += event["input_tokens"] + event["output_tokens"]
            self.cost += event["cost_usd"]
            note = "" if event["outcome"] == "final" else f" ({event['outcome']})"
            retries = f", {event['attempts'] - 1} retr{'y' if event['attempts'] == 2 else 'ies'}" if event["attempts"] > 1 else ""
            text = (f"round {event['round']} · {event['step']} · {event['agent']}{note}{retries} · "
                    f"{self.tokens:,} tokens · ${self.cost:.4f}")
            if self.live:
                self._status(text)
            else:
                self._line(text)
        elif kind == "halt":
            self._line(f"chair-1 asks: {event['message']}")
        elif kind == "answer":
            self._line(f"answer ({event['source']}): {event['text']}")
        elif kind == "stop":
            self._line(f"stopped: {event['reason']}" + (f" ({event['detail']})" if event.get("detail") else ""))
        elif kind == "model_retry":  # a run whose output is not a terminal says why it waits, too
            self._line(f"round {event['round']} · {event['step']} · {event['agent']}: {event['reason']}; "
                       f"retry {event['retry']} of {event['max_retries']} in {event['wait_s']:.1f} s")
        elif kind == "interrupted":
            self._line(f"interrupted: {event['detail']}; go on with: {event['hint']}")
        elif kind == "warning":
            self._line(f"warning: {event['message']}")

    def _status(self, text: str) -> None:
        if self.live:
            self.stream.write("\r\033[K" + text[:200])
            self.stream.flush()

    def _line(self, text: str) -> None:
        if self.live:
            self.stream.write("\r\033[K")
        print(text, file=self.stream, flush=True)


def print_conversation(mission_id: str, home: str | None, url: str | None) -> None:
    from cabal.graph import ContextGraph
    from cabal.rounds.transcript import conversation, product_tree

    with ContextGraph.open(url, name=mission_id, home=home) as graph:
        current = None
        for entry in conversation(graph):
            if entry["round"] != current:
                current = entry["round"]
                print(f"\n── round {current} ──")
            if entry["kind"] == "halt:question":
                options = f"  [{' / '.join(entry['options'])}]" if entry.get("options") else ""
                print(f"{entry['speaker']} asks you: {entry['text']}{options}")
            elif entry["kind"] == "halt:done":
                print(f"{entry['speaker']}: {entry['text']} (mission concluded)")
            else:
                print(f"{entry['speaker']}: {entry['text']}")
        accepted = [p for _, p, _ in product_tree(graph) if p.get("status") == "accepted"]
        if accepted:
            print("\naccepted: " + ", ".join(p["name"] for p in accepted))


def report(result: MissionResult) -> None:
    print(f"\nmission: {result.mission_id}")
    print(f"state: {result.state}" + (f" ({result.stop_reason})" if result.stop_reason else "")
          + f", round {result.round}")
    print(f"usage: {result.usage.input_tokens:,} in, {result.usage.output_tokens:,} out, "
          f"{result.usage.cache_read_tokens:,} cached, ${result.cost_usd:.4f}")
    if result.pending_halt:
        print(f"waiting for you: {result.pending_halt.get('message')}")
        print(f"answer with: cabal resume {result.mission_id} --answer '...'   (or: cabal chat {result.mission_id})")
    if result.transcript_path:
        print(f"transcript: {result.transcript_path}")


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    """The model settings given on the command line (they override the mission file's and the
    environment's)."""
    return {"timeout_s": args.timeout, "max_retries": args.max_retries, "max_tokens": args.max_tokens,
            "temperature": args.temperature}


def _interrupted(progress: Progress, mission_id: str | None = None) -> int:
    mission_id = mission_id or progress.mission_id
    print("\ncabal: interrupted (Ctrl-C)" + (f"; the mission is paused. Go on with: cabal resume {mission_id}"
                                           if mission_id else ""), file=sys.stderr)
    return EXIT_CTRL_C


def cmd_run(args: argparse.Namespace) -> int:
    progress = Progress()
    try:
        result = rounds.run_mission(args.mission, model=args.model, home=args.home, url=args.url, rounds=args.rounds,
                                    model_settings=_settings(args), on_event=progress)
    except KeyboardInterrupt:
        return _interrupted(progress)
    if not args.quiet:
        print_conversation(result.mission_id, args.home, args.url)
    report(result)
    return exit_status(result)


def cmd_resume(args: argparse.Namespace) -> int:
    progress = Progress()
    try:
        result = rounds.resume_mission(args.mission_id, answer=args.answer, model=args.model, rounds=args.rounds,
                                       home=args.home, url=args.url, model_settings=_settings(args),
                                       on_event=progress)
    except KeyboardInterrupt:
        return _interrupted(progress, args.mission_id)
    report(result)
    return exit_status(result)


def cmd_chat(args: argparse.Namespace) -> int:
    print_conversation(args.mission_id, args.home, args.url)
    result = rounds.mission_status(args.mission_id, home=args.home, url=args.url)
    while result.pending_halt is not None:
        if not sys.stdin.isatty() and args.answer is None:
            print(f"\nwaiting for your answer: cabal resume {args.mission_id} --answer '...'")
            return EXIT_HALTED
        try:
            answer = args.answer if args.answer is not None else input("\nyou> ").strip()
        except EOFError:  # Ctrl-D: no answer now; the question keeps
            print(f"\nno answer given; answer later with: cabal chat {args.mission_id}")
            return EXIT_HALTED
        args.answer = None
        if not answer:
            continue
        progress = Progress()
        try:
            result = rounds.resume_mission(args.mission_id, answer=answer, model=args.model, home=args.home,
                                           url=args.url, model_settings=_settings(args), on_event=progress)
        except KeyboardInterrupt:
            return _interrupted(progress, args.mission_id)
        print_conversation(args.mission_id, args.home, args.url)
    report(result)
    return exit_status(result)


def cmd_say(args: argparse.Namespace) -> int:
    note = rounds.say(args.mission_id, " ".join(args.text), product=args.product, home=args.home, url=args.url)
    print(f"left message {note}; the team reads it at the next Reflect and Plan & Assign")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from cabal.graph import ContextGraph
    from cabal.rounds.transcript import product_tree

    result = rounds.mission_status(args.mission_id, home=args.home, url=args.url)
    with ContextGraph.open(args.url, name=args.mission_id, home=args.home) as graph:
        tree = [{"depth": d, "id": p["id"], "name": p["name"], "type": p["type"], "status": p.get("status"),
                 "owner": p.get("owner"), "version": v["number"] if v else None} for d, p, v in product_tree(graph)]
    data = {
        "mission": result.mission_id, "state": result.state, "stop_reason": result.stop_reason, "round": result.round,
        "pending_halt": {"message": result.pending_halt.get("message"), "options": result.pending_halt.get("options") or []}
        if result.pending_halt else None,
        "usage": {"input_tokens": result.usage.input_tokens, "output_tokens": result.usage.output_tokens,
                  "cache_read_tokens": result.usage.cache_read_tokens, "calls": result.usage.calls,
                  "cost_usd": result.cost_usd},
        "products": tree,
    }
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    print(f"{result.mission_id}: {result.state}" + (f" ({result.stop_reason})" if result.stop_reason else "")
          + f", round {result.round}")
    if result.pending_halt:
        print(f"waiting for you: {result.pending_halt.get('message')}")
    for row in tree:
        print(f"{'  ' * row['depth']}- {row['name']} [{row['type']}] {row['status']}"
              f" · {'v' + str(row['version']) if row['version'] else 'no version'} · {row['owner']}")
    print(f"usage: {result.usage.calls} calls, {result.usage.input_tokens + result.usage.output_tokens:,} tokens, "
          f"${result.cost_usd:.4f}")
    return 0


def cmd_transcript(args: argparse.Namespace) -> int:
    print(rounds.transcript(args.mission_id, home=args.home, url=args.url), end="")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    rounds.stop_mission(args.mission_id, home=args.home, url=args.url)
    print(f"{args.mission_id} will stop at the start of its next round (userHalt)")
    return 0


def cmd_missions(args: argparse.Namespace) -> int:
    from cabal.rounds.api import Workspace

    workspace = Workspace.at(args.home, args.url, reading=True)
    for mission_id in workspace.missions():
        result = rounds.mission_status(mission_id, home=args.home, url=args.url)
        print(f"{mission_id}: {result.state}" + (f" ({result.stop_reason})" if result.stop_reason else "")
              + f", round {result.round}")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from cabal.rounds.mission import MissionSpec

    print(json.dumps(MissionSpec.model_json_schema(), indent=2))
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    def common(parser: argparse.ArgumentParser, *, model: bool = False) -> argparse.ArgumentParser:
        add_graph_options(parser)
        if model:
            parser.add_argument("--model", help="Claude model name, scripted:PATH or py:module:factory")
            parser.add_argument("--timeout", type=float, metavar="SECONDS", help="how long one model call may take")
            parser.add_argument("--max-retries", type=int, metavar="N",
                                help="retries of a failed model call (rate limit, overload, timeout) before pausing")
            parser.add_argument("--max-tokens", type=int, metavar="N", help="the longest answer a call may give")
            parser.add_argument("--temperature", type=float, metavar="T", help="sampling temperature (0 to 1)")
        return parser

    run = common(commands.add_parser("run", help="run a mission file"), model=True)
    run.add_argument("mission", help="mission file (YAML)")
    run.add_argument("--rounds", type=int, help="override the mission's round limit")
    run.add_argument("--quiet", action="store_true", help="do not print the conversation at the end")
    run.set_defaults(func=cmd_run)

    resume = common(commands.add_parser("resume", help="answer a pending question, or continue after a crash"), model=True)
    resume.add_argument("mission_id")
    resume.add_argument("--answer", help="your answer to the Chair's question")
    resume.add_argument("--rounds", type=int, help="a new round limit: continues a mission that ran out of rounds "
                                                   "or that you stopped")
    resume.set_defaults(func=cmd_resume)

    chat = common(commands.add_parser("chat", help="the team's conversation; answer a pending question"), model=True)
    chat.add_argument("mission_id")
    chat.add_argument("--answer", help="answer without a prompt")
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

    stop = common(commands.add_parser("stop", help="ask a mission to stop at its next round"))
    stop.add_argument("mission_id")
    stop.set_defaults(func=cmd_stop)

    missions = common(commands.add_parser("missions", help="list the missions of the workspace"))
    missions.set_defaults(func=cmd_missions)

    schema = commands.add_parser("schema", help="print the JSON Schema of a mission file")
    schema.set_defaults(func=cmd_schema)
