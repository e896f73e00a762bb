"""The kopf registrations, thin: each calls one reconcile function.

Run: ``kopf run -m oda_analyst.controller.handlers --all-namespaces --liveness=http://0.0.0.0:8080/healthz``
(``--standalone`` for a single replica without peering; with several replicas kopf's peering
keeps one active, see crds/peering.yaml). Settings come from ``ODA_*`` (oda_analyst.config).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import kopf

from oda_analyst.config import get_settings
from oda_analyst.controller import metrics, names
from oda_analyst.controller.alert_link import link_alert_answer
from oda_analyst.controller.alerts import ANN_LINKED, LABEL_ALERT
from oda_analyst.controller.bucket import Bucket, query_prefix
from oda_analyst.controller.context import (
    Context,
    admission,
    pipeline_url,
    workload_env,
)
from oda_analyst.controller.kube import Kube
from oda_analyst.controller.login import login  # noqa: F401  (kopf's login, registered here)
from oda_analyst.controller.model_scale import ensure_model
from oda_analyst.controller.peering import peering_priority
from oda_analyst.controller.port_http import HttpPipeline
from oda_analyst.controller.reconcile_cache import (
    collect_cache,
    drop_cache_graph,
    reconcile_cache,
)
from oda_analyst.controller.reconcile_query import reconcile_query
from oda_analyst.controller.reconcile_schedule import reconcile_schedule
from oda_analyst.controller.sidecars import Sidecars, start_sidecars
from oda_analyst.service_auth import bearer_header

Q = (names.GROUP, names.VERSION, names.QUERY_PLURAL)
C = (names.GROUP, names.VERSION, names.CACHE_PLURAL)
_SETTINGS = get_settings()  # intervals of the timers below; the full check is at start-up


def _scheduled(spec: Any, **_: Any) -> bool:
    return bool(spec.get("schedule"))


def _one_shot(spec: Any, **_: Any) -> bool:
    return not spec.get("schedule")


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    settings.persistence.finalizer = names.FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=names.GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=names.GROUP, key="last-handled-configuration"
    )
    app = get_settings()
    settings.peering.name = app.operator_peering  # the chart's, per release
    if not settings.peering.standalone:
        # With peering, a replica acts only once it has seen its peers (else two could take the
        # same query at start-up), and replicas must differ in priority: kopf freezes them all
        # on a tie. The earliest started ranks highest, so a restarted replica stands by.
        settings.peering.mandatory = True
        if settings.peering.priority == 0:
            settings.peering.priority = peering_priority(time.time_ns())
    settings.posting.level = logging.INFO
    settings.watching.server_timeout = 60
    # The analyst Deployment runs the pipeline; this process only talks to it.
    pipeline = HttpPipeline(pipeline_url(app), timeout_s=app.operator_pipeline_timeout_s,
                            headers=bearer_header(app.mcp_token))  # fmt: skip
    memo["ctx"] = Context(settings=app, kube=Kube.from_environment(), pipeline=pipeline,
                          bucket=Bucket.from_settings(app), env=workload_env(app),
                          admission=admission(app))  # fmt: skip
    memo["sidecars"] = start_sidecars(memo["ctx"])  # alert receiver, vLLM idle loop
    metrics.watch_admission(memo["ctx"].admission)
    metrics.serve(app.operator_metrics_port, app.operator_metrics_host)


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    metrics.stop()
    sidecars = memo.get("sidecars")
    if isinstance(sidecars, Sidecars):
        await sidecars.stop()
    ctx = memo.get("ctx")
    if isinstance(ctx, Context):
        if isinstance(ctx.pipeline, HttpPipeline):
            await ctx.pipeline.aclose()
        await ctx.kube.close()


def _ctx(memo: Any) -> Context:
    ctx = memo["ctx"]
    assert isinstance(ctx, Context)
    return ctx


# --- AnalystQuery ---------------------------------------------------------------------------


@kopf.on.resume(*Q, when=_one_shot)
@kopf.on.create(*Q, when=_one_shot, retries=None, backoff=5)
@kopf.on.update(*Q, field="spec.clarifications", when=_one_shot, retries=None, backoff=5)
async def query_changed(name: str, namespace: str | None, body: Any, memo: Any,
                        **_: Any) -> None:  # fmt: skip
    with metrics.reconcile("query"):
        await ensure_model(_ctx(memo).kube, _ctx(memo).settings, body)  # vLLM up, or wait
        await reconcile_query(_ctx(memo), name, namespace or "")


@kopf.on.delete(*Q)
async def query_deleted(name: str, namespace: str | None, uid: str, memo: Any, **_: Any) -> None:
    """The query's artefacts go with it (its pods and ConfigMaps go by owner reference)."""
    ctx = _ctx(memo)
    with metrics.reconcile("query-delete"):
        await asyncio.to_thread(ctx.bucket.remove_prefix, query_prefix(namespace or "", name, uid))
    metrics.forget_query(uid)


@kopf.on.resume(*Q, when=_scheduled)
@kopf.on.create(*Q, when=_scheduled)
@kopf.timer(*Q, when=_scheduled, interval=_SETTINGS.operator_poll_s, initial_delay=1)
async def schedule_tick(name: str, namespace: str | None, memo: Any, **_: Any) -> None:
    with metrics.reconcile("schedule"):
        await reconcile_schedule(_ctx(memo), name, namespace or "")


def _finished(status: Any, **_: Any) -> bool:
    return (status or {}).get("phase") in names.TERMINAL


# Only finished alert queries not linked yet: the timer stops once the link is written.
@kopf.timer(*Q, labels={LABEL_ALERT: kopf.PRESENT}, annotations={ANN_LINKED: kopf.ABSENT},
            when=_finished, interval=_SETTINGS.operator_poll_s, initial_delay=1)  # fmt: skip
async def alert_answer_link(name: str, namespace: str | None, memo: Any, **_: Any) -> None:
    """An alert-triggered query's answer, once finished, linked back (annotations, webhook)."""
    ctx = _ctx(memo)
    with metrics.reconcile("alert-link"):
        await link_alert_answer(ctx.kube, name, namespace or "",
                                webhook=ctx.settings.operator_alerts_webhook,
                                retry_s=max(5.0, ctx.settings.operator_poll_s))  # fmt: skip


# --- VKGCache -------------------------------------------------------------------------------


@kopf.on.resume(*C)
@kopf.on.create(*C, retries=None, backoff=5)
async def cache_changed(name: str, namespace: str | None, memo: Any, **_: Any) -> None:
    with metrics.reconcile("cache"):
        await reconcile_cache(_ctx(memo), name, namespace or "")


@kopf.timer(*C, interval=_SETTINGS.operator_gc_interval_s, idle=2)
async def cache_gc(name: str, namespace: str | None, memo: Any, **_: Any) -> None:
    with metrics.reconcile("cache-gc"):
        await collect_cache(_ctx(memo), name, namespace or "")


@kopf.on.delete(*C)
async def cache_deleted(spec: Any, memo: Any, **_: Any) -> None:
    with metrics.reconcile("cache-delete"):
        await drop_cache_graph(_ctx(memo), spec)


# --- liveness -------------------------------------------------------------------------------


@kopf.on.probe(id="pipeline")
def pipeline_ready(memo: Any, **_: Any) -> bool:
    """The liveness endpoint says whether start-up built the pipeline's client."""
    return isinstance(memo.get("ctx"), Context)
