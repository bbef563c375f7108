"""The protocols a membrane can run: built-in ``protocols/``, the user's folders, loaded strings.

A protocol is found by its file name (``add_invariant.yaml`` is ``add_invariant``); a later
folder overrides an earlier one, and a string loaded with ``load_string`` overrides both.
Files are read on first use and kept; ``call_protocol`` targets are checked against every
name the library knows. Parsed files are also shared by every library of the process (each
mission run builds its own membrane) until the file changes (``resources.parsed_once``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from cabal import resources
from cabal.errors import ProtocolLoadError, ResourceNotFound
from cabal.membrane.loader import load_protocol
from cabal.membrane.protocol import Protocol
from cabal.yaml_reader import read_text_file

SUFFIXES = (".yaml", ".yml")


class ProtocolLibrary:
    def __init__(self, protocol_dirs: Iterable[str | Path] = ()) -> None:
        self._files = resources.files_by_name("protocols", SUFFIXES, protocol_dirs)
        self._loaded: dict[str, Protocol] = {}

    def names(self) -> list[str]:
        return sorted(set(self._files) | set(self._loaded))

    def exists(self, name: str) -> bool:
        return name in self._loaded or name in self._files

    def get(self, name: str) -> Protocol:
        """The protocol of that name; ``ResourceNotFound`` or ``ProtocolLoadError`` otherwise."""
        protocol = self._loaded.get(name)
        if protocol is not None:
            return protocol
        path = self._files.get(name) if isinstance(name, str) else None
        if path is None:
            raise ResourceNotFound("protocol", str(name), known=self.names())
        # The names call_protocol may target are part of what a load checks: part of the key.
        names = frozenset(self.names())
        protocol = resources.parsed_once(path, lambda p: load_protocol(
            read_text_file(p), str(p), protocol_exists=names.__contains__, expected_name=name),
            "protocol", name, names)
        self._loaded[name] = protocol
        return protocol

    def add_string(self, text: str, source: str = "<string>") -> Protocol:
        protocol = load_protocol(text, source, protocol_exists=self.exists)
        self._loaded[protocol.name] = protocol
        return protocol

    def describe(self) -> list[dict]:
        """name, description, version and source of every protocol (a broken one says why)."""
        found = []
        for name in self.names():
            try:
                protocol = self.get(name)
            except ProtocolLoadError as exc:
                found.append({"name": name, "source": str(self._files.get(name, "")), "error": str(exc)})
                continue
            found.append(
                {"name": name, "description": protocol.description, "version": protocol.version, "source": protocol.source}
            )
        return found
