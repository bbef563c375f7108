"""One failure policy for every provider: what a failed call was, in ``ModelError`` terms.

A family module names its SDK's errors; the judgement (which statuses are worth another try,
how long the server asked to wait, how an unreadable body or an unknown SDK error reads) is
made here once. ``transient`` failures are retried by ``call_model``; the rest pause the
mission ``interrupted`` at once, with a one-line reason.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from cabal.errors import ModelError

# Statuses worth another try: timeout, conflict, rate limit, server errors, overload (529).
TRANSIENT_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))
# Statuses that speak for the whole account (rate limit, overload), not for one request.
SHARED_BACKOFF_STATUSES = frozenset({429, 529})
# A body the client could not read (not JSON, not a message) surfaces as one of these.
UNREADABLE_REPLY = (ValueError, KeyError, TypeError)
_WHAT_IT_MEANS = {401: "the key was refused", 403: "the key may not use this model", 404: "no such model"}


def redact(text: str) -> str:
    """``text`` with every provider's key blanked out."""
    from cabal.llm.providers import secret_values

    for secret in secret_values():
        text = text.replace(secret, "[redacted]")
    return text


def status_failure(provider: str, status: int, detail: str, headers: Mapping[str, str] | None = None, *,
                   transient: bool | None = None, unset_key: str | None = None) -> ModelError:
    """A reply with HTTP ``status``: transient or not by the status (unless the SDK said),
    with the server's ``retry-after``, and ``detail`` (what the provider said) in one line.
    ``unset_key``: the key's variable, when none was set (a server of one's own was sent no
    key): a 401 then says to set it."""
    meaning = _WHAT_IT_MEANS.get(status)
    if status == 401 and unset_key:
        meaning = f"the server wants a key and none is set: set {unset_key}"
    said = " ".join(str(detail or "").split())[:300] or "no error message"
    message = f"{provider} returned {status}: {said}" + (f" ({meaning})" if meaning else "")
    return ModelError(redact(message), status=status, provider=provider,
                      transient=status in TRANSIENT_STATUSES if transient is None else transient,
                      retry_after_s=retry_after_s(headers or {}))


def timed_out(provider: str, where: str = "") -> ModelError:
    return ModelError(redact(f"{provider} did not answer in time{f' ({where})' if where else ''}"),
                      provider=provider, transient=True)


def unreachable(provider: str, reason: str) -> ModelError:
    return ModelError(redact(f"cannot reach {provider}: {reason}"), provider=provider, transient=True)


def unreadable(error: BaseException, provider: str | None = None) -> ModelError:
    summary = " ".join(str(error).split())[:200]
    return ModelError(redact(f"the model's reply could not be read ({type(error).__name__}: {summary})"),
                      provider=provider, transient=True)


def client_failed(provider: str, error: BaseException) -> ModelError:
    """An error from inside a provider's SDK that no rule names: not Cabal's bug, not worth a
    retry; the mission pauses with its message."""
    summary = " ".join(str(error).split())[:300] or "no message"
    return ModelError(redact(f"{provider} client failed: {type(error).__name__}: {summary}"), provider=provider)


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """The wait the server asks for (``retry-after-ms``, else ``retry-after`` in seconds)."""
    for header, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(header)
        if value:
            try:
                return float(value) / scale
            except ValueError:
                return None  # an HTTP date: fall back to our own backoff
    return None


def http_status(error: BaseException) -> tuple[int, Mapping[str, str]] | None:
    """The HTTP status (and headers) an SDK error carries, read the ways SDKs carry them."""
    response = getattr(error, "response", None)
    status = getattr(error, "status_code", None)
    if not isinstance(status, int):
        status = getattr(response, "status_code", None) or getattr(error, "status", None)
    if not isinstance(status, int) or status < 100:
        return None
    headers: Any = getattr(response, "headers", None)  # each SDK's own headers object
    return status, headers if isinstance(headers, Mapping) or hasattr(headers, "get") else {}


def raised_inside(error: BaseException, modules: tuple[str, ...]) -> bool:
    """Whether ``error`` is one of ``modules``' exception classes or was raised from their code."""
    if type(error).__module__.split(".")[0] in modules:
        return True
    trace = error.__traceback__
    innermost = None
    while trace is not None:
        innermost = trace
        trace = trace.tb_next
    if innermost is None:
        return False
    name = innermost.tb_frame.f_globals.get("__name__", "")
    return str(name).split(".")[0] in modules


def generic_failure(provider: str, error: BaseException) -> ModelError | None:
    """What any SDK's error says through the usual shapes: an HTTP status, a timeout, a
    dropped connection (None when it says none of these)."""
    found = http_status(error)
    if found is not None:
        status, headers = found
        detail = getattr(error, "message", None) or getattr(error, "error", None) or str(error)
        return status_failure(provider, status, str(detail), headers)
    kind = type(error).__name__.lower()
    if isinstance(error, TimeoutError) or "timeout" in kind:
        return timed_out(provider)
    if isinstance(error, ConnectionError) or "connect" in kind or "protocolerror" in kind:
        return unreachable(provider, str(error) or type(error).__name__)
    return None


def loaded(module: str) -> Any:
    """``module`` if something imported it already (its errors can only occur then), else None."""
    return sys.modules.get(module)


def judged(provider: Any, error: BaseException) -> ModelError | None:
    """What a call's failure was: the provider's own reading of its SDK's error, else an
    unreadable reply, else any error raised inside the provider's SDK or HTTP layer; None
    for an error that is none of these (Cabal's own)."""
    if provider is not None:
        found = provider.module().classify(provider, error)
        if found is not None:
            return found
    if isinstance(error, UNREADABLE_REPLY):
        return unreadable(error)
    if provider is not None and provider.sdk_modules and raised_inside(error, provider.sdk_modules):
        return client_failed(provider.name, error)
    return None
