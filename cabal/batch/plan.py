"""What a batch is: many missions, each with its own id, planned from mission files or a batch file.

PLAN, as ``cabal batch PLAN`` reads it:

- a folder: its ``*.mission.yaml`` files;
- a glob of mission files (``missions/*.yaml``), or one mission file;
- a batch file (``*.batch.yaml``): one team, limits and model (``mission:``, a mission file
  without its request) with many ``requests:`` (a list, or a CSV/JSONL file and the column to
  read), optionally a ``matrix:`` of models x team sizes x round limits and a ``repeat:`` count.
  ``BatchSpec.model_json_schema()`` (``cabal schema batch``) documents every field.

```yaml
name: pricing-study
mission: {team: {operatives: 2}, rounds: 3, budget: {tokens: 200000}, model: claude-sonnet-4-6}
requests: {file: requests.csv, column: request}
matrix: {operatives: [1, 3]}
repeat: 2
budget: {tokens: 2000000, cost_usd: 20}      # the whole batch, on top of each mission's own
```

Ids are deterministic, so running the same plan again finds the same batch and missions: the
batch's id comes from where the plan is (its file, folder or glob), each mission's from the
batch, its place in the plan (its key) and its content. A mission file edited since is a new
mission; one unchanged keeps its id, and with it its graph and checkpoints.
"""

from __future__ import annotations

import csv
import dataclasses
import glob
import hashlib
import json
import os
import re
from dataclasses import dataclass
from functools import cached_property
from itertools import product
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cabal.errors import CabalError, ConfigError, ProtocolLoadError
from cabal.report.expect import Expectations
from cabal.llm.settings import ModelSettings
from cabal.rounds.mission import DEFAULT_KEY, MissionSpec, load_mission, located_problems, parse_mission, with_tool_folders
from cabal.yaml_reader import read_settings_file, read_text_file

BATCH_PREFIX = "b-"
BATCH_SUFFIXES = (".batch.yaml", ".batch.yml")
MISSION_GLOBS = ("*.mission.yaml", "*.mission.yml")
MAX_MISSIONS = 10_000


class RequestItem(BaseModel):
    """One request, with what only this mission has."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    request: str = Field(min_length=1, max_length=20_000, description="what the user wants the team to do")
    name: str | None = Field(None, max_length=80, description="the mission's name; default: the batch's, numbered")
    answers: list[str] | None = Field(None, description="replies to the Chair's questions; default: the mission's")
    expect: Expectations | None = Field(None, description="what `cabal eval` checks of this request's missions "
                                                          "(over the batch's `expect`)")


class RequestsFile(BaseModel):
    """Requests read from a table: one mission per row."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str = Field(min_length=1, description="a .csv file (with a header row) or a .jsonl file, relative to "
                                                "the batch file")
    column: str = Field(min_length=1, description="the column (CSV) or key (JSONL) holding the request")
    name_column: str | None = Field(None, description="a column naming each mission (optional)")


class Matrix(BaseModel):
    """Variants every request runs in: each combination is one mission."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: list[str | ModelSettings] | None = Field(None, min_length=1, description="models to compare")
    models: dict[str, list[str | ModelSettings]] | None = Field(
        None, description="a role's or agent's models to compare ({chair: [...]}, or written models.chair: [...]); "
                          "the keys of a mission file's `models`")
    operatives: list[int] | None = Field(None, min_length=1, description="team sizes to compare")
    rounds: list[int] | None = Field(None, min_length=1, description="round limits to compare")

    @model_validator(mode="before")
    @classmethod
    def _dotted_models(cls, data: Any) -> Any:
        """``models.chair: [...]`` is ``models: {chair: [...]}``."""
        if not isinstance(data, dict) or not any(isinstance(k, str) and k.startswith("models.") for k in data):
            return data
        folded = {k: v for k, v in data.items() if not (isinstance(k, str) and k.startswith("models."))}
        nested = dict(folded.get("models") or {})
        nested.update({k.removeprefix("models."): v for k, v in data.items()
                       if isinstance(k, str) and k.startswith("models.")})
        return {**folded, "models": nested}

    @field_validator("models")
    @classmethod
    def _some_of_each(cls, value: dict | None) -> dict | None:
        for key, choices in (value or {}).items():
            if not choices:
                raise ValueError(f"models.{key}: give at least one model")
        return value

    def role_models(self) -> list[tuple[str, dict[str, str | ModelSettings]]]:
        """Each combination of the roles' models: its key part (``-chair2``) and its entries."""
        models = self.models or {}
        keys = list(models)
        combos = product(*(enumerate(models[key], 1) for key in keys))
        return [("".join(f"-{key}{n}" for key, (n, _) in zip(keys, combo, strict=True) if len(models[key]) > 1),
                 {key: choice for key, (_, choice) in zip(keys, combo, strict=True)}) for combo in combos]


