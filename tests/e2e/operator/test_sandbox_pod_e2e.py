"""The chart code of an AnalystQuery runs in its user's sandbox pod, never in the operator.

The operator runs here as in its image: without a sandbox of its own (its ``ODA_CACHE`` holds no
sandbox Python environment, so the code agent's local backends cannot start). A query asking for
a plot still completes: the analyst's code agent hands its script to a pod of the user
(runtimeClassName gvisor, no token, read-only root, a deny-all fence, so the test node runs it
with no network at all) on the test node; its files go in and come out through the API
server's exec into the pod's io container, and the chart in the query's artefacts is byte for
byte the file the script wrote to that pod's /out. When that pod cannot run (its image is
missing), the query fails with the pod's reason in status and a Warning event — not a
traceback, not a Completed without its chart.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from minio import Minio

import retrieval_eval
from k8s_node import NodeAgent, wait_for
from kube_cluster import Cluster
from kube_fixtures import ARTIFACT_BUCKET, GROUP, S3_KEY, S3_SECRET, Api
from oda_analyst.codeagent.pyenv import locate
from oda_analyst.controller import names
from oda_analyst.errors import SandboxUnavailableError
from operator_runner import operator_in_process

pytestmark = pytest.mark.timeout(1200)

AS_OF = "2022-06-15T00:00:00Z"
FINISHED = {"Completed", "Failed", "Rejected"}


@pytest.fixture()
def no_local_sandbox(operator_env: dict[str, str], tmp_path: Path) -> Iterator[dict[str, str]]:
    """The operator's environment with no sandbox of its own, as in the operator's image."""
    yield {**operator_env, "ODA_CACHE": str(tmp_path / "no-sandbox-here")}


def _apply(cluster: Cluster, ns: str, name: str, question: str) -> None:
    body = {"apiVersion": f"{GROUP}/v1alpha1", "kind": "AnalystQuery",
            "metadata": {"name": name},
            "spec": {"question": question, "user": "alice", "referenceTime": AS_OF}}  # fmt: skip
    cluster.kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump(body))


def _finished(api: Api, ns: str, name: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        obj = api.query(ns, name)
        return obj if ((obj or {}).get("status") or {}).get("phase") in FINISHED else None

    found: dict[str, Any] = wait_for(done, timeout=900, what=f"{name} to finish", every=1)
    return found


def _bucket(s3: str) -> Minio:
    return Minio(s3.removeprefix("http://"), access_key=S3_KEY, secret_key=S3_SECRET,
                 secure=False)  # fmt: skip


def _get(client: Minio, key: str) -> bytes:
    resp = client.get_object(ARTIFACT_BUCKET, key)
    try:
        return bytes(resp.read())
    finally:
        resp.close()
        resp.release_conn()


def _code_pods(api: Api, ns: str, query: str) -> list[dict[str, Any]]:
    pods = api.items(f"/api/v1/namespaces/{ns}/pods", **{names.LABEL_QUERY: query})
    return [p for p in pods if "-code-" in p["metadata"]["name"]]


def _warnings(api: Api, ns: str, name: str) -> list[dict[str, Any]]:
    return [e for e in api.events(ns, name) if e.get("type") == "Warning"]


def test_a_plot_query_draws_its_chart_in_the_users_gvisor_pod(
    cluster: Cluster, api: Api, crds: None, node: NodeAgent, namespaces: Any, s3: str,
    no_local_sandbox: dict[str, str],
) -> None:  # fmt: skip
    item = next(i for i in retrieval_eval.load_items() if i.id == "Q2")  # "… and plot"
    ns = namespaces("t-sbx-")
    with operator_in_process(no_local_sandbox, ns):
        with pytest.raises(SandboxUnavailableError):  # the operator could run no code itself
            locate()
        _apply(cluster, ns, "q2", item.text)
        obj = _finished(api, ns, "q2")
    status = obj["status"]
    assert status["phase"] == "Completed", status.get("message")
    client = _bucket(s3)
    prefix = f"s3://{ARTIFACT_BUCKET}/"
    charts = [u for u in status["artifacts"] if "/coordinator/" in u and u.endswith(".png")]
    assert len(charts) == 1, status["artifacts"]
    chart = _get(client, charts[0].removeprefix(prefix))
    assert chart.startswith(b"\x89PNG") and len(chart) > 10_000
    told = json.loads(_get(client, status["answerUri"].removeprefix(prefix)))
    assert told["status"] == "completed" and told["dispatches"].get("codeagent.execute") == 1

    # The pod that ran the chart's script: the user's hardened sandbox, owned by the query.
    (pod,) = _code_pods(api, ns, "q2")
    spec, meta = pod["spec"], pod["metadata"]
    assert pod["status"]["phase"] == "Succeeded"
    assert spec["runtimeClassName"] == "gvisor" and spec["automountServiceAccountToken"] is False
    assert [c["name"] for c in spec["containers"]] == ["sandbox", "io"]
    assert spec["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    assert not [e for c in spec["containers"] for e in c.get("env") or [] if "valueFrom" in e]
    assert meta["ownerReferences"][0]["uid"] == obj["metadata"]["uid"]
    ran = [r for r in node.started() if r["name"] == meta["name"]]
    assert len(ran) == 1 and ran[0]["runtimeClassName"] == "gvisor"
    assert ran[0]["network"] == "none"  # its fence denies everything: no network at all
    fences = api.items(f"/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies",
                       **{names.LABEL_QUERY: "q2"})  # fmt: skip
    # no ingress and no egress at all (the API server drops empty lists)
    code_fences = [f for f in fences if "sandbox-user" in json.dumps(f["spec"]["podSelector"])
                   and f["metadata"]["name"].endswith("-fence")]  # fmt: skip
    assert code_fences and all(set(f["spec"]["policyTypes"]) == {"Ingress", "Egress"}
                               and not f["spec"].get("ingress") and not f["spec"].get("egress")
                               for f in code_fences)  # fmt: skip
    # its files went in and out through the API server's exec into its io container
    moved = [c for c in node.kubelet.calls if c["namespace"] == ns and c["pod"] == meta["name"]]
    assert [c["command"][3] for c in moved] == ["put", "get", "release"], moved
    assert all(c["container"] == "io" and c.get("exit") == 0 for c in moved), moved

    # The chart is the file the script wrote to the pod's /out, byte for byte.
    drawn = charts[0].rsplit("/", 1)[1].split("-", 1)[1]  # chart1-line.png → line.png
    written = node.workdir / meta["uid"] / "volumes" / "out" / drawn
    assert written.read_bytes() == chart
    assert not _warnings(api, ns, "q2")


def test_a_sandbox_pod_that_cannot_run_fails_the_query_with_its_reason(
    cluster: Cluster, api: Api, crds: None, node: NodeAgent, namespaces: Any, s3: str,
    no_local_sandbox: dict[str, str],
) -> None:  # fmt: skip
    item = next(i for i in retrieval_eval.load_items() if i.id == "Q2")
    ns = namespaces("t-sbx-")
    env = {**no_local_sandbox, "ODA_OPERATOR_SANDBOX_IMAGE": "oda-analyst/no-such-image:0.1.0"}
    with operator_in_process(env, ns):
        _apply(cluster, ns, "q2", item.text)
        obj = _finished(api, ns, "q2")
        warned = wait_for(lambda: _warnings(api, ns, "q2"), timeout=60,
                          what="the Warning event")  # fmt: skip
    status = obj["status"]
    assert status["phase"] == "Failed", status
    message = status["message"]
    assert "sandbox pod" in message and "oda-analyst/no-such-image" in message, message
    assert "Traceback" not in message
    (condition,) = [c for c in status["conditions"] if c["type"] == "Completed"]
    assert condition["status"] == "False" and condition["reason"] == "AnalysisFailed"
    assert any(e["reason"] == "AnalysisFailed" and "sandbox pod" in e["message"]
               for e in warned), warned  # fmt: skip
    assert not [u for u in status.get("artifacts") or [] if u.endswith(".png")]
    (pod,) = _code_pods(api, ns, "q2")
    assert pod["status"]["phase"] == "Failed"
    assert pod["spec"]["containers"][0]["image"] == "oda-analyst/no-such-image:0.1.0"


def test_a_sandbox_pod_whose_image_cannot_be_pulled_is_removed_and_fails_the_query(
    cluster: Cluster, api: Api, crds: None, node: NodeAgent, namespaces: Any,
    no_local_sandbox: dict[str, str],
) -> None:  # fmt: skip
    """What a kubelet reports for an image it cannot pull (the pod stays Pending, its container
    waiting in ImagePullBackOff), patched into the pod's status as a kubelet would."""
    item = next(i for i in retrieval_eval.load_items() if i.id == "Q2")
    ns = namespaces("t-sbx-")
    node.hold_containing("-code-")
    try:
        with operator_in_process(no_local_sandbox, ns):
            _apply(cluster, ns, "q2", item.text)
            (pod,) = wait_for(lambda: _code_pods(api, ns, "q2"), timeout=900,
                              what="the code pod")  # fmt: skip
            image = pod["spec"]["containers"][0]["image"]
            waiting = {"reason": "ImagePullBackOff",
                       "message": f'Back-off pulling image "{image}"'}  # fmt: skip
            status = {"phase": "Pending", "containerStatuses": [
                {"name": "sandbox", "image": image, "imageID": "", "ready": False,
                 "restartCount": 0, "state": {"waiting": waiting}}]}  # fmt: skip
            api.http.patch(f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}/status",
                           json={"status": status},
                           headers={"Content-Type": "application/merge-patch+json"}
                           ).raise_for_status()  # fmt: skip
            obj = _finished(api, ns, "q2")
    finally:
        node.hold_containing()
    status = obj["status"]
    assert status["phase"] == "Failed", status
    assert "ImagePullBackOff" in status["message"] and image in status["message"], status
    assert "Traceback" not in status["message"]
    assert wait_for(lambda: not _code_pods(api, ns, "q2"), timeout=60,
                    what="the stuck pod to be removed")  # fmt: skip
