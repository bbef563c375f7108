"""The upstream projects' protocol dialect, translated into Cabal's protocol document at load time.

The project the membrane design comes from writes protocols in a richer dialect than the seed
(membrane-patterns.md). ``is_upstream`` recognises it; ``translate`` rewrites such a document
into the canonical one ``loader`` reads, so the engine knows one format. Lines survive the
translation (every mapping keeps the line of the mapping it came from), so a problem in a
translated file is still reported at its own line. What the dialect writes, and how it is read:

- documentation keys (``triggers``, ``requires_skills``, ``contextual_knowledge``, ``config``,
  the ``output`` entries other than ``summary``, a step's ``purpose``, a question's ``creates``)
  are kept in ``Protocol.docs`` for ``protocols show``; ``{contextual_knowledge.domain}`` in a
  text is replaced by that text.
- ``procedure:`` names the protocol (or the called one) like ``protocol:``.
- an ask step's ``context:`` is its question text; ``why``, ``context`` and ``guidance`` of a
  question join its text; ``required: false``, ``optional: true`` and ``default:`` inside
  ``expects`` make the question optional (with that default); ``type: reference`` and
  ``reference_or_string`` are id answers (their answers are link ends, so only a node id can
  be written), ``from:`` names the list the id is picked from.
- answers are read by their bare question name (``{space_id}``): ask steps ``flatten``.
- ``auto_fetch:`` (on query and ask steps) is one query step per entry, run in order before
  the step; ``find: X, type: T, status: S`` is ``find: X, where: {type: T, status: S}``; a
  ``find`` of a node type the schema does not have (``escalation``, ``todo``) is a narrative
  of that type, as the upstream files themselves say ("TODOs are narratives with type=todo");
  ``about: id`` finds nodes with an ``about`` link to it; ``order_by: f`` is newest first
  (``-f``: the one file that orders wants "the last moment"); ``get: id`` reads one node with
  its outgoing links, so ``{escalation.about}`` is the ids the escalation is about;
  ``preset: schema_node_types`` and ``inject`` read the schema.
- ``computed:`` is a ``set`` step after its step; ``set`` and ``transform`` (``sort_by``,
  ``group_by``: a flat list, equal keys kept together) are ``set`` steps.
- branch ``on: X`` is ``condition: "X"``; ``checks:`` are tried in order, the first that holds
  wins, ``ready`` and ``true`` always hold; an action is a ``goto``, a ``call_protocol`` or a
  ``complete``. ``{list | contains name: 'x'}`` is ``'x' in {list|map:name}``;
  ``{docs | has_all_doc_types}`` holds when the list has a narrative of each of the seven doc
  chain types the upstream doc chain creates.
- call ``inputs:`` is ``context:``; ``next:`` is where the caller resumes;
  ``collect_created: x`` stores the first node the called protocol prepares as ``x``.
- ``complete`` ends the protocol (``status: cancelled`` is outcome cancelled) with its
  ``message`` as the summary; ``loop`` (``count``, a ``step``, ``collect_as``) is an ask step
  answered once per item of ``{count|range}``; ``foreach`` (``items``, ``as``, ``steps``) is an
  ``each`` step over its body steps; ``expect``/``on_fail`` on a query stop the protocol with
  the error when the expectation fails.
- in a create step, a node without ``type`` takes its node type as type, one without the
  ``name`` its node type requires takes its id, a moment without ``status`` is ``spoken``; a
  link whose type the schema does not have (``serves``, ``triggers``, ``attached_to``, one chosen
  by an answer) is a ``relates`` link carrying that type as its ``nature`` (as links with an
  explicit ``nature:`` do); "links" of ``type: update`` and ``updates:`` are update steps
  after the create; ``moment:`` records the step's moment.
- ``agent_provides`` naming answers (``[data_flow]``) makes the moment's prose those answers.
- filters: ``truncate(30)`` is ``truncate:30``, ``pad2`` ``pad:2``, ``hash6`` ``hash:6``,
  ``strip_prefix('x')``, ``default("x")``/``default(name)``, ``to_json`` ``json``, ``map(id)``,
  ``filter(type=x)`` ``where:type=x``, ``| first | id`` the first item's id, ``clean_module_name``
  ``slugify``, ``extract_title`` ``title``, ``count_words`` ``words``; the display filters
  (``list``, ``format_list``, ``summarize``, ``format_with_...``, ``list names``, ...) render a
  list one item a line (``lines``), ``format_numbered`` numbered, ``format_names`` and
  ``format_ids`` as names and ids. ``{loop_index}`` is ``{position}`` (from 1);
  ``{timestamp_short}`` is the compact timestamp.
- text only shown to the agent (question texts) keeps a placeholder whose filter means nothing
  here as written; anywhere a value is computed, an unknown filter is a located problem.
- mind-mcp's newer format, as its runtime (``runtime/connectome/steps.py``, and
  ``procedure_runner.py`` before it) runs it: a link with no ``type`` is a ``relates`` link,
  keeping its ``nature``; a ``call_procedure`` step is a ``call_protocol`` (``context`` or
  ``inputs`` join the shared context, it resumes at ``on_complete``, else ``next``; its
  ``max_depth`` is kept as documentation, Cabal's own call depth limit applies); a check whose
  action is ``{type: call_procedure, protocol, context, on_complete}`` calls it and resumes at
  ``on_complete``, else where the branch goes on.
- ``read_file`` (``path``, ``store_as``) and ``move_file`` (``from``, ``to``) are Cabal's steps
  of the same names: they run on the files under the membrane's file root, and a move waits
  for the cluster's commit (see ``files``).

Templates and conditions are read by ``dialect_text``. The translated document (with the
documentation under ``docs:``) is what ``cabal protocols convert`` writes (``convert``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from cabal.errors import ProtocolProblem
from cabal.graph import schema
from cabal.membrane.dialect_text import TextReader, braced, unbraced
from cabal.yaml_reader import LineDict

TOP_DOC_KEYS = ("triggers", "requires_skills", "contextual_knowledge", "config")
TOP_KEYS = ("protocol", "procedure", "version", "description", "steps", "output", "dependencies", "start",
            *TOP_DOC_KEYS)  # fmt: skip
STEP_DOC_KEYS = ("purpose", "reason", "description", "comment", "notes", "why")
MARKER_STEP_TYPES = ("loop", "foreach", "inject", "transform", "call_procedure")


@dataclass
class Translation:
    document: Any
    docs: dict[str, Any] = field(default_factory=dict)
    problems: list[ProtocolProblem] = field(default_factory=list)
    origins: dict[str, tuple[str, str]] = field(default_factory=dict)  # generated step -> (its step, field)

    def locate(self, problem: ProtocolProblem) -> ProtocolProblem:
        """A problem found in a step the translation made, told where the author wrote it."""
        origin = self.origins.get(problem.step) if problem.step else None
        if origin is None:
            return problem
        step, prefix = origin
        field = f"{prefix}.{problem.field}" if problem.field else prefix
        return type(problem)(problem.file, problem.message, step=step, field=field, line=problem.line)


# ------------------------------------------------------------------------------ detection


def is_upstream(data: Any) -> bool:
    """Whether a document is written in the upstream dialect (a canonical one never has these)."""
    if not isinstance(data, Mapping):
        return False
    if any(key in data for key in ("procedure", *TOP_DOC_KEYS)):
        return True
    steps = data.get("steps")
    if not isinstance(steps, Mapping):
        return False
    return any(_upstream_step(step) for step in steps.values() if isinstance(step, Mapping))


def _upstream_step(step: Mapping) -> bool:
    kind = step.get("type")
    if kind in MARKER_STEP_TYPES or (kind == "set" and "values" not in step):
        return True
    markers = {
        "ask": ("auto_fetch", "computed", "collect_as"),
        "query": ("auto_fetch", "computed", "cypher"),
        "branch": ("on",),
        "call_protocol": ("inputs", "collect_created", "procedure"),
        "create": ("updates",),
        "complete": ("status", "message"),  # Cabal's own complete step says summary and outcome
    }.get(kind if isinstance(kind, str) else "", ())
    if kind == "branch" and isinstance(step.get("checks"), list) and any(
            isinstance(check, Mapping) and "action" in check for check in step["checks"]):
        return True  # Cabal's own checks say `goto:`
    if kind == "create" and any(isinstance(link, Mapping) and "type" not in link
                                for link in step.get("links") or [] if isinstance(step.get("links"), list)):
        return True  # mind-mcp's links may leave out their type (a relates link)
    return any(key in step for key in markers) or (kind == "ask" and isinstance(step.get("context"), str))


# ----------------------------------------------------------------------------- the document


def _like(source: Any) -> LineDict:
    """A new mapping located where ``source`` is."""
    made = LineDict()
    made.line = getattr(source, "line", None)
    return made


def _put(target: LineDict, key: str, value: Any, source: Any = None, source_key: str | None = None) -> None:
    target[key] = value
    line = source.line_of(source_key or key) if isinstance(source, LineDict) else None
    if line is not None:
        target.key_lines[key] = line


class _Translator:
    def __init__(self, data: Mapping, source: str) -> None:
        self.data = data
        self.source = source
        self.problems: list[ProtocolProblem] = []
        self.docs: dict[str, Any] = {}
        knowledge = data.get("contextual_knowledge")
        self.knowledge: Mapping[str, Any] = knowledge if isinstance(knowledge, Mapping) else {}
        self.steps: dict[str, Mapping] = {}  # canonical steps, in order (an unknown type's kept as it came)
        self.entry: dict[str, str] = {}  # upstream step id -> the id of its first canonical step
        self.upstream_ids: set[str] = set(data.get("steps") or {}) if isinstance(data.get("steps"), Mapping) else set()
        self.got: set[str] = set()  # names that hold a ``get`` query's node
        self.internal: set[tuple[str, str]] = set()  # (step, key): a link the translation made itself
        self.origins: dict[str, tuple[str, str]] = {}  # generated step -> (upstream step, field it came from)
        self.short: dict[str, str] = {}  # a foreach body step -> its own name (its results' default name)
        reader = TextReader(self.knowledge, self.got, self.fail)
        self.text, self.condition = reader.text, reader.condition
        order = [k for k in (data.get("steps") or {})] if isinstance(data.get("steps"), Mapping) else []
        # Upstream, a step without ``next`` goes on to the step written after it.
        self.following = {step_id: (order[i + 1] if i + 1 < len(order) else "$complete") for i, step_id in enumerate(order)}

    def fail(self, message: str, *, step: str | None = None, field: str | None = None, at: Any = None) -> None:
        line = None
        if isinstance(at, LineDict):
            line = at.line_of(field.split(".")[0] if field else None)
        self.problems.append(ProtocolProblem(self.source, message, step=step, field=field, line=line))

    def new_id(self, base: str, suffix: str) -> str:
        candidate = f"{base}-{suffix}"
        number = 2
        while candidate in self.steps or candidate in self.upstream_ids:
            candidate = f"{base}-{suffix}{number}"
            number += 1
        return candidate

    # top level ---------------------------------------------------------------------------

    def translate(self) -> Translation:
        data = self.data
        out = _like(data)
        for key in data:
            if key not in TOP_KEYS:
                self.fail(f"unknown top-level field {key!r}", field=str(key), at=data)
        name = data.get("protocol", data.get("procedure"))
        _put(out, "protocol", name, data, "protocol" if "protocol" in data else "procedure")
        for key in ("version", "description", "start", "dependencies"):
            if key in data:
                _put(out, key, data[key], data)
        for key in TOP_DOC_KEYS:
            if key in data:
                self.docs[key] = data[key]
        self._scan_gets(data.get("steps"))
        self._output(data, out)
        steps = data.get("steps")
        if isinstance(steps, Mapping):
            for step_id, raw in steps.items():
                if isinstance(step_id, str) and isinstance(raw, Mapping):
                    self.step(step_id, raw, next_default=self.following.get(step_id))
                else:  # the loader reports it, located
                    self.steps[str(step_id)] = raw
            self._retarget()
            if "start" not in data and steps:
                first = next(iter(steps))
                _put(out, "start", self.entry.get(first, first), steps)
            canonical = _like(steps)
            for step_id, step in self.steps.items():
                _put(canonical, step_id, step, steps if step_id in steps else None)
            _put(out, "steps", canonical, data)
        elif "steps" in data:
            _put(out, "steps", steps, data)
        if self.docs:  # a canonical document keeps its documentation under `docs:`
            _put(out, "docs", self.docs)
        return Translation(out, self.docs, self.problems, self.origins)

    def _output(self, data: Mapping, out: LineDict) -> None:
        output = data.get("output")
        if output is None:
            return
        if not isinstance(output, Mapping):
            self.docs["output"] = output
            return
        rest = {k: v for k, v in output.items() if k != "summary"}
        if rest:
            self.docs["output"] = rest
        if isinstance(output.get("summary"), str):
            _put(out, "summary", self.text(output["summary"], None, "summary", output), output, "summary")

    def _scan_gets(self, steps: Any) -> None:
        """Names a ``get`` query stores: ``{name.<link type>}`` reads its links."""
        if not isinstance(steps, Mapping):
            return
        for raw in steps.values():
            for fetch in (raw.get("auto_fetch") or []) if isinstance(raw, Mapping) else []:
                if isinstance(fetch, Mapping) and isinstance(fetch.get("query"), Mapping) and "get" in fetch["query"]:
                    if isinstance(fetch.get("store_as"), str):
                        self.got.add(fetch["store_as"])

    def _retarget(self) -> None:
        """Point every step reference at the first canonical step of the step it names."""
        order = list(self.steps)
        for position, (step_id, step) in enumerate(self.steps.items()):
            if not isinstance(step, LineDict):
                continue
            if step.get("then") == ONWARD:  # a generated check last in its chain: the step placed after it
                step["then"] = order[position + 1] if position + 1 < len(order) else "$complete"
                self.internal.add((step_id, "then"))
            for key in ("next", "then", "else", "default", "on_complete", "do"):
                if isinstance(step.get(key), str) and (step_id, key) not in self.internal:
                    step[key] = self.entry.get(step[key], step[key])
            cases = step.get("cases")
            if isinstance(cases, MutableMapping):  # a YAML mapping, translated in place
                for case, target in cases.items():
                    cases[case] = self.entry.get(target, target) if isinstance(target, str) else target
            for check in step.get("checks") or []:
                if isinstance(check, MutableMapping) and isinstance(check.get("goto"), str):
                    check["goto"] = self.entry.get(check["goto"], check["goto"])

    # steps --------------------------------------------------------------------------------

    def step(self, step_id: str, raw: Mapping, *, next_default: str | None = None) -> str:
        """Translate one upstream step (and the steps it expands into); its first canonical id."""
        kind = raw.get("type")
        handler = getattr(self, f"_{kind}", None) if isinstance(kind, str) else None
        if handler is None:  # the loader reports an unknown type, located
            self.steps[step_id] = raw
            return step_id
        docs = {key: raw[key] for key in STEP_DOC_KEYS if key in raw}
        if docs:
            self.docs.setdefault("steps", {})[step_id] = docs
        return handler(step_id, raw, next_default)

    def _base(self, step_id: str, raw: Mapping, kind: str, next_default: str | None) -> LineDict:
        out = _like(raw)
        _put(out, "type", kind, raw, "type")
        if "next" in raw:
            _put(out, "next", raw["next"], raw)
        elif next_default is not None:
            _put(out, "next", next_default, raw, "type")
        return out

    def _chain(self, step_id: str, raw: Mapping, first: LineDict, before: list[tuple[str, LineDict]],
               after: list[tuple[str, LineDict]]) -> str:  # fmt: skip
        """Place ``before`` steps, the step itself, then ``after`` steps, each going to the next."""
        sequence = [*before, (step_id, first), *after]
        final_next = first.get("next")
        for (made_id, step), (next_id, _) in zip(sequence, sequence[1:]):
            key = _onward(step)
            step[key] = next_id
            self.internal.add((made_id, key))
            if isinstance(step, LineDict) and step.line is not None:
                step.key_lines.setdefault(key, step.line)
        last = sequence[-1][1]
        if final_next is not None:
            key = _onward(last)
            last[key] = final_next
            line = first.key_lines.get("next", raw.line if isinstance(raw, LineDict) else None)
            if line is not None:  # else the key has its step's line, as any key without its own
                last.key_lines[key] = line
        elif "next" in last and len(sequence) > 1:
            del last["next"]
        for made_id, step in sequence:
            self.steps[made_id] = step
        self.entry[step_id] = sequence[0][0]
        return sequence[0][0]

    def _fetches(self, step_id: str, raw: Mapping, skip_first: bool = False) -> list[tuple[str, LineDict]]:
        found: list[tuple[str, LineDict]] = []
        fetches = raw.get("auto_fetch")
        if fetches is None:
            return found
        if not isinstance(fetches, list):
            self.fail("'auto_fetch' must be a list of {query, store_as}", step=step_id, field="auto_fetch", at=raw)
            return found
        for index, fetch in enumerate(fetches):
            at = fetch if isinstance(fetch, LineDict) else raw
            if not isinstance(fetch, Mapping) or not isinstance(fetch.get("query"), Mapping):
                self.fail("each auto_fetch entry needs a 'query' mapping", step=step_id, field=f"auto_fetch.{index}", at=at)
                continue
            for key in fetch:
                if key not in ("query", "store_as", *STEP_DOC_KEYS):
                    self.fail(f"an auto_fetch entry does not take {key!r}", step=step_id,
                              field=f"auto_fetch.{index}.{key}", at=at)  # fmt: skip
            query = _like(fetch)
            _put(query, "type", "query", fetch, "query")
            _put(query, "query", self.query(fetch["query"], step_id, f"auto_fetch.{index}.query"), fetch)
            if "store_as" in fetch:
                _put(query, "store_as", fetch["store_as"], fetch)
            made_id = step_id if (skip_first and index == 0) else self.new_id(step_id, f"fetch{index + 1}")
            self.origins[made_id] = (step_id, f"auto_fetch.{index}")
            found.append((made_id, query))
        return found

    def _computed(self, step_id: str, raw: Mapping) -> list[tuple[str, LineDict]]:
        computed = raw.get("computed")
        if computed is None:
            return []
        if not isinstance(computed, Mapping) or not computed:
            self.fail("'computed' must map names to values", step=step_id, field="computed", at=raw)
            return []
        made = _like(computed)
        _put(made, "type", "set", raw, "computed")
        _put(made, "values", self.values(computed, step_id, "computed"), raw, "computed")
        made_id = self.new_id(step_id, "computed")
        self.origins[made_id] = (step_id, "computed")
        return [(made_id, made)]

    def _ask(self, step_id: str, raw: Mapping, next_default: str | None, *, for_each: str | None = None,
             store_as: Any = None, flatten: bool = True) -> str:  # fmt: skip
        out = self._base(step_id, raw, "ask", next_default)
        allowed = ("type", "context", "question", "questions", "expects", "next", "moment", "auto_fetch", "computed",
                   "for_each", "collect_as", "context_enrichment", *STEP_DOC_KEYS)  # fmt: skip
        self._unknown(step_id, raw, allowed, "ask")
        text = raw.get("context", raw.get("question"))
        if text is not None:
            _put(out, "question", self.text(text, step_id, "context", raw, display=True), raw,
                 "context" if "context" in raw else "question")  # fmt: skip
        if "questions" in raw:
            _put(out, "questions", self.questions(raw["questions"], step_id, raw), raw)
            if flatten:
                _put(out, "flatten", True, raw, "questions")
        if "expects" in raw:
            _put(out, "expects", self.expects(raw["expects"], step_id, "expects", raw)[0], raw)
        if for_each is not None:  # a loop's: already canonical
            _put(out, "for_each", for_each, raw, "type")
        elif isinstance(raw.get("for_each"), str):
            _put(out, "for_each", self.text(braced(raw["for_each"]), step_id, "for_each", raw), raw)
            if "collect_as" in raw and "questions" in raw:
                # Each collected answer carries the item it answers for as ``target``: the only
                # file that collects a for_each's answers reads them as {item.target}.
                _put(out, "item_as", "target", raw, "collect_as")
        collect = store_as if store_as is not None else raw.get("collect_as")
        if collect is not None:
            _put(out, "store_as", collect, raw, "collect_as" if "collect_as" in raw else "type")
        if "context_enrichment" in raw:
            _put(out, "context_enrichment", raw["context_enrichment"], raw)
        if "moment" in raw:
            _put(out, "moment", self.moment(raw["moment"], step_id, raw), raw)
        return self._chain(step_id, raw, out, self._fetches(step_id, raw), self._computed(step_id, raw))

    def _query(self, step_id: str, raw: Mapping, next_default: str | None) -> str:
        allowed = ("type", "auto_fetch", "computed", "next", "query", "store_as", "preset", "cypher", "params", "expect",
                   "on_fail", "moment", *STEP_DOC_KEYS)  # fmt: skip
        self._unknown(step_id, raw, allowed, "query")
        after = self._computed(step_id, raw)
        if "auto_fetch" in raw:
            fetches = self._fetches(step_id, raw, skip_first=True)
            if not fetches:
                out = self._base(step_id, raw, "set", next_default)
                _put(out, "values", {}, raw, "auto_fetch")
                return self._chain(step_id, raw, out, [], after)
            first_id, first = fetches[0]
            if "next" in raw:
                _put(first, "next", raw["next"], raw)
            return self._chain(step_id, raw, first, [], fetches[1:] + after)
        out = self._base(step_id, raw, "query", next_default)
        store = raw.get("store_as", self.short.get(step_id, step_id))
        if "cypher" in raw:
            query = {"cypher": raw["cypher"]}
            if "params" in raw:
                query["params"] = self.values(raw["params"], step_id, "params")
            _put(out, "query", query, raw, "cypher")
        elif "query" in raw:
            _put(out, "query", self.query(raw["query"], step_id, "query") if isinstance(raw["query"], Mapping)
                 else raw["query"], raw)  # fmt: skip
        elif "preset" in raw:
            _put(out, "preset", raw["preset"], raw)
        _put(out, "store_as", store, raw, "store_as" if "store_as" in raw else "type")
        if "moment" in raw:
            _put(out, "moment", self.moment(raw["moment"], step_id, raw), raw)
        checks = self._expectation(step_id, raw, store)
        return self._chain(step_id, raw, out, [], checks + after)

    def _expectation(self, step_id: str, raw: Mapping, store: str) -> list[tuple[str, LineDict]]:
        """``expect: "row_count > 0"`` with ``on_fail: {error: ...}``: stop with the error when false."""
        if "expect" not in raw:
            return []
        expectation = raw["expect"]
        failure = on_fail if isinstance(on_fail := raw.get("on_fail"), Mapping) else {}
        if not isinstance(expectation, str):
            self.fail("'expect' must be a condition", step=step_id, field="expect", at=raw)
            return []
        condition = re.sub(r"\brow_count\b", f"len({{{store}}})", expectation)
        stop = _like(raw)
        _put(stop, "type", "complete", raw, "on_fail" if "on_fail" in raw else "expect")
        _put(stop, "outcome", "failed", raw, "on_fail" if "on_fail" in raw else "expect")
        message = failure.get("error", f"step {step_id}: {expectation} does not hold")
        _put(stop, "summary", self.text(str(message), step_id, "on_fail.error", raw), raw, "on_fail")
        stop_id = self.new_id(step_id, "failed")
        self.origins[stop_id] = (step_id, "on_fail")
        check = _like(raw)
        _put(check, "type", "branch", raw, "expect")
        _put(check, "condition", self.condition(condition, step_id, "expect", raw), raw, "expect")
        _put(check, "then", ONWARD, raw, "expect")  # the step after it, filled in by _chain
        _put(check, "else", stop_id, raw, "expect")
        self.steps[stop_id] = stop
        check_id = self.new_id(step_id, "expect")
        self.origins[check_id] = (step_id, "expect")
        return [(check_id, check)]

    def _branch(self, step_id: str, raw: Mapping, next_default: str | None) -> str:
        self._unknown(step_id, raw, ("type", "on", "condition", "then", "else", "cases", "default", "checks", "next",
                                     *STEP_DOC_KEYS), "branch")  # fmt: skip
        out = self._base(step_id, raw, "branch", next_default)
        if "on" in raw:
            _put(out, "condition", self.condition(str(raw["on"]), step_id, "on", raw), raw, "on")
        elif "condition" in raw:
            _put(out, "condition", self.condition(raw["condition"], step_id, "condition", raw)
                 if isinstance(raw["condition"], str) else raw["condition"], raw)  # fmt: skip
        for key in ("then", "else", "default"):
            if key in raw:
                _put(out, key, raw[key], raw)
        if "cases" in raw:
            _put(out, "cases", raw["cases"], raw)
        if "checks" in raw:
            _put(out, "checks", self.checks(raw["checks"], step_id, raw), raw)
        return self._chain(step_id, raw, out, [], [])

    def checks(self, checks: Any, step_id: str, raw: Mapping) -> Any:
        if not isinstance(checks, list):
            return checks
        found = []
        for index, check in enumerate(checks):
            field = f"checks.{index}"
            at = check if isinstance(check, LineDict) else raw
            if not isinstance(check, Mapping):
                found.append(check)
                continue
            action = check.get("action")
            made = _like(check)
            condition = check.get("condition")
            if isinstance(condition, str):
                condition = self.condition(condition, step_id, f"{field}.condition", at)
            _put(made, "condition", condition, check, "condition")
            if isinstance(action, Mapping) and "goto" in action and len(action) == 1:
                _put(made, "goto", action["goto"], check, "action")
            elif isinstance(action, Mapping) and action.get("type") in CHECK_ACTIONS:
                action_id = self.new_id(step_id, f"{'end' if action['type'] == 'complete' else 'call'}{index + 1}")
                self.origins[action_id] = (step_id, f"{field}.action")
                # mind-mcp's runtime resumes a called procedure at its on_complete; without one,
                # at the step after the branch (where its other runtime goes on).
                self.step(action_id, action, next_default=raw.get("next", self.following.get(step_id)))
                _put(made, "goto", action_id, check, "action")
            else:
                self.fail("a check's action is {goto: step}, a call_protocol, a call_procedure or a complete",
                          step=step_id, field=f"{field}.action", at=at)  # fmt: skip
                continue
            found.append(made)
        return found

    def _call_procedure(self, step_id: str, raw: Mapping, next_default: str | None) -> str:
        """mind-mcp's name of a call: ``protocol`` (or ``procedure``), ``context`` or ``inputs``
        added to the shared context, resuming at ``on_complete`` (else ``next``). Its
        ``max_depth`` is documentation here: Cabal's own call depth limit applies."""
        if "max_depth" in raw:
            self.docs.setdefault("steps", {}).setdefault(step_id, {})["max_depth"] = raw["max_depth"]
        return self._call_protocol(step_id, raw, next_default, kind="call_procedure")

    def _call_protocol(self, step_id: str, raw: Mapping, next_default: str | None, *,
                       kind: str = "call_protocol") -> str:
        self._unknown(step_id, raw, ("type", "protocol", "procedure", "context", "inputs", "on_complete", "next",
                                     "collect_created", *(("max_depth",) if kind == "call_procedure" else ()),
                                     *STEP_DOC_KEYS), kind)  # fmt: skip
        out = self._base(step_id, raw, "call_protocol", next_default)
        name_key = "protocol" if "protocol" in raw else "procedure"
        if name_key in raw:
            _put(out, "protocol", raw[name_key], raw, name_key)
        passed: dict[str, Any] = {}
        for key in ("context", "inputs"):
            if isinstance(raw.get(key), Mapping):
                passed.update(self.values(raw[key], step_id, key))
            elif key in raw:
                self.fail(f"'{key}' must be a mapping", step=step_id, field=key, at=raw)
        if passed:
            _put(out, "context", passed, raw, "inputs" if "inputs" in raw else "context")
        if "on_complete" in raw:
            _put(out, "on_complete", raw["on_complete"], raw)
        if "collect_created" in raw:
            _put(out, "store_created_as", raw["collect_created"], raw, "collect_created")
        return self._chain(step_id, raw, out, [], [])

    def _complete(self, step_id: str, raw: Mapping, next_default: str | None) -> str:
        self._unknown(step_id, raw, ("type", "status", "message", *STEP_DOC_KEYS), "complete")
        out = _like(raw)
        _put(out, "type", "complete", raw)
        if raw.get("status") == "cancelled":
            _put(out, "outcome", "cancelled", raw, "status")
        if "message" in raw:
            _put(out, "summary", self.text(str(raw["message"]), step_id, "message", raw), raw, "message")
        self.steps[step_id] = out
        self.entry[step_id] = step_id
        return step_id

    def _loop(self, step_id: str, raw: Mapping, next_default: str | None) -> str:
        self._unknown(step_id, raw, ("type", "count", "step", "collect_as", "next", *STEP_DOC_KEYS), "loop")
        inner = raw.get("step")
        count = raw.get("count")
        if not isinstance(inner, Mapping) or inner.get("type") != "ask":
            self.fail("a loop's 'step' must be an ask step", step=step_id, field="step", at=raw)
            self.steps[step_id] = _placeholder(raw, step_id)
            return step_id
        if not isinstance(count, (str, int)) or isinstance(count, bool):
            self.fail("a loop's 'count' must be a number or a reference such as {n}", step=step_id, field="count", at=raw)
            self.steps[step_id] = _placeholder(raw, step_id)
            return step_id
        items = f"{{{unbraced(count)}|range}}" if isinstance(count, str) else str(list(range(1, count + 1)))
        body = _like(inner)
        for key, value in inner.items():
            _put(body, key, value, inner)
        if "next" in raw:
            _put(body, "next", raw["next"], raw)
        elif "next" in body:
            del body["next"]
        return self._ask(step_id, body, next_default, for_each=items, store_as=raw.get("collect_as"), flatten=False)

    def _foreach(self, step_id: str, raw: Mapping, next_default: str | None) -> str:
        self._unknown(step_id, raw, ("type", "items", "as", "steps", "next", *STEP_DOC_KEYS), "foreach")
        out = self._base(step_id, raw, "each", next_default)
        _put(out, "items", self.text(braced(str(raw.get("items", ""))), step_id, "items", raw), raw, "items")
        if "as" in raw:
            _put(out, "as", raw["as"], raw)
        body = raw.get("steps")
        entries = []
        for index, entry in enumerate(body if isinstance(body, list) else []):
            if isinstance(entry, Mapping) and len(entry) == 1 and isinstance(next(iter(entry.values())), Mapping):
                name, inner = next(iter(entry.items()))
                made_id = self.new_id(step_id, str(name))
                self.origins[made_id] = (step_id, f"steps.{index}.{name}")
                self.short[made_id] = str(name)
                entries.append((made_id, inner))
            else:
                self.fail("each of a foreach's 'steps' is a mapping {name: step}", step=step_id, field=f"steps.{index}",
                          at=entry if isinstance(entry, LineDict) else raw)  # fmt: skip
        if not entries:
            self.fail("a foreach needs 'steps' (its body)", step=step_id, field="steps", at=raw)
            self.steps[step_id] = _placeholder(raw, step_id)
            return step_id
        self.steps[step_id] = out
        self.entry[step_id] = step_id
        for index, (made_id, inner) in enumerate(entries):
            self.upstream_ids.add(made_id)
            following = entries[index + 1][0] if index + 1 < len(entries) else step_id
            self.step(made_id, inner, next_default=following)
        _put(out, "do", entries[0][0], raw, "steps")
        return step_id

    def _inject(self, step_id: str, raw: Mapping, next_default: str | None) -> str:
        self._unknown(step_id, raw, ("type", "source", "node_type", "store_as", "next", *STEP_DOC_KEYS), "inject")
        out = self._base(step_id, raw, "query", next_default)
        if raw.get("source") != "schema":
            self.fail(f"inject reads the schema ('source: schema'), got {raw.get('source')!r}", step=step_id,
                      field="source", at=raw)  # fmt: skip
        what = raw.get("node_type", "node_types")
        _put(out, "query", {"schema": self.text(what, step_id, "node_type", raw) if isinstance(what, str) else what},
             raw, "node_type" if "node_type" in raw else "source")  # fmt: skip
        _put(out, "store_as", raw.get("store_as", step_id), raw, "store_as" if "store_as" in raw else "type")
        return self._chain(step_id, raw, out, [], [])

    def _set(self, step_id: str, raw: Mapping, next_default: str | None) -> str:
        out = self._base(step_id, raw, "set", next_default)
        values = {k: v for k, v in raw.items() if k not in ("type", "next", *STEP_DOC_KEYS)}
        if "values" in raw and isinstance(raw["values"], Mapping):
            values = dict(raw["values"])
        _put(out, "values", self.values(values, step_id, "values"), raw, "type")
        return self._chain(step_id, raw, out, [], [])

    def _transform(self, step_id: str, raw: Mapping, next_default: str | None) -> str:
        self._unknown(step_id, raw, ("type", "input", "sort_by", "group_by", "store_as", "next", *STEP_DOC_KEYS),
                      "transform")  # fmt: skip
        out = self._base(step_id, raw, "set", next_default)
        chain = [unbraced(str(raw.get("input", "")))]
        for key, name in (("sort_by", "sort"), ("group_by", "group")):
            if key in raw:
                chain.append(f"{name}:{raw[key]}")
        store = raw.get("store_as", step_id)
        _put(out, "values", {store: "{" + "|".join(chain) + "}"}, raw, "input")
        return self._chain(step_id, raw, out, [], [])

    def _read_file(self, step_id: str, raw: Mapping, next_default: str | None) -> str:
        self._unknown(step_id, raw, ("type", "path", "store_as", "next", *STEP_DOC_KEYS), "read_file")
        out = self._base(step_id, raw, "read_file", next_default)
        if "path" in raw:
            _put(out, "path", self.value(raw["path"], step_id, "path", raw), raw)
        _put(out, "store_as", raw.get("store_as", self.short.get(step_id, step_id)), raw,
             "store_as" if "store_as" in raw else "type")  # fmt: skip
        return self._chain(step_id, raw, out, [], [])

    def _move_file(self, step_id: str, raw: Mapping, next_default: str | None) -> str:
        self._unknown(step_id, raw, ("type", "from", "to", "next", *STEP_DOC_KEYS), "move_file")
        out = self._base(step_id, raw, "move_file", next_default)
        for key in ("from", "to"):
            if key in raw:
                _put(out, key, self.value(raw[key], step_id, key, raw), raw)
        return self._chain(step_id, raw, out, [], [])

    def _update(self, step_id: str, raw: Mapping, next_default: str | None) -> str:
        out = self._base(step_id, raw, "update", next_default)
        for key, value in raw.items():
            if key in ("type", "next", *STEP_DOC_KEYS):
                continue
            if key in ("set", "fields"):
                value = self.values(value, step_id, key) if isinstance(value, Mapping) else value
            elif isinstance(value, str) and key != "for_each":
                value = self.text(value, step_id, key, raw)
            _put(out, key, value, raw)
        return self._chain(step_id, raw, out, [], [])

    def _create(self, step_id: str, raw: Mapping, next_default: str | None) -> str:
        self._unknown(step_id, raw, ("type", "nodes", "links", "updates", "moment", "next", *STEP_DOC_KEYS), "create")
        out = self._base(step_id, raw, "create", next_default)
        updates: list[tuple[str, LineDict]] = []
        if isinstance(raw.get("nodes"), list):
            _put(out, "nodes", [self.node(n, step_id, f"nodes.{i}", raw) for i, n in enumerate(raw["nodes"])], raw)
        elif "nodes" in raw:
            _put(out, "nodes", raw["nodes"], raw)
        if isinstance(raw.get("links"), list):
            links = []
            for index, link in enumerate(raw["links"]):
                if isinstance(link, Mapping) and link.get("type") == "update":
                    made_id = self.new_id(step_id, f"update{len(updates) + 1}")
                    self.origins[made_id] = (step_id, f"links.{index}")
                    updates.append((made_id, self.update(link, step_id, f"links.{index}")))
                else:
                    links.append(self.link(link, step_id, f"links.{index}", raw))
            _put(out, "links", links, raw)
        elif "links" in raw:
            _put(out, "links", raw["links"], raw)
        for index, update in enumerate(raw.get("updates") or []):
            made_id = self.new_id(step_id, f"update{len(updates) + 1}")
            self.origins[made_id] = (step_id, f"updates.{index}")
            updates.append((made_id, self.update(update, step_id, f"updates.{index}")))
        if "moment" in raw:
            _put(out, "moment", self.moment(raw["moment"], step_id, raw), raw)
        return self._chain(step_id, raw, out, [], updates)

    def _unknown(self, step_id: str, raw: Mapping, allowed: tuple[str, ...], kind: str) -> None:
        for key in raw:
            if key not in allowed:
                self.fail(f"upstream {kind} steps do not take {key!r}", step=step_id, field=str(key), at=raw)

    # parts of steps ------------------------------------------------------------------------

    def questions(self, questions: Any, step_id: str, raw: Mapping) -> Any:
        if not isinstance(questions, list):
            return questions
        found = []
        for index, question in enumerate(questions):
            field = f"questions.{index}"
            if not isinstance(question, Mapping):
                found.append(question)
                continue
            made = _like(question)
            texts = []
            for key, value in question.items():
                if key in ("name", "good_answer", "bad_answer", "why_it_matters"):
                    _put(made, key, self.text(value, step_id, f"{field}.{key}", question, display=True)
                         if isinstance(value, str) else value, question)  # fmt: skip
                elif key == "ask":
                    _put(made, "ask", self.text(value, step_id, f"{field}.ask", question, display=True)
                         if isinstance(value, str) else value, question)  # fmt: skip
                elif key == "why":
                    _put(made, "why_it_matters", self.text(str(value), step_id, f"{field}.why", question, display=True),
                         question, "why")  # fmt: skip
                elif key in ("context", "guidance"):
                    texts.append(self.text(str(value), step_id, f"{field}.{key}", question, display=True).strip())
                elif key == "creates":
                    self.docs.setdefault("creates", {})[f"{step_id}.{question.get('name')}"] = value
                elif key == "expects":
                    expects, optional, default = self.expects(value, step_id, f"{field}.expects", question)
                    _put(made, "expects", expects, question)
                    if optional:
                        _put(made, "required", False, question, "expects")
                    if default is not _NONE:
                        _put(made, "default", default, question, "expects")
                elif key in ("required", "default"):
                    _put(made, key, value, question)
                else:
                    self.fail(f"a question does not take {key!r}", step=step_id, field=f"{field}.{key}", at=question)
            if texts and isinstance(made.get("ask"), str):
                made["ask"] = "\n\n".join([made["ask"], *texts])
            found.append(made)
        return found

    def expects(self, expects: Any, step_id: str, field: str, at: Any) -> tuple[Any, bool, Any]:
        """(canonical expects, optional?, default): ``required``/``optional``/``default`` move out."""
        if not isinstance(expects, Mapping):
            return expects, False, _NONE
        made = _like(expects)
        optional = expects.get("required") is False or expects.get("optional") is True
        default = expects.get("default", _NONE)
        for key, value in expects.items():
            if key in ("required", "optional", "default"):
                continue
            if key == "type" and value in ("reference", "reference_or_string"):
                value = "id"
            if key == "from":
                value = self.text(braced(str(value)), step_id, f"{field}.from", expects)
            _put(made, key, value, expects)
        if default is not _NONE:
            optional = True
        return made, optional, default

    def moment(self, moment: Any, step_id: str, raw: Mapping) -> Any:
        if not isinstance(moment, Mapping):
            return moment
        made = _like(moment)
        for key, value in moment.items():
            if key != "agent_provides":
                _put(made, key, value, moment)
        provides = moment.get("agent_provides")
        if provides is None:
            return made
        entries = provides if isinstance(provides, list) else [provides]
        kept, answers = [], []
        for entry in entries:
            name = next(iter(entry)) if isinstance(entry, Mapping) and len(entry) == 1 else entry
            if name in ("description", "reasoning"):
                kept.append(name)
            elif isinstance(name, str):
                answers.append(name)
            else:
                self.fail(f"agent_provides names what the agent writes, got {entry!r}", step=step_id, field="moment",
                          at=raw)  # fmt: skip
        _put(made, "agent_provides", kept, moment, "agent_provides")
        if answers and "prose" not in moment:  # the moment's prose is the answers it names
            _put(made, "prose", "\n\n".join(f"{{{name}}}" for name in answers), moment, "agent_provides")
        return made

    def node(self, node: Any, step_id: str, field: str, raw: Mapping) -> Any:
        if not isinstance(node, Mapping):
            return node
        made = _like(node)
        kind = node.get("node_type")
        static = isinstance(kind, str) and "{" not in kind
        subtype = node.get("type")
        if static and kind not in schema.NODE_TYPES:  # a node type the schema does not have: a narrative of that type
            _put(made, "node_type", "narrative", node, "node_type")
            if subtype is None:
                _put(made, "type", kind, node, "node_type")
                subtype = kind
            kind = "narrative"
        for key, value in node.items():
            if key == "node_type" and static and key in made:
                continue
            _put(made, key, self.spec_value(key, value, step_id, field, node), node)
        if "type" not in made and isinstance(kind, str):
            _put(made, "type", kind, node, "node_type")
        known = schema.NODE_TYPES.get(kind) if static and isinstance(kind, str) else None
        if known is not None:
            if "name" in known.required and "name" not in made and "id" in made:
                _put(made, "name", made["id"], node, "id")
            if kind == "moment" and "status" not in made:
                _put(made, "status", "spoken", node, "node_type")
        return made

    def spec_value(self, key: str, value: Any, step_id: str, field: str, at: Mapping) -> Any:
        """One entry of a node or link spec: a condition, a list to go through, or a value."""
        if key == "condition" and isinstance(value, str):
            return self.condition(value, step_id, f"{field}.condition", at)
        if key in ("for_each", "for_each_inner") and isinstance(value, str):
            return self.text(braced(value), step_id, f"{field}.{key}", at)
        return self.value(value, step_id, f"{field}.{key}", at)

    def link(self, link: Any, step_id: str, field: str, raw: Mapping) -> Any:
        if not isinstance(link, Mapping):
            return link
        made = _like(link)
        properties = link.get("properties", {})
        properties = dict(properties) if isinstance(properties, Mapping) else properties
        kind = link.get("type")
        nature = link.get("nature")
        if kind is None:  # mind-mcp: a link without a type is a relates link (keeping its nature)
            kind = "relates"
        elif isinstance(kind, str) and kind not in schema.LINK_TYPES:
            # Not a link type of the schema (one of the upstream's, or one an answer chooses):
            # a ``relates`` link that carries it as its nature.
            nature = kind if nature is None else nature
            kind = "relates"
        for key, value in link.items():
            if key not in ("type", "nature", "properties"):
                _put(made, key, self.spec_value(key, value, step_id, field, link), link)
        _put(made, "type", kind, link, "type")
        if nature is not None and isinstance(properties, dict):
            properties.setdefault("nature", nature)
        if properties:
            _put(made, "properties", self.value(properties, step_id, f"{field}.properties", link) if
                 isinstance(properties, dict) else properties, link, "properties" if "properties" in link else "type")  # fmt: skip
        return made

    def update(self, update: Any, step_id: str, field: str) -> LineDict:
        made = _like(update)
        _put(made, "type", "update", update, "type" if isinstance(update, Mapping) and "type" in update else None)
        if not isinstance(update, Mapping):
            self.fail("an update is a mapping (node or target, set)", step=step_id, field=field)
            return made
        for key, value in update.items():
            if key == "type":
                continue
            if key in ("node", "target"):
                _put(made, "node", self.text(value, step_id, f"{field}.{key}", update) if isinstance(value, str) else value,
                     update, key)  # fmt: skip
            elif key in ("set", "fields"):
                _put(made, "fields", self.values(value, step_id, f"{field}.{key}") if isinstance(value, Mapping) else value,
                     update, key)  # fmt: skip
            elif key == "for_each" and isinstance(value, str):
                _put(made, "for_each", self.text(braced(value), step_id, f"{field}.for_each", update), update, key)
            elif key not in STEP_DOC_KEYS:
                self.fail(f"an update does not take {key!r}", step=step_id, field=f"{field}.{key}", at=update)
        return made

    def query(self, query: Mapping, step_id: str, field: str) -> Any:
        made = _like(query)
        if "find" in query:
            kind = query["find"]
            where = dict(query["where"]) if isinstance(query.get("where"), Mapping) else {}
            if isinstance(kind, str) and kind not in schema.NODE_TYPES and "{" not in kind:
                where.setdefault("type", kind)  # a type the schema does not have: narratives of that type
                kind = "narrative"
            _put(made, "find", kind, query, "find")
            for key, value in query.items():
                if key in ("find", "where"):
                    continue
                if key in ("in_space", "limit", "about"):
                    _put(made, key, self.value(value, step_id, f"{field}.{key}", query), query)
                elif key == "order_by":
                    _put(made, key, f"-{value}" if isinstance(value, str) else value, query)
                else:  # type, status, module, id, ...: fields the found nodes must have
                    where[key] = value
            if where:
                _put(made, "where", self.value(where, step_id, f"{field}.where", query), query,
                     "where" if "where" in query else "find")  # fmt: skip
            return made
        if "get" in query:
            _put(made, "get", self.value(query["get"], step_id, f"{field}.get", query), query, "get")
            _put(made, "links", True, query, "get")
            return made
        if query.get("preset") == "schema_node_types":
            _put(made, "schema", "node_types", query, "preset")
            return made
        for key, value in query.items():
            _put(made, key, self.value(value, step_id, f"{field}.{key}", query), query)
        return made

    def values(self, values: Mapping, step_id: str, field: str) -> LineDict:
        made = _like(values)
        for key, value in values.items():
            _put(made, key, self.value(value, step_id, f"{field}.{key}", values), values)
        return made

    def value(self, value: Any, step_id: str | None, field: str, at: Any) -> Any:
        if isinstance(value, str):
            return self.text(value, step_id, field, at)
        if isinstance(value, Mapping):
            made = _like(value)
            for key, item in value.items():
                _put(made, key, self.value(item, step_id, f"{field}.{key}", value), value)
            return made
        if isinstance(value, list):
            return [self.value(item, step_id, f"{field}.{index}", at) for index, item in enumerate(value)]
        return value

CHECK_ACTIONS = ("call_protocol", "call_procedure", "complete")  # besides {goto: step}
_NONE = object()
ONWARD = "$onward"  # a generated branch's "go on to the step after me", until it is known


def _onward(step: Any) -> str:
    """The key that says where a step goes on to: a generated check's ``then``, else ``next``."""
    return "then" if isinstance(step, Mapping) and step.get("then") == ONWARD else "next"
def _placeholder(raw: Mapping, step_id: str) -> LineDict:
    """A step that cannot run, kept so the step graph around it is still checked."""
    made = _like(raw)
    _put(made, "type", "complete", raw, "type")
    return made


def translate(data: Mapping, source: str) -> Translation:
    """The canonical protocol document of an upstream one, its documentation, and its problems."""
    return _Translator(data, source).translate()