class BatchBudget(BaseModel):
    """The spend of the whole batch, on top of each mission's own budget."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tokens: int | None = Field(None, ge=1, description="input + output tokens for every mission together")
    cost_usd: float | None = Field(None, gt=0, description="model spend for every mission together, in US dollars")

    def spent(self, tokens: int, cost_usd: float) -> str | None:
        """Why this budget allows no further call, or None while some of it is left."""
        if self.tokens is not None and tokens >= self.tokens:
            return f"the batch's token budget is spent ({tokens:,} of {self.tokens:,} tokens)"
        if self.cost_usd is not None and cost_usd >= self.cost_usd:
            return f"the batch's cost budget is spent (${cost_usd:.4f} of ${self.cost_usd:.2f})"
        return None

    def merged(self, tokens: int | None = None, cost_usd: float | None = None) -> BatchBudget:
        """This budget with the limits given (not None) replaced."""
        return BatchBudget(tokens=tokens if tokens is not None else self.tokens,
                           cost_usd=cost_usd if cost_usd is not None else self.cost_usd)


class MissionTemplate(MissionSpec):
    """What every mission of the batch shares: a mission file without its request."""

    # A template refuses the request a mission file needs: the field narrows on purpose.
    request: None = Field(None, description="not here: each mission's request comes from `requests`")  # type: ignore[assignment]
    name: None = Field(None, description="not here: missions are named by their request or the batch")


class BatchSpec(BaseModel):
    """A batch file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(None, max_length=80, description="the batch's name; default: from the file name")
    mission: MissionTemplate = Field(default_factory=MissionTemplate,
                                     description="the team, rounds, budget, model and answers of every mission")
    requests: list[str | RequestItem] | RequestsFile = Field(
        description="the requests: a list (text, or {request, name, answers}), or {file, column} of a CSV/JSONL file")
    matrix: Matrix | None = Field(None, description="run every request in each combination of these variants")
    repeat: int = Field(1, ge=1, le=100, description="run each mission this many times (to compare outcomes)")
    budget: BatchBudget = Field(default_factory=BatchBudget, description="a budget for the whole batch")
    expect: Expectations | None = Field(None, description="what `cabal eval` checks of every mission (a request's "
                                                          "own `expect` overrides its fields)")


@dataclass(frozen=True)
class PlannedMission:
    """One mission of a batch, before or after it runs."""

    key: str  # its place in the plan, stable across runs: a file name, or r3-m1-o2-x1
    mission_id: str
    source: str  # the mission file, or the batch file (and row) it comes from
    spec: MissionSpec | None  # None when its file is broken
    error: str | None = None  # a broken file's located one-line error
    repeat: int = 1  # which run of the same mission (1..repeat)

    @property
    def request(self) -> str:
        return self.spec.request if self.spec is not None else ""

    @property
    def model(self) -> str:
        """The model, as a report names it (a script by its file name), and each role's or
        agent's own model after it (``a; chair: b``)."""
        if self.spec is None:
            return ""
        own = [f"{key}: {short_model(entry if isinstance(entry, str) else entry.name)}"
               for key, entry in (self.spec.models or {}).items()
               if key != DEFAULT_KEY and (isinstance(entry, str) or "name" in entry.model_fields_set)]
        return "; ".join([short_model(self.spec.model_settings().name), *own])


