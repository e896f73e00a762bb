"""The OIDC option's pure parts: which settings it needs, and which claims give a user."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from oda_analyst.errors import AccessDeniedError, ConfigError
from oda_analyst.webui.app import create_app
from oda_analyst.webui.history import History
from oda_analyst.webui.oidc import OidcLogin, config_from, user_from_claims
from oda_analyst.webui.pages import login
from oidc_provider import free_port


def test_config_names_the_missing_setting() -> None:
    with pytest.raises(ConfigError, match="issuer") as err:
        config_from(None, "ui", None, "sub", "openid", None)
    assert err.value.hint and "ODA_UI_OIDC_ISSUER" in err.value.hint
    with pytest.raises(ConfigError) as err:
        config_from("https://idp.example.org", None, None, "sub", "openid", None)
    assert err.value.hint and "ODA_UI_OIDC_CLIENT_ID" in err.value.hint
    with pytest.raises(ConfigError, match="openid"):
        config_from("https://idp.example.org", "ui", None, "sub", "profile email", None)


def test_discovery_url_and_label() -> None:
    cfg = config_from("https://idp.example.org/realms/hpc/", "ui", "s", "sub", "openid", None)
    assert (
        cfg.discovery_url == "https://idp.example.org/realms/hpc/.well-known/openid-configuration"
    )
    assert cfg.label == "https://idp.example.org/realms/hpc/"


def test_the_configured_claim_is_the_user() -> None:
    claims = {"sub": "1234-abcd", "preferred_username": "alice", "email": "a@example.org"}
    assert user_from_claims(claims, "preferred_username") == "alice"
    assert user_from_claims(claims, "email") == "a@example.org"
    assert user_from_claims(claims, "sub") == "1234-abcd"


@pytest.mark.parametrize("value", [None, "", "al ice", "../etc", "x" * 65, 42])
def test_a_missing_or_unsafe_claim_is_refused(value: object) -> None:
    with pytest.raises(AccessDeniedError) as err:
        user_from_claims({"preferred_username": value}, "preferred_username")
    assert err.value.hint and "ODA_UI_OIDC_USER_CLAIM" in err.value.hint


def test_sign_in_page_offers_what_is_enabled() -> None:
    both = login(None, password=True, provider="Site SSO")
    assert "Sign in with Site SSO" in both and "name='password'" in both
    sso_only = login(None, password=False, provider="Site SSO")
    assert "name='password'" not in sso_only and "/login/oidc" in sso_only
    refused = login("the token <expired>", hint="start again", password=False, provider="X")
    assert "The token &lt;expired&gt;" in refused and "Start again" in refused


class NotCalled:
    async def ask(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the coordinator was called")

    async def clarify(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the coordinator was called")


def test_an_unreachable_provider_is_a_readable_page(tmp_path: Path) -> None:
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    oidc = OidcLogin(config_from(down, "ui", "s", "sub", "openid", "Site SSO"), timeout_s=2)
    history = History(tmp_path / "h.sqlite")
    try:
        with TestClient(create_app(NotCalled(), {}, history, secret="k", oidc=oidc)) as ui:
            page = ui.get("/login")
            assert "Sign in with Site SSO" in page.text and "name='password'" not in page.text
            start = ui.get("/login/oidc", follow_redirects=False)
            assert start.status_code == 502
            assert "cannot be reached" in start.text and "Traceback" not in start.text
            # No password users: the form's POST is not there either.
            # (with the CSRF token its cookie holds: without, any form post here is a 403)
            form = {"user": "a", "password": "b", "csrftoken": ui.cookies["oda_csrf"]}
            assert ui.post("/login", data=form).status_code == 404
            # A callback that was never started is refused, not a crash.
            late = ui.get("/auth/callback?code=x&state=y")
            assert late.status_code == 401 and "state" in late.text
    finally:
        history.close()
