"""The Alertmanager webhook receiver: a small Starlette app the operator serves beside kopf.

``POST /alerts`` takes Alertmanager's webhook payload (version 4), with the release's bearer token
(``ODA_OPERATOR_ALERTS_TOKEN``; a request without it is a 401), and creates one AnalystQuery
per firing alert that has a template (alerts.py); ``GET /healthz`` says it is up. A resend of
an alert already turned into a query is a duplicate (same name, nothing created); more new
queries than the rate limit allows are dropped and reported. An API server that cannot be
reached (or fails) is a 503, so Alertmanager sends the alerts again later; one that refuses the
query (invalid, forbidden) is reported in ``skipped``, since a resend would be refused again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import uvicorn
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from oda_analyst.controller.alerts import (
    AlertTemplates,
    RateLimit,
    Seen,
    Webhook,
    plan,
)
from oda_analyst.controller.kube import KubeError
from oda_analyst.service_auth import BearerAuth

log = logging.getLogger(__name__)

Create = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
MAX_BODY = 1 << 20  # an Alertmanager group of a few hundred alerts fits well within 1 MiB
# Refusals a resend would meet again (bad object, no permission): reported, not retried.
_REFUSED = frozenset({400, 403, 404, 422})


@dataclass
class Receiver:
    templates: AlertTemplates
    create: Create
    namespace: str
    user: str
    limit: RateLimit
    now: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    seen: Seen = field(default_factory=Seen)

    async def receive(self, webhook: Webhook) -> dict[str, Any]:
        planned = plan(webhook, self.templates, namespace=self.namespace, user=self.user,
                       now=self.now())  # fmt: skip
        out: dict[str, list[str]] = {"created": [], "duplicate": [], "rateLimited": [],
                                     "skipped": []}  # fmt: skip
        for p in planned:
            if p.query is None:
                out["skipped"].append(f"{p.alertname} ({p.fingerprint}): {p.skipped}")
                continue
            name = p.query["metadata"]["name"]
            if name in self.seen:
                out["duplicate"].append(name)
                continue
            if not self.limit.admit():
                log.warning("alert %s (%s) dropped: more than %d queries a minute",
                            p.alertname, p.fingerprint, self.limit.per_minute)  # fmt: skip
                out["rateLimited"].append(name)
                continue
            try:
                made = await self.create(p.query)
            except KubeError as exc:
                if exc.status not in _REFUSED:
                    raise  # the server may take it later: a 503, and Alertmanager resends
                out["skipped"].append(f"{p.alertname} ({p.fingerprint}): the API server "
                                      f"refused {name}: {exc.message}")  # fmt: skip
                continue
            self.seen.add(name)
            fresh = made.get("metadata", {}).get("uid") and not made.get("status")
            out["created" if fresh else "duplicate"].append(name)
            log.info("alert %s (%s) → AnalystQuery %s/%s", p.alertname, p.fingerprint,
                     self.namespace, name)  # fmt: skip
        return out


def build_app(receiver: Receiver, token: str | None = None) -> Starlette:
    """The receiver's routes; with ``token`` every route but /healthz asks for it (Alertmanager's
    ``http_config.authorization``), so a pod that reaches the port cannot start queries."""

    async def alerts(request: Request) -> JSONResponse:
        body = await request.body()
        if len(body) > MAX_BODY:
            return JSONResponse({"error": "payload too large"}, status_code=413)
        try:
            webhook = Webhook.model_validate_json(body)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            return JSONResponse({"error": f"not an Alertmanager webhook: {where}: "
                                          f"{first['msg']}"}, status_code=400)  # fmt: skip
        try:
            result = await receiver.receive(webhook)
        except KubeError as exc:
            log.warning("alerts not turned into queries: %s", exc.message)
            return JSONResponse({"error": exc.message}, status_code=503)
        return JSONResponse(result)

    async def healthz(_: Request) -> JSONResponse:
        return JSONResponse({"ok": True, "templates": sorted(receiver.templates.templates)})

    guard = [Middleware(BearerAuth, token=token, what="the alert receiver")] if token else []
    return Starlette(routes=[Route("/alerts", alerts, methods=["POST"]),
                             Route("/healthz", healthz, methods=["GET"])],
                     middleware=guard)  # fmt: skip


def rate_limit(per_minute: int) -> RateLimit:
    return RateLimit(per_minute=per_minute, clock=time.monotonic)


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # kopf owns the process's signals; uvicorn must not take them over in kopf's loop.
        yield


@dataclass
class Running:
    server: uvicorn.Server
    task: asyncio.Task[None]

    async def stop(self) -> None:
        self.server.should_exit = True
        try:
            await asyncio.wait_for(self.task, timeout=10)
        except TimeoutError:
            self.task.cancel()


def start(app: Starlette, host: str, port: int) -> Running:
    """Serve in the running loop (kopf's) until ``stop``."""
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off")
    server = _Server(config)
    return Running(server, asyncio.create_task(server.serve(), name="alert-receiver"))
