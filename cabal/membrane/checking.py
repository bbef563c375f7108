"""Checking protocol files the way ``cabal protocols check`` does: every problem, in one pass.

Each file is loaded with the loader's strict name check, so besides what loading refuses it
reports each template name nothing provides (a misspelt ``{notez}``). A name a called protocol
leaves in the shared context counts as provided after the call: ``provided_names`` reads the
callees (the files being checked first, then the protocol library), transitively.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from cabal.errors import ProtocolLoadError, ProtocolProblem, ResourceNotFound
from cabal.membrane.library import ProtocolLibrary
from cabal.membrane.loader import load_protocol
from cabal.membrane.protocol import CallStep, Protocol
from cabal.yaml_reader import read_text_file


class _Callees:
    """The names each protocol leaves in the context, for the files given and the library."""

    def __init__(self, files: dict[str, Path], library: ProtocolLibrary) -> None:
        self.files = files
        self.library = library
        self.loaded: dict[str, Protocol | None] = {}
        self.names: dict[str, frozenset[str] | None] = {}

    def exists(self, name: str) -> bool:
        return name in self.files or self.library.exists(name)

    def protocol(self, name: str) -> Protocol | None:
        if name not in self.loaded:
            try:
                if name in self.files:
                    text = read_text_file(self.files[name])
                    self.loaded[name] = load_protocol(text, str(self.files[name]), protocol_exists=self.exists)
                else:
                    self.loaded[name] = self.library.get(name)
            except (ProtocolLoadError, ResourceNotFound):
                self.loaded[name] = None  # reported where it is checked, if it is
        return self.loaded[name]

    def provided_names(self, name: str, seen: frozenset[str] = frozenset()) -> frozenset[str] | None:
        """What protocol ``name`` and the ones it calls put into the context (None: unknown)."""
        if name in self.names:
            return self.names[name]
        if name in seen:  # a cycle: its own steps are counted where it starts
            return frozenset()
        protocol = self.protocol(name)
        if protocol is None:
            return None
        found = set(protocol.provides)
        callees = [(s.protocol, s.context) for s in protocol.steps.values() if isinstance(s, CallStep)]
        callees += [(d.protocol, {}) for d in protocol.dependencies if d.action == "spawn" and d.protocol]
        for callee, passed in callees:
            found |= set(passed)
            names = self.provided_names(callee, seen | {name})
            if names is None:
                self.names[name] = None
                return None
            found |= names
        self.names[name] = frozenset(found)
        return self.names[name]


def check_files(files: Iterable[Path], protocol_dirs: Iterable[str | Path] = ()) -> list[ProtocolProblem]:
    """Every problem of every file; a call target may be another file given or any known protocol."""
    files = list(files)
    callees = _Callees({path.stem: path for path in files}, ProtocolLibrary(protocol_dirs))
    problems: list[ProtocolProblem] = []
    for path in files:
        try:
            load_protocol(read_text_file(path), str(path), protocol_exists=callees.exists, expected_name=path.stem, strict_names=True,
                          callee_names=callees.provided_names)  # fmt: skip
        except ProtocolLoadError as exc:
            problems += exc.problems
    return problems
