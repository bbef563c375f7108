"""Corpus check: load every protocol file of a folder and drive each loadable one to completion.

Every ``*.yaml`` of the folder is loaded the way the membrane loads it (a file in the upstream
dialect through ``cabal.membrane.dialect``). A file that does not load is refused as malformed
(a defect of the file: invalid YAML, a key given twice, a target that is not a step, ...), with
each problem located. Each file that loads is then run against a real graph (an embedded
FalkorDB server in a temporary workspace, one named graph per file) and a membrane whose file
root is a temporary folder of its own, with an automatic answerer:

- the context holds a value for every name the protocol (and the protocols it calls) reads
  from its context: the actor for ``actor_id``, a space for a name used where an id goes,
  text otherwise;
- before the run the graph gets, in that space, one node for each ``find`` query the
  protocols make (its node type and its ``where`` fields: literal ones, and those read from
  the context but ``id``, whose absence the protocols check to create it), linked ``contains``
  from the space and ``about`` it, so every query has something to find;
- a query whose results a ``foreach`` goes through finds nodes with each field the loop reads
  on its items; a field a ``read_file`` step reads as a path names a text file the check
  writes under the file root, so every read has a file to read and every move one to move;
- each form (``Membrane.form``) is answered from its JSON Schema alone, with the smallest valid
  answer: required fields only, the first option of an ``enum`` (an id picked ``from`` a list
  is one), an existing node of the right type for an id, the smallest number allowed, a text
  that matches the pattern and length, one item per list unless more are needed; then
  ``Membrane.submit``, until the session completes.

Prints ``name value unit`` lines, then one line per file that did not complete, with why:

    files 21 count
    loaded 20 count
    completed 20 count
    refused_malformed 1 count

A completed protocol whose file moves failed after its commit counts as not completed.

Usage: python bench/corpus_check.py DIR [--verbose]
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cabal.errors import CabalError, ProtocolLoadError  # noqa: E402
from cabal.graph import ContextGraph, EmbeddedServer, schema  # noqa: E402
from cabal.membrane import Membrane, MembraneResult, names  # noqa: E402
from cabal.membrane.library import ProtocolLibrary  # noqa: E402
from cabal.membrane.protocol import CallStep, EachStep, Protocol, QueryStep, ReadFileStep, SetStep  # noqa: E402
from cabal.membrane.templates import Ref, Scope, Unresolved, interpolate, parse, references  # noqa: E402

try:
    import re._parser as sre_parse  # Python 3.11+
except ImportError:  # pragma: no cover
    import sre_parse  # type: ignore[no-redef]

ACTOR = "actor_corpus_check"
SPACE = "space_corpus_check"
ID_FIELDS = ("from", "to", "in_space", "about", "get", "id", "node", "exists", "links_from", "links_to", "related_to",
             "contents_of")  # fmt: skip
MAX_FORMS = 60
SEED_TEXT = "# Seeded document\n\nWritten by the corpus check for a read_file step to read.\n"


# ----------------------------------------------------------------------------- loading


def load_all(folder: Path) -> tuple[ProtocolLibrary, dict[str, Protocol], dict[str, list[str]]]:
    library = ProtocolLibrary([folder])
    files = sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml"))
    loaded: dict[str, Protocol] = {}
    malformed: dict[str, list[str]] = {}
    for path in files:
        try:
            loaded[path.name] = library.get(path.stem)
        except ProtocolLoadError as exc:
            malformed[path.name] = [str(p).replace(f"{folder}/", "") for p in exc.problems]
    return library, loaded, malformed


def called(protocol: Protocol, library: ProtocolLibrary, seen: set[str] | None = None) -> list[Protocol]:
    """The protocol and every protocol it calls or spawns, transitively."""
    seen = seen if seen is not None else set()
    if protocol.name in seen:
        return []
    seen.add(protocol.name)
    found = [protocol]
    targets = [s.protocol for s in protocol.steps.values() if isinstance(s, CallStep)]
    targets += [d.protocol for d in protocol.dependencies if d.action == "spawn" and d.protocol]
    for name in targets:
        try:
            found += called(library.get(name), library, seen)
        except CabalError:
            continue
    return found


# ------------------------------------------------------------------------------ set-up


def context_for(protocols: list[Protocol]) -> dict[str, Any]:
    """A value for each name the protocols read from their context."""
    context: dict[str, Any] = {"actor_id": ACTOR}
    for protocol in protocols:
        wanted = names.implicit_context(protocol) - names.ALWAYS
        for read in protocol.reads:
            if read.name not in wanted or read.name in context:
                continue
            last = read.field.split(".")[-1]
            as_id = read.whole and last in ID_FIELDS and ".where." not in f".{read.field}."
            context[read.name] = SPACE if as_id else f"corpus check {read.name}"
        for name in wanted - set(context):
            context[name] = f"corpus check {name}"
    return context


def seed(graph: ContextGraph, protocols: list[Protocol], context: dict[str, Any], files: Path) -> int:
    """The actor, the space, one node in it for each find query of the protocols, and the files
    their read_file steps read (under ``files``, the membrane's file root)."""
    nodes = [
        {"id": ACTOR, "node_type": "actor", "type": "agent", "name": "corpus check"},
        {"id": SPACE, "node_type": "space", "type": "module", "name": "corpus check"},
    ]
    links: list[dict] = []
    seeded: dict[tuple, dict] = {}
    for protocol in protocols:
        looped = loop_fields(protocol)
        for step in protocol.steps.values():
            if not isinstance(step, QueryStep) or step.query.verb != "find":
                continue
            kind = step.query.args.get("node_type")
            where = seed_where(step.query.args.get("where") or {}, context)
            if not isinstance(kind, str) or references(kind) or kind not in schema.NODE_TYPES:
                continue
            signature = (kind, tuple(sorted((k, repr(v)) for k, v in where.items())))
            node = seeded.get(signature)
            if node is None:
                node_id = f"seed_{len(seeded) + 1}_{kind}"
                node = {"id": node_id, "node_type": kind, "type": "seed", "name": f"seed {kind} {len(seeded) + 1}"}
                node.update({k: v[0] if isinstance(v, list) else v for k, v in where.items()})
                if kind == "moment":
                    node.setdefault("status", "spoken")
                for field in schema.NODE_TYPES[kind].required:
                    node.setdefault(field, f"seed {field}")
                seeded[signature] = node
                nodes.append(node)
                links += [{"type": "contains", "from": SPACE, "to": node_id},
                          {"type": "about", "from": node_id, "to": SPACE}]  # fmt: skip
            read, paths = looped.get(step.store_as, (set(), set()))
            for field in sorted(read - set(node)):
                node[field] = seed_file(files, f"{node['id']}_{field}.md") if field in paths else f"seed-{field}"
    graph.create_cluster(nodes, links)
    return len(nodes)


def seed_where(where: dict, context: dict[str, Any]) -> dict[str, Any]:
    """A find query's where fields with a value to seed: literal ones, and those read from the
    context, but ``id`` (a query for one id asks whether the protocol must create that node)."""
    found = {}
    for field, value in where.items():
        if not references(value):
            found[field] = value
        elif field != "id":
            try:
                found[field] = interpolate(value, Scope(context))
            except (CabalError, Unresolved):  # it reads an answer: nothing to seed it with
                continue
    return found


def seed_file(files: Path, name: str) -> str:
    path = files / "seed" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SEED_TEXT, encoding="utf-8")
    return path.relative_to(files).as_posix()


