"""vLLM scale-to-zero through the operator: a model-backed AnalystQuery scales its model's
Deployment from zero to one and waits until a replica is ready before stage 1 starts; once no
model-backed query has run for the idle time, the operator scales it back to zero.

No kubelet runs here, so "ready" is what a kubelet would report, patched into the Deployment's
status by the test whenever it runs a replica. There is no GPU either: the model endpoint the
operator is given does not answer, so the query runs by the rules (and says so in its
warnings) — what is tested is the scaling around it, not the model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from alerting import free_port
from k8s_node import wait_for
from kube_fixtures import Api
from oda_analyst.controller.model_scale import LABEL_LAST_USED, LABEL_MODEL
from operator_runner import operator_in_process

pytestmark = pytest.mark.timeout(1200)

MERGE = {"Content-Type": "application/merge-patch+json"}
# node 903: the e2e tests share one graph store, and no other test builds this graph
QUESTION = "Retrieve the total power of node 903 on 1 June 2022 from 20:00 to 21:00"


def _deployment(name: str, model: str) -> dict[str, Any]:
    labels = {"app.kubernetes.io/component": "vllm", LABEL_MODEL: model}
    pod = {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0"}]}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "labels": labels},
            "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": pod}}}  # fmt: skip


def _report_ready(api: Api, path: str) -> dict[str, Any]:
    """What the kubelet and the deployment controller would write once vLLM answers /health:
    a ready replica of the Deployment's current generation (nothing while it is at zero)."""
    dep = api.get(path)
    assert dep is not None
    replicas = int(dep["spec"].get("replicas") or 0)
    status = dep.get("status") or {}
    current = status.get("observedGeneration") == dep["metadata"]["generation"]
    if replicas and (status.get("readyReplicas") != replicas or not current):
        ready = {"observedGeneration": dep["metadata"]["generation"], "replicas": replicas,
                 "readyReplicas": replicas, "availableReplicas": replicas}  # fmt: skip
        api.http.patch(f"{path}/status", json={"status": ready}, headers=MERGE).raise_for_status()
    return dep


def test_model_backed_query_waits_for_its_model_server_which_then_idles_to_zero(
    cluster: Any, api: Api, crds: None, node: Any, namespaces: Any,
    s3_lake: tuple[str, Path], operator_env: dict[str, str],
) -> None:  # fmt: skip
    ns = namespaces("t-m-")
    deps = f"/apis/apps/v1/namespaces/{ns}/deployments"
    api.http.post(deps, json=_deployment("oda-vllm-qwen", "qwen")).raise_for_status()
    path = f"{deps}/oda-vllm-qwen"
    dead = free_port()  # nothing listens: the model calls fail and the rules answer
    env = {**operator_env, "ODA_LLM_BASE_URL": f"http://127.0.0.1:{dead}/v1",
           "ODA_LLM_MODEL": "qwen", "ODA_OPERATOR_VLLM_NAMESPACE": ns,
           "ODA_OPERATOR_VLLM_IDLE_S": "8"}  # fmt: skip
    query = {"apiVersion": "oda-analyst.dev/v1alpha1", "kind": "AnalystQuery",
             "metadata": {"name": "q", "namespace": ns},
             "spec": {"question": QUESTION, "user": "alice",
                      "referenceTime": "2022-06-15T00:00:00Z"}}  # fmt: skip
    with operator_in_process(env, ns):
        api.http.post(f"/apis/oda-analyst.dev/v1alpha1/namespaces/{ns}/analystqueries",
                      json=query).raise_for_status()  # fmt: skip
        up = wait_for(lambda: (api.get(path) or {}).get("spec", {}).get("replicas") == 1,
                      timeout=120, what="the operator to scale the model server to 1")  # fmt: skip
        assert up
        dep = api.get(path)
        assert dep is not None and LABEL_LAST_USED in dep["metadata"]["labels"]
        # not ready yet: the query has not started stage 1
        assert ((api.query(ns, "q") or {}).get("status") or {}).get("phase") is None

        def waiting() -> list[str]:
            # kopf records a handler's temporary failure in its progress annotation
            ann = ((api.query(ns, "q") or {}).get("metadata") or {}).get("annotations") or {}
            return [v for v in ann.values() if "waiting for the model server" in v]

        (progress,) = wait_for(waiting, timeout=60, what="the query's recorded wait")
        assert "oda-vllm-qwen" in progress

        def finished() -> dict[str, Any] | None:
            _report_ready(api, path)  # the kubelet's part, each time a replica is asked for
            obj = api.query(ns, "q")
            phase = ((obj or {}).get("status") or {}).get("phase")
            return obj if phase in {"Completed", "Failed", "Rejected"} else None

        done = wait_for(finished, timeout=900, what="the query to finish", every=1)
        assert done["status"]["phase"] == "Completed", done["status"].get("message")
        assert "node 903" in done["status"]["understoodAs"]
        # no model-backed query since: after the idle time the server goes back to zero
        down = wait_for(lambda: (api.get(path) or {}).get("spec", {}).get("replicas") == 0,
                        timeout=120, what="the idle model server to be scaled to 0")  # fmt: skip
        assert down
