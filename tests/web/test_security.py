"""Who may use the server: the Host check of a loopback server, the token wall of any other,
CSRF on every request that changes something, and the headers every response carries."""

from __future__ import annotations

import re
from html import unescape

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

from cabal.web.app import create_app
from cabal.config import is_loopback
from cabal.web.security import POLICY, Security

from .conftest import QUESTION


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("192.0.2.2", False), ("example.com", False), ("", False)])
def test_which_addresses_are_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_server_beyond_loopback_always_has_a_token() -> None:
    assert Security.for_address("127.0.0.1", 1).token is None
    token = Security.for_address("0.0.0.0", 1).token
    assert token is not None and len(token) == 43  # 32 random bytes, URL-safe base64
    assert Security.for_address("0.0.0.0", 1).token != token  # a new one at every start
    with pytest.raises(ValueError, match="listening on 0.0.0.0 .not loopback. needs a token"):
        Security("0.0.0.0", 1, token=None)


def test_every_response_carries_the_security_headers(client: TestClient) -> None:
    for path in ("/", "/missions/new", "/static/live.js", "/missions/m-nothing-000000"):
        headers = client.get(path).headers
        assert headers["content-security-policy"] == POLICY
        assert (headers["x-content-type-options"], headers["x-frame-options"], headers["referrer-policy"]) == (
            "nosniff", "DENY", "same-origin")
    assert "script-src 'self';" in POLICY and "default-src 'none'" in POLICY and "frame-ancestors 'none'" in POLICY


def test_a_loopback_server_refuses_other_host_names(workspace, security) -> None:
    """A page elsewhere that rebinds its domain to 127.0.0.1 sends its own name as Host."""
    app = create_app(workspace, security)
    with TestClient(app, base_url="http://attacker.example:8765") as rebound:
        refused = rebound.get("/")
    with TestClient(app, base_url="http://localhost:8765") as local:
        assert local.get("/").status_code == 200
    assert refused.status_code == 400
    assert "answers only to the loopback addresses" in unescape(refused.text)


def test_every_post_needs_the_csrf_token(client: TestClient, security: Security) -> None:
    # But /ag-ui: its clients are no page of this server. A browser cannot send its JSON from
    # another site without a preflight this server never grants, nor without an Origin the guard refuses.
    posts = [route.path.replace("{mission_id}", "m-any-000000") for route in client.app.routes
             if isinstance(route, Route) and "POST" in (route.methods or ()) and route.path != "/ag-ui"]
    assert sorted(posts) == ["/missions", "/missions/example", "/missions/m-any-000000/answer",
                             "/missions/m-any-000000/continue", "/missions/m-any-000000/fork",
                             "/missions/m-any-000000/resume",
                             "/missions/m-any-000000/say",
                             "/missions/m-any-000000/stop", "/missions/upload"]
    for path in posts:
        missing = client.post(path, data={"answer": "x", "request": "x"})
        wrong = client.post(path, data={"csrf": "not-it", "request": "x"})
        assert (missing.status_code, wrong.status_code) == (403, 403), path
        assert "CSRF token is missing or wrong" in missing.text
    # With the token, the request reaches its handler (here: an unknown mission).
    assert client.post("/missions/m-any-000000/stop", data={"csrf": security.csrf}).status_code == 404


def test_a_post_from_another_origin_is_refused_even_with_the_token(client: TestClient, security: Security) -> None:
    form = {"csrf": security.csrf, "request": "Anything."}
    other_site = client.post("/missions", data=form, headers={"origin": "http://attacker.example"})
    sandboxed = client.post("/missions", data=form, headers={"origin": "null"})
    fetch_says = client.post("/missions", data=form, headers={"sec-fetch-site": "cross-site"})
    assert [r.status_code for r in (other_site, sandboxed, fetch_says)] == [403, 403, 403]
    assert "must come from this server's own pages" in unescape(other_site.text)


