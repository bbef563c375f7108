"""Starting a mission from the browser: a shipped example, the form, or an uploaded mission file,
each checked into a ``Launch`` (what ``Runner.start`` runs) or refused with a ``ConfigError``
that says what to fix.

A mission file read here goes through ``load_mission``, as with ``cabal run``. What a page may
not choose is the model's code or files: a ``scripted:PATH`` model reads a file of this machine
and a ``py:MODULE:FACTORY`` one imports code, so a form or an upload may name any provider's
model the server can build (``openai:gpt-4.1-mini``, ``ollama:qwen3:8b``, ``claude-...``) or
the simulated team, never those two. The examples run with their own scripts, which the server finds
in the package; the page names only the example.
"""

from __future__ import annotations

import re
import secrets
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from cabal.errors import CabalError, ConfigError
from cabal.private import open_private, private_folder
from cabal.resources import builtin_dir
from cabal.rounds.mission import MissionSpec, load_mission, parse_mission
from cabal.sources import Wanted, folder_wanted

SIMULATED = "simulated"
PAGE_REFUSED = ("scripted", "py")  # they read a file or import code of this machine
MODEL_SPEC = re.compile(r"[A-Za-z0-9][\w.@-]{0,80}(:[\w.:/@-]{1,160})?")
MAX_UPLOAD = 64 * 1024  # a mission file is a request and a few settings: 64 KiB is plenty
MAX_SOURCE_FILES = 10  # files the new-mission form takes as the mission's sources
MAX_SOURCE_BYTES = 2_000_000  # all of them together; the mission's own source_limits apply too
UPLOADS = "uploads"  # the workspace's folder of uploaded sources, one private folder per mission started
Number = TypeVar("Number", int, float)


@dataclass(frozen=True)
class Launch:
    """A mission to start: a mission file or its contents, and the model to run it with (None:
    the file's)."""

    mission: Path | dict
    model: str | None = None
    sources: tuple[Wanted, ...] = ()  # folders of uploaded files, read as the mission's sources


@dataclass(frozen=True)
class Example:
    """A mission shipped with Cabal (``examples/``)."""

    name: str
    path: Path
    spec: MissionSpec

    @property
    def asks(self) -> bool:
        """Whether its file answers the team's questions (so a person may answer them instead)."""
        return bool(self.spec.answers)


@cache
def examples() -> tuple[Example, ...]:
    found = []
    for path in sorted(builtin_dir("examples").glob("*/*.mission.yaml")):
        spec, _ = load_mission(path)
        found.append(Example(path.name.removesuffix(".mission.yaml"), path, spec))
    return tuple(found)


def example_launch(name: str, *, answer_myself: bool) -> Launch:
    """A shipped example; with ``answer_myself`` the file's unattended answers are left out, so
    the team's questions wait for the person in the page."""
    example = next((e for e in examples() if e.name == name), None)
    if example is None:
        raise ConfigError(f"no example named {name[:80]!r}; the examples are: "
                          + ", ".join(e.name for e in examples()))
    model = example.spec.model_settings().name
    if model.startswith("scripted:"):  # its script lies next to it; the spec alone would look in the current folder
        model = "scripted:" + str((example.path.parent / model.removeprefix("scripted:")).resolve())
    data = example.spec.model_dump(exclude_none=True)
    if example.spec.team.cards:  # its role cards lie next to it too
        data["team"]["cards"] = str((example.path.parent / example.spec.team.cards).resolve())
    # Its sources lie next to it too: read from its folder and named from it, as `cabal run` does.
    sources = tuple(example.spec.wanted_sources(example.path.parent))
    data.pop("sources", None)
    if answer_myself:
        data["answers"] = []
    return Launch(data, model, sources)


def form_launch(fields: Mapping[str, str]) -> Launch:
    """The new-mission form: request, name, team size, rounds, budget and model."""
    request = fields.get("request", "").strip()
    if not request:
        raise ConfigError("Say what you want the team to do: the request is empty.")
    data: dict = {"request": request, "team": {"operatives": _number(fields, "operatives", "Team size", int, 2)},
                  "rounds": _number(fields, "rounds", "Rounds", int, 3)}
    if name := fields.get("name", "").strip():
        data["name"] = name
    budget = {"tokens": _number(fields, "budget_tokens", "Token budget", int, None),
              "cost_usd": _number(fields, "budget_cost_usd", "Cost budget", float, None)}
    if any(value is not None for value in budget.values()):
        data["budget"] = {key: value for key, value in budget.items() if value is not None}
    model = _chosen_model(fields.get("model", "").strip(), fields.get("model_name", "").strip())
    checked_model(model)
    try:
        spec = parse_mission(data, source="the form")
    except ConfigError as error:
        raise ConfigError(str(error).removeprefix("the form: invalid mission: ")) from None
    return Launch(spec.model_dump(exclude_none=True), model)


