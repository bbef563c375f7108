"""Batches: many missions at once, on this machine's processes or a Dask cluster, with a report.

The public API, imported on first use so ``import cabal.batch.plan`` stays light:

- ``run_batch``, ``resume_batch``, ``batch_status``, ``batches`` (``api``) and their values,
  ``BatchResult`` (``runner``) and ``BatchReport``/``MissionRow`` (``report``);
- ``BatchSpec``, ``load_plan`` (``plan``): what a batch is, and the batch file.

The rest is the batch's own: ``worker`` (one mission in the process that runs it), ``local``
and ``cluster`` (the two pools of workers), ``limits`` (what workers share about model calls),
``store`` (the batch's durable state), ``events`` and ``progress`` (what a watcher sees),
``render`` and ``html`` (the report as md, json, csv and html).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cabal.lazy import lazy_names

if TYPE_CHECKING:  # the same names, typed for checkers; at run time each loads on first use
    from cabal.batch.api import run_batch, resume_batch, batch_status, batches
    from cabal.batch.runner import BatchResult
    from cabal.batch.report import BatchReport, MissionRow
    from cabal.batch.plan import BatchSpec, load_plan

_EXPORTS = {
    "run_batch": "api", "resume_batch": "api", "batch_status": "api", "batches": "api",
    "BatchResult": "runner", "BatchReport": "report", "MissionRow": "report",
    "BatchSpec": "plan", "load_plan": "plan",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_names(__name__, _EXPORTS)
