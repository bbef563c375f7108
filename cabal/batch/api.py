"""The Python API of batches: run one, resume one, see where one is.

    from cabal.batch import run_batch
    result = run_batch("examples/batch/study.batch.yaml", workers=4)
    print(result.report.summary())          # 6 missions: 5 done, 1 halted
    for row in result.report.pending_questions:
        print(row.mission_id, row.pending_question)

A batch is durable: running the same plan again finds it by its id, skips what is finished and
resumes what was interrupted; ``resume_batch(id)`` does the same from the plan it stored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cabal.batch.plan import BatchPlan, BatchSpec, load_plan, plan_of_spec
from cabal.batch.report import BatchReport, collect
from cabal.batch.store import BatchStore, batch_ids
from cabal.errors import ConfigError

if TYPE_CHECKING:
    from cabal.batch.runner import BatchResult
from cabal.rounds.workspace import Workspace


def run_batch(plan: str | Path | BatchSpec | BatchPlan, *, workers: int | None = None, dask: str | None = None,
              max_concurrent: int | None = None, max_tokens: int | None = None, max_cost_usd: float | None = None,
              repeat: int | None = None, retries: int = 2, answers: Mapping[str, str] | None = None,
              home: str | Path | None = None, url: str | None = None,
              on_event: Callable[[Any], None] | None = None, record: bool = True,
              model: str | None = None) -> BatchResult:
    """Run every mission of ``plan`` that is not finished, and return where each one is.

    ``plan``: a folder of mission files, a glob, a mission file or a batch file (see
    ``cabal.batch.plan``), or a ``BatchSpec``/``BatchPlan`` built in Python.
    ``workers``: local processes (default: two per core, at most 16); ``dask``: ``local:N`` or
    a scheduler's address, to run on Dask instead. ``max_concurrent``: model calls in flight
    across all workers. ``max_tokens``/``max_cost_usd``: the batch's budget (overriding the
    batch file's), on top of each mission's own. ``repeat``: runs of each mission.
    ``answers``: mission id -> answer to its pending question. ``on_event``: every event of
    the batch (``cabal.batch.events``) and of its missions (``cabal.rounds.events``, each naming its mission).
    ``record``: keep each mission's model calls in its cassette (``--no-record`` turns it off).
    ``model``: every mission's model, over its file's (``--model``; a plan given as a
    ``BatchPlan`` is already planned and refuses it).

    Local workers are processes started by a fork server, which imports the calling script
    as ``__mp_main__``: a script that calls this at module level needs the usual
    ``if __name__ == "__main__":`` guard.
    """
    # The engine is imported to run a batch only: status and report read without it.
    from cabal.batch.cluster import check_address
    from cabal.batch.runner import RunOptions, execute

    if dask is not None:
        check_address(dask)  # before anything is planned or written
    if isinstance(plan, BatchSpec):
        plan = plan_of_spec(plan, repeat=repeat, model=model)
    elif not isinstance(plan, BatchPlan):
        plan = load_plan(plan, repeat=repeat, model=model)
    elif model is not None:
        raise ConfigError("model= applies to a plan still to be made (a file or a BatchSpec), not to a BatchPlan")
    plan = _with_budget(plan, max_tokens, max_cost_usd)
    options = RunOptions(workers, dask, max_concurrent, retries, dict(answers or {}), record)
    return execute(plan, options, home=home, url=url, on_event=on_event)


def resume_batch(batch_id: str, *, workers: int | None = None, dask: str | None = None,
                 max_concurrent: int | None = None, max_tokens: int | None = None, max_cost_usd: float | None = None,
                 retries: int = 2, answers: Mapping[str, str] | None = None, home: str | Path | None = None,
                 url: str | None = None, on_event: Callable[[Any], None] | None = None,
                 record: bool = True) -> BatchResult:
    """Go on with a batch from the plan it stored: interrupted missions resume, missions never
    started start, halted ones resume with their answer from ``answers``. A raised budget
    (``max_tokens``, ``max_cost_usd``) is kept for later runs."""
    workspace = Workspace.at(home, url, reading=True)
    plan = BatchStore.existing(workspace.home, batch_id).load_plan()
    return run_batch(_with_budget(plan, max_tokens, max_cost_usd), workers=workers, dask=dask,
                     max_concurrent=max_concurrent, retries=retries, answers=answers, home=home, url=url,
                     on_event=on_event, record=record)


def batch_status(batch_id: str, *, home: str | Path | None = None, url: str | None = None) -> BatchReport:
    """Every mission of the batch, where it is now (read from its graph)."""
    workspace = Workspace.at(home, url, reading=True)
    return collect(workspace, BatchStore.existing(workspace.home, batch_id))


def batches(*, home: str | Path | None = None, url: str | None = None) -> list[BatchReport]:
    """The batches of the workspace, the one run longest ago first."""
    workspace = Workspace.at(home, url, reading=True)
    return [collect(workspace, BatchStore(workspace.home, batch_id)) for batch_id in batch_ids(workspace.home)]


def _with_budget(plan: BatchPlan, tokens: int | None, cost_usd: float | None) -> BatchPlan:
    if tokens is None and cost_usd is None:
        return plan
    return replace(plan, budget=plan.budget.merged(tokens, cost_usd))
