"""Issue 31's hardening of the web UI (OWASP ASVS level 2 for sessions and requests), each
finding of the review replayed against the app: CSRF from another origin or site, JSON sent as
text, framing and caching, cookies, revocation on sign-out, session lifetimes, password guessing
and its argon2 flood, malformed bodies. The coordinator is the scripted one of test_webui_app."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient
from test_webui_app import ScriptedCoordinator, form_token

import oda_analyst.webui.app as webui_app
import oda_analyst.webui.sessions as sessions_module
from oda_analyst.webui.app import create_app
from oda_analyst.webui.auth import hash_password
from oda_analyst.webui.history import History
from oda_analyst.webui.sessions import ExpiringMemoryStore, SessionPolicy
from oda_analyst.webui.signin import BusyError, SignInGate, SignInLimits

USERS = {"alice": hash_password("a-pass"), "mallory": hash_password("m-pass")}


@pytest.fixture
def parts(tmp_path: Path) -> tuple[ScriptedCoordinator, History]:
    return ScriptedCoordinator(tmp_path), History(tmp_path / "history.sqlite")


def _app(parts: tuple[ScriptedCoordinator, History], **kwargs: Any) -> Any:
    coordinator, history = parts
    return create_app(coordinator, USERS, history, secret="test", **kwargs)


def _sign_in(client: TestClient, user: str = "alice", password: str = "a-pass") -> httpx.Response:
    """As the browser does: the sign-in page, then its form with the page's token."""
    token = form_token(client.get("/login").text)
    return client.post(
        "/login",
        data={"user": user, "password": password, "csrftoken": token},
        follow_redirects=False,
    )


def _signed_in(app: Any) -> TestClient:
    client = TestClient(app)
    assert _sign_in(client).status_code == 303
    return client


# --- 1. requests: JSON only on /api, no cross-origin state change, form tokens ------------------


def test_api_bodies_must_be_json(parts: Any) -> None:
    coordinator, history = parts
    alice = _signed_in(_app(parts))
    body = json.dumps({"text": "power of node 900"})
    for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None):
        headers = {"content-type": kind} if kind else {}
        r = alice.post("/api/ask", content=body, headers=headers)
        assert r.status_code == 415 and "application/json" in r.json()["error"], kind
    assert coordinator.calls == [] and history.conversations("alice") == []
    # JSON with a charset parameter is JSON
    r = alice.post(
        "/api/ask", content=body, headers={"content-type": "application/json; charset=utf-8"}
    )
    assert r.status_code == 200


@pytest.mark.parametrize(
    "headers",
    [
        {"sec-fetch-site": "same-site", "origin": "http://testserver:8081"},  # another port
        {"sec-fetch-site": "cross-site", "origin": "https://evil.example"},
        {"origin": "http://testserver:8081"},  # a browser without Fetch Metadata
        {"origin": "null"},  # a sandboxed frame or a data: page
    ],
)
def test_a_state_changing_request_from_another_origin_is_refused(
    parts: Any, headers: dict[str, str]
) -> None:
    coordinator, history = parts
    app = _app(parts)
    alice = _signed_in(app)
    mid = json.loads(alice.post("/api/ask", json={"text": "q"}).text.splitlines()[-1])["message"][
        "id"
    ]
    calls = len(coordinator.calls)
    assert alice.post("/api/ask", json={"text": "forged"}, headers=headers).status_code == 403
    forged = {"message_id": mid, "score": "down", "comment": "forged"}
    assert alice.post("/api/feedback", json=forged, headers=headers).status_code == 403
    token = form_token(alice.get("/").text)
    out = alice.post("/logout", data={"csrftoken": token}, headers=headers, follow_redirects=False)
    assert out.status_code == 403
    assert len(coordinator.calls) == calls and history.feedback(mid) is None
    assert alice.get("/", follow_redirects=False).status_code == 200  # still signed in
    # login CSRF: a stranger's browser posting the attacker's credentials gets no session
    stranger = TestClient(app)
    form = {"user": "mallory", "password": "m-pass"}
    r = stranger.post("/login", data=form, headers=headers, follow_redirects=False)
    assert r.status_code == 403 and "set-cookie" not in r.headers


