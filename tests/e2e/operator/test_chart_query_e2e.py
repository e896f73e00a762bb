"""An AnalystQuery through the installed chart: `helm install` onto the real API server, then
the analyst and the operator started exactly as the chart's Deployments would start them — their
commands and arguments, their environments (Secret references resolved as the kubelet would),
their ConfigMap volumes written out, and the tokens of the chart's own ServiceAccounts, so the
chart's RBAC is all each may use — with the test node agent in place of a kubelet for the pods
they create. The operator runs no pipeline: it asks the analyst's pipeline port. The query
(the paper's Q2 for another node, with its plot) completes, its chart drawn in the user's sandbox
pod that the analyst starts (neither process has a sandbox of its own, as in the image: their
cache folders are the chart's emptyDirs), and so does the query an alert posted
to the receiver the chart turned on (its templates read from the chart's ConfigMap); the
figures of both are checked against Polars on the lake. A web UI user's plot, sent to the
analyst's code agent over MCP as the UI's coordinator sends it (the release's token, the user's
header), is drawn in that user's network-less pod in the release's namespace, which the chart
names the UI's sandbox namespace.

What differs from a pod, and why: emptyDir and ConfigMap mounts are folders of the test, the
liveness, alert and analyst ports are free loopback ports (so the operator reaches the pipeline
port at 127.0.0.1, not by the Service's name: no cluster DNS or kube-proxy here), and the images
are the node agent's local stand-ins (image.repository / sandboxImage.repository name them).
"""

from __future__ import annotations

import asyncio
import base64
import csv
import io
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from mcp.types import ImageContent
from minio import Minio

import retrieval_eval
from alerting import free_port
from analyst_runner import wait_serving
from helm_tool import CHART, REPO, Helm, locate_helm
from k8s_node import wait_for
from kube_cluster import Cluster, write_kubeconfig
from kube_fixtures import ARTIFACT_BUCKET, LAKE_BUCKET, S3_KEY, S3_SECRET, Api
from oda_analyst.controller.alerts import ANN_LINKED
from processes import stop_process

pytestmark = pytest.mark.timeout(1500)

AS_OF = "2022-06-15T00:00:00Z"


@pytest.fixture()
def release(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[Helm, str, str]]:  # fmt: skip
    found = locate_helm(tmp_path_factory.mktemp("helm-home"))
    helm = Helm(binary=found.binary, home=found.home, env={"KUBECONFIG": str(cluster.kubeconfig)})
    ns = f"t-chart-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", ns)  # watched by the operator: it must exist first
    yield helm, "oda", ns
    helm.run("uninstall", "oda", "-n", ns, "--wait=false")
    cluster.kubectl("delete", "analystqueries,vkgcaches", "--all", "-n", ns, "--wait=false",
                    check=False)  # fmt: skip
    cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def _secret_value(api: Api, ns: str, ref: dict[str, str]) -> str:
    secret = api.get(f"/api/v1/namespaces/{ns}/secrets/{ref['name']}")
    assert secret is not None, f"the chart's env names Secret {ref['name']}, which is not there"
    return base64.b64decode(secret["data"][ref["key"]]).decode()


def _as_the_container(api: Api, ns: str, deployment: dict[str, Any], root: Path
                      ) -> tuple[list[str], dict[str, str]]:  # fmt: skip
    """A Deployment's container's argv and environment, its volumes mapped to folders."""
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    moved: dict[str, str] = {}
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        folder = root / mount["name"]
        folder.mkdir(parents=True, exist_ok=True)
        if "configMap" in volume:
            cm = api.get(f"/api/v1/namespaces/{ns}/configmaps/{volume['configMap']['name']}")
            assert cm is not None
            for key, text in cm["data"].items():
                (folder / key).write_text(text)
        moved[mount["mountPath"]] = str(folder)
    env: dict[str, str] = {}
    for item in container["env"]:
        if "valueFrom" in item:
            value = _secret_value(api, ns, item["valueFrom"]["secretKeyRef"])
        else:
            value = str(item["value"])
        for path, folder in moved.items():
            if value == path or value.startswith(path + "/"):
                value = folder + value[len(path) :]
        env[item["name"]] = value
    return [*container["command"], *container.get("args", [])], env


