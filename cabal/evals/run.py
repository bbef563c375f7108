"""An evaluation: every request of a batch file run K times on the batch machinery (local
processes or Dask), each run checked against its request's expectations and judged, the share
of runs meeting each expectation reported, and the whole stored so two evaluations (before and
after a change) can be compared.

Each evaluation is a batch of its own (its id from the file and the evaluation's id), so running
one again runs the missions again rather than finding the last evaluation's. Its result is
``<workspace>/evals/<id>.json`` (private).
"""

from __future__ import annotations

import json
import math
import re
import secrets
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cabal.errors import ConfigError, ResourceNotFound
from cabal.report.expect import Expectations, RunFacts, check

EVALS_FOLDER = "evals"
EVAL_PREFIX = "e-"
JUDGE_THREADS = 4
_REQUEST_OF_KEY = re.compile(r"r(\d+)")


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CheckResult(_Value):
    name: str
    passed: bool
    found: str


class JudgeScore(_Value):
    question: str
    score: int | None = Field(description="None when the judge gave no valid answer")
    reason: str


class RunRecord(_Value):
    """One run of one request: its mission, figures, checks and the judge's scores."""

    group: str = Field(description="the request (and matrix variant) it ran: the batch key without its repeat")
    request: str
    repeat: int
    mission_id: str
    state: str
    tokens: int
    cost_usd: float
    rounds: int
    wall_s: float
    checks: tuple[CheckResult, ...] = ()
    judge: tuple[JudgeScore, ...] = ()
    judge_cost_usd: float = 0.0
    baseline_id: str | None = Field(None, description="the baseline run of the same mission (eval --baseline)")
    versus: Literal["win", "tie", "loss"] | None = Field(None, description="the team against its baseline, judged "
                                                                           "blind in both orders")
    baseline_tokens: int = 0
    baseline_cost_usd: float = 0.0


class EvalResult(_Value):
    """A stored evaluation (``<workspace>/evals/<id>.json``)."""

    format: str = "cabal.eval"
    eval_id: str
    name: str
    source: str
    batch_id: str
    repeat: int
    min_pass: float
    started_at: float
    elapsed_s: float
    runs: tuple[RunRecord, ...]

    def groups(self) -> list[str]:
        return list(dict.fromkeys(run.group for run in self.runs))

    def runs_of(self, group: str) -> list[RunRecord]:
        return [run for run in self.runs if run.group == group]


# -------------------------------------------------------------------------------- summaries


class Spread(_Value):
    """A figure over the runs of a request: mean, p90, standard deviation, extremes."""

    n: int = Field(description="how many values (a judge scores only the runs it answered validly)")
    mean: float
    p90: float
    sd: float
    low: float
    high: float

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        if not values:
            return cls(n=0, mean=0.0, p90=0.0, sd=0.0, low=0.0, high=0.0)
        ordered = sorted(values)
        p90 = ordered[min(len(ordered) - 1, math.ceil(0.9 * len(ordered)) - 1)]  # nearest rank
        return cls(n=len(values), mean=statistics.fmean(values), p90=p90, sd=statistics.pstdev(values),
                   low=ordered[0], high=ordered[-1])


class ExpectationRate(_Value):
    name: str
    passed: int
    runs: int

    @property
    def rate(self) -> float:
        return self.passed / self.runs if self.runs else 0.0


class GroupSummary(_Value):
    group: str
    request: str
    runs: int
    expectations: tuple[ExpectationRate, ...]
    tokens: Spread
    cost_usd: Spread
    rounds: Spread
    wall_s: Spread
    judge: tuple[tuple[str, Spread], ...] = ()  # per question, over the runs the judge scored
    judge_cost_usd: float = 0.0


FIGURES = ("tokens", "cost_usd", "rounds", "wall_s")