def test_the_same_origin_is_accepted(parts: Any) -> None:
    alice = _signed_in(_app(parts))
    for headers in (
        {"sec-fetch-site": "same-origin", "origin": "http://testserver"},
        {"origin": "http://testserver"},
    ):
        assert alice.post("/api/ask", json={"text": "q"}, headers=headers).status_code == 200


def test_the_public_origin_is_accepted_behind_a_proxy(parts: Any) -> None:
    alice = _signed_in(_app(parts, public_url="https://oda.example.org/", secure_cookies=False))
    headers = {"origin": "https://oda.example.org"}
    assert alice.post("/api/ask", json={"text": "q"}, headers=headers).status_code == 200


def test_the_sign_in_and_sign_out_forms_need_their_csrf_token(parts: Any) -> None:
    app = _app(parts)
    browser = TestClient(app)
    page = browser.get("/login").text
    form = {"user": "alice", "password": "a-pass"}
    # a browser that holds the UI's cookies posts a form without the page's token: refused
    assert browser.post("/login", data=form, follow_redirects=False).status_code == 403
    wrong = {**form, "csrftoken": "x" + form_token(page)}
    assert browser.post("/login", data=wrong, follow_redirects=False).status_code == 403
    assert browser.get("/", follow_redirects=False).status_code == 303  # not signed in
    ok = browser.post(
        "/login", data={**form, "csrftoken": form_token(page)}, follow_redirects=False
    )
    assert ok.status_code == 303
    assert browser.post("/logout", follow_redirects=False).status_code == 403
    assert browser.get("/", follow_redirects=False).status_code == 200  # still signed in


# --- 2. security headers ------------------------------------------------------------------------


def test_every_response_carries_the_security_headers(parts: Any) -> None:
    app = _app(parts)
    alice = _signed_in(app)
    responses = [
        TestClient(app).get("/login"),
        alice.get("/"),
        alice.get("/api/conversations/nope"),
        alice.post("/api/ask", content="x", headers={"content-type": "text/plain"}),
        TestClient(app).post("/api/ask", json={"text": "x"}),
        alice.get("/static/app.js"),
    ]
    for r in responses:
        csp = r.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "default-src 'self'" in csp, r.url
        assert r.headers["x-frame-options"] == "DENY"
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["referrer-policy"] == "same-origin"
        assert r.headers["cache-control"] == "no-store"
        assert "strict-transport-security" not in r.headers  # served over http here


# --- 3. cookies and sessions --------------------------------------------------------------------


def _session_cookie(r: httpx.Response) -> str:
    return next(c for c in r.headers.get_list("set-cookie") if "oda_session" in c)


def test_cookies_are_secure_when_the_public_url_is_https(parts: Any) -> None:
    https = TestClient(_app(parts, public_url="https://oda.example.org"))
    cookie = _session_cookie(_sign_in(https)).lower()
    assert cookie.startswith("__host-oda_session=") and "; secure" in cookie
    assert "httponly" in cookie and "samesite=strict" in cookie
    csrf = next(c for c in https.get("/login").headers.get_list("set-cookie"))
    assert csrf.startswith("__Host-oda_csrf=") and "Secure" in csrf
    assert "strict-transport-security" in https.get("/login").headers

    plain = TestClient(_app(parts))
    assert "secure" not in _session_cookie(_sign_in(plain)).lower()
    # the setting wins over the URL (a proxy that terminates TLS elsewhere, or a test rig)
    forced = TestClient(_app(parts, secure_cookies=True))
    assert "; secure" in _session_cookie(_sign_in(forced)).lower()


