"""One VKGCache: its builder Job, its status from the graph store, its expiry."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import kopf

from oda_analyst.controller import events, gc, manifests, metrics, names
from oda_analyst.controller.context import Context
from oda_analyst.controller.kube import path_of
from oda_analyst.controller.port import GraphInfo
from oda_analyst.controller.port_http import AnalystUnavailableError
from oda_analyst.controller.status import stamp


def cache_path(namespace: str, name: str | None = None, sub: str | None = None) -> str:
    return path_of(names.API_VERSION, names.CACHE_PLURAL, namespace, name, sub)


def _graph_status(info: GraphInfo) -> dict[str, Any]:
    return {"phase": "Ready", "triples": info.triples, "bytes": info.bytes,
            "created": stamp(info.created), "lastAccess": stamp(info.last_access),
            "namedGraph": info.named_graph, "message": f"{info.triples} triples"}  # fmt: skip


async def _graph(ctx: Context, key: str) -> GraphInfo | None:
    try:
        return await ctx.pipeline.graph(key)
    except AnalystUnavailableError as err:  # the graph may be there: ask again, decide then
        raise kopf.TemporaryError(err.message, delay=ctx.settings.operator_poll_s) from None


async def _job_failure(ctx: Context, namespace: str, job: str) -> str:
    pods = await ctx.kube.list(path_of("v1", "pods", namespace), labels={"job-name": job})
    for pod in pods:
        status = pod.get("status") or {}
        for cs in status.get("containerStatuses") or []:
            term = (cs.get("state") or {}).get("terminated") or {}
            if term.get("exitCode"):
                return str(term.get("message") or f"exit code {term['exitCode']}").strip()
        if status.get("phase") == "Failed" and status.get("message"):
            return f"pod {pod['metadata']['name']}: {status['message']}"
    return "the builder Job failed"


async def reconcile_cache(ctx: Context, name: str, namespace: str) -> None:
    obj = await ctx.kube.get(cache_path(namespace, name))
    if obj is None or obj["metadata"].get("deletionTimestamp"):
        return
    status, key = obj.get("status") or {}, obj["spec"]["key"]
    status_path = cache_path(namespace, name, "status")
    job_name = names.builder_job_name(name)
    job_path = path_of("batch/v1", "jobs", namespace, job_name)
    phase = status.get("phase")
    if phase == "Failed":
        return
    info = await _graph(ctx, key)
    if info is not None:  # built (by this Job, or by an earlier life of this cache)
        if phase != "Ready":
            await ctx.kube.patch(status_path, {"status": _graph_status(info)})
            events.info(obj, "Built", f"{info.triples} triples in {info.named_graph}")
        return
    job = await ctx.kube.get(job_path)
    if phase == "Ready" or (job and (job.get("status") or {}).get("succeeded") and not info):
        # The graph left the store (its own LRU) while the resource stayed: build it again.
        if job is not None:
            await ctx.kube.delete(job_path)
        await ctx.kube.patch(
            status_path, {"status": {"phase": "Pending", "message": "graph gone; rebuilding"}}
        )
        raise kopf.TemporaryError("graph left the store; rebuilding", delay=1)
    if job is None:
        await ctx.kube.create(manifests.get_builder_job(obj, ctx.env))
        metrics.pod_launched("vkg-builder")
        await ctx.kube.patch(
            status_path, {"status": {"phase": "Building", "message": f"Job {job_name}"}}
        )
        events.info(obj, "Building", f"builder Job {job_name} reads the lake")
        raise kopf.TemporaryError("builder started", delay=ctx.settings.operator_poll_s)
    conds = {c.get("type"): c.get("status") for c in (job.get("status") or {}).get("conditions")
             or []}  # fmt: skip
    if conds.get("Failed") == "True":
        message = await _job_failure(ctx, namespace, job_name)
        await ctx.kube.patch(status_path, {"status": {"phase": "Failed", "message": message}})
        events.warn(obj, "BuildFailed", message)
        raise kopf.PermanentError(message)
    raise kopf.TemporaryError(f"waiting for Job {job_name}", delay=ctx.settings.operator_poll_s)


async def collect_cache(ctx: Context, name: str, namespace: str) -> str | None:
    """The TTL/LRU timer: refresh lastAccess and bytes from the store, then delete the cache
    when it expired or is among the least recently used beyond the namespace's bounds (count,
    total size); never while a query that is not finished reads it. Returns why it deleted
    it, else None."""
    obj = await ctx.kube.get(cache_path(namespace, name))
    if obj is None or (obj.get("status") or {}).get("phase") != "Ready":
        return None
    info = await _graph(ctx, obj["spec"]["key"])
    if info is None:
        return None  # reconcile_cache rebuilds it when a query needs it
    fresh = {"lastAccess": stamp(info.last_access), "bytes": info.bytes}
    if any((obj.get("status") or {}).get(k) != v for k, v in fresh.items()):
        obj = await ctx.kube.patch(cache_path(namespace, name, "status"), {"status": fresh})
    queries = await ctx.kube.list(path_of(names.API_VERSION, names.QUERY_PLURAL, namespace))
    caches = await ctx.kube.list(cache_path(namespace))
    why = gc.why_collect(obj, datetime.now(UTC), caches=caches, queries=queries,
                         capacity=ctx.settings.operator_vkg_capacity,
                         max_bytes=ctx.settings.operator_vkg_max_bytes)  # fmt: skip
    if why:
        events.info(obj, "Evicted", why)
        await ctx.kube.delete(cache_path(namespace, name))
    return why


async def drop_cache_graph(ctx: Context, spec: Mapping[str, Any]) -> None:
    try:
        await ctx.pipeline.drop_graph(spec["key"])
    except AnalystUnavailableError as err:  # the finalizer stays until the graph is dropped
        raise kopf.TemporaryError(err.message, delay=ctx.settings.operator_poll_s) from None