def _as_the_pod(api: Api, ns: str, deployment: dict[str, Any], root: Path
                ) -> tuple[list[str], dict[str, str]]:  # fmt: skip
    """The operator container's argv and environment, its volumes mapped to folders."""
    argv, env = _as_the_container(api, ns, deployment, root)
    assert argv[:2] == ["kopf", "run"], argv
    argv[0] = str(Path(sys.executable).parent / "kopf")
    live = free_port()
    argv = [f"--liveness=http://127.0.0.1:{live}/healthz" if a.startswith("--liveness=") else a
            for a in argv]  # fmt: skip
    if "ODA_OPERATOR_ALERTS_PORT" in env:
        env["ODA_OPERATOR_ALERTS_PORT"] = str(free_port())
        env["ODA_OPERATOR_ALERTS_HOST"] = "127.0.0.1"
    return argv, env


def _as_the_analyst(api: Api, ns: str, deployment: dict[str, Any], root: Path
                    ) -> tuple[list[str], dict[str, str], int]:  # fmt: skip
    """The analyst container's argv (on loopback, free ports) and environment, and the port of
    its pipeline."""
    argv, env = _as_the_container(api, ns, deployment, root)
    assert argv[:2] == ["oda-analyst", "serve"], argv
    argv[0] = str(Path(sys.executable).parent / "oda-analyst")
    ports: dict[str, int] = {}
    loopback = []
    for arg in argv:
        flag, _, value = arg.partition("=")
        if flag == "--host":
            loopback.append("--host=127.0.0.1")
        elif flag.endswith("-port") and value.isdigit():
            ports[flag] = free_port()
            loopback.append(f"{flag}={ports[flag]}")
        else:
            loopback.append(arg)
    assert "--pipeline-port" in ports, argv
    return loopback, env, ports["--pipeline-port"]


