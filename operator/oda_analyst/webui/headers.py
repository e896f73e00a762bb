"""The security headers on every response (OWASP ASVS 4.0 V14.4), set by ``secure``'s ASGI
middleware so that no route can forget them.

The page loads its script, style and images from this origin only (its one inline script is
``type=application/json`` data, which CSP does not run), may not be framed by anyone
(``frame-ancestors 'none'``, and ``X-Frame-Options: DENY`` for browsers without CSP 2), and its
forms post only here. Every answer is ``no-store``: pages, API answers and artefacts all hold
one user's data, which a shared or back-button cache must not keep after sign-out.
"""

from __future__ import annotations

from secure import (
    CacheControl,
    ContentSecurityPolicy,
    ReferrerPolicy,
    Secure,
    StrictTransportSecurity,
    XContentTypeOptions,
    XFrameOptions,
)
from secure.middleware import SecureASGIMiddleware

CSP = (
    ContentSecurityPolicy()
    .default_src("'self'")
    .script_src("'self'")
    .style_src("'self'")
    .img_src("'self'", "data:")
    .connect_src("'self'")
    .object_src("'none'")
    .base_uri("'none'")
    .form_action("'self'")
    .frame_ancestors("'none'")
)


def security_headers(*, https: bool) -> Secure:
    """The headers; HSTS only when the UI is served over https (on http it would be ignored,
    and sent from a development address it could pin a host that has no TLS)."""
    return Secure(
        csp=CSP,
        xfo=XFrameOptions().deny(),
        xcto=XContentTypeOptions(),
        referrer=ReferrerPolicy().same_origin(),
        cache=CacheControl().no_store(),
        hsts=StrictTransportSecurity().max_age(31536000) if https else None,
    )


__all__ = ["SecureASGIMiddleware", "security_headers"]
