"""Build a chat model from a one-string spec (``claude-...``, ``scripted:PATH``, ``py:mod:fn``)."""

from __future__ import annotations

import importlib
import os
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel

from cabal.errors import ModelError
from cabal.llm.scripted import ScriptedChatModel
from cabal.llm.settings import DEFAULT_MODEL, ModelSettings

ANTHROPIC_DEFAULT_BASE_URL = "https://api.anthropic.com"

_SPEC_FORMS = "a Claude model name (claude-...), scripted:PATH, py:MODULE:FACTORY or replay:ID_OR_PATH"


def make_model(spec: str = DEFAULT_MODEL, settings: ModelSettings | None = None, **options: Any) -> BaseChatModel:
    """The chat model ``spec`` names.

    - ``scripted:PATH``: a ``ScriptedChatModel`` replaying a YAML/JSON script; ``options``
      go to it (``latency_s``).
    - ``py:MODULE:FACTORY``: whatever ``MODULE.FACTORY(**options)`` returns.
    - ``replay:ID_OR_PATH[?mode=lenient&fallback=SPEC]``: a ``ReplayChatModel`` answering from
      a recorded mission's cassette (the fallback model built from ``SPEC`` like any other).
    - anything else: a Claude model through ``ChatAnthropic``, with ``settings``' timeout,
      answer length and temperature; ``options`` override those or set other ``ChatAnthropic``
      fields. The client never retries by itself: ``call_model`` does, under the settings'
      policy. The API key comes only from ``ANTHROPIC_API_KEY``; ``ANTHROPIC_BASE_URL`` may
      point at another endpoint.
    """
    spec = spec.strip()
    if not spec:
        raise ModelError(f"empty model spec; expected {_SPEC_FORMS}")
    if ":" not in spec:
        return _claude(spec, settings or ModelSettings(name=spec), options)
    scheme, _, rest = spec.partition(":")
    if scheme == "scripted":
        return ScriptedChatModel.from_file(rest, **options)
    if scheme == "py":
        return _from_factory(rest, options)
    if scheme == "replay":  # a recorded mission's calls (llm/replay.py)
        from cabal.llm.replay import replay_model

        return replay_model(rest, lambda fallback: make_model(fallback, settings, **options))
    raise ModelError(f"unknown model spec {spec!r}; expected {_SPEC_FORMS}")


def model_name(model: Any) -> str:
    """The provider's name for ``model`` (what prices are looked up by), through bindings."""
    while hasattr(model, "bound"):
        model = model.bound
    for attribute in ("model", "model_name"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return str(getattr(model, "_llm_type", type(model).__name__))


def redact_secrets(text: str) -> str:
    """``text`` with the Anthropic API key (if set) blanked out."""
    api_key = os.environ.get("ANTHROPIC_API_KEY", "").strip()
    return text.replace(api_key, "[redacted]") if api_key else text


def _claude(name: str, settings: ModelSettings, options: dict[str, Any]) -> BaseChatModel:
    api_key = os.environ.get("ANTHROPIC_API_KEY", "").strip()
    if not api_key:
        raise ModelError(
            f"model {name!r} needs an Anthropic API key: set ANTHROPIC_API_KEY",
            provider="anthropic",
        )
    from langchain_anthropic import ChatAnthropic

    client: dict[str, Any] = {
        "max_tokens": settings.max_tokens,
        "timeout": settings.timeout_s,
        **({"temperature": settings.temperature} if settings.temperature is not None else {}),
        **options,
        "max_retries": 0,  # call_model retries, so that every wait is seen and reported
        "model": name,
        # Passed explicitly so ANTHROPIC_BASE_URL alone decides the endpoint: left unset,
        # ChatAnthropic would prefer ANTHROPIC_API_URL and may route to a LangSmith gateway.
        "base_url": os.environ.get("ANTHROPIC_BASE_URL", "").strip() or ANTHROPIC_DEFAULT_BASE_URL,
        "api_key": api_key,
    }
    try:
        return ChatAnthropic(**client)
    except (ValueError, TypeError) as error:
        # A validation error may echo every setting, the key among them.
        message = redact_secrets(f"cannot configure model {name!r}: {error}")
        raise ModelError(message, provider="anthropic") from None


def _from_factory(target: str, options: dict[str, Any]) -> BaseChatModel:
    module_name, _, factory_name = target.rpartition(":")
    if not module_name or not factory_name:
        raise ModelError(f"model spec 'py:{target}' must be py:MODULE:FACTORY")
    try:
        module = importlib.import_module(module_name)
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
