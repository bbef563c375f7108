"""Cabal's own stand-ins for a model, which need no key and cost nothing: ``scripted:PATH`` (a
script replayed), ``py:MODULE:FACTORY`` (a chat model a Python function builds; MODULE may also
be the path of a ``.py`` file), ``simulated`` (the simulated team) and ``replay:ID_OR_PATH`` (a
recorded mission's calls, answered again from its cassette)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from cabal.errors import ModelError
from cabal.llm.providers import SIMULATED, SIMULATED_FACTORY, Provider

if TYPE_CHECKING:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import BaseMessage

    from cabal.llm.settings import ModelSettings


def build(provider: Provider, rest: str, settings: ModelSettings, options: dict[str, Any]) -> BaseChatModel:
    if provider.name == "scripted":
        from cabal.llm.scripted import ScriptedChatModel

        return ScriptedChatModel.from_file(rest, **options)
    assert provider.name != "replay", "a replay's fallback is another model: make_model builds it"
    target = SIMULATED_FACTORY if provider.name == "simulated" else rest
    model = from_factory(target, options)
    if target == SIMULATED_FACTORY and getattr(model, "model_name", None) == "cabal-function":
        model = model.model_copy(update={"model_name": SIMULATED})  # named as the user chose it, everywhere
    return model


def classify(provider: Provider, error: BaseException) -> ModelError | None:
    return None  # a stand-in's failure is Cabal's own (or the user's factory's): nothing to judge


def near_mission(spec: str, base: Path | None) -> str:
    """``spec`` with what it names next to the mission file (in ``base``) made absolute: a
    script's relative path; a cassette's (``replay:``); a ``py:`` module that is a file there (found before any installed
    module of that name), as the path of its file. So a resumed mission, or a batch's worker
    anywhere, finds them again."""
    if base is None:
        return spec
    if spec.startswith("scripted:"):
        path = Path(spec.removeprefix("scripted:"))
        return f"scripted:{(path if path.is_absolute() else base / path).resolve()}"
    if spec.startswith("replay:"):  # a cassette shipped beside its mission file (examples/foodbank)
        from cabal.llm.replay import parse_replay_spec, replay_spec

        ref, mode, fallback = parse_replay_spec(spec.removeprefix("replay:"))
        beside = base / ref
        if not Path(ref).is_absolute() and beside.exists():
            return replay_spec(str(beside.resolve()), mode, near_mission(fallback, base) if fallback else None)
        return spec
    if spec.startswith("py:") and spec.count(":") == 2:
        _, module, factory = spec.split(":")
        found = module_file(module, base)
        if found is not None:
            return f"py:{found}:{factory}"
    return spec


def module_file(module_name: str, base: Path) -> Path | None:
    """``MODULE``'s file next to the mission file (``base``), if there is one there."""
    candidate = base.joinpath(*module_name.split(".")).with_suffix(".py")
    return candidate.resolve() if candidate.is_file() else None


def from_factory(target: str, options: dict[str, Any]) -> BaseChatModel:
    module_name, _, factory_name = target.rpartition(":")
    if not module_name or not factory_name:
        raise ModelError(f"model spec 'py:{target}' must be py:MODULE:FACTORY")
    try:
        module = _module(module_name)
    except ImportError as error:
        raise ModelError(f"model spec 'py:{target}': cannot import {module_name!r}: {error}") from error
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        raise ModelError(f"model spec 'py:{target}': {module_name} has no callable {factory_name!r}")
    try:
        model = factory(**options)
    except Exception as error:  # noqa: BLE001 - a user's factory: any failure is reported, not raised
        summary = " ".join(str(error).split())[:200]
        raise ModelError(f"model spec 'py:{target}': {factory_name}() raised {type(error).__name__}: {summary}") from None
    if not hasattr(model, "bind_tools"):
        raise ModelError(
            f"model spec 'py:{target}': {factory_name}() returned {type(model).__name__}, "
            "not a chat model (it has no bind_tools)"
        )
    return model


def _module(name: str) -> ModuleType:
    """A module by name, or by the path of its ``.py`` file (loaded once per process)."""
    if not name.endswith(".py"):
        return importlib.import_module(name)
    path = Path(name)
    key = f"cabal_model_{abs(hash(str(path)))}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, path)
    if spec is None or spec.loader is None or not path.is_file():
        raise ImportError(f"no Python file {name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[key]
        raise
    return module


def prepare(messages: list[BaseMessage]) -> list[BaseMessage]:
    """Cabal's stand-ins play Claude, the default model: they see its prompt, breakpoints and all."""
    from cabal.llm.providers.anthropic import with_cache_breakpoints

    return with_cache_breakpoints(messages)