def model_choices(environ: Any = None) -> list[str]:
    """The form's list of models: the simulated team, then one of each provider ``cabal models``
    finds ready (``providers.readiness``: package, key, a local server answering), its example
    model, or ``PROVIDER:`` for one without an example (the model's name is typed beside it)."""
    from cabal.llm.providers import ready_providers

    return [SIMULATED, *(provider.example_model or f"{provider.name}:" for provider in ready_providers(environ))]


def _chosen_model(listed: str, typed: str) -> str:
    """The form's model: what was typed (a whole spec, or a name for the listed ``PROVIDER:``), else the listed one."""
    if not typed:
        return listed
    return f"{listed}{typed}" if listed.endswith(":") and ":" not in typed and not typed.startswith("claude") else typed


def upload_launch(filename: str, data: bytes) -> Launch:
    """An uploaded mission file, read as ``cabal run`` reads one."""
    if not data:
        raise ConfigError("The mission file is empty.")
    if len(data) > MAX_UPLOAD:
        raise ConfigError(f"The mission file is over {MAX_UPLOAD:,} bytes, the most this page takes.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError("The mission file is not UTF-8 text.") from None
    # The file's own name (without folders) names the mission when its `name:` does not.
    stem = re.sub(r"[^a-z0-9-]+", "-", Path(filename or "mission").name.lower().removesuffix(".yaml")
                  .removesuffix(".yml").removesuffix(".mission")).strip("-")[:40] or "mission"
    shown = Path(filename or "mission").name[:120]
    with tempfile.TemporaryDirectory(prefix="cabal-upload-") as folder:
        path = Path(folder) / f"{stem}.mission.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            spec, _ = load_mission(path)
        except CabalError as error:  # say where the user knows the file as, not where it was read
            raise ConfigError(str(error).replace(str(path), shown)) from None
    checked_model(spec.model_settings().name)
    if spec.team.cards:  # as for a script: the page may not make the server read a folder of its disk
        raise ConfigError("A mission started from this page cannot name a folder of role cards (team.cards): the "
                          "cards would be read from this machine. Run it with `cabal run`, or put the cards in "
                          "the project's agents/ folder.")
    return Launch(spec.model_dump(exclude_none=True))


def saved_sources(home: Path, files: list[tuple[str, bytes]]) -> tuple[Wanted, ...]:
    """Files uploaded with the form, kept in a new private folder of the workspace (a resumed
    mission reads them again), named by their own last path part made plain; refused past
    ``MAX_SOURCE_FILES`` or ``MAX_SOURCE_BYTES``. The folder is what the mission reads: a source
    may not leave it."""
    files = [(name, data) for name, data in files if name or data]  # a form with no file chosen sends an empty part
    if not files:
        return ()
    if len(files) > MAX_SOURCE_FILES:
        raise ConfigError(f"{len(files)} files were uploaded as sources; at most {MAX_SOURCE_FILES} are taken.")
    total = sum(len(data) for _, data in files)
    if total > MAX_SOURCE_BYTES:
        raise ConfigError(f"The uploaded sources hold {total:,} bytes; at most {MAX_SOURCE_BYTES:,} in all are taken.")
    folder = private_folder(private_folder(home / UPLOADS) / secrets.token_hex(8))
    used: set[str] = set()
    for index, (name, data) in enumerate(files, start=1):
        plain = re.sub(r"[^A-Za-z0-9._ -]+", "-", Path(name or "").name).strip(" .-")[:100] or f"source-{index}"
        stem, dot, ext = plain.rpartition(".") if "." in plain else (plain, "", "")
        chosen, number = plain, 1
        while chosen.lower() in used:
            number += 1
            chosen = f"{stem}-{number}{dot}{ext}"
        used.add(chosen.lower())
        with open_private(folder / chosen, "wb") as handle:
            handle.write(data)
    return (folder_wanted(folder, "the uploaded files"),)


def checked_model(model: str) -> str:
    """``model`` if a page may choose it: a model of any provider (its spec is checked when the
    mission is built) or the simulated team; never one that reads a script or imports code."""
    from cabal.llm.models import resolve

    if model in ("py:cabal.rounds.simulated:team", SIMULATED):
        return SIMULATED
    try:
        chosen, _ = resolve(model) if MODEL_SPEC.fullmatch(model) else (None, "")
    except CabalError as error:
        raise ConfigError(str(error)) from None
    if chosen is not None and chosen.name not in PAGE_REFUSED:
        return model
    raise ConfigError(f"The model {model[:80]!r} cannot be chosen here: a mission started from this page runs a "
                      "provider's model (claude-..., openai:MODEL, ollama:MODEL, ...) or the simulated team "
                      f"({SIMULATED}). Models that read a script or import code from this machine run only from "
                      "the command line (cabal run).")


def _number(fields: Mapping[str, str], key: str, label: str, kind: type[Number], default: Number | None) -> Number | None:
    text = fields.get(key, "").strip()
    if not text:
        return default
    try:
        return kind(text)
    except ValueError:
        raise ConfigError(f"{label} must be a {'whole ' if kind is int else ''}number; got {text[:40]!r}.") from None
