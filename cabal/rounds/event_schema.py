"""The published JSON Schema of the ``--events`` lines, generated from the event dataclasses
themselves (``EVENT_TYPES``), so it cannot drift from what is written. A copy lives in
``docs/schemas/events.schema.json``; a test keeps it equal to this.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import TypeAdapter

from cabal.report.schema import SCHEMA_DIALECT
from cabal.rounds.events import EVENT_TYPES


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
