"""What the identity webhook decides about an AnalystQuery, as pure functions of a request.

Identity comes from the cluster, not from the object: a query's ``spec.user`` owns its sandbox
pod and graph-cache entry, so on create it is the requester's own user name (``userInfo``), and
it never changes afterwards. Only the operator itself (trusted creators: its ServiceAccount, which
creates a scheduled query's runs and alert-triggered queries for the user they belong to) writes
a user other than its own. ``spec.model.baseUrl`` is where the operator sends the lake's data for
a model-backed stage, so it must be one of the release's allowed endpoints.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from oda_analyst.config import Settings
from oda_analyst.errors import OdaError

# The CRD's pattern of spec.user (crds/analystquery.yaml).
USER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$")


class AdmissionRefusedError(OdaError):
    """The API server is told to refuse the request, with this message for its author."""

    code = "admission_refused"


@dataclass(frozen=True)
class Policy:
    trusted_creators: frozenset[str]
    model_urls: frozenset[str]

    @classmethod
    def from_settings(cls, settings: Settings) -> Policy:
        return cls(trusted_creators=frozenset(_items(settings.webhook_trusted_creators)),
                   model_urls=frozenset(normal_url(u)
                                        for u in _items(settings.webhook_model_urls)))  # fmt: skip


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def normal_url(url: str) -> str:
    """A base URL as compared: scheme and host in lower case, no trailing slash."""
    parts = urlsplit(url.strip())
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/"),
                       parts.query, ""))  # fmt: skip


def user_on_create(spec: Mapping[str, Any], requester: str, policy: Policy) -> str:
    """The ``spec.user`` a new query gets: the requester's own name, or (a trusted creator
    acting for someone) the user it wrote."""
    written = str(spec.get("user") or "")
    if requester in policy.trusted_creators:
        if not written:
            raise AdmissionRefusedError(
                f"{requester} creates queries for other users and must name one in spec.user"
            )
        return written
    if not USER.match(requester):
        raise AdmissionRefusedError(
            f"your user name {requester!r} cannot own a query: a query's user is 1-128 letters, "
            "digits, '.', '_', '@', '+' or '-', starting with a letter or digit",
            hint="create the query as a person's account, or ask the administrator to list this "
            "account in webhook.trustedCreators")  # fmt: skip
    if written and written != requester:
        raise AdmissionRefusedError(
            f"spec.user is {written!r}, but you are {requester!r}: a query runs as the user who "
            "creates it",
            hint="leave spec.user out (it is set from your identity) or write your own name",
        )
    return requester


def check_update(old: Mapping[str, Any], new: Mapping[str, Any], policy: Policy) -> None:
    """An update may not move a query to another user, nor to an unlisted model endpoint."""
    before, after = old.get("spec") or {}, new.get("spec") or {}
    if before.get("user") != after.get("user"):
        raise AdmissionRefusedError(
            f"spec.user cannot change (from {before.get('user')!r} to {after.get('user')!r}): "
            "it is set from the identity of whoever created the query",
            hint="create a new AnalystQuery as the user who should own it",
        )
    if before.get("model") != after.get("model"):
        check_model(after, policy)


def check_model(spec: Mapping[str, Any], policy: Policy) -> None:
    """``spec.model.baseUrl``, when set, must be an allowed endpoint."""
    model = spec.get("model")
    if not isinstance(model, Mapping) or "baseUrl" not in model:
        return
    url = str(model["baseUrl"])
    if normal_url(url) in policy.model_urls:
        return
    allowed = ", ".join(sorted(policy.model_urls)) or "none (this release allows no override)"
    raise AdmissionRefusedError(
        f"spec.model.baseUrl {url!r} is not an allowed model endpoint: the operator would send "
        "the lake's data there",
        hint=f"use one of: {allowed}; or leave spec.model out (the release's own model answers); "
        "the administrator adds endpoints in the chart's webhook.modelBaseUrls",
    )