def test_sign_out_revokes_the_session_on_the_server(parts: Any) -> None:
    app = _app(parts)
    alice = _signed_in(app)
    cid = json.loads(alice.post("/api/ask", json={"text": "q"}).text.splitlines()[0])["id"]
    stolen = dict(alice.cookies)
    assert TestClient(app, cookies=stolen).get(f"/api/conversations/{cid}").status_code == 200
    token = form_token(alice.get("/").text)
    assert (
        alice.post("/logout", data={"csrftoken": token}, follow_redirects=False).status_code == 303
    )
    # the old cookie, replayed by whoever kept it, reads nothing any more
    replay = TestClient(app, cookies=stolen)
    assert replay.get(f"/api/conversations/{cid}").status_code == 401
    assert replay.get("/", follow_redirects=False).status_code == 303


def test_sign_in_issues_a_new_session_id(parts: Any) -> None:
    app = _app(parts)
    client = TestClient(app)
    client.get("/login")
    client.cookies.set("oda_session", "planted-by-an-attacker")
    r = _sign_in(client)
    assert "planted-by-an-attacker" not in _session_cookie(r)


class _Clock:
    """Stands in for the sessions module's ``time`` (wall and monotonic clocks move together)."""

    def __init__(self) -> None:
        self.now = time.time()

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now


