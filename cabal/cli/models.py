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
    from cabal.llm.providers import model_providers

    if args.spec:
        return _describe(args.spec, as_json=args.json)
    rows: list[dict[str, Any]] = [{"provider": p.name, "package": p.pip, "installed": p.installed, "install": p.install,
             "key": p.key_variables[0] if p.key_variables else None,
             "key_set": bool(p.key()) if p.key_variables else None} for p in model_providers()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'provider':<24} {'package':<30} {'key':<22} ready")
    for row in rows:
        key = row["key"] or "(credential chain)" if row["key"] or row["provider"] != "ollama" else "(none)"
        key_state = "" if row["key_set"] is None else (" set" if row["key_set"] else " unset")
        ready = "yes" if row["installed"] and row["key_set"] is not False else (
            row["install"] if not row["installed"] else f"set {row['key']}")
        print(f"{row['provider']:<24} {row['package']:<30} {key + key_state:<22} {ready}")
    print("also: simulated (the simulated team, offline), scripted:PATH, py:MODULE:FACTORY")
    return 0


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
