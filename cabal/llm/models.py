"""Build a chat model from a one-string spec: ``PROVIDER:MODEL`` (``openai:gpt-4.1-mini``,
``ollama:qwen3:8b``), a bare ``claude-*`` name, ``scripted:PATH``, ``py:MODULE:FACTORY`` or
``simulated``. The providers are ``cabal.llm.providers``' registry; this is the one door."""

from __future__ import annotations

import difflib
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel

from cabal.errors import ConfigError, MissingKey, ModelError, UnknownModel
from cabal.llm.providers import PROVIDERS, Provider, closest_providers, inferred_provider, provider_of
from cabal.llm.providers.failures import redact
from cabal.llm.settings import DEFAULT_MODEL, ModelSettings

_SPEC_FORMS = "PROVIDER:MODEL (openai:gpt-4.1-mini, ollama:qwen3:8b, ...), a Claude model name (claude-...), " \
              "simulated, scripted:PATH, py:MODULE:FACTORY or replay:ID_OR_PATH"


def make_model(spec: str = DEFAULT_MODEL, settings: ModelSettings | None = None, **options: Any) -> BaseChatModel:
    """The chat model ``spec`` names, built with ``settings`` (timeout, answer length,
    temperature, ``base_url``); ``options`` go to the model's class as they are (for
    ``scripted:``, ``latency_s``; for ``py:``, the factory's keywords).

    A provider's client never retries by itself: ``call_model`` does, under the settings'
    policy. Keys come only from the provider's variables (``cabal models`` lists them).
    Refused with one line: an unknown provider (the known ones, closest first), a bare name
    that is not Claude's (the provider it likely means), a missing key (its variable); a
    provider whose package is missing is a ``ConfigError`` naming the ``pip install``.
    ``replay:ID_OR_PATH[?mode=lenient&fallback=SPEC]``: a ``ReplayChatModel`` answering from a
    recorded mission's cassette (the fallback model built from ``SPEC`` like any other).
    """
    spec = spec.strip()
    if not spec:
        raise UnknownModel(f"empty model spec; expected {_SPEC_FORMS}")
    chosen, name = resolve(spec)
    settings = settings or ModelSettings(name=spec)
    if chosen.name == "replay":  # here, not in its family: the fallback is built like any model
        from cabal.llm.replay import replay_model

        return replay_model(name, lambda fallback: make_model(fallback, settings, **options))
    if chosen.family == "local":
        return chosen.module().build(chosen, name, settings, options)
    if not chosen.installed:
        raise ConfigError(f"model {spec!r} needs the {chosen.pip} package: {chosen.install}")
    family = chosen.module()
    if chosen.family == "anthropic":
        family.check_name(name)
    needs_key = family.needs_key(chosen, settings) if hasattr(family, "needs_key") else chosen.key_required
    if needs_key and chosen.key_variables and not chosen.key():
        raise MissingKey(name, chosen.label, chosen.key_variables[0], provider=chosen.name)
    try:
        model = family.build(chosen, name, settings, options)
    except (ValueError, TypeError) as error:
        # A validation error may echo every setting, the key among them.
        raise ModelError(redact(f"cannot configure model {name!r}: {error}"), provider=chosen.name) from None
    from cabal.llm.prices import remember

    remember(model_name(model), chosen, settings.price)
    return model


def resolve(spec: str) -> tuple[Provider, str]:
    """The provider a spec names and the rest of it (the model's name, a path or a factory)."""
    if spec == "simulated":
        return PROVIDERS["simulated"], ""
    prefix, colon, rest = spec.partition(":")
    if not colon:
        if spec.startswith("claude"):
            return PROVIDERS["anthropic"], spec
        raise UnknownModel(f"unknown model {spec!r}: {_bare_hint(spec)} (cabal models lists the providers)")
    if prefix in PROVIDERS and (rest or prefix == "simulated"):
        return PROVIDERS[prefix], rest
    known = ", ".join(closest_providers(prefix))
    raise UnknownModel(f"unknown model spec {spec!r}; expected {_SPEC_FORMS}. Known providers: {known}")


def _bare_hint(spec: str) -> str:
    """What a bare name without a provider likely meant: a misspelt ``simulated`` (or another
    provider's name, Cabal's own among them), else the provider its prefix names."""
    close = difflib.get_close_matches(spec.lower(), list(PROVIDERS), n=1, cutoff=0.75)
    if close:
        return f"did you mean {close[0]}?" if close[0] == "simulated" else f"did you mean {close[0]}:MODEL?"
    guess = inferred_provider(spec)
    return f"did you mean `{guess}:{spec}`?" if guess else f"name its provider: PROVIDER:{spec}"


def modules_to_preload(spec: str) -> list[str]:
    """The modules a process that will build ``spec``'s model may import ahead (a batch's
    worker server): the provider's LangChain package, or a ``py:`` factory's module."""
    try:
        chosen, rest = resolve(spec.strip())
    except ModelError:
        return []  # the mission will say what is wrong with it when it starts
    if chosen.name == "py":
        module = rest.rpartition(":")[0]
        return [module] if module and not module.endswith(".py") else []
    if chosen.name == "simulated":
        return ["cabal.rounds.simulated"]
    return [chosen.package] if chosen.package and chosen.installed else []


def model_name(model: Any) -> str:
    """The provider's name for ``model`` (what prices are looked up by), through bindings."""
    while hasattr(model, "bound"):
        model = model.bound
    for attribute in ("model", "model_name", "model_id", "azure_deployment"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return str(getattr(model, "_llm_type", type(model).__name__))


def redact_secrets(text: str) -> str:
    """``text`` with every provider's key (if set) blanked out."""
    return redact(text)


__all__ = ["make_model", "model_name", "modules_to_preload", "provider_of", "redact_secrets", "resolve"]