def loop_fields(protocol: Protocol) -> dict[str, tuple[set[str], set[str]]]:
    """For each query result a ``foreach`` goes through (by the name it is stored as): the fields
    the protocol reads on the loop's items, and those of them a read_file step reads as a path."""
    steps = list(protocol.steps.values())
    refs = [ref for step in steps for text in strings(step) for ref in refs_of(text)]
    found: dict[str, tuple[set[str], set[str]]] = {}
    for loop in (step for step in steps if isinstance(step, EachStep)):
        read = {str(ref.path[1]) for ref in refs if ref.path[0] == loop.as_name and len(ref.path) > 1}
        paths = {str(ref.path[1]) for step in steps if isinstance(step, ReadFileStep) for ref in refs_of(step.path)
                 if ref.path[0] == loop.as_name and len(ref.path) > 1}  # fmt: skip
        for name in sources(protocol, {ref.path[0] for ref in refs_of(loop.items)}):
            found[name] = (read, paths)
    return found


def sources(protocol: Protocol, wanted: set, seen: set | None = None) -> set[str]:
    """The query results (names they are stored as) the names ``wanted`` are computed from."""
    seen = set() if seen is None else seen
    found = set()
    for step in protocol.steps.values():
        if isinstance(step, QueryStep) and step.store_as in wanted:
            found.add(step.store_as)
        elif isinstance(step, SetStep):
            for name in set(step.values) & (wanted - seen):
                seen.add(name)
                found |= sources(protocol, {ref.path[0] for ref in refs_of(step.values[name])}, seen)
    return found


