"""Local models through Ollama's native API (``/api/chat``) and ``langchain-ollama``.

The server is ``base_url`` from the mission file, else ``OLLAMA_HOST`` (the ollama client's
own variable), else its default. No key, no price: a local model costs nothing Cabal can
count (a mission file may still give it a ``price:``). Ollama reuses its KV cache for a
repeated prefix by itself; it reports no cached tokens.
"""

from __future__ import annotations

import http.client
import os
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from langchain_core.messages import BaseMessage

from cabal.config import is_loopback
from cabal.errors import ModelError
from cabal.llm.providers import Provider
from cabal.llm.providers.failures import generic_failure, loaded, status_failure, timed_out, unreachable

if TYPE_CHECKING:
    from langchain_core.language_models.chat_models import BaseChatModel

    from cabal.llm.settings import ModelSettings


DEFAULT_HOST = "http://127.0.0.1:11434"  # the ollama client's own default
PROBE_S = 0.5  # a server on this machine answers in milliseconds; a listing must not wait longer


def server_url(environ: Any = None) -> str:
    """The server a model without a mission's ``base_url`` talks to: ``OLLAMA_HOST``, else Ollama's default."""
    env = os.environ if environ is None else environ
    host = str(env.get("OLLAMA_HOST", "")).strip() or DEFAULT_HOST
    return host if "://" in host else f"http://{host}"


def unready(provider: Provider, environ: Any = None) -> str | None:
    """Why Ollama's models cannot be used now (None: they can). A server on this machine is
    asked ``/api/version`` within half a second, without a proxy; one elsewhere is not probed
    (a listing sends nothing off this machine) and is taken as ready."""
    url = server_url(environ)
    parts = urlsplit(url)
    host = "127.0.0.1" if parts.hostname in (None, "0.0.0.0") else parts.hostname  # what the client reaches
    if not is_loopback(host):
        return None
    try:
        port = parts.port or 11434
        connection = http.client.HTTPConnection(host, port, timeout=PROBE_S)
        try:
            connection.request("GET", "/api/version")
            answered = connection.getresponse().status == 200
        finally:
            connection.close()
    except (OSError, ValueError, http.client.HTTPException):
        answered = False
    return None if answered else f"start Ollama (ollama serve): nothing answers at {url}"


def build(provider: Provider, name: str, settings: ModelSettings, options: dict[str, Any]) -> BaseChatModel:
    from langchain_ollama import ChatOllama

    host = settings.base_url or os.environ.get("OLLAMA_HOST", "").strip() or None  # None: the client's default
    client: dict[str, Any] = {
        "num_predict": settings.max_tokens,
        **({"temperature": settings.temperature} if settings.temperature is not None else {}),
        "client_kwargs": {"timeout": settings.timeout_s},
        **options,
        "model": name,
    }
    if host:
        client["base_url"] = host if "://" in host else f"http://{host}"
    return ChatOllama(**client)


def classify(provider: Provider, error: BaseException) -> ModelError | None:
    ollama = loaded("ollama")
    if ollama is not None and isinstance(error, ollama.ResponseError):
        if error.status_code < 100:  # the stream itself carried an error line
            return ModelError(f"ollama failed: {error.error}", provider="ollama", transient=True)
        return status_failure("ollama", error.status_code, str(error.error))
    httpx = loaded("httpx")
    if httpx is not None and isinstance(error, httpx.TimeoutException):
        return timed_out("ollama", str(error) or type(error).__name__)
    if httpx is not None and isinstance(error, (httpx.TransportError, httpx.HTTPStatusError)):
        return generic_failure("ollama", error) or unreachable("ollama", f"{type(error).__name__}: {error}")
    if isinstance(error, ConnectionError):  # the ollama client's own "Failed to connect to Ollama"
        return unreachable("ollama", str(error))
    return None


def prepare(messages: list[BaseMessage]) -> list[BaseMessage]:
    return messages  # no cache markup: this provider caches a repeated prefix by itself, or not at all