def summarize(result: EvalResult) -> list[GroupSummary]:
    summaries = []
    for group in result.groups():
        runs = result.runs_of(group)
        names = list(dict.fromkeys(c.name for run in runs for c in run.checks))
        rates = tuple(ExpectationRate(name=name, runs=len(runs),
                                      passed=sum(1 for run in runs for c in run.checks if c.name == name and c.passed))
                      for name in names)
        questions = list(dict.fromkeys(s.question for run in runs for s in run.judge))
        judged = tuple((q, Spread.of([float(s.score) for run in runs for s in run.judge
                                      if s.question == q and s.score is not None])) for q in questions)
        summaries.append(GroupSummary(
            group=group, request=runs[0].request, runs=len(runs), expectations=rates,
            **{figure: Spread.of([float(getattr(run, figure)) for run in runs]) for figure in FIGURES},
            judge=judged, judge_cost_usd=sum(run.judge_cost_usd for run in runs)))
    return summaries


def failing(result: EvalResult) -> list[tuple[str, ExpectationRate]]:
    """Every (request, expectation) whose pass rate is below the evaluation's ``min_pass``."""
    return [(summary.group, rate) for summary in summarize(result) for rate in summary.expectations
            if rate.rate < result.min_pass]


# ---------------------------------------------------------------------------------- running


def load_expectations(path: Path) -> tuple[Any, dict[int, Expectations]]:
    """The batch file's spec, and each request's expectations (its own over the batch's), by
    the request's number in the file (1 first)."""
    from cabal.batch.plan import RequestItem, parse_batch, read_requests
    from cabal.yaml_reader import read_settings_file

    data = read_settings_file(path, "batch file", "requests")
    data.setdefault("name", path.name.removesuffix(".yaml").removesuffix(".yml").removesuffix(".batch"))
    spec = parse_batch(data, source=str(path))
    if isinstance(spec.requests, list):
        items = [RequestItem(request=r) if isinstance(r, str) else r for r in spec.requests]
    else:
        items = read_requests(path.resolve().parent / spec.requests.file, spec.requests.column)
    expectations = {number: _anchored((item.expect.over(spec.expect) if item.expect else spec.expect)
                                      or Expectations(), path.resolve().parent)
                    for number, item in enumerate(items, 1)}
    if all(expect.empty for expect in expectations.values()):
        raise ConfigError(f"{path}: no request expects anything",
                          hint="add `expect:` to the batch file (for every request) or to a request")
    return spec, expectations


def _anchored(expect: Expectations, base: Path) -> Expectations:
    """``expect`` with its judge's model built once (a bad spec is an error before anything
    runs) and a relative ``scripted:`` path made absolute against the batch file's folder."""
    from cabal.llm import make_model

    if expect.judge is None:
        return expect
    spec = expect.judge.model
    if spec.startswith("scripted:") and not Path(spec.removeprefix("scripted:")).is_absolute():
        spec = f"scripted:{(base / spec.removeprefix('scripted:')).resolve()}"
    make_model(spec)
    return expect.model_copy(update={"judge": expect.judge.model_copy(update={"model": spec})})


def run_eval(batch_file: str | Path, *, repeat: int = 1, min_pass: float = 0.8, workers: int | None = None,
             dask: str | None = None, home: str | Path | None = None, url: str | None = None,
             on_event: Callable[[Any], None] | None = None, baseline_judge: str | None = None) -> EvalResult:
    """Run every request of ``batch_file`` ``repeat`` times, check and judge each run, store the result.
    ``baseline_judge``: also run each mission's baseline (one call of its model) and judge the
    team against it blind with that model (``cabal eval --baseline --judge-model SPEC``)."""
    from cabal.batch.api import run_batch
    from cabal.batch.plan import plan_of_spec, slug
    from cabal.rounds.workspace import Workspace

    path = Path(batch_file).expanduser()
    if not path.is_file():
        raise ConfigError(f"{path}: no such batch file")
    spec, expectations = load_expectations(path)
    eval_id = f"{EVAL_PREFIX}{slug(spec.name or 'eval', 40)}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
    plan = plan_of_spec(spec, base=path.resolve().parent, source=f"{path.resolve()}#{eval_id}", repeat=repeat)
    started, clock = time.time(), time.monotonic()
    batch = run_batch(plan, workers=workers, dask=dask, home=home, url=url, on_event=on_event)
    workspace = Workspace.at(home, url)
    planned = {m.mission_id: m for m in plan.missions}
    with ThreadPoolExecutor(JUDGE_THREADS) as pool:
        runs = list(pool.map(lambda row: _versus(workspace, _run_record(workspace, row, planned[row.mission_id],
                                                                          expectations, repeat > 1), baseline_judge),
                             batch.report.rows))
    result = EvalResult(eval_id=eval_id, name=spec.name or path.stem, source=str(path.resolve()),
                        batch_id=plan.batch_id, repeat=repeat, min_pass=min_pass, started_at=started,
                        elapsed_s=round(time.monotonic() - clock, 3), runs=tuple(runs))
    save(workspace.home, result)
    return result