def short_model(name: str) -> str:
    """A model as a report or a list names it: a script by its file name, not its whole path."""
    return f"scripted:{Path(name.removeprefix('scripted:')).name}" if name.startswith("scripted:") else name


@dataclass(frozen=True)
class BatchPlan:
    batch_id: str
    name: str
    source: str  # what it was planned from: a file, folder or glob
    missions: tuple[PlannedMission, ...]
    budget: BatchBudget = BatchBudget()
    skipped: tuple[tuple[str, str], ...] = ()  # a folder's YAML files that are no mission files: (file, why)

    def mission(self, mission_id: str) -> PlannedMission:
        """The planned mission called ``mission_id`` (a KeyError for one the plan does not hold)."""
        return self._by_id[mission_id]

    @cached_property
    def _by_id(self) -> dict[str, PlannedMission]:  # a batch may hold thousands: no scan per lookup
        return {m.mission_id: m for m in self.missions}


# ------------------------------------------------------------------------------- planning


def load_plan(target: str | Path, *, repeat: int | None = None, model: str | None = None) -> BatchPlan:
    """The plan ``target`` names (see the module docstring); ``repeat`` overrides its count;
    ``model`` (``--model``) every mission's model, as ``cabal run --model`` does one's (a batch
    file that compares models refuses it).

    A mission file that is broken stays in the plan with its located error, so the others run
    and the report says what is wrong with it; a broken batch file is a ``ConfigError``."""
    text = str(target)
    path = Path(text).expanduser()
    if path.is_dir():
        files = sorted({f for pattern in MISSION_GLOBS for f in path.glob(pattern)})
        skipped = _skipped(path, files)
        if not files:
            raise ConfigError(f"{path}: no mission files ({' or '.join(MISSION_GLOBS)}) in this folder"
                              + (f"; skipped: {'; '.join(f'{name} ({why})' for name, why in skipped)}" if skipped else ""))
        plan = _plan_of_files(files, path.resolve(), str(path.resolve()), path.resolve().name, repeat, model)
        return dataclasses.replace(plan, skipped=skipped)
    if path.is_file() and path.name.endswith(BATCH_SUFFIXES):
        return _plan_of_batch_file(path, repeat, model)
    if path.is_file():
        return _plan_of_files([path], path.resolve().parent, str(path.resolve()),
                              path.name.removesuffix(".yaml").removesuffix(".yml").removesuffix(".mission"), repeat,
                              model)
    if glob.has_magic(text):
        files = sorted(Path(f) for f in glob.glob(str(path), recursive=True) if Path(f).is_file())
        if not files:
            raise ConfigError(f"{text}: no file matches this pattern")
        pattern = str(Path(text).expanduser().absolute())
        root = Path(os.path.commonpath([str(f.resolve().parent) for f in files]))
        return _plan_of_files(files, root, pattern, _pattern_name(text), repeat, model)
    raise ConfigError(f"{text}: no such file or folder",
                      hint="PLAN is a folder of *.mission.yaml files, a glob, a mission file or a *.batch.yaml file")


def parse_batch(data: dict, *, source: str = "<batch>") -> BatchSpec:
    try:
        return BatchSpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(located_problems(exc, data, source, "invalid batch file", BatchSpec)) from None