def test_a_session_ends_when_idle_and_at_its_absolute_lifetime(
    parts: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = _Clock()
    monkeypatch.setattr(sessions_module, "time", clock)
    app = _app(parts, session_policy=SessionPolicy(idle_s=600, absolute_s=3600))
    busy = _signed_in(app)
    idle = _signed_in(app)
    for _ in range(5):  # busy keeps coming back every 9 minutes: 45 minutes in all
        clock.now += 540
        assert busy.get("/", follow_redirects=False).status_code == 200
    assert idle.get("/", follow_redirects=False).status_code == 303  # 45 idle minutes
    clock.now += 540  # 54 minutes: still within the hour
    assert busy.get("/", follow_redirects=False).status_code == 200
    clock.now += 540  # 63 minutes: past the absolute lifetime, however busy
    assert busy.get("/", follow_redirects=False).status_code == 303


def test_the_memory_store_expires_and_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(sessions_module, "time", clock)
    store = ExpiringMemoryStore(max_sessions=3)

    async def run() -> None:
        await store.write("a", b"1", 60, 60)
        clock.now += 61
        assert await store.read("a", 60) == b""
        for sid in "bcdef":
            await store.write(sid, sid.encode(), 60, 60)
        assert len(store) == 3 and await store.read("b", 60) == b""
        assert await store.read("f", 60) == b"f"

    asyncio.run(run())


# --- 4. sign-in rate limits and the argon2 bound --------------------------------------------------


def test_forty_wrong_passwords_then_the_right_one_is_refused(parts: Any) -> None:
    app = _app(parts)
    client = TestClient(app)
    statuses = [_sign_in(client, "alice", f"guess-{i}").status_code for i in range(40)]
    assert statuses[:5] == [401] * 5 and set(statuses[5:]) == {429}
    right = _sign_in(client, "alice", "a-pass")
    assert right.status_code == 429 and 0 < int(right.headers["retry-after"]) <= 60
    assert "Too many sign-in attempts" in right.text
    # from another address too: the limit is the user's, wherever the guesses come from
    elsewhere = TestClient(app, client=("10.0.0.9", 40000))
    assert _sign_in(elsewhere, "alice", "a-pass").status_code == 429
    # another user from another address is not held up
    assert _sign_in(elsewhere, "mallory", "m-pass").status_code == 303


def test_one_address_guessing_many_users_is_limited_and_others_are_not(parts: Any) -> None:
    app = _app(parts, sign_in_limits=SignInLimits(per_user="50/minute", per_address="4/minute"))
    guesser = TestClient(app, client=("10.0.0.66", 40000))
    statuses = [_sign_in(guesser, f"user{i}", "x").status_code for i in range(6)]
    assert statuses == [401] * 4 + [429] * 2
    assert _sign_in(TestClient(app, client=("10.0.0.7", 40000))).status_code == 303


def test_the_wait_grows_with_repeated_failures(parts: Any) -> None:
    app = _app(parts, sign_in_limits=SignInLimits(per_user="2/second;3/minute"))
    client = TestClient(app)
    assert [_sign_in(client, "alice", "x").status_code for _ in range(2)] == [401, 401]
    first = _sign_in(client, "alice", "x")
    assert first.status_code == 429 and int(first.headers["retry-after"]) == 1
    time.sleep(1.1)
    assert _sign_in(client, "alice", "x").status_code == 401
    second = _sign_in(client, "alice", "x")
    assert second.status_code == 429 and int(second.headers["retry-after"]) > 30


def test_a_flood_from_one_address_costs_no_more_argon2_than_its_limit(
    parts: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[str] = []
    real = webui_app.verify

    def counting(users: dict[str, str], user: str, password: str) -> bool:
        checked.append(user)
        return real(users, user, password)

    monkeypatch.setattr(webui_app, "verify", counting)
    app = _app(parts)

    async def flood() -> list[int]:
        transport = httpx.ASGITransport(app=app, client=("10.0.0.66", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
            token = form_token((await c.get("/login")).text)
            tries = [
                c.post("/login", data={"user": f"u{i}", "password": "x", "csrftoken": token})
                for i in range(48)
            ]
            return [r.status_code for r in await asyncio.gather(*tries)]

    statuses = asyncio.run(flood())
    # the default 20 a minute per address; of those, any beyond the argon2 slots and their
    # queue are told to retry (503) rather than wait
    assert statuses.count(429) == 48 - 20
    assert len(checked) == statuses.count(401) and len(checked) + statuses.count(503) == 20


def test_argon2_work_is_bounded_and_the_overflow_is_told_to_retry() -> None:
    running, most, calls = 0, 0, 0
    lock = threading.Lock()

    def slow_verify(user: str, password: str) -> bool:
        nonlocal running, most, calls
        with lock:
            running += 1
            calls += 1
            most = max(most, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        return False

    gate = SignInGate(SignInLimits(concurrent=2, queue=3), slow_verify)

    async def flood() -> list[bool | BaseException]:
        return await asyncio.gather(
            *(gate.verify(f"u{i}", "x") for i in range(10)), return_exceptions=True
        )

    results = asyncio.run(flood())
    assert most == 2 and calls == 5
    assert sum(isinstance(r, BusyError) for r in results) == 5
    assert [r for r in results if not isinstance(r, BaseException)] == [False] * 5


# --- 5. malformed requests ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[1,2]",
        b"{}",
        b'"text"',
        b"\xff\xfe",
        b'{"text": 5}',
        b'{"text": "q", "conversation_id": [1]}',
        b'{"text": "q", "clarify": "yes"}',
    ],
)
def test_a_malformed_question_is_a_4xx_json_error(parts: Any, body: bytes) -> None:
    coordinator, _ = parts
    alice = _signed_in(_app(parts))
    r = alice.post("/api/ask", content=body, headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500 and r.json()["error"], body
    assert coordinator.calls == []


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[1,2]",
        b"{}",
        b'{"message_id": 7, "score": "up"}',
        b'{"message_id": "m", "score": "up", "comment": {}}',
    ],
)
def test_malformed_feedback_is_a_4xx_json_error(parts: Any, body: bytes) -> None:
    alice = _signed_in(_app(parts))
    r = alice.post("/api/feedback", content=body, headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500 and r.json()["error"], body


def test_unknown_api_routes_and_methods_answer_json(parts: Any) -> None:
    alice = _signed_in(_app(parts))
    missing = alice.get("/api/nothing-here")
    assert missing.status_code == 404 and missing.json()["error"]
    wrong = alice.get("/api/ask")
    assert wrong.status_code == 405 and wrong.json()["error"]
