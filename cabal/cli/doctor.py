"""``cabal doctor``: find gaps in a context graph and close them through the membrane."""

from __future__ import annotations

import argparse
import json
from typing import Any

from cabal.cli.options import add_graph_options
from cabal.cli.protocols import library_options
from cabal.errors import ConfigError
from cabal.limits import printable


def register(commands: Any) -> None:
    doctor = commands.add_parser(
        "doctor",
        help="find gaps in the context graph; with --fix, close them through the membrane",
        description="List the gaps of a context graph and the protocol each gap's skill would run. "
        "With --fix, run those protocols, answered by a scripted answer file (--answers) or a model "
        "(--model), and report the clusters they created. Exit status 1 if a fix failed or left its gap open.",
    )
    doctor.add_argument("--fix", action="store_true", help="run the protocols that close the gaps")
    doctor.add_argument("--graph", default="cabal", help="the named graph to examine (default: cabal)")
    add_graph_options(doctor)
    answerer = doctor.add_mutually_exclusive_group()
    answerer.add_argument("--answers", metavar="FILE", help="YAML answers keyed by protocol name (with --fix)")
    answerer.add_argument("--model", metavar="SPEC", help="a model: PROVIDER:MODEL, claude-..., simulated, scripted:PATH or py:MODULE:FACTORY (with --fix)")
    doctor.add_argument("--gap", action="append", dest="gaps", metavar="KIND", help="only this gap kind (repeatable)")
    doctor.add_argument("--actor", default=None, help="the actor id the doctor's moments are expressed by")
    doctor.add_argument("--skills", action="append", default=[], metavar="DIR", help="a folder of extra skills")
    doctor.add_argument("--json", action="store_true", help="print the result as JSON")
    library_options(doctor)
    doctor.set_defaults(func=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    from cabal.graph import ContextGraph
    from cabal.doctor import DOCTOR_ACTOR, Doctor

    if not args.fix and (args.answers or args.model):
        raise ConfigError("--answers and --model answer protocols; they only make sense with --fix")
    answerer = _answerer(args) if args.fix else None
    with ContextGraph.open(args.url, name=args.graph, home=args.home) as graph:
        doctor = Doctor(graph, protocol_dirs=args.protocols, skill_dirs=args.skills, actor_id=args.actor or DOCTOR_ACTOR)
        gaps = doctor.find_gaps(args.gaps)
        if answerer is None:
            treatments = doctor.plan(gaps)
            if args.json:
                print(json.dumps([t.to_dict() for t in treatments], indent=2, ensure_ascii=False))
            else:
                _print_plan(args.graph, treatments)
            return 0
        outcomes = doctor.fix(answerer, gaps)
    if args.json:
        print(json.dumps([o.to_dict() for o in outcomes], indent=2, ensure_ascii=False))
    else:
        _print_outcomes(args.graph, outcomes)
    return 0 if all(o.closed for o in outcomes) else 1


def _answerer(args: argparse.Namespace) -> Any:
    from cabal.doctor import ModelAnswerer, ScriptedAnswers

    if args.answers:
        return ScriptedAnswers.from_file(args.answers)
    if args.model:
        from cabal.llm import make_model

        return ModelAnswerer(make_model(args.model), agent=args.actor or "doctor")
    raise ConfigError("--fix needs someone to answer the protocols: --answers FILE or --model SPEC")


def _print_plan(graph_name: str, treatments: list) -> None:
    if not treatments:
        print(f"no gaps in graph {graph_name!r}")
        return
    print(f"{len(treatments)} gap(s) in graph {graph_name!r}:")
    for t in treatments:
        plan = f"skill {t.skill.name} -> protocol {t.protocol}" if t.protocol else f"no protocol: {t.reason}"
        print(printable(f"  {t.gap.kind}: {t.gap.node_id} ({t.gap.node_name})"))
        print(f"      {plan}")


def _print_outcomes(graph_name: str, outcomes: list) -> None:
    if not outcomes:
        print(f"no gaps in graph {graph_name!r}")
        return
    closed = sum(o.closed for o in outcomes)
    print(f"{closed} of {len(outcomes)} gap(s) closed in graph {graph_name!r}:")
    for o in outcomes:
        protocol = o.treatment.protocol or "-"
        print(printable(f"  {o.gap.kind}: {o.gap.node_id} -> {protocol}: {o.status}{'' if o.closed else ', gap still open'}"))
        if o.status == "complete":
            created = o.created or {}
            print(printable(f"      created {created.get('nodes', 0)} node(s), {created.get('links', 0)} link(s): {o.summary}"))
            kinds: dict[str, list[str]] = {}
            for node in o.nodes:
                kinds.setdefault(f"{node['node_type']}:{node['type']}", []).append(node["id"])
            for kind, ids in kinds.items():
                print(printable(f"        {kind} {', '.join(ids)}"))
        elif o.error:
            print(printable(f"      {o.error}"))