def strings(value: Any) -> list[str]:
    """Every text inside a step: its templates, conditions and query arguments."""
    if isinstance(value, str):
        return [value]
    if dataclasses.is_dataclass(value):
        return [text for f in dataclasses.fields(value) for text in strings(getattr(value, f.name))]
    if isinstance(value, Mapping):
        return [text for item in value.values() for text in strings(item)]
    if isinstance(value, (list, tuple)):
        return [text for item in value for text in strings(item)]
    return []


def refs_of(text: Any) -> tuple[Ref, ...]:
    try:
        return parse(text).refs if isinstance(text, str) else ()
    except CabalError:
        return ()


# ----------------------------------------------------------------------------- answers


class Answerer:
    """Builds an answer from a JSON Schema alone (ids from the graph, for id answers)."""

    def __init__(self, graph: ContextGraph) -> None:
        self.graph = graph

    def value(self, schema_: dict, defs: dict) -> Any:
        if "$ref" in schema_:
            return self.value(defs[schema_["$ref"].split("/")[-1]], defs)
        if "enum" in schema_:
            if not schema_["enum"]:
                raise ValueError("an enum with no options: nothing to pick from")
            return schema_["enum"][0]
        kind = schema_.get("type")
        if kind == "object":
            answer = {}
            required = set(schema_.get("required", []))
            # The smallest valid answer: optional fields stay unanswered (an answer to one could
            # start more work, such as add_cluster's "create a space first?" calling itself).
            for name, sub in schema_.get("properties", {}).items():
                if name in required:
                    answer[name] = self.value(sub, defs)
            return answer
        if kind == "array":
            low, high = schema_.get("minItems", 0), schema_.get("maxItems")
            count = max(low, 1) if high is None else min(max(low, 1), high)
            items = schema_.get("items", {})
            if "enum" in items:  # ids picked from a list: distinct ones, as many as needed
                if len(items["enum"]) < low:
                    raise ValueError(f"{len(items['enum'])} ids to pick from, {low} needed")
                return list(items["enum"][: max(low, min(count, len(items["enum"])))])
            if _node_type(items) is not None:
                return self.ids(_node_type(items), count, low)
            return [self.value(items, defs) for _ in range(count)]
        if kind in ("integer", "number"):
            low, high = schema_.get("minimum"), schema_.get("maximum")
            number = low if low is not None else 1
            return min(number, high) if high is not None else number
        if kind == "boolean":
            return True
        if kind == "string":
            node_type = _node_type(schema_)
            if node_type is not None:
                return self.ids(node_type, 1, 1)[0]
            if schema_.get("minLength") == 0 and "pattern" not in schema_:
                return ""  # the author allows an empty answer ("leave empty if ..."): the smallest one
            return text_for(schema_.get("pattern"), schema_.get("minLength", 0), schema_.get("maxLength"))
        raise ValueError(f"no answer for the schema {schema_!r}")

    def ids(self, node_type: str, count: int, low: int) -> list[str]:
        if node_type == "graph":
            found = [SPACE]
        else:
            found = [n["id"] for n in self.graph.find(node_type) if n["id"] != ACTOR]
            found.sort(key=lambda node_id: (node_id != SPACE, node_id))
        if len(found) < low or not found:
            raise ValueError(f"no {node_type} node to answer with")
        return found[: max(count, low) or 1]


def _node_type(schema_: dict) -> str | None:
    match = re.search(r"id of an existing (\w+) node", schema_.get("description", "") or "")
    return match.group(1) if match else None


