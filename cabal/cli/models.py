"""``cabal models``: the providers Cabal can build a model for, and what it knows of one model."""

from __future__ import annotations

import argparse
import json
from typing import Any

from cabal.limits import printable


def register(commands: Any) -> None:
    models = commands.add_parser(
        "models",
        help="list the model providers (package and key present?), or describe one model spec",
        description="Without SPEC: every provider, with its pip package and key variable and whether each is "
        "present here. With SPEC (openai:gpt-4.1-mini, claude-sonnet-4-6, ollama:qwen3:8b, ...): its provider, "
        "package, key variable, prices and context window, as far as Cabal knows them.",
    )
    models.add_argument("spec", nargs="?", metavar="SPEC", help="a model spec to describe")
    models.add_argument("--json", action="store_true", help="print as JSON")
    models.set_defaults(func=cmd_models)


def cmd_models(args: argparse.Namespace) -> int:
    from cabal.llm.providers import model_providers, readiness

    if args.spec:
        return _describe(args.spec, as_json=args.json)
    states = [readiness(p) for p in model_providers()]
    rows: list[dict[str, Any]] = [{"provider": s.provider.name, "package": s.provider.pip,
                                   "installed": s.provider.installed, "install": s.provider.install,
                                   "key": s.provider.key_variables[0] if s.provider.key_variables else None,
                                   "key_set": bool(s.provider.key()) if s.provider.key_variables else None,
                                   "ready": s.ready, "todo": s.todo or None} for s in states]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    table = [("provider", "package", "key", "ready")] + [
        (row["provider"], row["package"], _key_column(row), "yes" if row["ready"] else f"no: {row['todo']}")
        for row in rows]
    print("\n".join(_aligned(table)))
    print("also: simulated (the simulated team, offline), scripted:PATH, py:MODULE:FACTORY, replay:MISSION_ID")
    return 0


def _key_column(row: dict[str, Any]) -> str:
    if row["key"] is None:
        return "(none)" if row["provider"] == "ollama" else "(credential chain)"
    return f"{row['key']} {'set' if row['key_set'] else 'unset'}"


def _aligned(rows: list[tuple[str, ...]]) -> list[str]:
    """Rows as lines whose columns line up: each column as wide as its widest cell, two spaces apart."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)]
    return ["  ".join([*(cell.ljust(width) for cell, width in zip(row, widths)), row[-1]]).rstrip() for row in rows]


def _describe(spec: str, *, as_json: bool) -> int:
    from cabal.llm.models import resolve
    from cabal.llm.prices import FREE, context_window, database_price

    chosen, name = resolve(spec.strip())
    local = chosen.family == "local"
    price = FREE if local else (database_price(name, chosen.prices_id) if chosen.prices_id else None)
    facts = {
        "spec": spec, "provider": chosen.name, "model": name or None,
        "package": chosen.pip or None, "installed": chosen.installed, "install": None if local else chosen.install,
        "key": chosen.key_variables[0] if chosen.key_variables else None,
        "key_set": bool(chosen.key()) if chosen.key_variables else None,
        "price_per_mtok": price.model_dump() if price is not None else None,
        "context_window": None if local or not chosen.prices_id else context_window(name, chosen.prices_id),
        "tracing_system": chosen.system,
    }
    if as_json:
        print(json.dumps(facts, indent=2))
        return 0
    for label, value in facts.items():
        if value is None:
            value = "unknown" if label in ("price_per_mtok", "context_window") else "-"
        elif isinstance(value, dict):
            value = ", ".join(f"{k.removesuffix('_per_mtok')} ${v:g}" for k, v in value.items() if v is not None)
        print(printable(f"{label}: {value}"))
    return 0
