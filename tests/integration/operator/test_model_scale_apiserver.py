"""vLLM scale-to-zero on the real API server (1.20): a model-backed query scales its model's
Deployment from zero to one and waits (kopf.TemporaryError) until a replica is ready, and the
idle check scales it back to zero. No kubelet runs here, so readiness is what a kubelet would
report, patched into the Deployment's status by the test."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import kopf
import pytest

from kube_cluster import Cluster
from kube_fixtures import Api
from oda_analyst.config import Settings
from oda_analyst.controller.kube import Kube
from oda_analyst.controller.model_scale import (
    LABEL_LAST_USED,
    LABEL_MODEL,
    ensure_model,
    scale_idle,
)

pytestmark = pytest.mark.timeout(600)


def _deployment(name: str, model: str) -> dict[str, Any]:
    labels = {"app.kubernetes.io/component": "vllm", LABEL_MODEL: model}
    pod = {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0"}]}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "labels": labels},
            "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": pod}}}  # fmt: skip


@pytest.fixture()
def ns(cluster: Cluster, api: Api) -> Iterator[str]:
    name = f"t-vllm-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", name)
    for dep, model in (("oda-vllm-qwen", "qwen"), ("oda-vllm-other", "other")):
        api.http.post(f"/apis/apps/v1/namespaces/{name}/deployments",
                      json=_deployment(dep, model)).raise_for_status()  # fmt: skip
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def _query(phase: str | None = "Pending", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "q"}, "spec": {"question": "q", "user": "u", **spec},
            "status": {"phase": phase} if phase else {}}  # fmt: skip


def test_model_backed_query_scales_up_waits_for_readiness_and_idle_scales_down(
    cluster: Cluster, api: Api, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))
    settings = Settings(llm_base_url="http://oda-vllm-qwen:8000/v1", llm_model="qwen",
                        operator_vllm_namespace=ns, operator_vllm_idle_s=5,
                        operator_poll_s=1)  # fmt: skip
    path = f"/apis/apps/v1/namespaces/{ns}/deployments/oda-vllm-qwen"

    async def scenario() -> None:
        kube = Kube.from_environment()
        try:
            # a query that runs by the rules alone, and a finished one, start nothing
            await ensure_model(kube, Settings(operator_vllm_namespace=ns, llm_base_url=None),
                               _query())  # fmt: skip
            await ensure_model(kube, settings, _query("Completed"))
            assert api.get(path)["spec"]["replicas"] == 0  # type: ignore[index]

            with pytest.raises(kopf.TemporaryError, match=r"oda-vllm-qwen.*ready"):
                await ensure_model(kube, settings, _query())
            dep = api.get(path)
            assert dep is not None and dep["spec"]["replicas"] == 1
            assert LABEL_LAST_USED in dep["metadata"]["labels"]
            other = api.get(f"/apis/apps/v1/namespaces/{ns}/deployments/oda-vllm-other")
            assert other is not None and other["spec"]["replicas"] == 0  # only the query's model
            with pytest.raises(kopf.TemporaryError):  # still not ready: still waiting
                await ensure_model(kube, settings, _query("BuildingVKG"))

            # what a kubelet and the deployment controller would report once vLLM answers /health
            ready = {"observedGeneration": dep["metadata"]["generation"], "replicas": 1,
                     "readyReplicas": 1, "availableReplicas": 1}  # fmt: skip
            merge = {"Content-Type": "application/merge-patch+json"}
            api.http.patch(f"{path}/status", json={"status": ready},
                           headers=merge).raise_for_status()  # fmt: skip
            await ensure_model(kube, settings, _query("Retrieving"))  # ready: goes on
            # a later use stamps the Deployment again and it stays ready (a stamp that moved
            # its generation would leave it "starting" for good)
            stamp = api.get(path)["metadata"]["labels"][LABEL_LAST_USED]  # type: ignore[index]
            await asyncio.sleep(1.1)
            await ensure_model(kube, settings, _query("Retrieving"))
            again = api.get(path)
            assert again is not None and again["metadata"]["labels"][LABEL_LAST_USED] != stamp

            now = datetime.now(UTC)
            assert await scale_idle(kube, settings, now) == []  # just used
            later = now + timedelta(seconds=settings.operator_vllm_idle_s + 1)
            assert await scale_idle(kube, settings, later) == ["oda-vllm-qwen"]
            assert api.get(path)["spec"]["replicas"] == 0  # type: ignore[index]
            # the next model-backed query starts it again
            with pytest.raises(kopf.TemporaryError):
                await ensure_model(kube, settings, _query())
            assert api.get(path)["spec"]["replicas"] == 1  # type: ignore[index]
        finally:
            await kube.close()

    asyncio.run(scenario())