def test_an_ag_ui_run_is_json_from_no_other_site(client: TestClient) -> None:
    run = {"threadId": "t", "runId": "r", "messages": []}
    as_a_form = client.post("/ag-ui", data=run)  # what another site's page may send without a preflight
    other_site = client.post("/ag-ui", json=run, headers={"origin": "http://attacker.example"})
    preflight = client.options("/ag-ui", headers={"origin": "http://attacker.example",
                                                  "access-control-request-method": "POST"})
    assert (as_a_form.status_code, other_site.status_code) == (415, 403)
    assert "access-control-allow-origin" not in preflight.headers


@pytest.fixture(scope="module")
def walled(workspace):
    """The app as a server on 0.0.0.0 sees it: behind its token."""
    security = Security.for_address("0.0.0.0", 8765)
    with TestClient(create_app(workspace, security), base_url="http://192.0.2.2:8765") as test_client:
        yield test_client, security


def cookie(security: Security, value: str | None = None) -> dict[str, str]:
    """The token cookie as a header (the test client's own cookie jar is emptied before each use)."""
    return {"cookie": f"{security.cookie}={value or security.token}"}


def test_the_token_wall_guards_pages_assets_and_streams(walled) -> None:
    client, security = walled
    client.cookies.clear()
    for path in ("/", "/missions/new", "/static/web.css", "/live", "/missions/m-any-000000/report.json"):
        assert client.get(path).status_code == 401, path
    none = client.get("/")
    wrong = client.get("/?token=" + "x" * 43)
    wrong_cookie = client.get("/", headers=cookie(security, "x" * 43))
    wrong_bearer = client.get("/", headers={"authorization": "Bearer " + "x" * 43})
    assert (none.status_code, wrong.status_code, wrong_cookie.status_code, wrong_bearer.status_code) == (
        401, 403, 403, 403)
    assert "needs the token it printed when it started" in none.text
    assert '<input name="token" type="password"' in none.text  # a box to paste it in
    assert security.token not in none.text + wrong.text


def test_the_right_token_opens_the_wall_and_leaves_the_address_bar(walled) -> None:
    client, security = walled
    client.cookies.clear()
    opened = client.get(f"/missions/new?token={security.token}&x=1", follow_redirects=False)

    assert opened.status_code == 303
    assert opened.headers["location"] == "/missions/new?x=1"  # the token taken out of the address
    kept = opened.headers["set-cookie"]
    assert kept.startswith(f"cabal_token_8765={security.token}; ")
    assert re.search(r"HttpOnly", kept, re.I) and re.search(r"SameSite=strict", kept, re.I)
    elsewhere = client.get(f"http://192.0.2.2:8765//attacker.example/x?token={security.token}", follow_redirects=False)
    assert elsewhere.headers["location"] == "/attacker.example/x"  # a path here, never another site
    client.cookies.clear()
    assert client.get("/", headers=cookie(security)).status_code == 200
    assert client.get("/", headers={"authorization": f"Bearer {security.token}"}).status_code == 200


def test_a_walled_post_needs_both_the_token_and_the_csrf_token(walled) -> None:
    client, security = walled
    client.cookies.clear()
    form = {"csrf": security.csrf, "example": "no-such-example"}
    assert client.post("/missions/example", data=form).status_code == 401
    no_csrf = client.post("/missions/example", data={"example": "no-such-example"}, headers=cookie(security))
    assert no_csrf.status_code == 403
    refused = client.post("/missions/example", data=form, headers=cookie(security))
    assert refused.status_code == 400  # through both walls, to the handler: there is no such example
    assert "no example named 'no-such-example'; the examples are: foodbank, launch, research, sources, team" in unescape(refused.text)


def test_ids_from_urls_reach_nothing_outside_the_workspace(client: TestClient, graph_server) -> None:
    from cabal import run_mission

    mission_id = run_mission(QUESTION, home=graph_server.home).mission_id
    for path in ("/missions/..%2F..%2Fetc%2Fpasswd", "/missions/m-..%2F..%2Fpasswd", "/missions/m-%2e%2e",
                 f"/missions/{mission_id}%2F..%2F..%2Fcheckpoints.sqlite", "/static/..%2F..%2Fpyproject.toml",
                 "/static/%2e%2e%2fapp.py", "/static/app.py", f"/missions/{mission_id}/report.sqlite"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert "Traceback" not in response.text
    assert client.get(f"/missions/{mission_id}").status_code == 200
