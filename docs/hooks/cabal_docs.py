"""MkDocs hooks: the reference pages drawn from the code itself, so they cannot drift from it.

A page holds a marker comment where generated Markdown goes:

- ``<!-- cabal:cli -->``: every command of ``cabal`` from its argparse parser (usage, help, options);
- ``<!-- cabal:schema mission|batch|export|events -->``: a table of the fields, from the same JSON
  Schema ``cabal schema`` prints;
- ``<!-- cabal:events -->``: the event kinds in the order they come, their fields and docstrings.

``on_config`` also lists every ``docs/guide/*.md`` page under the nav's "Guides" section, so a
guide added to the folder is in the site without editing ``mkdocs.yml``.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

MARKER = re.compile(r"<!-- cabal:(\w+)(?: (\w+))? -->")
GUIDES = "Guides"


def on_config(config: Any) -> Any:
    guide_dir = Path(config["docs_dir"]) / "guide"
    guides = sorted(guide_dir.glob("*.md")) if guide_dir.is_dir() else []
    nav = config["nav"] or []
    for position, entry in enumerate(nav):
        if isinstance(entry, dict) and GUIDES in entry:
            listed = _listed(entry[GUIDES])
            pages = list(entry[GUIDES] or []) + [f"guide/{page.name}" for page in guides
                                                 if f"guide/{page.name}" not in listed]
            if pages:
                nav[position] = {GUIDES: pages}
            else:
                del nav[position]
            break
    return config


def _listed(section: list | None) -> set[str]:
    listed = set()
    for item in section or []:
        listed.update(item.values() if isinstance(item, dict) else [item])
    return listed


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return MARKER.sub(lambda match: generated(match.group(1), match.group(2)), markdown)


def generated(what: str, argument: str | None) -> str:
    if what == "cli":
        from cabal.cli import build_parser

        return cli_reference(build_parser())
    if what == "schema":
        return schema_table(json_schema(argument or "mission"))
    if what == "events":
        return events_table()
    raise ValueError(f"unknown docs marker cabal:{what}")


# ------------------------------------------------------------------------------------------- CLI

def cli_reference(parser: argparse.ArgumentParser) -> str:
    """Every command under ``parser``, depth first, as Markdown sections."""
    return "\n".join(_command_section(name, sub, help_text, level=2)
                     for name, sub, help_text in _subcommands(parser, "cabal"))


def _subcommands(parser: argparse.ArgumentParser, prefix: str) -> list[tuple[str, argparse.ArgumentParser, str]]:
    found = []
    for action in parser._actions:  # noqa: SLF001 - argparse keeps its subcommands here, with no public accessor
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}  # noqa: SLF001
            for name, sub in action.choices.items():
                found.append((f"{prefix} {name}", sub, helps.get(name, "")))
    return found


def _command_section(name: str, parser: argparse.ArgumentParser, help_text: str, level: int) -> str:
    lines = [f"{'#' * level} `{name}`", ""]
    if help_text:
        lines += [_sentence(help_text), ""]
    if parser.description and parser.description != help_text:
        lines += [parser.description, ""]
    lines += ["```text", parser.format_usage().removeprefix("usage: ").strip(), "```", ""]
    rows = [_option_row(action) for action in parser._actions  # noqa: SLF001
            if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))]  # noqa: SLF001
    if rows:
        lines += ["| argument | what it is |", "|---|---|", *rows, ""]
    for sub_name, sub, sub_help in _subcommands(parser, name):
        lines.append(_command_section(sub_name, sub, sub_help, level + 1))
    return "\n".join(lines)


def _option_row(action: argparse.Action) -> str:
    if action.option_strings:
        names = ", ".join(action.option_strings)
        if action.nargs != 0:
            names += f" {action.metavar or action.dest.upper()}"
    else:
        names = str(action.metavar or action.dest)
    text = action.help or ""
    if action.choices and not isinstance(action.choices, dict):
        text += f" (one of: {', '.join(map(str, action.choices))})"
    if action.default not in (None, False, argparse.SUPPRESS) and "default" not in text:
        text += f" (default: {action.default})"
    return f"| `{_cell(names)}` | {_cell(text)} |"


# --------------------------------------------------------------------------------------- schemas

def json_schema(what: str) -> dict[str, Any]:
    """The JSON Schema ``cabal schema WHAT`` prints."""
    from cabal.cli.missions import schema_of

    return schema_of(what)


def schema_table(schema: dict[str, Any]) -> str:
    rows = ["| field | type | default | what it is |", "|---|---|---|---|"]
    rows += _field_rows(schema, schema.get("$defs", {}), "")
    return "\n".join(rows) + "\n"


def _field_rows(schema: dict[str, Any], definitions: dict[str, Any], prefix: str) -> list[str]:
    rows = []
    required = set(schema.get("required", []))
    for name, field in schema.get("properties", {}).items():
        path = f"{prefix}{name}"
        nested = _object_definition(field, definitions)
        default = "required" if name in required else _default(field)
        rows.append(f"| `{path}` | {_cell(_type_of(field, definitions))} | {_cell(default)} | "
                    f"{_cell(field.get('description', ''))} |")
        if nested is not None:
            rows += _field_rows(nested, definitions, f"{path}.")
    return rows


def _object_definition(field: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any] | None:
    for option in [field, *field.get("anyOf", [])]:
        ref = option.get("$ref", "")
        if ref:
            target = definitions.get(ref.rsplit("/", 1)[-1], {})
            if target.get("properties"):
                return target
    return None


def _type_of(field: dict[str, Any], definitions: dict[str, Any]) -> str:
    if "$ref" in field:
        return definitions.get(field["$ref"].rsplit("/", 1)[-1], {}).get("type", "object")
    if "anyOf" in field:
        return " or ".join(_type_of(option, definitions) for option in field["anyOf"])
    if "const" in field:
        return f"`{field['const']}`"
    if "enum" in field:
        return " or ".join(f"`{value}`" for value in field["enum"])
    if field.get("type") == "array":
        return f"list of {_type_of(field.get('items', {}), definitions)}"
    return str(field.get("type", "any"))


def _default(field: dict[str, Any]) -> str:
    if "default" not in field:
        return ""
    value = field["default"]
    return "none" if value is None else f"`{value}`" if not isinstance(value, (dict, list)) or value else "empty"


# ---------------------------------------------------------------------------------------- events

def events_table() -> str:
    from cabal.report.schema import event_description, event_fields
    from cabal.rounds.events import EVENT_TYPES

    rows = ["| kind | fields | when |", "|---|---|---|"]
    for kind, event_type in EVENT_TYPES.items():
        rows.append(f"| `{kind}` | {', '.join(event_fields(event_type))} | {_cell(event_description(event_type))} |")
    return "\n".join(rows) + "\n"


def _cell(text: str) -> str:
    """Text that stays in one Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _sentence(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", ")")) else ".")
