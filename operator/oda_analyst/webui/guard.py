"""What every request must be before a route sees it: not cross-site when it changes anything,
and JSON when it is an API call (OWASP ASVS 4.0 V4.2.2, V13.1.5, V13.2.5).

A state-changing request (any method but GET, HEAD, OPTIONS) is refused 403 when the browser
says it comes from another site or origin: ``Sec-Fetch-Site`` other than ``same-origin`` or
``none``, or else an ``Origin`` that is neither the UI's public origin nor the origin of the
``Host`` it was sent to. Another port on the same host is *same-site* but not same-origin, so it
is refused too (SameSite cookies alone let that through). A request with neither header is no
modern browser's: the forms' CSRF tokens (asgi-csrf) and the SameSite cookies cover old ones.

``/api/*`` takes only ``application/json`` bodies (415 otherwise): a cross-origin page can send
``text/plain`` or a form without a CORS preflight, but not JSON, and the UI serves no CORS.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# "none": the user typed the address or used a bookmark, never a page of another site.
_OWN_FETCH_SITES = frozenset({b"same-origin", b"none"})


def origin_of(url: str | None) -> str | None:
    """``scheme://host[:port]`` of a URL, lower case, or None for no usable URL."""
    if not url:
        return None
    parts = urlsplit(url.strip())
    if not parts.scheme or not parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc}".lower()


def is_api(scope: Scope) -> bool:
    return str(scope.get("path", "")).startswith("/api/")


async def refuse(scope: Scope, send: Send, status: int, message: str) -> None:
    """The refusal as JSON on ``/api/*`` (the page shows its ``error``), else a short text."""
    if is_api(scope):
        body, kind = json.dumps({"error": message}).encode(), b"application/json"
    else:
        body, kind = message.encode(), b"text/plain; charset=utf-8"
    headers = [(b"content-type", kind), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def cross_origin_reason(headers: dict[bytes, bytes], public_origin: str | None) -> str | None:
    """Why a state-changing request with these headers is another site's, or None if it is not."""
    site = headers.get(b"sec-fetch-site")
    if site is not None:
        if site.lower() in _OWN_FETCH_SITES:
            return None
        return f"a {site.decode('latin-1')} request may not change anything here"
    origin = headers.get(b"origin")
    if origin is None:
        return None
    sent_from = origin.decode("latin-1").strip().lower()
    if public_origin is not None and sent_from == public_origin:
        return None
    host = headers.get(b"host", b"").decode("latin-1").lower()
    if host and urlsplit(sent_from).netloc == host:
        return None
    return f"a request from {sent_from[:80]} may not change anything here"


def media_type(headers: dict[bytes, bytes]) -> str:
    return headers.get(b"content-type", b"").split(b";", 1)[0].strip().lower().decode("latin-1")


class RequestGuard:
    """Pure ASGI middleware (it must not read the body: the answer stream follows it)."""

    def __init__(self, app: ASGIApp, *, public_url: str | None = None) -> None:
        self.app = app
        self.public_origin = origin_of(public_url)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        reason = cross_origin_reason(headers, self.public_origin)
        if reason is not None:
            await refuse(scope, send, 403, reason)
            return
        if is_api(scope) and media_type(headers) != "application/json":
            await refuse(scope, send, 415, "send the request body as application/json")
            return
        await self.app(scope, receive, send)


def csrf_failed() -> Callable[[MutableMapping[str, Any], Any, Any], Awaitable[None]]:
    """asgi-csrf's answer to a form without a matching token: a sentence, not its debug text."""

    async def send_failed(scope: MutableMapping[str, Any], send: Any, _reason: Any) -> None:
        await refuse(
            scope,
            send,
            403,
            "This form has expired or was not sent from this site: reload the page and try again.",
        )

    return send_failed