def _image_env(home: Path) -> dict[str, str]:
    """What the image would provide besides the chart's env: a PATH, a HOME, offline model
    files, and the code under test (this checkout's package, whatever the venv installed)."""
    return {"PATH": os.environ["PATH"], "HOME": str(home), "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(REPO / "operator")}  # fmt: skip


def _service_account_kubeconfig(cluster: Cluster, api: Api, ns: str, name: str) -> Path:
    sa = wait_for(lambda: (api.get(f"/api/v1/namespaces/{ns}/serviceaccounts/{name}") or {})
                  .get("secrets"), timeout=60, what=f"a token of {name}")  # fmt: skip
    secret = api.get(f"/api/v1/namespaces/{ns}/secrets/{sa[0]['name']}") or {}
    token = base64.b64decode(secret["data"]["token"]).decode()
    return write_kubeconfig(cluster.root / f"{ns}-{name}.kubeconfig", cluster.server, token)


def _object(s3: str, uri: str) -> bytes:
    client = Minio(s3.removeprefix("http://"), access_key=S3_KEY, secret_key=S3_SECRET,
                   secure=False)  # fmt: skip
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    resp = client.get_object(bucket, key)
    try:
        return bytes(resp.read())
    finally:
        resp.close()
        resp.release_conn()


def _alert_through_the_chart_receiver(api: Api, ns: str, env: dict[str, str], *,
                                      finished_check: subprocess.Popen[bytes], log: Path
                                      ) -> dict[str, Any]:  # fmt: skip
    """The receiver the chart turned on, with the templates from the chart's ConfigMap: an
    alert as Alertmanager posts it becomes a query in the release's namespace, answered."""
    receiver = f"http://127.0.0.1:{env['ODA_OPERATOR_ALERTS_PORT']}"
    health = httpx.get(f"{receiver}/healthz", timeout=10).json()
    assert health["templates"] == ["GPUStuckAtZero", "JobFailureBurst", "NodeHighInletTemperature",
                                   "NodePowerSpike"]  # fmt: skip
    alert = {"status": "firing", "labels": {"alertname": "NodePowerSpike", "node": "902"},
             "startsAt": "2022-06-01T20:30:00Z", "endsAt": "2022-06-01T21:00:00Z",
             "fingerprint": "c0ffee0123456789"}  # fmt: skip
    # as Alertmanager configured per the chart's NOTES: with the release's alerts token
    token = {"authorization": f"Bearer {env['ODA_OPERATOR_ALERTS_TOKEN']}"}
    unsigned = httpx.post(f"{receiver}/alerts", json={"version": "4", "alerts": [alert]},
                          timeout=30)  # fmt: skip
    assert unsigned.status_code == 401, unsigned.text
    made = httpx.post(f"{receiver}/alerts", json={"version": "4", "alerts": [alert]},
                      headers=token, timeout=30).json()  # fmt: skip
    (name,) = made["created"]

    def linked() -> dict[str, Any] | None:
        if finished_check.poll() is not None:
            raise AssertionError(f"the operator exited: {log.read_text()[-3000:]}")
        obj = api.query(ns, name)
        return obj if ANN_LINKED in ((obj or {}).get("metadata", {}).get("annotations") or {}) \
            else None  # fmt: skip

    found: dict[str, Any] = wait_for(linked, timeout=600, what=f"{name} answered and linked")
    return found


UI_PLOT = """
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
frame = pd.read_csv("/in/data.csv")
plt.plot(frame["t"], frame["v"])
plt.savefig("/out/plot.png")
print("points", len(frame))
"""


def _ui_users_plot(argv: list[str], env: dict[str, str]) -> tuple[dict[str, Any], bytes]:
    """A web UI user's plot through the analyst's code agent, as the UI's coordinator asks it
    (ODA_CODEAGENT_MCP_URL, the release's token, x-oda-user): the run and the PNG."""
    port = next(a.split("=", 1)[1] for a in argv if a.startswith("--codeagent-port="))
    headers = {"x-oda-user": "erin"}
    if env.get("ODA_MCP_TOKEN"):
        headers["authorization"] = f"Bearer {env['ODA_MCP_TOKEN']}"
    data = "t,v\n" + "".join(f"{i},{(i * 7) % 13}\n" for i in range(50))

    async def session() -> tuple[dict[str, Any], bytes]:
        transport = StreamableHttpTransport(f"http://127.0.0.1:{port}/mcp", headers=headers)
        async with Client(transport, timeout=300) as client:
            await client.call_tool("codeagent_init", {})
            await client.call_tool("codeagent_start", {})
            await client.call_tool(
                "codeagent_upload",
                {"name": "data.csv", "content_base64": base64.b64encode(data.encode()).decode()},
            )
            ran = await client.call_tool("codeagent_execute", {"code": UI_PLOT})
            got = await client.call_tool("codeagent_get_artifacts", {"names": ["plot.png"]})
            await client.call_tool("codeagent_stop", {})
            (image,) = got.content
            assert isinstance(image, ImageContent), image
            return dict(ran.structured_content or {}), base64.b64decode(image.data)

    return asyncio.run(session())


def test_query_completes_through_the_installed_chart(
    cluster: Cluster, api: Api, node: Any, s3: str, s3_lake: tuple[str, Path], oxigraph: str,
    release: tuple[Helm, str, str], tmp_path: Path,
) -> None:  # fmt: skip
    from devset import oracle  # noqa: PLC0415 (bench/ joins sys.path in the e2e conftest)

    helm, name, ns = release
    values = {
        "image": {"repository": "oda-analyst/analyst"},
        "sandboxImage": {"repository": "oda-analyst/sandbox"},
        "lake": {"uri": s3_lake[0], "artefactsBucket": ARTIFACT_BUCKET,
                 "s3": {"endpoint": s3, "create": True, "accessKey": S3_KEY,
                        "secretKey": S3_SECRET}},
        "oxigraph": {"enabled": False},
        "sparql": {"endpoint": oxigraph},
        "redis": {"enabled": False},
        "operator": {"watchNamespaces": [ns], "pollSeconds": 1},
        # The chart's webhook configurations name a Service, which this API server cannot reach
        # (no kube-proxy, no cluster DNS); test_identity_webhook runs them on this server with
        # their clientConfig pointed at the operator's loopback port instead.
        "webhook": {"enabled": False},
    }  # fmt: skip
    (tmp_path / "values.yaml").write_text(yaml.safe_dump(values))
    done = helm.run("install", name, str(CHART), "-n", ns, "-f", str(tmp_path / "values.yaml"),
                    "--take-ownership", "--server-side=false", timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    deployment = json.loads(cluster.kubectl("get", "deployment", f"{name}-oda-analyst-operator",
                                            "-n", ns, "-o", "json").stdout)  # fmt: skip
    assert LAKE_BUCKET in s3_lake[0]
    # the analyst first: the operator asks it for every query
    analyst_deployment = json.loads(cluster.kubectl("get", "deployment",
                                                    f"{name}-oda-analyst-analyst", "-n", ns,
                                                    "-o", "json").stdout)  # fmt: skip
    a_argv, a_env, pipeline_port = _as_the_analyst(api, ns, analyst_deployment,
                                                   tmp_path / "analyst-pod")  # fmt: skip
    a_sa = analyst_deployment["spec"]["template"]["spec"]["serviceAccountName"]
    a_env["KUBECONFIG"] = str(_service_account_kubeconfig(cluster, api, ns, a_sa))
    a_env.update(_image_env(tmp_path / "analyst-home"))
    a_log = tmp_path / "analyst.log"
    analyst = subprocess.Popen(a_argv, env=a_env, stdout=a_log.open("wb"),
                               stderr=subprocess.STDOUT)  # fmt: skip
    wait_serving(analyst, f"http://127.0.0.1:{pipeline_port}", a_log)
    argv, env = _as_the_pod(api, ns, deployment, tmp_path / "pod")
    assert env["ODA_OPERATOR_PIPELINE_URL"].startswith(f"http://{name}-oda-analyst-pipeline:")
    env["ODA_OPERATOR_PIPELINE_URL"] = f"http://127.0.0.1:{pipeline_port}"
    sa = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    env["KUBECONFIG"] = str(_service_account_kubeconfig(cluster, api, ns, sa))
    env.update(_image_env(tmp_path / "home"))
    log = tmp_path / "operator.log"
    proc = subprocess.Popen(argv, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    try:
        item = next(i for i in retrieval_eval.load_items() if i.id == "Q2")
        # node 901, not Q2's 900: the e2e tests share one graph store, and the operator tests
        # after this one expect to build Q2's graph themselves. With the plot: neither the
        # analyst's process nor the operator's has a sandbox (their cache folders are the
        # chart's emptyDirs, as in the image), so the chart can only come from the user's
        # sandbox pod, which the analyst starts.
        question = item.text.replace("node 900", "node 901")
        assert question != item.text and "plot" in question
        spec = {"question": question, "user": "alice", "referenceTime": AS_OF}
        query = {"apiVersion": "oda-analyst.dev/v1alpha1", "kind": "AnalystQuery",
                 "metadata": {"name": "q2", "namespace": ns}, "spec": spec}  # fmt: skip
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(query))

        def finished() -> dict[str, Any] | None:
            if proc.poll() is not None:
                raise AssertionError(f"the operator exited: {log.read_text()[-3000:]}")
            obj = api.query(ns, "q2")
            phase = ((obj or {}).get("status") or {}).get("phase")
            return obj if phase in {"Completed", "Failed", "Rejected"} else None

        obj = wait_for(finished, timeout=1200, what="q2 to finish", every=1)
        alert_obj = _alert_through_the_chart_receiver(api, ns, env, finished_check=proc, log=log)
        ui_run, ui_png = _ui_users_plot(a_argv, a_env)
    finally:
        stop_process(proc)
        stop_process(analyst)
    status = obj["status"]
    assert status["phase"] == "Completed", f"{status.get('message')}\n{log.read_text()[-3000:]}"
    assert "node 901" in status["understoodAs"]
    names = sorted(uri.rsplit("/", 1)[1] for uri in status["artifacts"]
                   if "/coordinator/" not in uri)  # fmt: skip
    assert names == ["answer.json", "result.csv", "summary.json"]  # summary: the sandbox pod
    charts = [u for u in status["artifacts"] if "/coordinator/" in u and u.endswith(".png")]
    assert len(charts) == 1 and _object(s3, charts[0]).startswith(b"\x89PNG"), charts
    code_pods = [p for p in api.items(f"/api/v1/namespaces/{ns}/pods")
                 if "-code-" in p["metadata"]["name"]]  # fmt: skip
    # the release's own RuntimeClass, which the chart tells the analyst to ask for
    assert len(code_pods) == 1
    assert code_pods[0]["spec"]["runtimeClassName"] == f"oda-oda-analyst-{ns}-gvisor"
    assert code_pods[0]["status"]["phase"] == "Succeeded"
    assert all(u.startswith(f"s3://{ARTIFACT_BUCKET}/") for u in status["artifacts"])
    answer = json.loads(_object(s3, status["answerUri"]))
    assert answer["status"] == "completed"
    csv_uri = next(u for u in status["artifacts"] if u.endswith("/result.csv"))
    rows = list(csv.DictReader(io.StringIO(_object(s3, csv_uri).decode())))
    want = oracle.series(s3_lake[1], "ipmi", "total_power", oracle.utc("2022-06-01T20:00"),
                         oracle.utc("2022-06-02T00:00"), nodes=[901])  # fmt: skip
    assert len(want) > 0
    assert sorted(round(float(r["value"]), 3) for r in rows) == sorted(
        round(v, 3) for v in want["value"].to_list()
    )

    # the web UI user's plot: drawn in that user's pod in the UI's sandbox namespace (the
    # release's), with no network, through the chart's analyst and its RBAC
    assert a_env["ODA_SANDBOX_NAMESPACE"] == ns
    assert ui_run["status"] == "ok" and "points 50" in ui_run["stdout"], ui_run
    assert ui_run["backend"] == "kubernetes" and ui_png.startswith(b"\x89PNG")
    (ui_pod,) = [r for r in node.started() if r["namespace"] == ns
                 and r["name"].startswith("codeagent-")]  # fmt: skip
    assert (
        ui_pod["network"] == "none" and ui_pod["runtimeClassName"] == f"oda-oda-analyst-{ns}-gvisor"
    )

    # the alert's query: the release's namespace, the chart's user, 20:00-21:00 (30 min back)
    status = alert_obj["status"]
    assert status["phase"] == "Completed", status.get("message")
    assert alert_obj["spec"]["user"] == "alertmanager"
    assert "node 902" in status["understoodAs"] and "20:00 to 21:00" in status["understoodAs"]
    csv_uri = next(u for u in status["artifacts"] if u.endswith("/result.csv"))
    rows = list(csv.DictReader(io.StringIO(_object(s3, csv_uri).decode())))
    want = oracle.series(s3_lake[1], "ipmi", "total_power", oracle.utc("2022-06-01T20:00"),
                         oracle.utc("2022-06-01T21:00"), nodes=[902])  # fmt: skip
    assert len(want) > 0
    assert sorted(round(float(r["value"]), 3) for r in rows) == sorted(
        round(v, 3) for v in want["value"].to_list()
    )
