"""Protocol YAML -> a validated, frozen ``Protocol``; every problem located by file, step, field, line.

The loader reports all problems of a file at once (``ProtocolLoadError.problems``): unknown
step types and fields, a ``next``/``then``/``else``/``cases``/``default``/``on_complete`` that
points nowhere, unknown expects types, calls to protocols that do not exist, templates with
unknown filters, conditions with forbidden syntax, steps that cannot reach ``$complete``.

YAML 1.1 traps (``on:`` read as ``True``) cannot change a protocol's meaning: files are read
with YAML 1.2 scalars (``cabal.yaml_reader``), so ``on:`` is a field named "on", reported as unknown
where it means nothing.

Two shapes are read: the format of membrane-patterns.md (``protocol:``, ``steps:`` as a mapping)
and the earlier membrane format (``connectome:`` as the name, ``start:`` for the first step,
``steps:`` as a list of mappings with ``id``, ``preset:`` and Cypher ``query:`` strings).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from cabal.errors import ProtocolLoadError
from cabal.graph import schema
from cabal.membrane import templates
from cabal.membrane.protocol import (
    AGENT_PROVIDES,
    COMPLETE,
    STEP_TYPES,
    AskStep,
    BranchStep,
    CallStep,
    CreateStep,
    Dependency,
    LinkSpec,
    MomentSpec,
    NodeSpec,
    Protocol,
    Question,
    QueryStep,
    Step,
    UpdateStep,
    case_key,
)
from cabal.membrane.queries import ENRICHMENT_KINDS, parse_query
from cabal.membrane.validation import ExpectsField, object_of, parse_expects
from cabal.yaml_reader import LineDict, Problems, read_yaml

STEP_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
DOC_KEYS = ("description", "comment", "notes", "why")  # allowed anywhere, ignored
TOP_KEYS = ("protocol", "connectome", "name", "version", "description", "purpose", "steps", "start",
            "dependencies", "output", "summary", "skill", "tags", "notes")  # fmt: skip
COMMON_KEYS = ("id", "type", "next", "moment", *DOC_KEYS)
STEP_KEYS: dict[str, tuple[str, ...]] = {
    "ask": ("question", "expects", "questions", "for_each", "context_enrichment"),
    "query": ("query", "store_as", "preset"),
    "branch": ("condition", "then", "else", "cases", "default"),
    "call_protocol": ("protocol", "context", "on_complete"),
    "create": ("nodes", "links"),
    "update": ("node", "target", "fields"),
}
ACTIONS = ("spawn", "prompt", "fail")
MOMENT_STEPS = ("ask", "query", "update")  # the steps something is said or done in


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


# ------------------------------------------------------------------------- the loader


class _Builder:
    """One protocol file being read; collects every problem instead of stopping at the first."""

    def __init__(self, source: str, protocol_exists: Callable[[str], bool]) -> None:
        self.source = source
        self.protocol_exists = protocol_exists
        self.problems = Problems(source)
        self.name = ""

    def fail(self, message: str, **where: Any) -> None:
        self.problems.add(message, **where)

    # top level -------------------------------------------------------------------------

    def build(self, data: Any, expected_name: str | None) -> Protocol:
        if not isinstance(data, Mapping):
            self.fail(f"a protocol file must be a mapping, got {type(data).__name__}")
            raise ProtocolLoadError(self.problems.found)
        self._duplicates(data)
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
        if first in steps and not self.problems.found:
            self._check_paths(first, steps)
        self.problems.raise_if_any()
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
        )

    def _duplicates(self, value: Any, step: str | None = None, path: tuple = ()) -> None:
        """A key given twice anywhere in the file (YAML would silently keep the second)."""
        if isinstance(value, list):
            for item in value:
                self._duplicates(item, step, (*path, "[]"))
        if not isinstance(value, LineDict):
            return
        for key, line in value.duplicates:
            self.problems.add(f"{key!r} is given twice; the second would silently win", step=step, field=str(key),
                              line=line)
        for key, item in value.items():
            inner_step = key if path == ("steps",) and isinstance(key, str) else step
            self._duplicates(item, inner_step, (*path, key))

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
            self.fail(f"a {kind} step records no moment (ask, query and update steps do)", step=step_id, field="moment", at=raw)
        base = {
            "id": step_id,
            "type": kind,
            "next": self._target(raw, "next", step_id) or implicit_next,
            "line": getattr(raw, "line", None),
            "moment": self._moment(raw, step_id),
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

    def _moment(self, raw: Mapping, step_id: str) -> MomentSpec | None:
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
        self._templates(value.get("about"), step_id, "moment.about", raw)
        self._templates(value.get("prose"), step_id, "moment.prose", raw)
        return MomentSpec(
            type=str(value.get("type") or "answer"),
            agent_provides=tuple(provides) if isinstance(provides, list) and not unknown else AGENT_PROVIDES,
            about=value.get("about"),
            prose=value.get("prose"),
        )

    def _ask(self, step_id: str, raw: Mapping, base: dict, _: str) -> Step | None:
        question = raw.get("question")
        questions = self._questions(raw, step_id)
        if questions:
            expects = object_of(
                [ExpectsField(q.name, q.expects, q.required, _question_text(q)) for q in questions]
            )
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
        self._templates(question, step_id, "question", raw)
        enrichment = raw.get("context_enrichment")
        if enrichment is not None:
            enrichment = self._enrichment(enrichment, step_id, raw)
        for_each = self._for_each(raw, step_id)
        if expects is None:
            return None
        return AskStep(
            **base,
            question=question if isinstance(question, str) else "",
            expects=expects,
            questions=tuple(questions),
            for_each=for_each,
            context_enrichment=enrichment,
        )

    def _expects(self, raw_expects: Any, step_id: str, at: Mapping, prefix: str):
        expects, problems = parse_expects(raw_expects)
        for field, message in problems:
            self.fail(message, step=step_id, field=prefix + field, at=at)
        kind = expects.get("node_type") if expects is not None else None
        if kind is not None and kind not in schema.NODE_TYPES:  # an id answer could never match it
            self.fail(f"unknown node_type {kind!r}; known: {', '.join(sorted(schema.NODE_TYPES))}",
                      step=step_id, field=f"{prefix}expects.node_type", at=at)  # fmt: skip
        return expects

    def _questions(self, raw: Mapping, step_id: str) -> list[Question]:
        value = raw.get("questions")
        if value is None:
            return []
        if not isinstance(value, list) or not value:
            self.fail("'questions' must be a non-empty list", step=step_id, field="questions", at=raw)
            return []
        found = []
        for index, item in enumerate(value):
            field = f"questions.{index}"
            at = item if isinstance(item, LineDict) else raw
            if not isinstance(item, Mapping) or not _text(item.get("name")) or not _text(item.get("ask")):
                self.fail("each question needs a 'name' and an 'ask'", step=step_id, field=field, at=at)
                continue
            if any(q.name == item["name"] for q in found):
                self.fail(f"question {item['name']!r} is asked twice", step=step_id, field=field, at=at)
            keys = ("name", "ask", "why_it_matters", "good_answer", "bad_answer", "expects", "required", *DOC_KEYS)
            for key in item:
                if key not in keys:
                    self.fail(f"a question does not take {key!r}", step=step_id, field=f"{field}.{key}", at=at)
            required = item.get("required", True)
            if not isinstance(required, bool):
                self.fail(f"'required' must be true or false, got {required!r}", step=step_id, field=f"{field}.required", at=at)
            expects = self._expects(item.get("expects", {"type": "string"}), step_id, at, f"{field}.")
            self._templates(item.get("ask"), step_id, f"{field}.ask", at)
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
                    )
                )
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

    def _for_each(self, raw: Mapping, step_id: str, field: str = "for_each") -> str | None:
        value = raw.get("for_each")
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            self.fail(f"'for_each' must name a list in the context, got {value!r}", step=step_id, field=field, at=raw)
            return None
        value = value.strip()
        # ``for_each: behaviors`` and ``for_each: "{behaviors}"`` mean the same list.
        template = value if "{" in value else "{" + value + "}"
        if templates.parse(template).single is None:
            self.fail(f"'for_each' must be one reference such as {{answers}}, got {value!r}", step=step_id, field=field, at=raw)
            return None
        return template

    def _query(self, step_id: str, raw: Mapping, base: dict, _: str) -> Step | None:
        if ("query" in raw) == ("preset" in raw):
            self.fail("a query step needs exactly one of 'query' and 'preset'", step=step_id, field="query", at=raw)
            return None
        raw_query = raw["query"] if "query" in raw else {"preset": raw["preset"]}
        spec, problems = parse_query(raw_query)
        for field, message in problems:
            self.fail(message, step=step_id, field=field if "query" in raw else "preset", at=raw)
        if spec is not None and spec.verb != "cypher":
            self._templates(dict(spec.args), step_id, "query", raw)
        store_as = raw.get("store_as", step_id)
        if not isinstance(store_as, str) or not STEP_ID.match(store_as):
            self.fail(f"'store_as' must be a name, got {store_as!r}", step=step_id, field="store_as", at=raw)
        if spec is None or problems:
            return None
        return QueryStep(**base, query=spec, store_as=store_as)

    def _branch(self, step_id: str, raw: Mapping, base: dict, implicit_next: str) -> Step | None:
        condition = raw.get("condition")
        if not isinstance(condition, str) or not condition.strip():
            self.fail("a branch needs a 'condition' expression", step=step_id, field="condition", at=raw)
            return None
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
            return BranchStep(**base, condition=condition, cases=cases, default=self._target(raw, "default", step_id))
        then = self._target(raw, "then", step_id)
        if then is None:
            self.fail("a branch needs 'then' (and 'else') or 'cases'", step=step_id, field="then", at=raw)
            return None
        otherwise = self._target(raw, "else", step_id) or base["next"]
        return BranchStep(**base, condition=condition, then=then, otherwise=otherwise)

    def _call_protocol(self, step_id: str, raw: Mapping, base: dict, _: str) -> Step | None:
        name = raw.get("protocol")
        if not _text(name):
            self.fail("a call_protocol step needs 'protocol'", step=step_id, field="protocol", at=raw)
            return None
        if name != self.name and not self.protocol_exists(name):
            self.fail(f"calls protocol {name!r}, which does not exist", step=step_id, field="protocol", at=raw)
        context = raw.get("context") or {}
        if not isinstance(context, Mapping):
            self.fail("'context' must be a mapping", step=step_id, field="context", at=raw)
            context = {}
        self._templates(dict(context), step_id, "context", raw)
        on_complete = self._target(raw, "on_complete", step_id) or base["next"]
        return CallStep(**base, protocol=name, context=MappingProxyType(dict(context)), on_complete=on_complete)

    def _create(self, step_id: str, raw: Mapping, base: dict, _: str) -> Step | None:
        nodes = self._nodes(raw.get("nodes") or [], step_id, raw)
        links = self._links(raw.get("links") or [], step_id, raw)
        if not nodes and not links:
            self.fail("a create step needs 'nodes' or 'links'", step=step_id, field="nodes", at=raw)
        return CreateStep(**base, nodes=tuple(nodes), links=tuple(links))

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
            fields = {k: v for k, v in item.items() if k not in ("for_each", "condition")}
            kind = fields.get("node_type")
            if kind not in schema.NODE_TYPES:
                self.fail(f"unknown node_type {kind!r}; known: {', '.join(sorted(schema.NODE_TYPES))}",
                          step=step_id, field=f"{field}.node_type", at=at)  # fmt: skip
            else:
                missing = [f for f in ("id", "type", *schema.NODE_TYPES[kind].required) if f not in fields]
                if missing:
                    self.fail(f"a {kind} node needs {', '.join(missing)}", step=step_id, field=field, at=at)
            for key in fields:
                if not isinstance(key, str) or not schema.FIELD_NAME.match(key):
                    self.fail(f"field name {key!r} must be letters, digits and _", step=step_id, field=f"{field}.{key}", at=at)
            self._templates(fields, step_id, field, at)
            condition = self._optional_condition(item, step_id, field, at)
            found.append(
                NodeSpec(fields=MappingProxyType(fields), for_each=self._for_each(item, step_id, f"{field}.for_each"),
                         condition=condition)  # fmt: skip
            )
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
            if item.get("type") not in schema.LINK_TYPES:
                self.fail(f"unknown link type {item.get('type')!r}; known: {', '.join(sorted(schema.LINK_TYPES))}",
                          step=step_id, field=f"{field}.type", at=at)  # fmt: skip
            for end in ("from", "to"):
                if not _text(item.get(end)):
                    self.fail(f"a link needs '{end}'", step=step_id, field=f"{field}.{end}", at=at)
            for key in item:
                if key not in ("type", "from", "to", "properties", "for_each", "condition", *DOC_KEYS):
                    self.fail(f"a link does not take {key!r}", step=step_id, field=f"{field}.{key}", at=at)
            properties = item.get("properties") or {}
            self._templates({"from": item.get("from"), "to": item.get("to"), **properties}, step_id, field, at)
            found.append(
                LinkSpec(
                    type=str(item.get("type")),
                    source=str(item.get("from")),
                    target=str(item.get("to")),
                    properties=MappingProxyType(dict(properties)),
                    for_each=self._for_each(item, step_id, f"{field}.for_each"),
                    condition=self._optional_condition(item, step_id, field, at),
                )
            )
        return found

    def _update(self, step_id: str, raw: Mapping, base: dict, _: str) -> Step | None:
        node = raw.get("node", raw.get("target"))
        fields = raw.get("fields")
        if not _text(node):
            self.fail("an update step needs 'node' (the id to update)", step=step_id, field="node", at=raw)
        if not isinstance(fields, Mapping) or not fields:
            self.fail("an update step needs 'fields' to set", step=step_id, field="fields", at=raw)
            return None
        for key in fields:
            if not isinstance(key, str) or not schema.FIELD_NAME.match(key) or key in schema.IMMUTABLE_KEYS:
                self.fail(f"cannot update field {key!r}", step=step_id, field=f"fields.{key}", at=raw)
        self._templates({"node": node, **fields}, step_id, "fields", raw)
        return UpdateStep(**base, node=str(node), fields=MappingProxyType(dict(fields)))

    # shared checks --------------------------------------------------------------------

    def _templates(self, value: Any, step_id: str | None, field: str, at: Any) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                self._templates(item, step_id, f"{field}.{key}", at)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                self._templates(item, step_id, f"{field}.{index}", at)
        elif isinstance(value, str):
            for message in templates.check(value):
                self.fail(message, step=step_id, field=field, at=at)

    def _condition(self, condition: str, step_id: str, field: str, at: Any) -> None:
        try:
            templates.compile_condition(condition)
        except templates.ConditionSyntaxError as exc:
            self.fail(str(exc), step=step_id, field=field, at=at)

    def _optional_condition(self, item: Mapping, step_id: str, field: str, at: Any) -> str | None:
        condition = item.get("condition")
        if condition is None:
            return None
        if not isinstance(condition, str):
            self.fail(f"'condition' must be an expression, got {condition!r}", step=step_id, field=f"{field}.condition", at=at)
            return None
        self._condition(condition, step_id, f"{field}.condition", at)
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
        self._templates(summary, None, "summary", data)
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
            on_missing = item.get("on_missing", "fail")
            details = on_missing if isinstance(on_missing, Mapping) else {"action": on_missing}
            action = details.get("action")
            protocol = details.get("protocol", item.get("protocol"))
            message = details.get("message", item.get("message"))
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
            elif not _text(item.get("exists")):
                self.fail("a dependency needs 'exists' (an id) or a 'query'", field=field, at=at)
            self._templates({"exists": item.get("exists"), "message": message}, None, field, at)
            found.append(Dependency(id=item["id"], query=query, exists=item.get("exists"), action=str(action),
                                    protocol=protocol, message=message))  # fmt: skip
        return tuple(found)

    # the step graph -------------------------------------------------------------------

    def _check_targets(self, steps: Mapping[str, Step], raw_steps: Mapping[str, Any]) -> None:
        for step in steps.values():
            for field, target in _targets(step):
                if target != COMPLETE and target not in raw_steps:
                    self.fail(f"{field} points to {target!r}, which is not a step of this protocol",
                              step=step.id, field=field, at=raw_steps[step.id])  # fmt: skip

    def _check_paths(self, first: str, steps: Mapping[str, Step]) -> None:
        """Every step reachable from the start must be able to reach ``$complete``."""
        edges = {step.id: [t for _, t in _targets(step)] for step in steps.values()}
        reachable: set[str] = set()
        pending = [first]
        while pending:
            step_id = pending.pop()
            if step_id in reachable or step_id == COMPLETE:
                continue
            reachable.add(step_id)
            pending += edges[step_id]
        finishing = {COMPLETE}
        changed = True
        while changed:
            changed = False
            for step_id, targets in edges.items():
                if step_id not in finishing and any(t in finishing for t in targets):
                    finishing.add(step_id)
                    changed = True
        for step_id in sorted(reachable - finishing, key=list(steps).index):
            self.problems.add("no path from this step to $complete", step=step_id, line=steps[step_id].line)


def _targets(step: Step) -> list[tuple[str, str]]:
    """(field, step id) for every place a step can go next."""
    if isinstance(step, BranchStep):
        if step.cases is not None:
            found = [(f"cases.{key}", target) for key, target in step.cases.items()]
            return found + ([("default", step.default)] if step.default else [])
        return [("then", step.then), ("else", step.otherwise)]
    if isinstance(step, CallStep):
        return [("on_complete", step.on_complete)]
    return [("next", step.next)]


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
) -> Protocol:
    """Read and check one protocol. ``protocol_exists`` answers for call_protocol and spawn targets."""
    data = read_yaml(text, source)
    return _Builder(source, protocol_exists).build(data, expected_name)
