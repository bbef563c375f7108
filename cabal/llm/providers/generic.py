"""Every other provider ``init_chat_model`` knows (Gemini, Bedrock, Mistral, Groq, ...):
its LangChain class built from the registry's record, its errors read through the shapes
every HTTP SDK shares (a status code with headers, a timeout, a dropped connection)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from cabal.errors import ModelError
from cabal.llm.providers import Provider
from cabal.llm.providers.failures import generic_failure

if TYPE_CHECKING:
    from langchain_core.language_models.chat_models import BaseChatModel

    from cabal.llm.settings import ModelSettings


def build(provider: Provider, name: str, settings: ModelSettings, options: dict[str, Any]) -> BaseChatModel:
    chat_class = getattr(importlib.import_module(provider.package), provider.chat_class)
    known = _field_names(chat_class)
    wanted: dict[str, Any] = {
        "max_tokens": settings.max_tokens,
        "timeout": settings.timeout_s,
        "temperature": settings.temperature,
        "max_retries": 0,  # call_model retries, so that every wait is seen and reported
        "base_url": settings.base_url,
    }
    client = {key: value for key, value in wanted.items() if value is not None and key in known}
    return chat_class(**client, **options, **{provider.model_field: name})


def _field_names(chat_class: type) -> set[str]:
    """The names a pydantic chat class accepts: its fields and their aliases."""
    fields = getattr(chat_class, "model_fields", {})
    return set(fields) | {f.alias for f in fields.values() if getattr(f, "alias", None)}


def classify(provider: Provider, error: BaseException) -> ModelError | None:
    return generic_failure(provider.name, error)


def prepare(messages: list[BaseMessage]) -> list[BaseMessage]:
    return messages  # no cache markup: this provider caches a repeated prefix by itself, or not at all