def plan_of_spec(spec: BatchSpec, *, base: Path | None = None, source: str | None = None,
                 repeat: int | None = None, model: str | None = None) -> BatchPlan:
    """The plan of a batch file's content; ``base`` resolves its relative paths (default: the
    current folder); ``source`` names it (default: ``inline:NAME``, which needs a name);
    ``model``: every mission's model (``--model``)."""
    if source is None and not spec.name:
        raise ConfigError("a batch given as data needs a name: its id comes from it")
    if model is not None and spec.matrix is not None and (spec.matrix.model or spec.matrix.models):
        raise ConfigError(f"--model {model}: {source or 'the batch'} compares models (matrix.model or "
                          "matrix.models); change the matrix instead")
    base = (base or Path.cwd()).resolve()
    source = source or f"inline:{spec.name}"
    name = spec.name or "batch"
    batch_id = _batch_id(name, source)
    requests = _requests(spec.requests, base, source)
    matrix = spec.matrix or Matrix()
    models: list[str | ModelSettings | None] = [*matrix.model] if matrix.model else [None]
    role_models = matrix.role_models()  # [("", {})] without a matrix of role models
    teams: list[int | None] = [*matrix.operatives] if matrix.operatives else [None]
    limits: list[int | None] = [*matrix.rounds] if matrix.rounds else [None]
    template = spec.mission.model_dump(exclude_unset=True, exclude={"request", "name"})
    count = len(requests) * len(models) * len(role_models) * len(teams) * len(limits) * (repeat or spec.repeat)
    if count > MAX_MISSIONS:
        raise ConfigError(f"{source}: the batch would have {count:,} missions (at most {MAX_MISSIONS:,})")
    missions = []
    for (r, item), (m, variant), (roles_key, roles), (o, operatives), (n, rounds) in product(
            enumerate(requests, 1), enumerate(models, 1), role_models, enumerate(teams, 1), enumerate(limits, 1)):
        data = {**template, "request": item.request, "name": item.name or f"{name}-{r}"}
        if item.answers is not None:
            data["answers"] = item.answers
        if variant is not None:
            data["model"] = variant.model_dump() if isinstance(variant, ModelSettings) else variant
        if roles:
            data["models"] = {**data.get("models", {}), **{
                key: entry.model_dump(include=entry.model_fields_set) if isinstance(entry, ModelSettings) else entry
                for key, entry in roles.items()}}
        if operatives is not None:
            data["team"] = {**data.get("team", {}), "operatives": operatives}
        if rounds is not None:
            data["rounds"] = rounds
        key = f"r{r}" + (f"-m{m}" if len(models) > 1 else "") + roles_key \
            + (f"-o{operatives}" if len(teams) > 1 else "") + (f"-n{rounds}" if len(limits) > 1 else "")
        where = f"{source} (request {r})"
        mission = _anchored(parse_mission(data, source=where), base)
        missions += _repeated(batch_id, key, where, mission.with_model(model) if model else mission, None,
                              repeat or spec.repeat)
    return BatchPlan(batch_id, name, source, tuple(missions), spec.budget)


def _skipped(folder: Path, missions: list[Path]) -> tuple[tuple[str, str], ...]:
    """The YAML files of ``folder`` that a batch of it does not run, each with why."""
    others = sorted(f for f in folder.iterdir() if f.suffix in (".yaml", ".yml") and f not in missions and f.is_file())
    return tuple((f.name, "a batch file: run it alone, cabal batch " + str(f) if f.name.endswith(BATCH_SUFFIXES)
                  else f"not named *.mission.yaml: rename it {f.name.removesuffix(f.suffix)}.mission{f.suffix} to run it")
                 for f in others)


def _plan_of_batch_file(path: Path, repeat: int | None, model: str | None) -> BatchPlan:
    data = read_settings_file(path, "batch file", "requests")
    data.setdefault("name", path.name.removesuffix(".yaml").removesuffix(".yml").removesuffix(".batch"))
    spec = parse_batch(data, source=str(path))
    return plan_of_spec(spec, base=path.resolve().parent, source=str(path.resolve()), repeat=repeat, model=model)


def _plan_of_files(files: list[Path], root: Path, source: str, name: str, repeat: int | None,
                   model: str | None = None) -> BatchPlan:
    batch_id = _batch_id(name, source)
    missions = []
    for file in files:
        resolved = file.resolve()
        key = str(resolved.relative_to(root)) if resolved.is_relative_to(root) else str(resolved)
        try:
            spec, base = load_mission(resolved)
            spec, error = _anchored(spec.with_model(model) if model else spec, base), None
        except CabalError as broken:
            spec, error = None, " ".join(str(broken).split())
        missions += _repeated(batch_id, key, str(resolved), spec, error, repeat or 1)
    return BatchPlan(batch_id, name, source, tuple(missions))


