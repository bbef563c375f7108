"""Build a chat model from a one-string spec (``claude-...``, ``scripted:PATH``, ``py:mod:fn``)."""

from __future__ import annotations

import importlib
import os
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel

from cabal.errors import ModelError
from cabal.llm.scripted import ScriptedChatModel

DEFAULT_MODEL = "claude-sonnet-4-6"  # 4-5 is deprecated by the SDK (end of life 2026-11-30)
DEFAULT_MAX_TOKENS = 8192
DEFAULT_MAX_RETRIES = 4
# ChatAnthropic's default (None) means no timeout at all; this is the SDK's own default.
DEFAULT_TIMEOUT_S = 600.0
ANTHROPIC_DEFAULT_BASE_URL = "https://api.anthropic.com"

_SPEC_FORMS = "a Claude model name (claude-...), scripted:PATH or py:MODULE:FACTORY"


def make_model(spec: str = DEFAULT_MODEL, **options: Any) -> BaseChatModel:
    """The chat model ``spec`` names.

    - ``scripted:PATH``: a ``ScriptedChatModel`` replaying a YAML/JSON script; ``options``
      go to it (``latency_s``).
    - ``py:MODULE:FACTORY``: whatever ``MODULE.FACTORY(**options)`` returns.
    - anything else: a Claude model through ``ChatAnthropic``; ``options`` override
      ``max_tokens``, ``max_retries``, ``timeout`` or set other ``ChatAnthropic`` fields.
      The API key comes only from ``ANTHROPIC_API_KEY``; ``ANTHROPIC_BASE_URL`` may point
      at another endpoint.
    """
    spec = spec.strip()
    if not spec:
        raise ModelError(f"empty model spec; expected {_SPEC_FORMS}")
    if ":" not in spec:
        return _claude(spec, options)
    scheme, _, rest = spec.partition(":")
    if scheme == "scripted":
        return ScriptedChatModel.from_file(rest, **options)
    if scheme == "py":
        return _from_factory(rest, options)
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


def _claude(name: str, options: dict[str, Any]) -> BaseChatModel:
    api_key = os.environ.get("ANTHROPIC_API_KEY", "").strip()
    if not api_key:
        raise ModelError(
            f"model {name!r} needs an Anthropic API key: set ANTHROPIC_API_KEY",
            provider="anthropic",
        )
    from langchain_anthropic import ChatAnthropic

    settings: dict[str, Any] = {
        "max_tokens": DEFAULT_MAX_TOKENS,
        "max_retries": DEFAULT_MAX_RETRIES,
        "timeout": DEFAULT_TIMEOUT_S,
        **options,
        "model": name,
        # Passed explicitly so ANTHROPIC_BASE_URL alone decides the endpoint: left unset,
        # ChatAnthropic would prefer ANTHROPIC_API_URL and may route to a LangSmith gateway.
        "base_url": os.environ.get("ANTHROPIC_BASE_URL", "").strip() or ANTHROPIC_DEFAULT_BASE_URL,
        "api_key": api_key,
    }
    try:
        return ChatAnthropic(**settings)
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
    model = factory(**options)
    if not hasattr(model, "bind_tools"):
        raise ModelError(
            f"model spec 'py:{target}': {factory_name}() returned {type(model).__name__}, "
            "not a chat model (it has no bind_tools)"
        )
    return model
