"""Protocol YAML -> a validated, frozen ``Protocol``; every problem located by file, step, field, line.

The loader reports all problems of a file at once (``ProtocolLoadError.problems``), in one pass:
unknown step types and fields, a ``next``/``then``/``else``/``cases``/``default``/``checks``/
``on_complete`` that points nowhere, unknown expects types, calls to protocols that do not
exist, templates with unknown filters, conditions with forbidden syntax, steps that cannot
reach ``$complete``. A step with a problem still takes part in the checks of where it leads, so
fixing one problem never reveals the next. With ``strict_names`` (what ``cabal protocols check``
asks for) it also reports each template name that neither the declared context, an earlier
step, a loop variable nor a built-in provides (``names``).

YAML 1.1 traps (``on:`` read as ``True``) cannot change a protocol's meaning: files are read
with YAML 1.2 scalars (``cabal.yaml_reader``), so ``on:`` is a field named "on", reported as unknown
where it means nothing.

The builder reads Cabal's own format: that of membrane-patterns.md (``protocol:``, ``steps:``
as a mapping), which also takes the earlier membrane format's spellings (``connectome:`` as
the name, ``start:`` for the first step, ``steps:`` as a list of mappings with ``id``,
``preset:`` and Cypher ``query:`` strings, ``set:`` on update steps). A file in the upstream
projects' dialect (ngram's, and mind-mcp's newer one) is translated into that format first, in
memory, by ``dialect`` (``cabal protocols convert`` writes the translation out), and its
problems are told at the lines of the file as written.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from cabal.errors import ProtocolLoadError, ProtocolProblem
from cabal.graph import schema
from cabal.membrane import dialect, names, templates
from cabal.membrane.protocol import (
    AGENT_PROVIDES,
    COMPLETE,
    OUTCOMES,
    STEP_TYPES,
    AskStep,
    BranchStep,
    CallStep,
    CompleteStep,
    CreateStep,
    Dependency,
    EachStep,
    LinkSpec,
    MomentSpec,
    NodeSpec,
    Protocol,
    MoveFileStep,
    Question,
    QueryStep,
    ReadFileStep,
    SetStep,
    Step,
    UpdateStep,
    case_key,
)
from cabal.membrane.queries import ENRICHMENT_KINDS, parse_query
from cabal.membrane.validation import Expects, ExpectsField, has_from, object_of, parse_expects
from cabal.yaml_reader import LineDict, Problems, read_yaml

STEP_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
DOC_KEYS = ("description", "comment", "notes", "why")  # allowed anywhere, ignored
TOP_KEYS = ("protocol", "connectome", "name", "version", "description", "purpose", "steps", "start",
            "dependencies", "output", "summary", "skill", "tags", "notes", "context", "docs")  # fmt: skip
COMMON_KEYS = ("id", "type", "next", "moment", *DOC_KEYS)
STEP_KEYS: dict[str, tuple[str, ...]] = {
    "ask": ("question", "expects", "questions", "for_each", "context_enrichment", "store_as", "flatten", "item_as"),
    "query": ("query", "store_as", "preset"),
    "branch": ("condition", "then", "else", "cases", "default", "checks"),
    "call_protocol": ("protocol", "context", "on_complete", "store_created_as"),
    "create": ("nodes", "links"),
    "update": ("node", "target", "fields", "set", "for_each"),
    "set": ("values",),
    "each": ("items", "as", "do"),
    "complete": ("summary", "outcome"),
    "read_file": ("path", "store_as"),
    "move_file": ("from", "to"),
}
ACTIONS = ("spawn", "prompt", "fail")
MOMENT_STEPS = ("ask", "query", "update", "create")  # the steps something is said or done in
DEPENDENCY_KEYS = ("id", "exists", "query", "preset", "on_missing", "protocol", "message", "spawn_membrane",
                   "prompt_message", *DOC_KEYS)  # fmt: skip
ON_MISSING_KEYS = ("action", "protocol", "message", "spawn_membrane", "prompt_message", *DOC_KEYS)

CalleeNames = Callable[[str], "frozenset[str] | None"]


# --------------------------------------------------------------------------- problems


def line_of(at: Any, field: str | None) -> int | None:
    if isinstance(at, LineDict):
        return at.line_of(field.split(".")[0] if field else None)
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


# ------------------------------------------------------------------------- the loader


class _Builder:
    """One protocol file being read; collects every problem instead of stopping at the first."""

    def __init__(self, source: str, protocol_exists: Callable[[str], bool], *, strict_names: bool = False,
                 callee_names: CalleeNames | None = None) -> None:  # fmt: skip
        self.source = source
        self.protocol_exists = protocol_exists
        self.strict_names = strict_names
        self.callee_names = callee_names
        self.problems = Problems(source)
        self.reads: list[names.Read] = []
        self.step_lines: dict[str, int] = {}  # where each step's id is written
        self.name = ""

    def fail(self, message: str, **where: Any) -> None:
        self.problems.add(message, **where)

    # top level -------------------------------------------------------------------------

    def build(self, data: Any, expected_name: str | None, *, raw: Any = None,
              dialect_name: str = "cabal") -> Protocol:  # fmt: skip
        if not isinstance(data, Mapping):
            self.fail(f"a protocol file must be a mapping, got {type(data).__name__}")
            raise ProtocolLoadError(self.problems.found)
        self._duplicates(data if raw is None else raw)
        for key in data:
            if key not in TOP_KEYS:
                self.fail(f"unknown top-level field {key!r}", field=str(key), at=data)
        name = _text(data.get("protocol")) or _text(data.get("connectome")) or _text(data.get("name"))
        if name is None:
            self.fail("missing the protocol's name ('protocol: <name>')", field="protocol", at=data)
            name = expected_name or "?"
        self.name = name
        if expected_name is not None and name != expected_name:
            self.fail(f"protocol {name!r} must live in a file named {name}.yaml", field="protocol", at=data)
        declared = self._context(data)
        docs = None
        if "docs" in data:  # documentation only: a canonical file's own, or what a translation kept
            docs = data["docs"] if isinstance(data["docs"], Mapping) else None
            if docs is None:
                self.fail("'docs' must be a mapping (documentation only)", field="docs", at=data)
        order, raw_steps = self._step_list(data)
        steps: dict[str, Step] = {}
        for index, step_id in enumerate(order):
            implicit_next = order[index + 1] if index + 1 < len(order) else COMPLETE
            step = self._step(step_id, raw_steps[step_id], implicit_next)
            if step is not None:
                steps[step_id] = step
        first = data.get("start", order[0] if order else None)
        if first is not None and first not in raw_steps:
            self.fail(f"start step {first!r} does not exist", field="start", at=data)
        output, summary = self._output(data)
        dependencies = self._dependencies(data.get("dependencies"), data)
        self._check_targets(steps, raw_steps)
        if first in raw_steps:
            self._check_paths(first, steps, raw_steps)
        provides = names.all_provided(steps)
        if self.strict_names and (declared is not None or dialect_name == "cabal") and isinstance(first, str):
            self._check_names(first, steps, dependencies, declared or ())
        if self.problems.found:
            raise ProtocolLoadError(self.problems.found)
        return Protocol(
            name=name,
            source=self.source,
            first=first,
            steps=MappingProxyType(steps),
            version=str(data.get("version", "")),
            description=str(data.get("description", data.get("purpose", "")) or ""),
            dependencies=dependencies,
            summary=summary,
            output=output,
            context=declared,
            provides=provides,
            reads=tuple(self.reads),
            docs=MappingProxyType(dict(docs)) if docs else None,
            dialect=dialect_name,
        )

    def _duplicates(self, value: Any, step: str | None = None, path: tuple = ()) -> None:
        """A key given twice anywhere in the file (YAML would silently keep the second)."""
        if isinstance(value, list):
            for item in value:
                self._duplicates(item, step, (*path, "[]"))
        if not isinstance(value, LineDict):
            return
        for key, line in value.duplicates:
            self.problems.found.append(
                ProtocolProblem(self.source, f"{key!r} is given twice; the second would silently win",
                                step=step, field=str(key), line=line)  # fmt: skip
            )
        for key, item in value.items():
            inner_step = key if path == ("steps",) and isinstance(key, str) else step
            self._duplicates(item, inner_step, (*path, key))

    def _context(self, data: Mapping) -> tuple[str, ...] | None:
        """``context:``, the names the protocol reads from the context it starts with."""
        if "context" not in data:
            return None
        value = data["context"]
        found = list(value) if isinstance(value, (list, Mapping)) else None
        if found is None or not all(isinstance(n, str) and schema.FIELD_NAME.match(n) for n in found):
            self.fail("'context' must list the names the protocol reads from its context (or map them to "
                      "descriptions)", field="context", at=data)  # fmt: skip
            return ()
        return tuple(found)

    def _step_list(self, data: Mapping) -> tuple[list[str], dict[str, Any]]:
        raw = data.get("steps")
        found: dict[str, Any] = {}
        if isinstance(raw, Mapping):
            items = list(raw.items())
        elif isinstance(raw, list):  # the earlier format: a list of steps that carry their id
            items = [(s.get("id") if isinstance(s, Mapping) else None, s) for s in raw]
        else:
            self.fail("'steps' must be a mapping of step id to step (or a list of steps with ids)", field="steps", at=data)
            return [], {}
        for step_id, body in items:
            if not isinstance(step_id, str) or not STEP_ID.match(step_id):
                where = body if isinstance(body, LineDict) else data
                self.fail(f"step id {step_id!r} must be a name (letters, digits, _ and -)", field="id", at=where)
                continue
            if step_id in found:
                self.fail(f"step {step_id!r} is defined twice", step=step_id, at=body)
                continue
            if not isinstance(body, Mapping):
                self.fail(f"a step must be a mapping, got {type(body).__name__}", step=step_id, at=data)
                continue
            found[step_id] = body
            if isinstance(raw, LineDict) and (line := raw.line_of(step_id)) is not None:
                self.step_lines[step_id] = line
        if not found and not self.problems.found:
            self.fail("a protocol needs at least one step", field="steps", at=data)
        return list(found), found

    # steps -------------------------------------------------------------------------------

    def _step(self, step_id: str, raw: Mapping, implicit_next: str) -> Step | None:
        kind = raw.get("type")
        if kind not in STEP_TYPES:
            self.fail(f"unknown step type {kind!r}; known: {', '.join(STEP_TYPES)}", step=step_id, field="type", at=raw)
            return None
        allowed = COMMON_KEYS + STEP_KEYS[kind]
        for key in raw:
            if key not in allowed:
                self.fail(
                    f"{kind} steps do not take {key!r} (they take: {', '.join(STEP_KEYS[kind])}, next, moment)",
                    step=step_id,
                    field=str(key),
                    at=raw,
                )
        if raw.get("moment") not in (None, False) and kind not in MOMENT_STEPS:
            self.fail(f"a {kind} step records no moment ({', '.join(MOMENT_STEPS)} steps do)",
                      step=step_id, field="moment", at=raw)  # fmt: skip
        if kind == "complete" and "next" in raw:
            self.fail("a complete step ends the protocol; it takes no 'next'", step=step_id, field="next", at=raw)
        base = {
            "id": step_id,
            "type": kind,
            "next": self._target(raw, "next", step_id) or implicit_next,
            "line": getattr(raw, "line", None),
            "moment": self._moment(raw, step_id, kind),
        }
        builder = getattr(self, f"_{kind}")
        return builder(step_id, raw, base, implicit_next)

    def _target(self, raw: Mapping, key: str, step_id: str) -> str | None:
        if key not in raw:
            return None
        value = raw[key]
        if not isinstance(value, str) or not value:
            self.fail(f"{key!r} must name a step or $complete, got {value!r}", step=step_id, field=key, at=raw)
            return None
        return value

    def _moment(self, raw: Mapping, step_id: str, kind: str) -> MomentSpec | None:
        value = raw.get("moment")
        if value is None or value is False:
            return None
        if value is True:
            return MomentSpec()
        if not isinstance(value, Mapping):
            self.fail("'moment' must be a mapping (type, agent_provides, about) or true", step=step_id, field="moment", at=raw)
            return None
        provides = value.get("agent_provides", list(AGENT_PROVIDES))
        if isinstance(provides, str):
            provides = [provides]
        unknown = [p for p in provides if p not in AGENT_PROVIDES] if isinstance(provides, list) else [provides]
        if unknown:
            self.fail(f"agent_provides takes {list(AGENT_PROVIDES)}, got {unknown}", step=step_id, field="moment", at=raw)
        for key in value:
            if key not in ("type", "agent_provides", "about", "prose", *DOC_KEYS):
                self.fail(f"moment does not take {key!r}", step=step_id, field=f"moment.{key}", at=raw)
        locals_ = names.ANSWER | (names.LOOP if kind == "ask" and raw.get("for_each") is not None else frozenset())
        self._templates(value.get("about"), step_id, "moment.about", raw, locals_=locals_, after=True)
        self._templates(value.get("prose"), step_id, "moment.prose", raw, locals_=locals_, after=True)
        return MomentSpec(
            type=str(value.get("type") or "answer"),
            agent_provides=tuple(provides) if isinstance(provides, list) and not unknown else AGENT_PROVIDES,
            about=value.get("about"),
            prose=value.get("prose"),
        )

    def _ask(self, step_id: str, raw: Mapping, base: dict, _: str) -> Step | None:
        question = raw.get("question")
        questions = self._questions(raw, step_id)
        expects: Expects | None
        if questions:
            expects = object_of([ExpectsField(q.name, q.expects, q.required, _question_text(q), *_default(q))
                                 for q in questions])  # fmt: skip
            if "expects" in raw:
                self.fail("give either 'expects' or 'questions', not both", step=step_id, field="expects", at=raw)
        elif "expects" in raw:
            expects = self._expects(raw["expects"], step_id, raw, "")
        else:
            self.fail("an ask step needs 'expects' (or a 'questions' list)", step=step_id, field="expects", at=raw)
            expects = None
        if question is not None and not isinstance(question, str):
            self.fail(f"'question' must be text, got {question!r}", step=step_id, field="question", at=raw)
        if question is None and not questions:
            self.fail("an ask step needs a 'question'", step=step_id, field="question", at=raw)
        for_each = self._for_each(raw, step_id)
        self._templates(question, step_id, "question", raw, locals_=names.LOOP if for_each else frozenset())
        enrichment = raw.get("context_enrichment")
        if enrichment is not None:
            enrichment = self._enrichment(enrichment, step_id, raw)
        store_as = self._name(raw, "store_as", step_id)
        item_as = self._name(raw, "item_as", step_id)
        if item_as is not None and (for_each is None or not questions):
            self.fail("'item_as' adds each item to its answer: it needs 'for_each' and 'questions'",
                      step=step_id, field="item_as", at=raw)  # fmt: skip
        flatten = raw.get("flatten", False)
        if not isinstance(flatten, bool):
            self.fail(f"'flatten' must be true or false, got {flatten!r}", step=step_id, field="flatten", at=raw)
        if expects is None:
            return None
        return AskStep(
            **base,
            question=question if isinstance(question, str) else "",
            expects=expects,
            questions=tuple(questions),
            for_each=for_each,
            context_enrichment=enrichment,
            store_as=store_as,
            item_as=item_as,
            flatten=flatten is True,
            resolves_from=has_from(expects),
        )

    def _name(self, raw: Mapping, key: str, step_id: str) -> str | None:
        value = raw.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not STEP_ID.match(value):
            self.fail(f"{key!r} must be a name, got {value!r}", step=step_id, field=key, at=raw)
            return None
        return value

    def _expects(self, raw_expects: Any, step_id: str, at: Mapping, prefix: str) -> Expects | None:
        expects, problems = parse_expects(raw_expects)
        for field, message in problems:
            self.fail(message, step=step_id, field=prefix + field, at=at)
        kind = expects.get("node_type") if expects is not None else None
        if kind is not None and kind not in schema.NODE_TYPES:  # an id answer could never match it
            self.fail(f"unknown node_type {kind!r}; known: {', '.join(sorted(schema.NODE_TYPES))}",
                      step=step_id, field=f"{prefix}expects.node_type", at=at)  # fmt: skip
        if expects is not None and expects.get("from") is not None:
            self._templates(expects.get("from"), step_id, f"{prefix}expects.from", at)
            if templates.parse(expects.get("from")).single is None:
                self.fail(f"'from' must be one reference to a list, such as {{candidates}}, got {expects.get('from')!r}",
                          step=step_id, field=f"{prefix}expects.from", at=at)  # fmt: skip
        return expects

    def _questions(self, raw: Mapping, step_id: str) -> list[Question]:
        value = raw.get("questions")
        if value is None:
            return []
        found: list[Question] = []
        for field, at, item in self._entries(value, step_id, "questions", raw, ("name", "ask"),
                                             "'questions' must be a non-empty list"):  # fmt: skip
            if any(q.name == item["name"] for q in found):
                self.fail(f"question {item['name']!r} is asked twice", step=step_id, field=field, at=at)
            keys = ("name", "ask", "why_it_matters", "good_answer", "bad_answer", "expects", "required", "default",
                    *DOC_KEYS)  # fmt: skip
            for key in item:
                if key not in keys:
                    self.fail(f"a question does not take {key!r}", step=step_id, field=f"{field}.{key}", at=at)
            required = item.get("required", "default" not in item)
            if not isinstance(required, bool):
                self.fail(f"'required' must be true or false, got {required!r}", step=step_id, field=f"{field}.required", at=at)
            if "default" in item and required is True:
                self.fail("a question with a default is not required", step=step_id, field=f"{field}.default", at=at)
            expects = self._expects(item.get("expects", {"type": "string"}), step_id, at, f"{field}.")
            self._templates(item.get("ask"), step_id, f"{field}.ask", at, reads=False)
            if expects is not None:
                found.append(
                    Question(
                        name=item["name"],
                        ask=item["ask"],
                        expects=expects,
                        why_it_matters=_text(item.get("why_it_matters")),
                        good_answer=_text(item.get("good_answer")),
                        bad_answer=_text(item.get("bad_answer")),
                        required=required is not False,
                        default=item.get("default"),
                    )
                )
        return found

    def _entries(self, value: Any, step_id: str, key: str, raw: Mapping, needs: tuple[str, ...],
                 not_a_list: str) -> list[tuple[str, Any, Mapping]]:  # fmt: skip
        """(field, where, entry) of each mapping of a list that has every key it ``needs``."""
        if not isinstance(value, list) or not value:
            self.fail(not_a_list, step=step_id, field=key, at=raw)
            return []
        found = []
        for index, item in enumerate(value):
            field = f"{key}.{index}"
            at = item if isinstance(item, LineDict) else raw
            if not isinstance(item, Mapping) or not all(_text(item.get(need)) for need in needs):
                wanted = " and ".join(repr(need) for need in needs)
                self.fail(f"each of '{key}' needs {wanted}", step=step_id, field=field, at=at)
                continue
            found.append((field, at, item))
        return found

    def _enrichment(self, value: Any, step_id: str, raw: Mapping) -> Mapping | None:
        if not isinstance(value, Mapping):
            self.fail("'context_enrichment' must be a mapping (prompt, allows)", step=step_id, field="context_enrichment", at=raw)
            return None
        allows = value.get("allows", list(ENRICHMENT_KINDS))
        if not isinstance(allows, list) or any(a not in ENRICHMENT_KINDS for a in allows):
            self.fail(
                f"context_enrichment.allows takes {list(ENRICHMENT_KINDS)}, got {allows!r}",
                step=step_id,
                field="context_enrichment.allows",
                at=raw,
            )
            allows = []
        return MappingProxyType({"prompt": value.get("prompt"), "allows": tuple(allows)})

    def _for_each(self, raw: Mapping, step_id: str, field: str = "for_each", key: str = "for_each",
                  locals_: frozenset[str] = frozenset()) -> str | None:  # fmt: skip
        value = raw.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            self.fail(f"'{key}' must name a list in the context, got {value!r}", step=step_id, field=field, at=raw)
            return None
        value = value.strip()
        # ``for_each: behaviors`` and ``for_each: "{behaviors}"`` mean the same list.
        template = value if "{" in value else "{" + value + "}"
        if templates.parse(template).single is None:
            self.fail(f"'{key}' must be one reference such as {{answers}}, got {value!r}", step=step_id, field=field, at=raw)
            return None
        self._templates(template, step_id, field, raw, locals_=locals_)
        return template

    def _query(self, step_id: str, raw: Mapping, base: dict, _: str) -> Step | None:
        if ("query" in raw) == ("preset" in raw):
            self.fail("a query step needs exactly one of 'query' and 'preset'", step=step_id, field="query", at=raw)
            return None
        raw_query = raw["query"] if "query" in raw else {"preset": raw["preset"]}
        spec, problems = parse_query(raw_query)
        for field, message in problems:
            self.fail(message, step=step_id, field=field if "query" in raw else "preset", at=raw)
        if spec is not None:
            self._query_reads(spec, step_id, "query", raw)
        store_as = raw.get("store_as", step_id)
        if not isinstance(store_as, str) or not STEP_ID.match(store_as):
            self.fail(f"'store_as' must be a name, got {store_as!r}", step=step_id, field="store_as", at=raw)
        if spec is None or problems:
            return None
        return QueryStep(**base, query=spec, store_as=store_as)

    def _query_reads(self, spec: Any, step_id: str | None, field: str, at: Any) -> None:
        if spec.verb != "cypher":
            self._templates(dict(spec.args), step_id, field, at)
            return
        self._templates(dict(spec.args.get("params") or {}), step_id, f"{field}.params", at)
        for name in re.findall(r"\$([A-Za-z_][A-Za-z0-9_]*)", spec.args["text"]):
            if name not in (spec.args.get("params") or {}):
                self.reads.append(names.Read(name, step_id, field, line_of(at, field)))

    def _branch(self, step_id: str, raw: Mapping, base: dict, implicit_next: str) -> Step | None:
        if "checks" in raw and ("then" in raw or "cases" in raw):
            self.fail("a branch has one of then/else, cases or checks, not two", step=step_id, field="checks", at=raw)
        if "checks" in raw:
            return self._checks(step_id, raw, base)
        condition = raw.get("condition")
        if not isinstance(condition, str) or not condition.strip():
            self.fail("a branch needs a 'condition' expression", step=step_id, field="condition", at=raw)
            condition = None
        else:
            self._condition(condition, step_id, "condition", raw)
        cases = raw.get("cases")
        if cases is not None:
            if not isinstance(cases, Mapping) or not cases:
                self.fail("'cases' must map values to step ids", step=step_id, field="cases", at=raw)
                return None
            if "then" in raw or "else" in raw:
                self.fail("a branch has either then/else or cases, not both", step=step_id, field="cases", at=raw)
            # YAML keys such as ``true:`` or ``3:`` are matched as text, like the condition's value.
            cases = MappingProxyType({case_key(key): value for key, value in cases.items()})
            default = self._target(raw, "default", step_id)
            return BranchStep(**base, condition=condition, cases=cases, default=default) if condition else None
        then = self._target(raw, "then", step_id)
        if then is None:
            self.fail("a branch needs 'then' (and 'else') or 'cases'", step=step_id, field="then", at=raw)
            return None
        otherwise = self._target(raw, "else", step_id) or base["next"]
        return BranchStep(**base, condition=condition, then=then, otherwise=otherwise) if condition else None

    def _checks(self, step_id: str, raw: Mapping, base: dict) -> Step | None:
        value = raw["checks"]
        if "condition" in raw:
            self.fail("a branch with 'checks' has a condition per check, not one 'condition'",
                      step=step_id, field="condition", at=raw)  # fmt: skip
        if not isinstance(value, list) or not value:
            self.fail("'checks' must be a list of {condition, goto}", step=step_id, field="checks", at=raw)
            return None
        found = []
        for field, at, item in self._entries(value, step_id, "checks", raw, ("condition", "goto"), ""):
            for key in item:
                if key not in ("condition", "goto", *DOC_KEYS):
                    self.fail(f"a check does not take {key!r}", step=step_id, field=f"{field}.{key}", at=at)
            self._condition(item["condition"], step_id, f"{field}.condition", at)
            found.append((item["condition"], item["goto"]))
        return BranchStep(**base, checks=tuple(found))

    def _call_protocol(self, step_id: str, raw: Mapping, base: dict, _: str) -> Step | None:
        name = raw.get("protocol")
        context = raw.get("context") or {}
        if not isinstance(context, Mapping):
            self.fail("'context' must be a mapping", step=step_id, field="context", at=raw)
            context = {}
        self._templates(dict(context), step_id, "context", raw)
        on_complete = self._target(raw, "on_complete", step_id) or base["next"]
        store = self._name(raw, "store_created_as", step_id)
        if not isinstance(name, str) or not _text(name):
            self.fail("a call_protocol step needs 'protocol'", step=step_id, field="protocol", at=raw)
            return None
        if name != self.name and not self.protocol_exists(name):
            self.fail(f"calls protocol {name!r}, which does not exist", step=step_id, field="protocol", at=raw)
        return CallStep(**base, protocol=name, context=MappingProxyType(dict(context)), on_complete=on_complete,
                        store_created_as=store)  # fmt: skip

    def _create(self, step_id: str, raw: Mapping, base: dict, _: str) -> Step | None:
        nodes = self._nodes(raw.get("nodes") or [], step_id, raw)
        links = self._links(raw.get("links") or [], step_id, raw)
        if not nodes and not links and not raw.get("nodes") and not raw.get("links"):
            self.fail("a create step needs 'nodes' or 'links'", step=step_id, field="nodes", at=raw)
        return CreateStep(**base, nodes=tuple(nodes), links=tuple(links))

    def _loops(self, item: Mapping, step_id: str, field: str, at: Any) -> tuple[str | None, str | None, frozenset]:
        for_each = self._for_each(item, step_id, f"{field}.for_each")
        inner = self._for_each(item, step_id, f"{field}.for_each_inner", "for_each_inner", names.LOOP)
        if inner is not None and for_each is None:
            self.fail("'for_each_inner' runs inside a 'for_each'", step=step_id, field=f"{field}.for_each_inner", at=at)
        locals_ = names.INNER if inner else names.LOOP if for_each else frozenset()
        return for_each, inner, locals_

    def _nodes(self, value: Any, step_id: str, raw: Mapping) -> list[NodeSpec]:
        if not isinstance(value, list):
            self.fail("'nodes' must be a list", step=step_id, field="nodes", at=raw)
            return []
        found = []
        for index, item in enumerate(value):
            field = f"nodes.{index}"
            at = item if isinstance(item, LineDict) else raw
            if not isinstance(item, Mapping):
                self.fail("a node must be a mapping", step=step_id, field=field, at=at)
                continue
            fields = {k: v for k, v in item.items() if k not in ("for_each", "condition", "for_each_inner")}
            kind = fields.get("node_type")
            if isinstance(kind, str) and templates.references(kind):
                if "id" not in fields or "type" not in fields:  # the rest is checked when the type is known
                    self.fail("a node needs id and type", step=step_id, field=field, at=at)
            elif kind not in schema.NODE_TYPES:
                self.fail(f"unknown node_type {kind!r}; known: {', '.join(sorted(schema.NODE_TYPES))}",
                          step=step_id, field=f"{field}.node_type", at=at)  # fmt: skip
            else:
                missing = [f for f in ("id", "type", *schema.NODE_TYPES[kind].required) if f not in fields]
                if missing:
                    self.fail(f"a {kind} node needs {', '.join(missing)}", step=step_id, field=field, at=at)
            for key in fields:
                if not isinstance(key, str) or not schema.FIELD_NAME.match(key):
                    self.fail(f"field name {key!r} must be letters, digits and _", step=step_id, field=f"{field}.{key}", at=at)
            for_each, inner, locals_ = self._loops(item, step_id, field, at)
            self._templates(fields, step_id, field, at, locals_=locals_)
            condition = self._optional_condition(item, step_id, field, at, locals_)
            found.append(NodeSpec(fields=MappingProxyType(fields), for_each=for_each, condition=condition,
                                  for_each_inner=inner))  # fmt: skip
        return found

    def _links(self, value: Any, step_id: str, raw: Mapping) -> list[LinkSpec]:
        if not isinstance(value, list):
            self.fail("'links' must be a list", step=step_id, field="links", at=raw)
            return []
        found = []
        for index, item in enumerate(value):
            field = f"links.{index}"
            at = item if isinstance(item, LineDict) else raw
            if not isinstance(item, Mapping):
                self.fail("a link must be a mapping", step=step_id, field=field, at=at)
                continue
            kind = item.get("type")
            if not (isinstance(kind, str) and templates.references(kind)) and kind not in schema.LINK_TYPES:
                self.fail(f"unknown link type {item.get('type')!r}; known: {', '.join(sorted(schema.LINK_TYPES))}",
                          step=step_id, field=f"{field}.type", at=at)  # fmt: skip
            for end in ("from", "to"):
                if not _text(item.get(end)):
                    self.fail(f"a link needs '{end}'", step=step_id, field=f"{field}.{end}", at=at)
            for key in item:
                if key not in ("type", "from", "to", "properties", "for_each", "condition", "for_each_inner", *DOC_KEYS):
                    self.fail(f"a link does not take {key!r}", step=step_id, field=f"{field}.{key}", at=at)
            properties = item.get("properties") or {}
            if not isinstance(properties, Mapping):
                self.fail("'properties' must be a mapping", step=step_id, field=f"{field}.properties", at=at)
                properties = {}
            for_each, inner, locals_ = self._loops(item, step_id, field, at)
            self._templates({"type": kind, "from": item.get("from"), "to": item.get("to"), **properties}, step_id, field, at,
                            locals_=locals_)  # fmt: skip
            found.append(
                LinkSpec(
                    type=str(kind),
                    source=str(item.get("from")),
                    target=str(item.get("to")),
                    properties=MappingProxyType(dict(properties)),
                    for_each=for_each,
                    condition=self._optional_condition(item, step_id, field, at, locals_),
                    for_each_inner=inner,
                )
            )
        return found

    def _update(self, step_id: str, raw: Mapping, base: dict, _: str) -> Step | None:
        node = raw.get("node", raw.get("target"))
        # ``set:`` is how the earlier membrane format names the fields to set.
        if "fields" in raw and "set" in raw:
            self.fail("give either 'fields' or 'set', not both", step=step_id, field="set", at=raw)
        key = "set" if "set" in raw and "fields" not in raw else "fields"
        fields = raw.get(key)
        for_each = self._for_each(raw, step_id)
        locals_ = names.LOOP if for_each else frozenset()
        if not _text(node):
            self.fail("an update step needs 'node' (the id to update)", step=step_id, field="node", at=raw)
        if not isinstance(fields, Mapping) or not fields:
            self.fail("an update step needs 'fields' (or 'set') to set", step=step_id, field=key, at=raw)
            return None
        for name in fields:
            if not isinstance(name, str) or not schema.FIELD_NAME.match(name) or name in schema.IMMUTABLE_KEYS:
                self.fail(f"cannot update field {name!r}", step=step_id, field=f"{key}.{name}", at=raw)
        self._templates({"node": node}, step_id, "node", raw, locals_=locals_)
        self._templates(dict(fields), step_id, key, raw, locals_=locals_)
        return UpdateStep(**base, node=str(node), fields=MappingProxyType(dict(fields)), for_each=for_each)

    def _set(self, step_id: str, raw: Mapping, base: dict, _: str) -> Step | None:
        values = raw.get("values")
        if not isinstance(values, Mapping) or not values:
            self.fail("a set step needs 'values' (name: value)", step=step_id, field="values", at=raw)
            return None
        for name in values:
            if not isinstance(name, str) or not STEP_ID.match(name):
                self.fail(f"{name!r} is not a name", step=step_id, field=f"values.{name}", at=raw)
        self._templates(dict(values), step_id, "values", raw)
        return SetStep(**base, values=MappingProxyType(dict(values)))

    def _each(self, step_id: str, raw: Mapping, base: dict, _: str) -> Step | None:
        items = self._for_each(raw, step_id, "items", "items")
        as_name = self._name(raw, "as", step_id) or ("item" if "as" not in raw else None)
        body = self._target(raw, "do", step_id)
        if items is None and "items" not in raw:
            self.fail("an each step needs 'items' (the list to go through)", step=step_id, field="items", at=raw)
        if body is None and "do" not in raw:
            self.fail("an each step needs 'do' (the first step of its body)", step=step_id, field="do", at=raw)
        if items is None or body is None or as_name is None:
            return None
        return EachStep(**base, items=items, as_name=as_name, body=body)

    def _complete(self, step_id: str, raw: Mapping, base: dict, _: str) -> Step | None:
        summary = raw.get("summary")
        if summary is not None and not isinstance(summary, str):
            self.fail("'summary' must be text", step=step_id, field="summary", at=raw)
            summary = None
        self._templates(summary, step_id, "summary", raw)
        outcome = raw.get("outcome", "complete")
        if outcome not in OUTCOMES:
            self.fail(f"'outcome' must be one of {', '.join(OUTCOMES)}, got {outcome!r}", step=step_id, field="outcome", at=raw)
            outcome = "complete"
        return CompleteStep(**base, summary=summary, outcome=outcome)

    def _read_file(self, step_id: str, raw: Mapping, base: dict, _: str) -> Step | None:
        path = self._path(raw, "path", step_id)
        store_as = raw.get("store_as", step_id)
        if not isinstance(store_as, str) or not STEP_ID.match(store_as):
            self.fail(f"'store_as' must be a name, got {store_as!r}", step=step_id, field="store_as", at=raw)
            return None
        return ReadFileStep(**base, path=path, store_as=store_as) if path is not None else None

    def _move_file(self, step_id: str, raw: Mapping, base: dict, _: str) -> Step | None:
        source, target = self._path(raw, "from", step_id), self._path(raw, "to", step_id)
        if source is None or target is None:
            return None
        return MoveFileStep(**base, source=source, target=target)

    def _path(self, raw: Mapping, key: str, step_id: str) -> str | None:
        """A path template of a file step: relative to the file root, never climbing out of it."""
        value = raw.get(key)
        if not isinstance(value, str) or not value.strip():
            self.fail(f"a {raw.get('type')} step needs {key!r}: a path under the membrane's file root, got {value!r}",
                      step=step_id, field=key, at=raw)  # fmt: skip
            return None
        self._templates(value, step_id, key, raw)
        if templates.check(value):
            return None
        # What the author wrote around the references: a value a reference brings is checked
        # when the step runs, against the root itself.
        written = "".join(part if isinstance(part, str) else "x" for part in templates.parse(value).parts)
        if written.startswith("/"):
            self.fail(f"{value!r} is absolute; a path is relative to the membrane's file root", step=step_id, field=key,
                      at=raw)  # fmt: skip
        elif ".." in written.split("/"):
            self.fail(f"{value!r} climbs out with '..'; a path stays under the membrane's file root", step=step_id,
                      field=key, at=raw)  # fmt: skip
        return value

    # shared checks --------------------------------------------------------------------

    def _templates(self, value: Any, step_id: str | None, field: str, at: Any, *, locals_: frozenset[str] = frozenset(),
                   reads: bool = True, after: bool = False) -> None:  # fmt: skip
        """Check a value's templates (filters) and note every name they read, with where."""
        if isinstance(value, Mapping):
            for key, item in value.items():
                self._templates(item, step_id, f"{field}.{key}", at, locals_=locals_, reads=reads, after=after)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                self._templates(item, step_id, f"{field}.{index}", at, locals_=locals_, reads=reads, after=after)
        elif isinstance(value, str):
            for message in templates.check(value):
                self.fail(message, step=step_id, field=field, at=at)
            if not reads:
                return
            single = templates.parse(value).single
            for name, _ in templates.reference_names(value):
                self.reads.append(names.Read(name, None if step_id == "output" else step_id, field, line_of(at, field),
                                             locals_, whole=single is not None, after=after))  # fmt: skip

    def _condition(self, condition: str, step_id: str | None, field: str, at: Any,
                   locals_: frozenset[str] = frozenset()) -> None:  # fmt: skip
        try:
            templates.compile_condition(condition)
        except templates.ConditionSyntaxError as exc:
            self.fail(str(exc), step=step_id, field=field, at=at)
            return
        for name in templates.condition_names(condition):
            self.reads.append(names.Read(name, None if step_id == "output" else step_id, field, line_of(at, field), locals_))

    def _optional_condition(self, item: Mapping, step_id: str, field: str, at: Any,
                            locals_: frozenset[str] = frozenset()) -> str | None:  # fmt: skip
        condition = item.get("condition")
        if condition is None:
            return None
        if not isinstance(condition, str):
            self.fail(f"'condition' must be an expression, got {condition!r}", step=step_id, field=f"{field}.condition", at=at)
            return None
        self._condition(condition, step_id, f"{field}.condition", at, locals_)
        return condition

    def _output(self, data: Mapping) -> tuple[CreateStep | None, str | None]:
        output = data.get("output") or {}
        if not isinstance(output, Mapping):
            self.fail("'output' must be a mapping (cluster, summary)", field="output", at=data)
            return None, None
        for key in output:
            if key not in ("cluster", "summary", *DOC_KEYS):
                self.fail(f"'output' does not take {key!r} (it takes: cluster, summary)", field=f"output.{key}", at=output)
        summary = output.get("summary", data.get("summary"))
        if summary is not None and not isinstance(summary, str):
            self.fail("'summary' must be text", field="summary", at=data)
            summary = None
        self._templates(summary, "output", "summary", data)
        cluster = output.get("cluster")
        if not cluster:
            return None, summary
        if not isinstance(cluster, Mapping):
            self.fail("'output.cluster' must be a mapping (nodes, links)", field="output.cluster", at=data)
            return None, summary
        nodes = self._nodes(cluster.get("nodes") or [], "output", cluster)
        links = self._links(cluster.get("links") or [], "output", cluster)
        step = CreateStep(id="output", type="create", next=COMPLETE, line=getattr(cluster, "line", None),
                          nodes=tuple(nodes), links=tuple(links))  # fmt: skip
        return step, summary

    def _dependencies(self, value: Any, data: Mapping) -> tuple[Dependency, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            self.fail("'dependencies' must be a list", field="dependencies", at=data)
            return ()
        found = []
        for index, item in enumerate(value):
            field = f"dependencies.{index}"
            at = item if isinstance(item, LineDict) else data
            if not isinstance(item, Mapping) or not _text(item.get("id")):
                self.fail("a dependency needs an 'id'", field=field, at=at)
                continue
            for key in item:
                if key not in DEPENDENCY_KEYS:
                    self.fail(f"a dependency does not take {key!r}", field=f"{field}.{key}", at=at)
            on_missing = item.get("on_missing", "fail")
            details = on_missing if isinstance(on_missing, Mapping) else {"action": on_missing}
            for key in details if isinstance(on_missing, Mapping) else ():
                if key not in ON_MISSING_KEYS:
                    self.fail(f"on_missing does not take {key!r}", field=f"{field}.on_missing.{key}", at=on_missing)
            action = details.get("action")
            # The seed names the spawned protocol ``spawn_membrane`` and the prompt ``prompt_message``.
            protocol = _first_of(details, item, ("protocol", "spawn_membrane"))
            message = _first_of(details, item, ("message", "prompt_message"))
            if action not in ACTIONS:
                self.fail(f"on_missing action must be one of {', '.join(ACTIONS)}, got {action!r}",
                          field=f"{field}.on_missing", at=at)  # fmt: skip
            if action == "spawn" and (not _text(protocol) or not self.protocol_exists(protocol)) and protocol != self.name:
                self.fail(f"spawns protocol {protocol!r}, which does not exist", field=f"{field}.on_missing", at=at)
            if action == "prompt" and not _text(message):
                self.fail("a prompt dependency needs a 'message'", field=f"{field}.on_missing", at=at)
            query = None
            if "query" in item or "preset" in item:
                query, problems = parse_query(item["query"] if "query" in item else {"preset": item["preset"]})
                for sub_field, text in problems:
                    self.fail(text, field=f"{field}.{sub_field}", at=at)
                if query is not None:
                    self._query_reads(query, None, field, at)
            elif not _text(item.get("exists")):
                self.fail("a dependency needs 'exists' (an id) or a 'query'", field=field, at=at)
            self._templates({"exists": item.get("exists"), "message": message}, None, field, at)
            found.append(Dependency(id=item["id"], query=query, exists=item.get("exists"), action=str(action),
                                    protocol=protocol, message=message))  # fmt: skip
        return tuple(found)

    # the step graph -------------------------------------------------------------------

    def _check_targets(self, steps: Mapping[str, Step], raw_steps: Mapping[str, Any]) -> None:
        for step_id, raw in raw_steps.items():
            step = steps.get(step_id)
            for field, target in names.targets(step) if step is not None else _raw_targets(raw):
                if target != COMPLETE and target not in raw_steps:
                    self.fail(f"{field} points to {target!r}, which is not a step of this protocol",
                              step=step_id, field=field, at=raw)  # fmt: skip

    def _check_paths(self, first: str, steps: Mapping[str, Step], raw_steps: Mapping[str, Any]) -> None:
        """Every step must be able to reach ``$complete``: the reachable ones, and the others too,
        so that fixing what makes a step unreachable never reveals it as a dead end later.

        A step that could not be read, and a target that does not exist, are given the benefit
        of the doubt: they are reported once, where they are, not again as dead ends.
        """
        edges = {
            step_id: [t for _, t in (names.targets(steps[step_id]) if step_id in steps else _raw_targets(raw))]
            for step_id, raw in raw_steps.items()
        }
        finishing = {COMPLETE} | {s for s in raw_steps if s not in steps}
        finishing |= {s for s in steps if steps[s].type == "complete"}
        finishing |= {t for targets in edges.values() for t in targets if t not in raw_steps}
        changed = True
        while changed:
            changed = False
            for step_id, targets in edges.items():
                if step_id not in finishing and any(t in finishing for t in targets):
                    finishing.add(step_id)
                    changed = True
        for step_id in sorted(set(raw_steps) - finishing, key=list(raw_steps).index):
            self.problems.found.append(
                ProtocolProblem(self.source, "no path from this step to $complete", step=step_id,
                                line=self.step_lines.get(step_id, getattr(raw_steps[step_id], "line", None)))  # fmt: skip
            )

    def _check_names(self, first: Any, steps: Mapping[str, Step], dependencies: tuple[Dependency, ...],
                     declared: tuple[str, ...]) -> None:  # fmt: skip
        spawned: set[str] = set()
        for dep in dependencies:
            if dep.action == "spawn" and dep.protocol and self.callee_names is not None:
                called = self.callee_names(dep.protocol)
                spawned |= {names.ANYTHING} if called is None else set(called)
        hint = "declare it under 'context:'" if declared else "list the names a protocol reads from its context under 'context:'"
        unprovided = names.unprovided(self.reads, steps, first, declared, start=spawned, callee_names=self.callee_names)
        by_name: dict[str, list[names.Read]] = {}
        for read in unprovided:
            by_name.setdefault(read.name, []).append(read)
        for name, reads in by_name.items():  # one problem per name, where it is first read
            read = min(reads, key=lambda r: (r.line is None, r.line or 0))
            where = "the steps before this one" if read.step is not None else "the protocol's steps"
            others = f"; also read in {len(reads) - 1} other place(s)" if len(reads) > 1 else ""
            self.problems.found.append(ProtocolProblem(
                self.source,
                f"nothing provides {{{name}}}: not {where}, a loop variable, a built-in or the declared "
                f"context ({hint} if the caller passes it){others}",
                step=read.step, field=read.field, line=read.line,
            ))  # fmt: skip


def _first_of(details: Mapping, item: Mapping, keys: tuple[str, ...]) -> Any:
    for source in (details, item):
        for key in keys:
            if source.get(key) is not None:
                return source[key]
    return None


def _raw_targets(raw: Any) -> list[tuple[str, str]]:
    """Where a step that could not be read would go: its target fields as written."""
    if not isinstance(raw, Mapping):
        return []
    found = [(key, raw[key]) for key in ("next", "then", "else", "default", "on_complete", "do")
             if isinstance(raw.get(key), str)]  # fmt: skip
    if isinstance(raw.get("cases"), Mapping):
        found += [(f"cases.{case_key(k)}", v) for k, v in raw["cases"].items() if isinstance(v, str)]
    if isinstance(raw.get("checks"), list):
        found += [(f"checks.{i}", c["goto"]) for i, c in enumerate(raw["checks"])
                  if isinstance(c, Mapping) and isinstance(c.get("goto"), str)]  # fmt: skip
    return found


def _default(question: Question) -> tuple:
    """The default of an ExpectsField, when the question has one (a question that is not required)."""
    return (question.default,) if not question.required and question.default is not None else ()


def _question_text(question: Question) -> str:
    lines = [question.ask]
    for label, text in (("Why it matters", question.why_it_matters), ("Good answer", question.good_answer),
                        ("Bad answer", question.bad_answer)):  # fmt: skip
        if text:
            lines.append(f"{label}: {text}")
    return "\n".join(lines)


def load_protocol(
    text: str,
    source: str = "<string>",
    *,
    protocol_exists: Callable[[str], bool] = lambda name: False,
    expected_name: str | None = None,
    strict_names: bool = False,
    callee_names: CalleeNames | None = None,
) -> Protocol:
    """Read and check one protocol. ``protocol_exists`` answers for call_protocol and spawn targets.

    ``strict_names`` also reports template names nothing provides (``callee_names`` gives the
    names a called protocol provides, or None when it cannot be read).
    """
    data = read_yaml(text, source)
    builder = _Builder(source, protocol_exists, strict_names=strict_names, callee_names=callee_names)
    if dialect.is_upstream(data):
        translation = dialect.translate(data, source)
        builder.problems.found += translation.problems
        try:
            return builder.build(translation.document, expected_name, raw=data, dialect_name="upstream")
        except ProtocolLoadError as exc:
            raise ProtocolLoadError([translation.locate(problem) for problem in exc.problems]) from None
    return builder.build(data, expected_name)