def _run_record(workspace: Any, row: Any, planned: Any, expectations: dict[int, Expectations],
                repeated: bool) -> RunRecord:
    from cabal.evals.judge import JUDGE_CASSETTE, judge_mission
    from cabal.rounds.workspace import mission_report

    request = _REQUEST_OF_KEY.match(planned.key)
    assert request is not None, f"a planned key starts with its request's place (r1-...), not {planned.key!r}"
    expect = expectations[int(request[1])]
    group = re.sub(r"-x\d+$", "", planned.key) if repeated else planned.key
    try:
        report = mission_report(row.mission_id, home=workspace.home, url=workspace.url)
    except ResourceNotFound:  # never started (refused, a broken file)
        report = None
    checks = [CheckResult(name=c.name, passed=c.passed, found=c.found)
              for c in check(expect, report, RunFacts(row.state, row.duration_s))]
    scores, judge_cost = [], 0.0
    if expect.judge is not None:
        if report is None:
            scores = [JudgeScore(question=q, score=None, reason="no mission to judge") for q in expect.judge.questions]
        else:
            folder = workspace.private_mission_dir(row.mission_id)
            judgement = judge_mission(expect.judge, report, record_to=folder / JUDGE_CASSETTE)
            judge_cost = judgement.cost_usd
            if judgement.scores:
                scores = [JudgeScore(question=q, score=s, reason=reason)
                          for q, (s, reason) in zip(expect.judge.questions, judgement.scores)]
            else:
                scores = [JudgeScore(question=q, score=None, reason=f"no valid answer: {judgement.problems}")
                          for q in expect.judge.questions]
        checks += [CheckResult(name=f"judge: {s.question}", passed=s.score is not None
                               and s.score >= expect.judge.min_score, found=f"{s.score}: {s.reason}")
                   for s in scores]
    return RunRecord(group=group, request=row.request, repeat=planned.repeat, mission_id=row.mission_id,
                     state=row.state, tokens=row.tokens, cost_usd=row.cost_usd, rounds=row.round,
                     wall_s=row.duration_s, checks=tuple(checks), judge=tuple(scores), judge_cost_usd=judge_cost)


def _versus(workspace: Any, record: RunRecord, judge: str | None) -> RunRecord:
    """``record`` with its mission judged against a baseline of the same mission file, when asked."""
    if judge is None or record.state != "done":
        return record
    from cabal.evals.versus import compare_missions
    from cabal.rounds.baseline import run_baseline

    with workspace.graph(record.mission_id) as graph:
        spec = json.loads(str((graph.get(record.mission_id) or {}).get("spec") or "{}"))
    baseline = run_baseline(spec, home=workspace.home, url=workspace.url)
    comparison = compare_missions(record.mission_id, baseline.mission_id, judge, home=workspace.home, url=workspace.url)
    return record.model_copy(update={
        "baseline_id": baseline.mission_id, "versus": {"A": "win", "B": "loss"}.get(comparison.overall, "tie"),
        "baseline_tokens": baseline.usage.total_tokens, "baseline_cost_usd": baseline.cost_usd})


