"""An upstream protocol file written out in Cabal's own format: what ``cabal protocols convert``
writes for people who want to keep the translation the loader otherwise makes in memory.

The text is the translation ``dialect.translate`` gives the loader, dumped as YAML, so the file
written loads (as a canonical file) into the protocol the original loads into. A file that
does not load is refused with the original's located problems; nothing is written for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from cabal.errors import ProtocolLoadError, ProtocolProblem
from cabal.membrane import dialect, names
from cabal.membrane.loader import load_protocol
from cabal.yaml_reader import read_yaml


def convert_protocol(text: str, source: str) -> tuple[str, str] | None:
    """``(protocol name, the YAML text in Cabal's format)`` of an upstream file, None for a file
    already in Cabal's format, or a ``ProtocolLoadError`` located in the file as written."""
    data = read_yaml(text, source)
    if not dialect.is_upstream(data):
        return None
    protocol = load_protocol(text, source, protocol_exists=lambda name: True)  # calls are judged by `check`
    document = _plain(dialect.translate(data, source).document)
    if protocol.context is None and isinstance(protocol.first, str):
        # A canonical file declares what it reads from the context it starts with (the upstream
        # dialect leaves it implicit), so `cabal protocols check` holds it to that.
        starting = {read.name for read in names.unprovided(protocol.reads, protocol.steps, protocol.first, ())}
        document = _with_context(document, sorted(starting))
    converted = (f"# {protocol.name}: converted from {source} (upstream dialect) by `cabal protocols convert`.\n"
                 + yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=110))
    again = read_yaml(converted, source)
    if dialect.is_upstream(again):  # the translation must be Cabal's own format, or it is a bug here
        raise ProtocolLoadError([ProtocolProblem(source, "the converted text still reads as the upstream dialect")])
    return protocol.name, converted


def _with_context(document: dict[str, Any], context: list[str]) -> dict[str, Any]:
    """``document`` with ``context:`` declared after its name and description."""
    head = [key for key in ("protocol", "version", "description") if key in document]
    return {**{key: document[key] for key in head}, "context": context,
            **{key: value for key, value in document.items() if key not in head}}


def _plain(value: Any) -> Any:
    """The document without the loader's line bookkeeping: plain mappings and lists."""
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value