def _repeated(batch_id: str, key: str, source: str, spec: MissionSpec | None, error: str | None,
              repeat: int) -> list[PlannedMission]:
    planned = []
    for run in range(1, repeat + 1):
        run_key = f"{key}-x{run}" if repeat > 1 else key
        content = spec.model_dump_json() if spec is not None else error
        digest = _digest(batch_id, run_key, content)
        mission_id = f"m-{slug(spec.name if spec is not None and spec.name else Path(key).stem, 40)}-{digest}"
        planned.append(PlannedMission(run_key, mission_id, source, spec, error, run))
    return planned


def _requests(requests: list[str | RequestItem] | RequestsFile, base: Path, source: str) -> list[RequestItem]:
    if isinstance(requests, list):
        if not requests:
            raise ConfigError(f"{source}: `requests` is empty")
        return [RequestItem(request=r) if isinstance(r, str) else r for r in requests]
    return read_requests(base / requests.file, requests.column, requests.name_column)


def read_requests(path: Path, column: str, name_column: str | None = None) -> list[RequestItem]:
    """The requests of a CSV (header row) or JSONL file: one per row, located errors."""
    try:
        text = read_text_file(path).removeprefix("\ufeff")  # a spreadsheet's CSV may start with a byte-order mark
    except ProtocolLoadError as exc:  # unreadable, too large, binary
        raise ConfigError(f"requests file {exc}") from None
    if path.suffix.lower() == ".jsonl":
        rows = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{path}:{number}: not valid JSON: {exc.msg}") from None
            if not isinstance(row, dict):
                raise ConfigError(f"{path}:{number}: each line is a JSON object")
            rows.append((number, row))
    elif path.suffix.lower() == ".csv":
        reader = csv.DictReader(text.splitlines())
        # A row's line is its record's number + 1 (the header); fine for requests without line breaks.
        rows = [(number, row) for number, row in enumerate(reader, 2)]
        if reader.fieldnames is None:
            raise ConfigError(f"{path}: empty CSV file (a header row names the columns)")
        for wanted in filter(None, (column, name_column)):
            if wanted not in reader.fieldnames:
                raise ConfigError(f"{path}:1: no column {wanted!r} (columns: {', '.join(reader.fieldnames)})")
    else:
        raise ConfigError(f"{path}: a requests file is .csv or .jsonl")
    items = []
    for number, row in rows:
        request = row.get(column)
        if not isinstance(request, str) or not request.strip():
            raise ConfigError(f"{path}:{number}: no request in {column!r}")
        name = row.get(name_column) if name_column else None
        try:
            items.append(RequestItem(request=request.strip(), name=str(name).strip()[:80] if name else None))
        except ValidationError as exc:
            raise ConfigError(f"{path}:{number}: {exc.errors()[0]['msg']}") from None
    if not items:
        raise ConfigError(f"{path}: no requests")
    return items


def _anchored(spec: MissionSpec, base: Path) -> MissionSpec:
    """``spec`` with its relative ``scripted:`` paths and source paths made absolute against
    ``base``, so a worker anywhere finds the scripts and the sources. A source path is joined,
    not resolved: a '..' in it is still refused when the sources are read. A stdio tool server
    runs in ``base`` too (``with_tool_folders``)."""
    spec = with_tool_folders(spec, base)
    sources = [entry if entry.path is None or Path(entry.path).is_absolute()  # an earlier mission: no path
               else entry.model_copy(update={"path": str(base / entry.path)}) for entry in spec.sources]
    if sources != spec.sources:
        spec = spec.model_copy(update={"sources": sources})
    return spec.anchored(base)


# ------------------------------------------------------------------------------------ ids


def slug(text: str, limit: int) -> str:
    """Lower-case ASCII letters and digits, single hyphens between words, at most ``limit``."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return "-".join(words)[:limit].strip("-") or "mission"


def _digest(*parts: Any) -> str:
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:8]


def _batch_id(name: str, source: str) -> str:
    return f"{BATCH_PREFIX}{slug(name, 40)}-{_digest(source)}"


def _pattern_name(pattern: str) -> str:
    """A glob's name: its last folder without wildcards (``missions/*.yaml``: missions)."""
    for part in reversed(Path(pattern).parts[:-1]):
        if not glob.has_magic(part) and part not in (".", ".."):
            return part
    return "batch"
