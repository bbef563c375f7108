"""Procedure YAML -> a frozen ``Procedure``; every problem located by file, step, field and line.

A step without What/Why/How is refused here, when the procedure is loaded, so an incomplete
guide never reaches the graph or an agent (A3). All problems of a file are reported at once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from cabal.errors import ProtocolLoadError, ProtocolProblem, ResourceNotFound, SchemaError
from cabal.graph import schema
from cabal.yaml_reader import LineDict, Problems, read_text_file, read_yaml
from cabal.procedures.model import Guide, LinkRequirement, NodeRequirement, Procedure, Selector, Step, Validation
from cabal.resources import files_by_name

SUFFIXES = (".yaml", ".yml")
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
TOP_KEYS = ("procedure", "description", "steps", "completion")
STEP_KEYS = ("id", "title", "guide", "validation")
GUIDE_KEYS = ("what", "why", "how", "watch_out")
REQUIRED_GUIDE = ("what", "why", "how")
VALIDATION_KEYS = ("requires", "links")
REQUIRE_KEYS = ("node_type", "type", "min", "fields")
LINK_KEYS = ("type", "from", "to", "min")
SELECTOR_KEYS = ("node_type", "type")


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


# ---------------------------------------------------------------------------- parsing


def parse_procedure(text: str, source: str = "<string>", *, expected_name: str | None = None) -> Procedure:
    """Parse and check one procedure; raises ``ProtocolLoadError`` listing every problem."""
    problems = Problems(source)
    data = read_yaml(text, source)  # the membrane's reader: YAML 1.2 scalars, lines, repeated keys
    if not isinstance(data, LineDict):
        raise ProtocolLoadError([ProtocolProblem(source, "a procedure file must be a mapping with procedure, description, steps")])
    problems.unknown_keys(data, TOP_KEYS, step=None)

    name = data.get("procedure")
    if not isinstance(name, str) or not NAME.match(name):
        problems.add("'procedure' must be a name (letters, digits, _ and -)", at=data, key="procedure", field="procedure")
        name = None
    elif expected_name is not None and name != expected_name:
        problems.add(f"procedure {name!r} must live in a file named {name}.yaml", at=data, key="procedure",
                     field="procedure")  # fmt: skip
    description = _text(data.get("description"))
    if description is None:
        problems.add("'description' must be non-empty text", at=data, key="description", field="description")

    steps: list[Step] = []
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        problems.add("'steps' must be a non-empty list", at=data, key="steps", field="steps")
        raw_steps = []
    seen: set[str] = set()
    for position, raw in enumerate(raw_steps, start=1):
        step = _parse_step(raw, position, problems, seen)
        if step is not None:
            steps.append(step)

    completion = None
    if "completion" in data:
        completion = _parse_validation(data["completion"], data, "completion", None, problems)

    problems.raise_if_any()
    assert name is not None and description is not None
    return Procedure(name, description, tuple(steps), completion, source)


def _parse_step(raw: Any, position: int, problems: Problems, seen: set[str]) -> Step | None:
    label = f"#{position}"
    if not isinstance(raw, LineDict):
        problems.add(f"step {label} must be a mapping with id, title, guide", step=label)
        return None
    step_id = raw.get("id")
    if not isinstance(step_id, str) or not NAME.match(step_id):
        problems.add("'id' must be a name (letters, digits, _ and -)", at=raw, key="id", step=label, field="id")
        step_id = None
    elif step_id in seen:
        problems.add(f"step id {step_id!r} is used twice", at=raw, key="id", step=step_id, field="id")
    else:
        seen.add(step_id)
    where = step_id or label
    problems.unknown_keys(raw, STEP_KEYS, step=where)
    count = len(problems.found)

    title = _text(raw.get("title"))
    if title is None:
        problems.add("'title' must be non-empty text", at=raw, key="title", step=where, field="title")

    guide = raw.get("guide")
    texts: dict[str, str | None] = {}
    if not isinstance(guide, LineDict):
        problems.add("missing 'guide' with what, why and how: an agent must be able to do the step from it alone",
                     at=raw, key="guide", step=where, field="guide")  # fmt: skip
    else:
        problems.unknown_keys(guide, GUIDE_KEYS, step=where, prefix="guide.")
        for key in GUIDE_KEYS:
            texts[key] = _text(guide.get(key))
            if key in REQUIRED_GUIDE and texts[key] is None:
                present = key in guide
                problems.add(
                    f"guide.{key} {'is empty' if present else 'is missing'}: every step needs What, Why and How",
                    # A missing field is located at the step's guide: key, an empty one at itself.
                    at=guide if present else raw, key=key if present else "guide", step=where, field=f"guide.{key}",
                )
            elif key == "watch_out" and key in guide and texts[key] is None:
                problems.add("guide.watch_out must be non-empty text (or left out)", at=guide, key=key, step=where,
                             field="guide.watch_out")  # fmt: skip

    validation = None
    if "validation" in raw:
        validation = _parse_validation(raw["validation"], raw, "validation", where, problems)

    what, why, how = texts.get("what"), texts.get("why"), texts.get("how")
    if len(problems.found) > count or step_id is None or title is None or what is None or why is None or how is None:
        return None
    return Step(step_id, title, Guide(what, why, how, texts.get("watch_out")), validation)


def _parse_validation(raw: Any, parent: LineDict, key: str, step: str | None, problems: Problems) -> Validation | None:
    if not isinstance(raw, LineDict) or not (raw.get("requires") or raw.get("links")):
        problems.add(f"'{key}' must be a mapping with 'requires' and/or 'links' lists", at=parent, key=key, step=step,
                     field=key)  # fmt: skip
        return None
    problems.unknown_keys(raw, VALIDATION_KEYS, step=step, prefix=f"{key}.")
    requires: list[NodeRequirement] = []
    links: list[LinkRequirement] = []
    for part in VALIDATION_KEYS:
        items = raw.get(part, [])
        if not isinstance(items, list):
            problems.add(f"'{key}.{part}' must be a list", at=raw, key=part, step=step, field=f"{key}.{part}")
            continue
        for index, item in enumerate(items):
            where = f"{key}.{part}.{index}"
            if not isinstance(item, LineDict):
                problems.add("must be a mapping", at=raw, key=part, step=step, field=where)
                continue
            if part == "requires":
                requirement = _parse_requirement(item, where, step, problems)
                if requirement is not None:
                    requires.append(requirement)
            else:
                link = _parse_link(item, where, step, problems)
                if link is not None:
                    links.append(link)
    return Validation(tuple(requires), tuple(links))


def _parse_min(item: LineDict, where: str, step: str | None, problems: Problems) -> int | None:
    value = item.get("min", 1)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        problems.add("'min' must be a whole number of at least 1", at=item, key="min", step=step, field=f"{where}.min")
        return None
    return value


def _parse_selector(item: LineDict, where: str, step: str | None, problems: Problems, *, required: bool) -> Selector | None:
    node_type, subtype, ok = item.get("node_type"), item.get("type"), True
    if node_type is None and required:
        problems.add("'node_type' is required", at=item, step=step, field=f"{where}.node_type")
        ok = False
    elif node_type is not None:
        try:
            schema.node_type(node_type)
        except SchemaError as exc:
            problems.add(exc.message, at=item, key="node_type", step=step, field=f"{where}.node_type")
            ok = False
    if subtype is not None and _text(subtype) is None:
        problems.add("'type' must be non-empty text", at=item, key="type", step=step, field=f"{where}.type")
        ok = False
    return Selector(node_type, subtype) if ok else None


def _parse_requirement(item: LineDict, where: str, step: str | None, problems: Problems) -> NodeRequirement | None:
    problems.unknown_keys(item, REQUIRE_KEYS, step=step, prefix=f"{where}.")
    selector = _parse_selector(item, where, step, problems, required=True)
    minimum = _parse_min(item, where, step, problems)
    fields = item.get("fields", [])
    if not isinstance(fields, list) or not all(isinstance(f, str) and schema.FIELD_NAME.match(f) for f in fields):
        problems.add("'fields' must be a list of field names", at=item, key="fields", step=step, field=f"{where}.fields")
        return None
    if selector is None or minimum is None:
        return None
    return NodeRequirement(selector, minimum, tuple(fields))


def _parse_link(item: LineDict, where: str, step: str | None, problems: Problems) -> LinkRequirement | None:
    problems.unknown_keys(item, LINK_KEYS, step=step, prefix=f"{where}.")
    kind = item.get("type")
    try:
        schema.link_type(kind)
    except SchemaError as exc:
        problems.add(exc.message, at=item, key="type", step=step, field=f"{where}.type")
        kind = None
    ends: list[Selector | None] = []
    for end in ("from", "to"):
        raw = item.get(end, LineDict())
        if not isinstance(raw, LineDict):
            problems.add(f"'{end}' must be a mapping with node_type and/or type", at=item, key=end, step=step,
                         field=f"{where}.{end}")  # fmt: skip
            ends.append(None)
            continue
        problems.unknown_keys(raw, SELECTOR_KEYS, step=step, prefix=f"{where}.{end}.")
        ends.append(_parse_selector(raw, f"{where}.{end}", step, problems, required=False))
    minimum = _parse_min(item, where, step, problems)
    if kind is None or None in ends or minimum is None:
        return None
    return LinkRequirement(kind, ends[0], ends[1], minimum)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ files


def load_file(path: str | Path) -> Procedure:
    path = Path(path)
    return parse_procedure(read_text_file(path), str(path), expected_name=path.stem)


def load_procedure(name: str, dirs: Iterable[str | Path] = ()) -> Procedure:
    """A procedure by name (built-in folder, then ``dirs``; later folders win) or by file path."""
    if name.endswith(SUFFIXES) and Path(name).is_file():
        return load_file(name)
    found = files_by_name("procedures", SUFFIXES, dirs)
    if name not in found:
        raise ResourceNotFound("procedure", name, known=list(found))
    return load_file(found[name])


def list_procedures(dirs: Iterable[str | Path] = ()) -> list[dict]:
    """Every procedure on the search path, by name: name, description, steps, path, and problem.

    A file that does not load is listed with its problem (and no steps) rather than hiding the rest.
    """
    listed: list[dict] = []
    for name, path in sorted(files_by_name("procedures", SUFFIXES, dirs).items()):
        try:
            procedure = load_file(path)
        except ProtocolLoadError as exc:
            listed.append({"name": name, "description": None, "steps": [], "path": str(path), "problem": str(exc)})
            continue
        steps = [step.id for step in procedure.steps]
        listed.append({"name": name, "description": procedure.description, "steps": steps, "path": str(path), "problem": None})
    return listed
