"""``cabal protocols list|show|check|convert``: the membrane protocols on the search path, and
upstream-dialect files written out in Cabal's own format."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from cabal.errors import ConfigError
from cabal.limits import printable

SUFFIXES = (".yaml", ".yml")


def register(commands: Any) -> None:
    """Add ``protocols`` to the cabal parser."""
    protocols = commands.add_parser("protocols", help="list, show and check membrane protocols")
    sub = protocols.add_subparsers(dest="protocols_command", metavar="COMMAND", required=True)

    listing = sub.add_parser("list", help="every protocol: built-in ones and those in --protocols folders")
    library_options(listing)
    listing.set_defaults(func=cmd_protocols_list)

    show = sub.add_parser("show", help="a protocol's steps, questions and expected answers")
    show.add_argument("name", help="protocol name")
    show.add_argument("--source", action="store_true", help="print the YAML file instead")
    library_options(show)
    show.set_defaults(func=cmd_protocols_show)

    check = sub.add_parser(
        "check",
        help="load protocol files and report every problem by file, step and field (exit 1 if any)",
        description="Load every protocol YAML given (files, or folders of them; default: every protocol "
        "on the search path) and print each problem located by file, line, step and field.",
    )
    check.add_argument("paths", nargs="*", metavar="PATH", help="protocol files or folders")
    library_options(check)
    check.set_defaults(func=cmd_protocols_check)

    convert = sub.add_parser(
        "convert",
        help="write protocol files of the upstream dialect in Cabal's own format",
        description="Translate each protocol file written in the upstream dialect (ngram's, or mind-mcp's newer "
        "format) into Cabal's own format, as the loader does in memory, and write it as YAML: to standard "
        "output for one file, else to -o DIR as DIR/<protocol>.yaml. A file already in Cabal's format is "
        "left out; a file that does not load is reported by file, line, step and field, and not written.",
    )
    convert.add_argument("path", metavar="FILE|DIR", help="a protocol file, or a folder of them")
    convert.add_argument("-o", "--output", metavar="DIR", help="the folder to write the converted files to")
    convert.set_defaults(func=cmd_protocols_convert)

def library_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--protocols", action="append", default=[], metavar="DIR",
        help="a folder of protocols that adds to or overrides the built-in ones (repeatable)",
    )  # fmt: skip


# ---------------------------------------------------------------------------- protocols


def cmd_protocols_list(args: argparse.Namespace) -> int:
    from cabal.membrane.library import ProtocolLibrary

    entries = ProtocolLibrary(args.protocols).describe()
    width = max((len(e["name"]) for e in entries), default=0)
    for entry in entries:
        if "error" in entry:
            print(printable(f"{entry['name']:<{width}}  BROKEN: {entry['error'].splitlines()[0]}"))
        else:
            description = " ".join((entry["description"] or "").split())
            print(printable(f"{entry['name']:<{width}}  {description[:100]}"))
    return 0


def cmd_protocols_show(args: argparse.Namespace) -> int:
    from cabal.membrane.library import ProtocolLibrary

    protocol = ProtocolLibrary(args.protocols).get(args.name)
    if args.source:
        print(printable(Path(protocol.source).read_text(encoding="utf-8")), end="")
        return 0
    print(printable(describe_protocol(protocol)))
    return 0


def describe_protocol(protocol: Any) -> str:
    """A readable outline: header, dependencies, then each step with where it goes next."""
    from cabal.membrane.protocol import AskStep, BranchStep, CallStep, CreateStep, QueryStep, UpdateStep

    lines = [f"{protocol.name}" + (f" (version {protocol.version})" if protocol.version else ""), f"source: {protocol.source}"]
    if protocol.description:
        lines.append(" ".join(protocol.description.split()))
    if protocol.dialect != "cabal":
        lines.append(f"dialect: {protocol.dialect} (translated into Cabal's format when loaded)")
    if protocol.context is not None:
        lines.append(f"context: {', '.join(protocol.context) or '(none)'}")
    for dep in protocol.dependencies:
        what = f"node {dep.exists}" if dep.exists else f"{dep.query.verb} query"
        action = f"spawn {dep.protocol}" if dep.action == "spawn" else dep.action
        lines.append(f"needs {dep.id}: {what}; if missing: {action}")
    lines.append("steps:")
    for step in protocol.steps.values():
        if isinstance(step, AskStep):
            detail = f"ask -> {step.next}"
            lines.append(f"  {step.id}: {detail}")
            if step.question:
                lines.append(f"      question: {' '.join(step.question.split())}")
            if step.questions:
                for question in step.questions:
                    optional = "" if question.required else " (optional)"
                    lines.append(f"      - {question.name}{optional}: {question.ask}  expects {_expects(question.expects)}")
            else:
                lines.append(f"      expects: {_expects(step.expects)}")
            if step.moment:
                lines.append(f"      moment: {step.moment.type} ({', '.join(step.moment.agent_provides)})")
        elif isinstance(step, QueryStep):
            lines.append(f"  {step.id}: query {step.query.verb} -> {step.store_as}, then {step.next}")
        elif isinstance(step, BranchStep) and step.checks is None:
            if step.cases is not None:
                routes = ", ".join(f"{k}: {v}" for k, v in step.cases.items())
                lines.append(f"  {step.id}: branch on {step.condition!r} ({routes})")
            else:
                lines.append(f"  {step.id}: branch if {step.condition!r} then {step.then} else {step.otherwise}")
        elif isinstance(step, CallStep):
            lines.append(f"  {step.id}: call_protocol {step.protocol}, then {step.on_complete}")
        elif isinstance(step, CreateStep):
            lines.append(f"  {step.id}: create {len(step.nodes)} node spec(s), {len(step.links)} link spec(s) -> {step.next}")
        elif isinstance(step, UpdateStep):
            lines.append(f"  {step.id}: update {step.node} ({', '.join(step.fields)}) -> {step.next}")
        else:  # set, each, complete, file steps, and a branch's checks
            lines.append(f"  {step.id}: {_outline(step)}")
    if protocol.summary:
        lines.append(f"summary: {protocol.summary}")
    if protocol.docs:
        import yaml

        lines.append("documentation:")
        shown = yaml.safe_dump(json.loads(json.dumps(dict(protocol.docs), default=str)), sort_keys=False, allow_unicode=True)
        lines += [f"  {line}" for line in shown.rstrip().splitlines()]
    return "\n".join(lines)


def _outline(step: Any) -> str:
    """One line for the step kinds the first outline does not cover."""
    if step.type == "set":
        return f"set {', '.join(step.values)} -> {step.next}"
    if step.type == "each":
        return f"each {step.as_name} in {step.items}: {step.body} ..., then {step.next}"
    if step.type == "complete":
        return f"complete ({step.outcome})" + (f": {' '.join(step.summary.split())}" if step.summary else "")
    if step.type == "read_file":
        return f"read_file {step.path} -> {step.store_as}, then {step.next}"
    if step.type == "move_file":
        return f"move_file {step.source} -> {step.target} after the commit, then {step.next}"
    return "branch on checks (" + ", ".join(f"{c!r}: {t}" for c, t in step.checks) + ")"


def _expects(expects: Any) -> str:
    return json.dumps(expects.public(), ensure_ascii=False)


def cmd_protocols_check(args: argparse.Namespace) -> int:
    from cabal import resources
    from cabal.membrane.checking import check_files

    files = _protocol_files(args.paths) if args.paths else sorted(
        resources.files_by_name("protocols", SUFFIXES, args.protocols).values()
    )
    problems = check_files(files, args.protocols)
    for problem in problems:
        print(printable(str(problem)))
    broken = len({p.file for p in problems})
    if problems:
        print(f"{len(problems)} problem(s) in {broken} of {len(files)} protocol file(s)", file=sys.stderr)
        return 1
    print(f"ok: {len(files)} protocol file(s) checked")
    return 0


def cmd_protocols_convert(args: argparse.Namespace) -> int:
    from cabal.errors import ProtocolLoadError
    from cabal.membrane.convert import convert_protocol
    from cabal.yaml_reader import read_text_file

    files = _protocol_files([args.path])
    target = Path(args.output) if args.output else None
    if target is None and Path(args.path).is_dir():
        raise ConfigError("converting a folder writes one file per protocol: give -o DIR")
    failed = 0
    for path in files:
        try:
            converted = convert_protocol(read_text_file(path), str(path))
        except ProtocolLoadError as error:
            failed += 1
            for problem in error.problems:
                print(printable(str(problem)), file=sys.stderr)
            continue
        if converted is None:
            print(printable(f"{path}: already in Cabal's format; left out"), file=sys.stderr)
            continue
        name, text = converted
        if target is None:
            sys.stdout.write(text)
            continue
        target.mkdir(parents=True, exist_ok=True)
        written = target / f"{name}.yaml"
        try:
            written.write_text(text, encoding="utf-8")
        except OSError as error:
            raise ConfigError(f"cannot write {written}: {error.strerror}") from None
        print(printable(f"{path} -> {written}"))
    if failed:
        print(f"{failed} of {len(files)} file(s) not converted (they do not load)", file=sys.stderr)
    return 1 if failed else 0


def _protocol_files(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files += sorted(p for p in path.iterdir() if p.is_file() and p.suffix in SUFFIXES)
        elif path.is_file():
            files.append(path)
        else:
            raise ConfigError(f"no such protocol file or folder: {raw}")
    return files
