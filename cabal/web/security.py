"""Who may use the server, and how a page proves a request came from it.

- **Where it listens.** On a loopback address (the default, 127.0.0.1) only this machine can
  connect, and requests must name a loopback host in their ``Host`` header: a web page elsewhere
  that rebinds its own domain to 127.0.0.1 (DNS rebinding) is refused.
- **The token.** Any other address needs a token, generated at start (``secrets``, 256 bits)
  and printed once in the URL to open, as Jupyter does. It is checked on every request, pages,
  assets and event streams alike: from ``?token=`` (then kept in an HttpOnly, SameSite=Strict
  cookie and taken out of the address bar by a redirect), from that cookie, or from an
  ``Authorization: Bearer`` header. None gives 401; a wrong one 403. The token is never logged:
  the server writes no access log with query strings.
- **CSRF.** A request that changes something (POST) must carry the server's CSRF token, which
  only its own pages hold (a form field or the ``X-CSRF-Token`` header of their script), and
  must not come from another origin (``Origin`` and ``Sec-Fetch-Site``): ``Guard`` refuses
  the second for every request, ``state_changing`` (app.py) checks the first before any
  handler that changes something runs.
- **Headers.** A Content-Security-Policy that lets a page run only the server's own script
  and load only from the server (so even markup that escaped escaping could not run), no
  framing, no referrer to other sites (nor would a token be in one: ``?token=`` is redirected
  away at once), no sniffing.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import Headers
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cabal.config import is_loopback

CSRF_FIELD, CSRF_HEADER = "csrf", "x-csrf-token"
POLICY = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
          "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
HEADERS = {
    "content-security-policy": POLICY,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    # Not "no-referrer": with it, browsers send "Origin: null" on the pages' own form posts.
    "referrer-policy": "same-origin",
    "cross-origin-opener-policy": "same-origin",
}
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


@dataclass(frozen=True)
class Security:
    """The secrets of one server: the token (None on a loopback address) and the CSRF token."""

    host: str
    port: int
    token: str | None
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)

    @classmethod
    def for_address(cls, host: str, port: int) -> Security:
        """A loopback address needs no token; any other gets a fresh one."""
        return cls(host, port, None if is_loopback(host) else secrets.token_urlsafe(32))

    def __post_init__(self) -> None:
        if self.token is None and not is_loopback(self.host):
            raise ValueError(f"listening on {self.host} (not loopback) needs a token")

    @property
    def cookie(self) -> str:
        """The token cookie's name: cookies do not tell ports apart, two servers must not share one."""
        return f"cabal_token_{self.port}"

    def token_matches(self, offered: str | None) -> bool:
        if not offered or self.token is None:
            return False
        return hmac.compare_digest(offered.encode(), self.token.encode())

    def csrf_matches(self, offered: str | None) -> bool:
        return bool(offered) and hmac.compare_digest(str(offered).encode(), self.csrf.encode())


class Guard:
    """ASGI middleware in front of every route: the security headers, the Host check of a
    loopback server, the token wall of any other, and the cross-origin check of a POST."""

    def __init__(self, app: ASGIApp, security: Security) -> None:
        self.app = app
        self.security = security

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []),
                                      *((name.encode(), value.encode()) for name, value in HEADERS.items()
                                        if name.encode() not in present)]
            await send(message)

        refusal = self.refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, with_headers)
            return
        await self.app(scope, receive, with_headers)

    def refusal(self, scope: Scope) -> Response | None:
        """The response that refuses this request, or None to let it through."""
        headers = Headers(scope=scope)
        security = self.security
        if security.token is None:
            host = headers.get("host", "")
            if not is_loopback(_host_name(host)):
                return refused(400, "Unexpected Host",
                               "This Cabal server answers only to the loopback addresses it listens on.")
        else:
            pairs = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
            in_url = next((value for key, value in pairs if key == "token"), None)
            if in_url is not None:
                if not security.token_matches(in_url):
                    return refused(403, "Wrong token", "That is not this server's token.", ask_token=True)
                if scope["method"] in SAFE_METHODS:  # keep it in a cookie, out of the address bar and history
                    rest = urlencode([(key, value) for key, value in pairs if key != "token"])
                    # One leading slash: "//host" would send the browser to another site.
                    path = "/" + scope["path"].lstrip("/")
                    response = RedirectResponse(path + (f"?{rest}" if rest else ""), status_code=303)
                    response.set_cookie(security.cookie, security.token or "", httponly=True, samesite="strict")
                    return response
            else:
                offered = _bearer(headers) or _cookie(headers, security.cookie)
                if offered is None:
                    return refused(401, "Token needed",
                                   "This Cabal server listens beyond this machine, so it needs the token it printed "
                                   "when it started. Open the address it printed, or paste the token here.",
                                   ask_token=True)
                if not security.token_matches(offered):
                    return refused(403, "Wrong token", "That is not this server's token.", ask_token=True)
        if scope["method"] not in SAFE_METHODS and _cross_site(headers):
            return refused(403, "Refused", "A request that changes something must come from this server's own pages.")
        return None


def _host_name(host: str) -> str:
    """``Host`` without its port (``[::1]:8765`` is ``::1``)."""
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _bearer(headers: Headers) -> str | None:
    scheme, _, value = headers.get("authorization", "").partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


def _cookie(headers: Headers, name: str) -> str | None:
    jar = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:  # noqa: BLE001 - a malformed cookie header is no token
        return None
    return jar[name].value if name in jar else None


def _cross_site(headers: Headers) -> bool:
    """A request another site's page made: its ``Origin`` is not this host, or the browser says so."""
    if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return True
    origin = headers.get("origin")
    if origin is None:  # not a browser's cross-origin request (browsers send Origin with every POST)
        return False
    return origin.split("://", 1)[-1] != headers.get("host", "")  # "null" (a sandboxed page) never matches


def refused(status: int, title: str, message: str, *, ask_token: bool = False) -> Response:
    """A small page that says why, with a box for the token where one would help."""
    from markupsafe import escape

    form = ('<form method="get" action=""><label>Token <input name="token" type="password" autocomplete="off" '
            'required style="font: inherit; padding: 6px 10px; width: 22em; max-width: 100%"></label> '
            '<button style="font: inherit; padding: 6px 16px">Open</button></form>') if ask_token else ""
    body = (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
            f'content="width=device-width, initial-scale=1"><title>{escape(title)} · Cabal</title></head>'
            f'<body style="font: 16px/1.5 system-ui, sans-serif; max-width: 40em; margin: 3em auto; padding: 0 1em">'
            f'<h1>{escape(title)}</h1><p>{escape(message)}</p>{form}</body></html>')
    return HTMLResponse(body, status_code=status, headers={"cache-control": "no-store"})