class VersusSummary(_Value):
    """The team against one call of its model, over an evaluation's runs (``--baseline``)."""

    wins: int
    ties: int
    losses: int
    token_ratio: float | None = Field(description="the team's tokens over its baselines', all runs together")
    dollar_ratio: float | None


def versus_summary(result: EvalResult) -> VersusSummary | None:
    judged = [run for run in result.runs if run.versus is not None]
    if not judged:
        return None
    tokens, baseline_tokens = sum(r.tokens for r in judged), sum(r.baseline_tokens for r in judged)
    dollars, baseline_dollars = sum(r.cost_usd for r in judged), sum(r.baseline_cost_usd for r in judged)
    return VersusSummary(wins=sum(r.versus == "win" for r in judged), ties=sum(r.versus == "tie" for r in judged),
                         losses=sum(r.versus == "loss" for r in judged),
                         token_ratio=round(tokens / baseline_tokens, 3) if baseline_tokens else None,
                         dollar_ratio=round(dollars / baseline_dollars, 3) if baseline_dollars else None)


# ---------------------------------------------------------------------------------- storage


def save(home: Path, result: EvalResult) -> Path:
    from cabal.private import private_folder, write_private

    target = private_folder(Path(home) / EVALS_FOLDER) / f"{result.eval_id}.json"
    write_private(target, result.model_dump_json(indent=1))
    return target


def load(reference: str, home: str | Path | None = None) -> EvalResult:
    """A stored evaluation by its id (in the workspace) or by the path of its JSON file."""
    from cabal.config import resolve_home

    path = Path(reference).expanduser()
    if not path.is_file():
        folder = resolve_home(home) / EVALS_FOLDER
        path = folder / f"{reference}.json"
        if not path.is_file():
            known = sorted(p.stem for p in folder.glob(f"{EVAL_PREFIX}*.json")) if folder.is_dir() else []
            raise ResourceNotFound("evaluation", reference, known=known, closest_first=True)
    try:
        return EvalResult.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise ConfigError(f"{path}: not a stored evaluation ({' '.join(str(error).split())[:200]})") from None


# --------------------------------------------------------------------------------- comparing


class Change(_Value):
    """One figure of one request in two evaluations, and whether its change exceeds the spread
    the runs of either show (a pass rate's binomial standard error, a figure's deviation)."""

    group: str
    what: str
    a: float | None
    b: float | None
    spread: float
    marked: bool


def compare(a: EvalResult, b: EvalResult) -> list[Change]:
    changes: list[Change] = []
    by_group_a = {s.group: s for s in summarize(a)}
    by_group_b = {s.group: s for s in summarize(b)}
    for group in list(dict.fromkeys([*by_group_a, *by_group_b])):
        sa, sb = by_group_a.get(group), by_group_b.get(group)
        rates_a = {r.name: r for r in sa.expectations} if sa else {}
        rates_b = {r.name: r for r in sb.expectations} if sb else {}
        for name in dict.fromkeys([*rates_a, *rates_b]):
            ra, rb = rates_a.get(name), rates_b.get(name)
            spread = max((math.sqrt(r.rate * (1 - r.rate) / r.runs) for r in (ra, rb) if r and r.runs), default=0.0)
            changes.append(_change(group, f"pass rate: {name}", ra.rate if ra else None, rb.rate if rb else None,
                                   spread))
        for figure in FIGURES:
            fa, fb = (getattr(s, figure) if s else None for s in (sa, sb))
            spread = max((f.sd for f in (fa, fb) if f), default=0.0)
            changes.append(_change(group, f"mean {figure}", fa.mean if fa else None, fb.mean if fb else None, spread))
    return changes


def _change(group: str, what: str, a: float | None, b: float | None, spread: float) -> Change:
    marked = a is not None and b is not None and abs(b - a) > spread + 1e-9
    return Change(group=group, what=what, a=a, b=b, spread=round(spread, 6), marked=marked)
