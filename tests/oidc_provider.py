"""A small OpenID Connect provider for tests, served by uvicorn on loopback.

It does what a real provider does for the authorization-code flow: a discovery document, an
authorization endpoint (a form where the test types the user and approves), a token endpoint
that checks the client's secret, the code (single use), the redirect URI and the PKCE verifier,
and a JWKS endpoint with the public half of the RSA key it signs ID tokens with. ``mode`` makes
it misbehave on purpose, so tests can check the UI refuses what it must:

* ``"tampered"``: the ID token's payload is changed after signing (another user);
* ``"expired"``: the ID token expired an hour ago;
* ``"wrong_nonce"``: the ID token carries a nonce the client did not send;
* ``"wrong_key"``: the ID token is signed by a key that is not in the JWKS (same key id);
* ``"wrong_state"``: the browser is sent back with a state the client did not send.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from html import escape
from typing import Any
from urllib.parse import urlencode

import uvicorn
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

CLIENT_ID = "oda-analyst-ui"
CLIENT_SECRET = "test-client-secret"
KID = "test-key-1"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class Provider:
    issuer: str
    mode: str = "ok"
    key: RSAKey = field(
        default_factory=lambda: RSAKey.generate_key(2048, parameters={"kid": KID, "use": "sig"})
    )
    authorize_requests: list[dict[str, str]] = field(default_factory=list)
    token_requests: list[dict[str, str]] = field(default_factory=list)
    _codes: dict[str, dict[str, str]] = field(default_factory=dict)

    def id_token(self, grant: dict[str, str]) -> str:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": f"sub-{grant['user']}",
            "aud": grant["client_id"],
            "iat": now,
            "exp": now + 300,
            "nonce": grant["nonce"],
            "preferred_username": grant["user"],
        }
        if self.mode == "expired":
            claims.update(iat=now - 7200, exp=now - 3600)
        if self.mode == "wrong_nonce":
            claims["nonce"] = "not-the-nonce-you-sent"
        key = self.key
        if self.mode == "wrong_key":
            key = RSAKey.generate_key(2048, parameters={"kid": KID, "use": "sig"})
        token = jwt.encode({"alg": "RS256", "kid": KID}, claims, key)
        if self.mode == "tampered":
            header, _payload, signature = token.split(".")
            forged = dict(claims, preferred_username="mallory", sub="sub-mallory")
            token = ".".join((header, _b64(json.dumps(forged).encode()), signature))
        return token

    def app(self) -> Starlette:
        async def discovery(request: Request) -> Response:
            return JSONResponse(
                {
                    "issuer": self.issuer,
                    "authorization_endpoint": f"{self.issuer}/authorize",
                    "token_endpoint": f"{self.issuer}/token",
                    "jwks_uri": f"{self.issuer}/jwks",
                    "response_types_supported": ["code"],
                    "subject_types_supported": ["public"],
                    "id_token_signing_alg_values_supported": ["RS256"],
                    "code_challenge_methods_supported": ["S256"],
                    "token_endpoint_auth_methods_supported": [
                        "client_secret_basic",
                        "client_secret_post",
                    ],
                    "scopes_supported": ["openid", "profile", "email"],
                }
            )

        async def authorize_form(request: Request) -> Response:
            params = dict(request.query_params)
            self.authorize_requests.append(params)
            problems = [
                p
                for p, ok in (
                    ("client_id", params.get("client_id") == CLIENT_ID),
                    ("response_type", params.get("response_type") == "code"),
                    ("code_challenge_method", params.get("code_challenge_method") == "S256"),
                    ("code_challenge", bool(params.get("code_challenge"))),
                    ("state", bool(params.get("state"))),
                    ("nonce", bool(params.get("nonce"))),
                    ("scope", "openid" in params.get("scope", "").split()),
                )
                if not ok
            ]
            if problems:
                return HTMLResponse(f"bad authorization request: {problems}", 400)
            hidden = "".join(
                f"<input type='hidden' name='{escape(k)}' value='{escape(v)}'>"
                for k, v in params.items()
            )
            return HTMLResponse(
                "<!doctype html><title>Test IdP</title><h1>Test identity provider</h1>"
                f"<form method='post' action='/authorize'>{hidden}"
                "<label>User <input id='idp-user' name='user'></label>"
                "<button id='idp-approve' type='submit'>Approve</button></form>"
            )

        async def authorize(request: Request) -> Response:
            form = {k: str(v) for k, v in (await request.form()).items()}
            code = secrets.token_urlsafe(24)
            self._codes[code] = form
            state = "a-state-nobody-sent" if self.mode == "wrong_state" else form["state"]
            query = urlencode({"code": code, "state": state})
            return RedirectResponse(f"{form['redirect_uri']}?{query}", 302)

        async def token(request: Request) -> Response:
            form = {k: str(v) for k, v in (await request.form()).items()}
            self.token_requests.append(form)
            client_id, secret = form.get("client_id"), form.get("client_secret")
            auth = request.headers.get("authorization", "")
            if auth.startswith("Basic "):
                client_id, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
            if client_id != CLIENT_ID or secret != CLIENT_SECRET:
                return JSONResponse({"error": "invalid_client"}, 401)
            grant = self._codes.pop(form.get("code", ""), None)
            if grant is None or form.get("grant_type") != "authorization_code":
                return JSONResponse({"error": "invalid_grant"}, 400)
            if form.get("redirect_uri") != grant["redirect_uri"]:
                return JSONResponse({"error": "invalid_grant", "error_description": "uri"}, 400)
            verifier = form.get("code_verifier", "")
            if _b64(hashlib.sha256(verifier.encode()).digest()) != grant["code_challenge"]:
                return JSONResponse(
                    {"error": "invalid_grant", "error_description": "PKCE verifier"}, 400
                )
            return JSONResponse(
                {
                    "access_token": secrets.token_urlsafe(24),
                    "token_type": "Bearer",
                    "expires_in": 300,
                    "id_token": self.id_token(grant),
                }
            )

        async def jwks(request: Request) -> Response:
            return JSONResponse(KeySet([self.key]).as_dict(private=False))

        return Starlette(
            routes=[
                Route("/.well-known/openid-configuration", discovery),
                Route("/authorize", authorize_form, methods=["GET"]),
                Route("/authorize", authorize, methods=["POST"]),
                Route("/token", token, methods=["POST"]),
                Route("/jwks", jwks),
            ]
        )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(app: Any, port: int) -> Iterator[None]:
    """``app`` under uvicorn on 127.0.0.1:``port`` in a thread, for the block's duration."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError(f"the server on port {port} did not start")
        time.sleep(0.05)
    try:
        yield
    finally:
        server.should_exit = True
        thread.join(30)


@contextmanager
def running_provider(host: str = "localhost") -> Iterator[Provider]:
    """A provider on loopback whose issuer names ``host`` (``localhost``, while the UI under
    test is on ``127.0.0.1``: another site, as a real provider is)."""
    port = free_port()
    provider = Provider(issuer=f"http://{host}:{port}")
    with serve(provider.app(), port):
        yield provider
