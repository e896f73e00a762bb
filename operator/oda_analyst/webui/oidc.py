"""Sign-in through a site's identity provider: OpenID Connect, authorization-code flow.

Authlib's Starlette client does the protocol: it reads the provider's discovery document,
sends the browser to its authorization endpoint with a fresh ``state``, ``nonce`` and PKCE
challenge (S256), kept in the signed session cookie, and on the way back checks the state,
redeems the code with the verifier and verifies the ID token against the provider's JWKS
(signature, ``iss``, ``aud``, ``exp``/``iat``, ``nonce``). This module adds what the UI needs
on top: a token without a verified ID token is refused (Authlib only checks one when the
provider sends it), and the user id is one configured claim, held to the same shape as a
password user's name because it becomes the graph ACL's and the sandbox's user.
"""

from __future__ import annotations

import contextlib
import importlib
import re
from dataclasses import dataclass
from typing import Any

import httpx
from authlib.integrations.base_client.errors import OAuthError
from authlib.integrations.starlette_client import OAuth
from joserfc.errors import JoseError
from starlette.requests import Request
from starlette.responses import Response

from oda_analyst.errors import AccessDeniedError, ConfigError

_USER = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")
DISCOVERY = "/.well-known/openid-configuration"
# ID-token times may differ by this much between the provider's clock and ours.
LEEWAY_S = 60


def _http_errors() -> tuple[type[Exception], ...]:
    """What a failed call to the provider raises: Authlib's client is built on httpx2 when
    that is installed and on httpx otherwise, and their errors share no base class."""
    errors: list[type[Exception]] = [httpx.HTTPError]
    with contextlib.suppress(ImportError, AttributeError):
        errors.append(importlib.import_module("httpx2").HTTPError)
    return tuple(errors)


_HTTP_ERRORS = _http_errors()


@dataclass(frozen=True)
class OidcConfig:
    issuer: str
    client_id: str
    client_secret: str | None
    user_claim: str = "preferred_username"
    scope: str = "openid profile email"
    label: str = "your identity provider"

    @property
    def discovery_url(self) -> str:
        return self.issuer.rstrip("/") + DISCOVERY


def config_from(
    issuer: str | None,
    client_id: str | None,
    client_secret: str | None,
    user_claim: str,
    scope: str,
    label: str | None,
) -> OidcConfig:
    """The provider the settings name, or a ConfigError saying which setting is missing."""
    if not issuer or not issuer.startswith(("http://", "https://")):
        raise ConfigError(
            "OIDC sign-in needs the provider's issuer URL",
            hint="set ODA_UI_OIDC_ISSUER, e.g. https://idp.example.org/realms/hpc "
            f"(its discovery document is <issuer>{DISCOVERY})",
        )
    if not client_id:
        raise ConfigError(
            "OIDC sign-in needs the client id registered at the provider",
            hint="set ODA_UI_OIDC_CLIENT_ID (and ODA_UI_OIDC_CLIENT_SECRET for a confidential "
            "client)",
        )
    if "openid" not in scope.split():
        raise ConfigError(
            f"ODA_UI_OIDC_SCOPE {scope!r} lacks 'openid': the provider would send no ID token",
            hint="e.g. ODA_UI_OIDC_SCOPE='openid profile email'",
        )
    return OidcConfig(issuer, client_id, client_secret, user_claim, scope, label or issuer)


def user_from_claims(claims: dict[str, Any], claim: str) -> str:
    """The user id the verified claims give, or AccessDeniedError if they give none usable."""
    value = claims.get(claim)
    if not isinstance(value, str) or not value:
        raise AccessDeniedError(
            f"the identity provider's token carries no '{claim}' claim",
            hint="ask the administrator to map that claim for this client, or to set "
            "ODA_UI_OIDC_USER_CLAIM to a claim the provider sends (e.g. sub or email)",
        )
    if not _USER.match(value):
        raise AccessDeniedError(
            f"the '{claim}' claim {value[:40]!r} is not a usable user name "
            "(letters, digits and _ . @ - only, at most 64)",
            hint="ask the administrator to use another claim (ODA_UI_OIDC_USER_CLAIM)",
        )
    return value


class OidcLogin:
    """The provider's half of sign-in: ``start`` sends the browser there, ``finish`` returns
    the signed-in user from the callback or raises AccessDeniedError with a readable reason."""

    def __init__(self, config: OidcConfig, *, timeout_s: float = 10.0) -> None:
        self.config = config
        oauth = OAuth()
        self._client: Any = oauth.register(
            "idp",
            client_id=config.client_id,
            client_secret=config.client_secret,
            server_metadata_url=config.discovery_url,
            client_kwargs={
                "scope": config.scope,
                "code_challenge_method": "S256",
                "timeout": timeout_s,
            },
        )

    async def start(self, request: Request, redirect_uri: str) -> Response:
        try:
            response: Response = await self._client.authorize_redirect(request, redirect_uri)
        except (*_HTTP_ERRORS, OAuthError, ValueError, KeyError) as err:
            raise AccessDeniedError(
                f"the identity provider at {self.config.issuer} cannot be reached or its "
                f"discovery document is unusable ({type(err).__name__})",
                hint="try again in a minute; if it persists, tell the administrator",
            ) from err
        return response

    async def finish(self, request: Request) -> str:
        if not request.query_params.get("state"):
            raise AccessDeniedError(
                "the sign-in answer carries no state", hint="start again from the sign-in page"
            )
        try:
            token = await self._client.authorize_access_token(request, leeway=LEEWAY_S)
        except OAuthError as err:
            if err.error == "mismatching_state":
                raise AccessDeniedError(
                    "this sign-in answer does not belong to the sign-in started here "
                    "(its state does not match)",
                    hint="start again from the sign-in page, in this browser",
                ) from err
            raise AccessDeniedError(
                f"the identity provider refused the sign-in: {err.description or err.error}",
                hint="start again from the sign-in page",
            ) from err
        except JoseError as err:
            raise AccessDeniedError(
                f"the identity provider's ID token failed verification ({_jose_reason(err)})",
                hint="start again from the sign-in page; if it persists, the provider's keys "
                "or clock may be wrong: tell the administrator",
            ) from err
        except _HTTP_ERRORS as err:
            raise AccessDeniedError(
                f"the identity provider could not be reached to finish the sign-in "
                f"({type(err).__name__})",
                hint="try again in a minute",
            ) from err
        claims = token.get("userinfo")
        if not claims:
            raise AccessDeniedError(
                "the identity provider sent no ID token",
                hint="the client must be an OpenID Connect client with the 'openid' scope",
            )
        return user_from_claims(dict(claims), self.config.user_claim)


def _jose_reason(err: Exception) -> str:
    error = getattr(err, "error", None)
    description = getattr(err, "description", None)
    if error and description:
        return f"{error}: {description}"
    return str(error or description or type(err).__name__)
