"""Sign-in through an identity provider, in headless Chromium: the UI (uvicorn on 127.0.0.1)
and a test OpenID Connect provider (tests/oidc_provider.py, on ``localhost``: another site, so
the session cookie has to survive the cross-site redirect back, as with a real provider).

The provider signs real RS256 ID tokens and enforces the client secret and PKCE; set to
misbehave, its tampered, expired, wrongly keyed or wrong-nonce tokens and a wrong state must
each end on a readable sign-in page, signed out. The coordinator is never called here: sign-in
and history are what is under test (the answered questions are in tests/e2e).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oda_analyst.webui.app import create_app
from oda_analyst.webui.auth import hash_password
from oda_analyst.webui.history import History
from oda_analyst.webui.oidc import OidcLogin, config_from
from oidc_provider import CLIENT_ID, CLIENT_SECRET, Provider, free_port, running_provider, serve

sync_api = pytest.importorskip("playwright.sync_api")

pytestmark = pytest.mark.integration

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
SHOTS = Path(os.environ.get("ODA_TEST_ARTIFACTS", Path(__file__).parents[2] / "test-artifacts"))


class NotCalled:
    """Sign-in tests ask nothing: any call to the coordinator is a failure."""

    async def ask(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the coordinator was called")

    async def clarify(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the coordinator was called")


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with running_provider("localhost") as p:
        yield p


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[History]:
    h = History(tmp_path_factory.mktemp("oidc") / "history.sqlite")
    yield h
    h.close()


@pytest.fixture(scope="module")
def seeded(history: History) -> dict[str, str]:
    """One conversation each for alice and bob, written before anyone signs in."""
    mine = history.create_conversation("alice", "Alice: power of rack 3 last week")
    theirs = history.create_conversation("bob", "Bob: hottest node yesterday")
    history.add_message(mine.id, "user", {"text": mine.title, "clarify": False})
    history.add_message(theirs.id, "user", {"text": theirs.title, "clarify": False})
    return {"alice": mine.id, "bob": theirs.id}


@pytest.fixture(scope="module")
def ui_url(provider: Provider, history: History, seeded: dict[str, str]) -> Iterator[str]:
    if not CHROMIUM.exists():
        pytest.skip("chromium is not installed (scripts/setup.sh installs it)")
    oidc = OidcLogin(
        config_from(
            provider.issuer,
            CLIENT_ID,
            CLIENT_SECRET,
            "preferred_username",
            "openid profile",
            "Test IdP",
        )
    )
    users = {"carol": hash_password("carol-pass")}  # both: a password user beside the IdP
    app = create_app(NotCalled(), users, history, secret="oidc-test", oidc=oidc)
    port = free_port()
    with serve(app, port):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture()
def page(browser: Any, provider: Provider) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1200, "height": 800})
    provider.mode = "ok"
    try:
        yield context.new_page()
    finally:
        provider.mode = "ok"
        context.close()


def _shot(page: Any, name: str) -> None:
    folder = SHOTS / "webui"
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)


def _via_idp(page: Any, ui_url: str, provider: Provider, user: str) -> None:
    page.goto(f"{ui_url}/")
    assert page.url == f"{ui_url}/login"
    page.click("#sign-in-oidc")
    page.wait_for_url(f"{provider.issuer}/authorize?*")
    page.fill("#idp-user", user)
    page.click("#idp-approve")
    page.wait_for_load_state()


def test_sign_in_through_the_provider_shows_only_your_history(
    page: Any, ui_url: str, provider: Provider, seeded: dict[str, str]
) -> None:
    _via_idp(page, ui_url, provider, "alice")
    page.wait_for_url(f"{ui_url}/")
    _shot(page, "10-oidc-signed-in")
    assert page.locator(".who span").inner_text() == "alice"
    titles = page.locator(".conversations li").all_inner_texts()
    assert titles == ["Alice: power of rack 3 last week"]
    # The flow really was code + PKCE with a state and nonce, and the verifier matched.
    asked = provider.authorize_requests[-1]
    assert asked["code_challenge_method"] == "S256" and asked["nonce"] and asked["state"]
    assert provider.token_requests[-1]["code_verifier"]
    # Bob's conversation is not there for alice, exactly like one that does not exist.
    other = page.request.get(f"{ui_url}/api/conversations/{seeded['bob']}")
    assert other.status == 404
    own = page.request.get(f"{ui_url}/api/conversations/{seeded['alice']}")
    assert own.status == 200 and own.json()["title"].startswith("Alice")
    page.click("#sign-out")
    page.wait_for_url(f"{ui_url}/login")
    assert page.request.get(f"{ui_url}/api/conversations/{seeded['alice']}").status == 401


def test_password_sign_in_still_works_beside_the_provider(page: Any, ui_url: str) -> None:
    page.goto(f"{ui_url}/login")
    page.fill("input[name=user]", "carol")
    page.fill("input[name=password]", "carol-pass")
    page.click("button[type=submit]")
    page.wait_for_url(f"{ui_url}/")
    assert page.locator(".who span").inner_text() == "carol"
    assert page.locator(".conversations li").count() == 0


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("tampered", "failed verification"),
        ("wrong_key", "failed verification"),
        ("expired", "expired"),
        ("wrong_nonce", "nonce"),
        ("wrong_state", "state does not match"),
    ],
)
def test_a_bad_answer_from_the_provider_is_refused_readably(
    page: Any, ui_url: str, provider: Provider, seeded: dict[str, str], mode: str, reason: str
) -> None:
    provider.mode = mode
    _via_idp(page, ui_url, provider, "alice")
    alert = page.locator("[role=alert]")
    alert.wait_for()
    _shot(page, f"11-oidc-refused-{mode}")
    assert reason in alert.inner_text()
    assert "Traceback" not in page.content()
    # Refused means signed out: no conversation of alice's (nor mallory's) opens.
    assert page.request.get(f"{ui_url}/api/conversations/{seeded['alice']}").status == 401
    page.goto(f"{ui_url}/")
    assert page.url == f"{ui_url}/login"
