"""The published JSON Schemas: of ``cabal export --format json`` and of the ``--events`` lines.

Both are generated from the types themselves (``MissionReport``, the event dataclasses), so a
schema cannot drift from what is written. Copies live in ``docs/schemas/`` for tools that want
a file; a test keeps them equal to these.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import TypeAdapter

from cabal.report.model import REPORT_FORMAT, REPORT_FORMAT_VERSION, MissionReport
from cabal.rounds.events import EVENT_TYPES

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def report_schema() -> dict[str, Any]:
    schema = MissionReport.model_json_schema(mode="serialization")
    return {"$schema": SCHEMA_DIALECT, "$id": f"urn:{REPORT_FORMAT}:{REPORT_FORMAT_VERSION}", **schema}


def events_schema() -> dict[str, Any]:
    """One line of ``--events``: any of the event kinds, told apart by ``kind``."""
    definitions: dict[str, Any] = {}
    kinds = []
    for kind, event_type in EVENT_TYPES.items():
        schema = TypeAdapter(event_type).json_schema(mode="serialization", ref_template="#/$defs/{model}")
        definitions.update(schema.pop("$defs", {}))
        schema["title"] = event_type.__name__
        schema["description"] = event_description(event_type)
        schema["properties"] = {"kind": {"const": kind}, **schema["properties"]}
        schema["required"] = ["kind", *[r for r in schema.get("required", []) if r != "at"], "at"]
        schema["properties"]["at"]["description"] = "when it happened, in seconds since the epoch"
        definitions[event_type.__name__] = schema
        kinds.append({"$ref": f"#/$defs/{event_type.__name__}"})
    return {"$schema": SCHEMA_DIALECT, "$id": "urn:cabal.events:1", "title": "Cabal mission event",
            "oneOf": kinds, "$defs": definitions}


def event_description(event_type: type) -> str:
    """An event type's docstring as one paragraph."""
    return " ".join((event_type.__doc__ or "").split())


def event_fields(event_type: type) -> list[str]:
    """The fields an event carries besides ``kind``, ``mission`` and ``at``."""
    return [f.name for f in dataclasses.fields(event_type) if f.name not in ("mission", "at")]
