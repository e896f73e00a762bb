"""vLLM scale-to-zero: a GPU model server runs only while model-backed queries do.

The chart's vLLM Deployments carry ``app.kubernetes.io/component=vllm`` and
``oda-analyst.dev/model=<served model name>``. A model-backed query (the operator has a model
endpoint, or the query names one in spec.model) first makes sure its model's Deployment runs:
it stamps ``model-last-used`` on it, scales it to one replica when it is at zero, and waits
(``kopf.TemporaryError``) until a replica of the Deployment's current generation is ready. A
loop beside kopf scales every Deployment whose last use is older than the idle time back to
zero. The stamp lives on the Deployment, so a restarted operator keeps counting from the real
last use; it is a label (epoch seconds), not an annotation, because a Deployment's generation
moves with every change of its annotations, and readiness would never catch up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import kopf

from oda_analyst.config import Settings
from oda_analyst.controller import names
from oda_analyst.controller.kube import Kube, path_of

log = logging.getLogger(__name__)

LABEL_MODEL = f"{names.GROUP}/model"
LABEL_LAST_USED = f"{names.GROUP}/model-last-used"
SELECTOR = {names.LABEL_COMPONENT: "vllm"}
Readiness = Literal["ready", "starting", "down"]


def model_of(obj: Mapping[str, Any], settings: Settings) -> str | None:
    """The served model name a query will call, or None when it runs by the rules alone."""
    own = (obj.get("spec") or {}).get("model") or {}
    if own.get("name"):
        return str(own["name"])
    if settings.llm_base_url and settings.llm_model:
        return settings.llm_model
    return None


def readiness(dep: Mapping[str, Any]) -> Readiness:
    spec, status = dep.get("spec") or {}, dep.get("status") or {}
    if int(spec.get("replicas") or 0) == 0:
        return "down"
    current = int(status.get("observedGeneration") or 0) >= int(
        dep["metadata"].get("generation") or 0
    )
    return "ready" if current and int(status.get("readyReplicas") or 0) >= 1 else "starting"


def last_used(dep: Mapping[str, Any]) -> datetime:
    meta = dep["metadata"]
    stamp = (meta.get("labels") or {}).get(LABEL_LAST_USED)
    if stamp and stamp.isdigit():
        return datetime.fromtimestamp(int(stamp), UTC)
    return datetime.fromisoformat(str(meta["creationTimestamp"]).replace("Z", "+00:00"))


def is_idle(dep: Mapping[str, Any], now: datetime, idle_s: float) -> bool:
    return readiness(dep) != "down" and now - last_used(dep) >= timedelta(seconds=idle_s)


def use_patch(dep: Mapping[str, Any], now: datetime, idle_s: float) -> dict[str, Any] | None:
    """The patch that marks a use (and starts the server when it is down), or None when the
    stamp is fresh enough and the server up: a query polled every second must not write the
    Deployment every second."""
    down = readiness(dep) == "down"
    fresh = now - last_used(dep) < timedelta(seconds=min(60.0, idle_s / 10))
    if fresh and not down:
        return None
    patch: dict[str, Any] = {"metadata": {"labels": {LABEL_LAST_USED: str(int(now.timestamp()))}}}
    if down:
        patch["spec"] = {"replicas": 1}
    return patch


async def _deployment(kube: Kube, namespace: str, model: str) -> dict[str, Any] | None:
    found = await kube.list(path_of("apps/v1", "deployments", namespace),
                            labels={**SELECTOR, LABEL_MODEL: model})  # fmt: skip
    return found[0] if found else None


async def ensure_model(kube: Kube, settings: Settings, obj: Mapping[str, Any]) -> None:
    """Before a model-backed query runs a stage: its model server is up, or we wait for it."""
    namespace = settings.operator_vllm_namespace
    phase = (obj.get("status") or {}).get("phase")
    if not namespace or phase in names.TERMINAL or phase == names.WAITING:
        return
    model = model_of(obj, settings)
    if model is None:
        return
    dep = await _deployment(kube, namespace, model)
    if dep is None:
        return  # not one of ours (an external endpoint): nothing to scale
    now = datetime.now(UTC)
    patch = use_patch(dep, now, settings.operator_vllm_idle_s)
    path = path_of("apps/v1", "deployments", namespace, dep["metadata"]["name"])
    if patch is not None:
        if "spec" in patch:
            log.info("scaling %s/%s up for model %s", namespace, dep["metadata"]["name"], model)
        dep = await kube.patch(path, patch)
    if readiness(dep) != "ready":
        what = f"waiting for the model server {dep['metadata']['name']} ({model}) to be ready"
        raise kopf.TemporaryError(what, delay=settings.operator_poll_s)


async def scale_idle(kube: Kube, settings: Settings, now: datetime) -> list[str]:
    """Scale every idle vLLM Deployment to zero; the names scaled."""
    namespace = settings.operator_vllm_namespace
    if not namespace:
        return []
    scaled: list[str] = []
    for dep in await kube.list(path_of("apps/v1", "deployments", namespace), labels=SELECTOR):
        if is_idle(dep, now, settings.operator_vllm_idle_s):
            name = dep["metadata"]["name"]
            await kube.patch(path_of("apps/v1", "deployments", namespace, name),
                             {"spec": {"replicas": 0}})  # fmt: skip
            log.info("scaled %s/%s to zero (idle for %.0f s)", namespace, name,
                     (now - last_used(dep)).total_seconds())  # fmt: skip
            scaled.append(name)
    return scaled


async def idle_loop(kube: Kube, settings: Settings) -> None:
    """Run until cancelled: look every tenth of the idle time (at most once a minute)."""
    every = max(settings.operator_poll_s, min(60.0, settings.operator_vllm_idle_s / 10))
    while True:
        try:
            await scale_idle(kube, settings, datetime.now(UTC))
        except Exception as exc:  # a failed look is retried at the next tick
            log.warning("vLLM idle check failed: %s", exc)
        await asyncio.sleep(every)
