"""Who may call an internal HTTP service: a bearer token shared per release.

The chart generates one random token per boundary (the analyst's MCP servers; the operator's
alert receiver) into Secrets of the release and gives it only to the components that call that
boundary; a server refuses every request without it (401), whatever labels or headers the caller
sets. A shared secret rather than projected ServiceAccount tokens checked with TokenReview: the
alert receiver's caller (Alertmanager) lies outside the release and can send a static bearer
credential but no audience-bound token of ours, and TokenReview would give every server pod an
API credential and a cluster-wide ``system:auth-delegator`` binding, and every call a round trip
to the API server, where these pods today hold no API access at all.

Behind the token, the MCP servers still take whom a call is for from ``x-oda-user``: only token
holders (the web UI, which signs its users in, and the operator, whose queries' users the
admission webhook stamps) can send it, and they act for their users.

A server without a token is allowed on loopback only (one person's machine, as before); bound to
any other address it refuses to start, so no install serves these endpoints open by mistake.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Collection
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from oda_analyst.errors import ConfigError

REALM = "oda-analyst"
# Probes (kubelet, tests) read these without a token: they say only that the server is up.
OPEN_PATHS = frozenset({"/healthz"})


def bearer_header(token: str | None) -> dict[str, str]:
    """The header a caller sends with ``token``; none without one."""
    return {"authorization": f"Bearer {token}"} if token else {}


def presented_token(headers: Collection[tuple[bytes, bytes]]) -> str | None:
    """The bearer token of an ``Authorization`` header among raw ASGI headers, if any."""
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").strip().partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None


def token_matches(presented: str | None, expected: str) -> bool:
    """Constant-time comparison, so a caller cannot learn the token a byte at a time."""
    if presented is None:
        return False
    return hmac.compare_digest(presented.encode(), expected.encode())


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None, *, what: str, variable: str) -> None:
    """Refuse to serve ``what`` open on a non-loopback address."""
    if token or is_loopback(host):
        return
    raise ConfigError(
        f"{what} would listen on {host} without a token: anyone who reaches it could call it",
        hint=f"set {variable} (the chart generates one per release), or bind to 127.0.0.1",
    )


class BearerAuth:
    """ASGI middleware: every HTTP request but ``open_paths`` must carry ``token``."""

    def __init__(self, app: ASGIApp, token: str, what: str,
                 open_paths: Collection[str] = OPEN_PATHS) -> None:  # fmt: skip
        if not token:
            raise ConfigError(f"an empty token for {what}", hint="set a non-empty token")
        self.app = app
        self.token = token
        self.what = what
        self.open_paths = frozenset(open_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path", "") in self.open_paths:
            await self.app(scope, receive, send)
            return
        presented = presented_token(scope.get("headers", ()))
        if token_matches(presented, self.token):
            await self.app(scope, receive, send)
            return
        await _refuse(send, self.what, presented is None)


async def _refuse(send: Send, what: str, missing: bool) -> None:
    reason = "no bearer token" if missing else "a wrong bearer token"
    body: dict[str, Any] = {
        "error": "unauthenticated",
        "message": f"{what} refused a request with {reason}",
        "hint": "send 'Authorization: Bearer <token>' with the token of the release's Secret",
    }
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": 401, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
        (b"www-authenticate", f'Bearer realm="{REALM}"'.encode())]})  # fmt: skip
    await send({"type": "http.response.body", "body": data})
