"""The answer of an alert-triggered query, linked back once it is finished: its text and URI
as annotations on the AnalystQuery, and (when configured) POSTed as JSON to a webhook, e.g. the
channel the alert went to. The ``alert-linked`` annotation is written last, so an operator
stopped halfway posts again rather than never."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import httpx
import kopf

from oda_analyst.controller import names
from oda_analyst.controller.alerts import ANN_LINKED, link_annotations, link_payload
from oda_analyst.controller.kube import Kube, path_of

log = logging.getLogger(__name__)


async def link_alert_answer(kube: Kube, name: str, namespace: str, *, webhook: str | None,
                            retry_s: float) -> bool:  # fmt: skip
    """True when this call linked the answer; False when there is nothing (more) to do."""
    path = path_of(names.API_VERSION, names.QUERY_PLURAL, namespace, name)
    obj = await kube.get(path)
    if obj is None or obj["metadata"].get("deletionTimestamp"):
        return False
    if ((obj.get("status") or {}).get("phase")) not in names.TERMINAL:
        return False
    if ANN_LINKED in (obj["metadata"].get("annotations") or {}):
        return False
    if webhook:
        try:
            async with httpx.AsyncClient(timeout=10) as http:
                response = await http.post(webhook, json=link_payload(obj))
            response.raise_for_status()
        except httpx.HTTPError as exc:
            raise kopf.TemporaryError(f"the answer webhook {webhook} failed: {exc}",
                                      delay=retry_s) from None  # fmt: skip
    annotations = link_annotations(obj, datetime.now(UTC))
    await kube.apply({"apiVersion": obj["apiVersion"], "kind": obj["kind"],
                      "metadata": {"name": name, "namespace": namespace,
                                   "annotations": annotations}})  # fmt: skip
    log.info("alert query %s/%s: answer linked%s", namespace, name,
             f" and posted to {webhook}" if webhook else "")  # fmt: skip
    return True