def text_for(pattern: str | None, low: int, high: int | None) -> str:
    """A text that matches the pattern and the lengths."""
    if pattern is None:
        base = "corpus check answer"
        text = base
        while len(text) < low:
            text += " " + base
        return text[:high] if high else text
    for repeat in range(1, 200):
        text = _generate(sre_parse.parse(pattern), repeat)
        if len(text) >= low and (high is None or len(text) <= high) and re.search(pattern, text):
            return text
    raise ValueError(f"no text of {low}..{high} characters matches {pattern!r}")


def _generate(parsed: Any, repeat: int) -> str:
    out = []
    for op, arg in parsed:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(arg))
        elif name == "NOT_LITERAL":
            out.append("x" if chr(arg) != "x" else "y")
        elif name == "ANY":
            out.append("x")
        elif name == "IN":
            out.append(_one_of(arg))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, sub = arg
            times = max(low, 1)
            if str(high) == "MAXREPEAT" or high > low:
                times = max(low, repeat) if str(high) == "MAXREPEAT" else min(max(low, repeat), high)
            out.append("".join(_generate(sub, repeat) for _ in range(times)))
        elif name == "SUBPATTERN":
            out.append(_generate(arg[-1], repeat))
        elif name == "BRANCH":
            out.append(_generate(arg[1][0], repeat))
    return "".join(out)


def _one_of(items: list) -> str:
    for op, arg in items:
        name = str(op)
        if name == "LITERAL":
            return chr(arg)
        if name == "RANGE":
            return chr(arg[0])
        if name == "CATEGORY":
            return {"CATEGORY_DIGIT": "1", "CATEGORY_SPACE": " "}.get(str(arg), "a")
    return "a"


# ------------------------------------------------------------------------------ driving


def drive(membrane: Membrane, protocol: str, context: dict, answerer: Answerer) -> tuple[MembraneResult | None, str | None]:
    """(the completed result, None), or (None, why the session did not complete)."""
    try:
        result = membrane.start(protocol, context)
        for _ in range(MAX_FORMS):
            if result.status == "complete":
                return result, None
            if result.status != "active":
                return None, f"session ended {result.status}"
            schema_ = membrane.form(result.session_id).schema
            try:
                answers = answerer.value(schema_, schema_.get("$defs", {}))
            except ValueError as exc:
                return None, f"step {result.step.id}: {exc}"
            result = membrane.submit(result.session_id, answers)
            if result.problems:
                return None, "; ".join(map(str, result.problems))
    except CabalError as error:
        return None, str(error)
    return None, f"not complete after {MAX_FORMS} forms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--verbose", action="store_true", help="also print each completed file")
    args = parser.parse_args(argv)
    library, loaded, malformed = load_all(args.folder)
    failures: dict[str, str] = {}
    completed: dict[str, MembraneResult] = {}
    with tempfile.TemporaryDirectory(prefix="corpus-check-") as home:
        server = EmbeddedServer(Path(home))
        server.start()
        try:
            for index, (file, protocol) in enumerate(loaded.items()):
                graph = ContextGraph.open(name=f"corpus_{index}", home=home)
                files = Path(home) / "files" / f"corpus_{index}"
                files.mkdir(parents=True)
                try:
                    protocols = called(protocol, library)
                    context = context_for(protocols)
                    seed(graph, protocols, context, files)
                    membrane = Membrane(graph, protocol_dirs=[args.folder], file_root=files)
                    done, why = drive(membrane, protocol.name, context, Answerer(graph))
                    if done is not None and done.file_errors:
                        done, why = None, "; ".join(f"{e.move.step}: {e.message}" for e in done.file_errors)
                except CabalError as exc:
                    done, why = None, str(exc)
                finally:
                    graph.delete_graph()
                    graph.close()
                if done is not None:
                    completed[file] = done
                else:
                    failures[file] = why
        finally:
            server.stop()
    print(f"files {len(loaded) + len(malformed)} count")
    print(f"loaded {len(loaded)} count")
    print(f"completed {len(completed)} count")
    print(f"refused_malformed {len(malformed)} count")
    for file, problems in malformed.items():
        for problem in problems:
            print(f"  refused (malformed) {problem}")
    for file, why in failures.items():
        print(f"  not completed {file}: {why}")
    if args.verbose:
        for file, done in completed.items():
            summary = " ".join(done.summary.split())[:90]
            moved = f", {len(done.created.moved)} file(s) moved" if done.created.moved else ""
            print(f"  completed {file}: {done.created.nodes} nodes, {done.created.links} links{moved}; {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
