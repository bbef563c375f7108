"""OpenAI, Azure OpenAI and every OpenAI-compatible server (vLLM, LM Studio, llama.cpp's
server, Ollama's ``/v1``) through ``langchain-openai``.

The endpoint is ``base_url`` from the mission file's ``model:`` mapping, else the SDK's own
``OPENAI_BASE_URL``. A server of one's own rarely checks the key; the SDK wants one all the
same, so a model with a ``base_url`` and no ``OPENAI_API_KEY`` sends a fixed word instead.
OpenAI caches a repeated prefix by itself and reports it as ``cached_tokens``, which
langchain-openai passes on as ``cache_read``: nothing to mark, nothing to read specially.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from cabal.errors import ModelError
from cabal.llm.providers import Provider
from cabal.llm.providers.failures import loaded, status_failure, timed_out, unreachable

if TYPE_CHECKING:
    from langchain_core.language_models.chat_models import BaseChatModel

    from cabal.llm.settings import ModelSettings

KEYLESS_SERVER_KEY = "no-key"  # what a server that checks no key receives


def endpoint(provider: Provider, settings: ModelSettings) -> str | None:
    variable = provider.base_url_variable
    return settings.base_url or (os.environ.get(variable, "").strip() if variable else "") or None


def build(provider: Provider, name: str, settings: ModelSettings, options: dict[str, Any]) -> BaseChatModel:
    import langchain_openai

    base_url = endpoint(provider, settings)
    client: dict[str, Any] = {
        "max_tokens": settings.max_tokens,
        "timeout": settings.timeout_s,
        **({"temperature": settings.temperature} if settings.temperature is not None else {}),
        **options,
        "max_retries": 0,  # call_model retries, so that every wait is seen and reported
        provider.model_field: name,
        "api_key": provider.key() or KEYLESS_SERVER_KEY,
    }
    if provider.name == "azure_openai":
        client["azure_endpoint"] = base_url
    elif base_url:
        client["base_url"] = base_url
    return getattr(langchain_openai, provider.chat_class)(**client)


def needs_key(provider: Provider, settings: ModelSettings) -> bool:
    """OpenAI's own API needs a key; a server of one's own (a ``base_url``) may not."""
    return provider.name != "openai" or endpoint(provider, settings) is None


def classify(provider: Provider, error: BaseException) -> ModelError | None:
    openai = loaded("openai")
    if openai is None:
        return None
    if isinstance(error, openai.APIStatusError):
        unset = provider.key_variables[0] if provider.key_variables and not provider.key() else None
        return status_failure(provider.name, error.status_code, _said(error), error.response.headers,
                              unset_key=unset)
    if isinstance(error, openai.APITimeoutError):
        return timed_out(provider.name, str(error.request.url))
    if isinstance(error, openai.APIConnectionError):
        cause = error.__cause__
        return unreachable(provider.name, f"{error.request.url}: {cause or error.message}")
    return None


def _said(error: Any) -> str:
    """What the server said: the body's ``error.message`` (OpenAI and most compatible servers),
    else its ``error`` string (Ollama's /v1), else the SDK's summary."""
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return str(error.message)


def prepare(messages: list[BaseMessage]) -> list[BaseMessage]:
    return messages  # no cache markup: this provider caches a repeated prefix by itself, or not at all
