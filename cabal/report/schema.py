"""The published JSON Schema of ``cabal export --format json`` (that of the ``--events`` lines is
``cabal.rounds.event_schema``, beside the events).

It is generated from the type itself (``MissionReport``), so the schema cannot drift from what
is written. A copy lives in ``docs/schemas/`` for tools that want a file; a test keeps it equal.
"""

from __future__ import annotations

from typing import Any

from cabal.report.model import REPORT_FORMAT, REPORT_FORMAT_VERSION, MissionReport

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def report_schema() -> dict[str, Any]:
    schema = MissionReport.model_json_schema(mode="serialization")
    return {"$schema": SCHEMA_DIALECT, "$id": f"urn:{REPORT_FORMAT}:{REPORT_FORMAT_VERSION}", **schema}
