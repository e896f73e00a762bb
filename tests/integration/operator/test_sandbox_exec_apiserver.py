"""One sandbox path for every caller, on the real API server (1.20), in two namespaces.

The analyst's ``PodSandbox`` (with the analyst's own service account, bound by
deploy/analyst-rbac.yaml and nothing else) runs a code-agent script for a query in each of two
namespaces, and one for a web UI user (no query) in the UI's sandbox namespace. Each pod has no
network at all: its fence denies all traffic, so the test node runs it in a network namespace
with nothing but loopback (the script cannot reach the API server, which listens on this host's
loopback); nothing in its spec names the bucket or a Secret. Its inputs (a CSV over a
ConfigMap's 1 MiB) go in and its outputs come out only through the API server's pods/exec,
which the test node's kubelet endpoint serves: the files the script wrote come back byte for
byte, computed from the inputs it was given.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport

from k8s_node import NodeAgent
from kube_cluster import Cluster
from kube_fixtures import GROUP, Api
from oda_analyst.codeagent.limits import Limits
from oda_analyst.controller import manifests, names
from oda_analyst.controller.kube import Kube
from oda_analyst.controller.port import SandboxScope
from oda_analyst.pipeline.sandbox_pod import PodSandbox, scoped
from processes import stop_process

pytestmark = pytest.mark.timeout(900)

ENV = manifests.WorkloadEnv(image="oda-analyst/analyst:0.1.0",
                            sandbox_image="oda-analyst/sandbox:0.1.0", lake="s3://m100-lake/lake",
                            s3_endpoint="http://127.0.0.1:9000", s3_region="us-east-1",
                            s3_secret="oda-analyst-s3", sparql_endpoint=None)  # fmt: skip

SCRIPT = """
import hashlib, socket
data = open("/in/data.csv", "rb").read()
rows = data.decode().splitlines()[1:]
total = sum(float(r.split(",")[1]) for r in rows)
host, port = "127.0.0.1", {api_port}
try:
    socket.create_connection((host, port), timeout=3).close()
    reached = "reached"
except OSError as exc:
    reached = "unreachable"
print(f"api server: {{reached}}")
print(f"rows={{len(rows)}}")
with open("/out/summary.txt", "w") as fh:
    fh.write(f"{{hashlib.sha256(data).hexdigest()}} {{total:.1f}}\\n")
import matplotlib.pyplot as plt
plt.plot([float(r.split(",")[1]) for r in rows[:200]])
plt.savefig("/out/line.png")
try:
    open("/in/tampered", "w").write("x")
    print("in: writable")
except OSError:
    print("in: read-only")
try:
    open("/var/tmp/oda-root-written", "w").write("x")
    print("root: writable")
except OSError:
    print("root: read-only")
"""


@pytest.fixture()
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """The analyst server's loop, in a thread of its own (PodSandbox waits from another)."""
    running = asyncio.new_event_loop()
    thread = threading.Thread(target=running.run_forever, daemon=True)
    thread.start()
    yield running
    running.call_soon_threadsafe(running.stop)
    thread.join(timeout=10)
    running.close()


def _csv(ns: str) -> bytes:
    """A table over 1 MiB (a ConfigMap could not carry it), different in each namespace."""
    seed = int(hashlib.sha256(ns.encode()).hexdigest()[:6], 16) % 97
    lines = ["timestamp,value"] + [f"2022-06-01T00:{i % 60:02d}:00,{(i * seed) % 1000}.5"
                                   for i in range(60_000)]  # fmt: skip
    data = ("\n".join(lines) + "\n").encode()
    assert len(data) > 2**20
    return data


def _expected(data: bytes) -> str:
    rows = data.decode().splitlines()[1:]
    total = sum(float(r.split(",")[1]) for r in rows)
    return f"{hashlib.sha256(data).hexdigest()} {total:.1f}\n"


def _query(api: Api, ns: str, name: str, user: str) -> dict[str, Any]:
    body = {"apiVersion": f"{GROUP}/v1alpha1", "kind": "AnalystQuery",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"question": "plot the total power of node 900", "user": user}}  # fmt: skip
    resp = api.http.post(f"/apis/{GROUP}/v1alpha1/namespaces/{ns}/analystqueries", json=body)
    resp.raise_for_status()
    made: dict[str, Any] = resp.json()
    return made


def _run(pods: PodSandbox, user: str, tmp: Path, data: bytes, source: str
         ) -> tuple[Any, Path]:  # fmt: skip
    inputs, outputs = tmp / "in", tmp / "out"
    inputs.mkdir(parents=True)
    outputs.mkdir(parents=True)
    (inputs / "data.csv").write_bytes(data)
    return pods.run(user, source, inputs, outputs, Limits()), outputs


def _pods(api: Api, ns: str) -> list[dict[str, Any]]:
    return api.items(f"/api/v1/namespaces/{ns}/pods")


def _deleted(api: Api, ns: str, name: str) -> None:
    """The pod is being deleted (its node confirms it gone a moment later) or gone."""
    found = api.get(f"/api/v1/namespaces/{ns}/pods/{name}")
    assert found is None or found["metadata"].get("deletionTimestamp"), found


def _check_network_less(pod: dict[str, Any]) -> None:
    spec = pod["spec"]
    assert [c["name"] for c in spec["containers"]] == ["sandbox", "io"]
    assert spec["automountServiceAccountToken"] is False and not spec.get("hostNetwork")
    assert spec["runtimeClassName"] == "gvisor"
    for c in spec["containers"]:
        env = {e["name"]: e for e in c.get("env") or []}
        assert not [e for e in env.values() if "valueFrom" in e], env
        assert not [k for k in env if k.startswith(("ODA_S3", "AWS_", "ODA_PUBLISH"))], env
    assert not [v for v in spec["volumes"] if "configMap" in v or "secret" in v]


def test_queries_in_two_namespaces_and_a_ui_user_run_in_network_less_pods(
    cluster: Cluster, api: Api, crds: None, node: NodeAgent, namespaces: Any,
    analyst_kubeconfig: Path, loop: asyncio.AbstractEventLoop, tmp_path: Path,
) -> None:  # fmt: skip
    api_port = urlsplit(cluster.server).port
    source = SCRIPT.format(api_port=api_port)
    first, second = namespaces("t-sbx-"), namespaces("t-sbx-")
    kube = Kube(kubeconfig=analyst_kubeconfig)
    pods = PodSandbox(kube, ENV, loop, ui_namespace=second, poll_s=0.3)
    try:
        results = {}
        for ns, user in ((first, "alice@example.org"), (second, "bob")):
            query = _query(api, ns, "q1", user)
            scope = SandboxScope(query=query, user=user, prefix=f"queries/{ns}/q1/")
            data = _csv(ns)
            with scoped(scope):
                captured, out = _run(pods, user, tmp_path / ns, data, source)
            results[ns] = (query, captured, out, data)
        # a web UI user: no query, no scope; the pod runs in the UI's namespace
        ui_data = _csv("ui")
        ui_captured, ui_out = _run(pods, "carol", tmp_path / "ui", ui_data, source)
    finally:
        asyncio.run_coroutine_threadsafe(kube.close(), loop).result(30)

    for ns, (query, captured, out, data) in results.items():
        assert captured.returncode == 0, (ns, captured.stderr)
        assert "api server: unreachable" in captured.stdout, captured.stdout
        assert "rows=60000" in captured.stdout and "in: read-only" in captured.stdout
        assert "root: read-only" in captured.stdout  # readOnlyRootFilesystem, enforced
        assert (out / "summary.txt").read_text() == _expected(data)
        assert (out / "line.png").read_bytes().startswith(b"\x89PNG")
        # the query's pod: in its namespace, owned by it, network-less, ended once read
        (pod,) = [p for p in _pods(api, ns)
                  if p["metadata"].get("labels", {}).get(names.LABEL_QUERY) == "q1"]  # fmt: skip
        assert pod["metadata"]["ownerReferences"][0]["uid"] == query["metadata"]["uid"]
        _check_network_less(pod)
        (ran,) = [r for r in node.started() if r["name"] == pod["metadata"]["name"]]
        assert ran["network"] == "none" and ran["namespace"] == ns
        assert ran["readOnlyRoot"] == [True, True]
        fences = api.items(f"/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies",
                           **{names.LABEL_QUERY: "q1"})  # fmt: skip
        assert len(fences) == 1
        assert set(fences[0]["spec"]["policyTypes"]) == {"Ingress", "Egress"}
        assert not fences[0]["spec"].get("egress") and not fences[0]["spec"].get("ingress")
        assert not api.items(f"/api/v1/namespaces/{ns}/configmaps",
                             **{"app.kubernetes.io/part-of": "oda-analyst"})  # fmt: skip
        # in and out went through the API server's exec into the pod's io container
        moved = [c["command"][-2:] if c["command"][-2] == "put" else c["command"][-1:]
                 for c in node.kubelet.calls
                 if c["namespace"] == ns and c["pod"] == pod["metadata"]["name"]]  # fmt: skip
        assert [m[0] for m in moved] == ["put", "get", "release"], moved
        assert all(c["container"] == "io" for c in node.kubelet.calls if c["namespace"] == ns)

    assert ui_captured.returncode == 0, ui_captured.stderr
    assert "api server: unreachable" in ui_captured.stdout
    assert (ui_out / "summary.txt").read_text() == _expected(ui_data)
    (ui_ran,) = [r for r in node.started() if r["namespace"] == second
                 and r["name"].startswith("codeagent-")]  # fmt: skip
    assert ui_ran["network"] == "none"
    # the UI run's pod is deleted once read; its fence stays, for the user's next run
    _deleted(api, second, ui_ran["name"])
    ui_fences = [f for f in api.items(f"/apis/networking.k8s.io/v1/namespaces/{second}/"
                                      "networkpolicies")
                 if names.LABEL_QUERY not in f["spec"]["podSelector"]["matchLabels"]]  # fmt: skip
    assert len(ui_fences) == 1 and not ui_fences[0]["spec"].get("egress")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


UI_SCRIPT = """
import pandas as pd
frame = pd.read_csv("/in/data.csv")
with open("/out/summary.txt", "w") as fh:
    fh.write(f"{len(frame)} {frame['value'].sum():.1f}\\n")
print("rows", len(frame))
"""


def test_the_web_uis_code_agent_runs_its_users_code_in_their_pods(
    cluster: Cluster, api: Api, node: NodeAgent, namespaces: Any, analyst_kubeconfig: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    """``oda-analyst serve`` as the chart's analyst runs it for the web UI, with no sandbox of its
    own (an empty ODA_CACHE, as in the image) and ODA_CODEAGENT_SANDBOX=pod: a UI user's code,
    sent through the code agent's MCP tools as the UI's coordinator sends it, runs in that
    user's network-less pod in ODA_SANDBOX_NAMESPACE, and its file comes back as a tool result."""
    ns = namespaces("t-sbx-ui-")
    port, log = _free_port(), tmp_path / "serve.log"
    env = {**os.environ, "KUBECONFIG": str(analyst_kubeconfig), "ODA_CODEAGENT_SANDBOX": "pod",
           "ODA_SANDBOX_NAMESPACE": ns, "ODA_CACHE": str(tmp_path / "no-sandbox-here"),
           "ODA_DATA_DIR": str(tmp_path / "data"), "ODA_OPERATOR_POLL_S": "0.3",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}  # fmt: skip
    env.pop("ODA_MCP_TOKEN", None)
    argv = [str(Path(sys.executable).parent / "oda-analyst"), "serve", "--host", "127.0.0.1",
            "--retriever-port", str(_free_port()), "--codeagent-port", str(port),
            "--metrics-port", str(_free_port())]  # fmt: skip
    proc = subprocess.Popen(argv, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    data = b"timestamp,value\n" + b"".join(b"t%d,%d.5\n" % (i, i) for i in range(1000))
    try:
        deadline = time.monotonic() + 240
        while True:
            assert proc.poll() is None, log.read_text()[-3000:]
            try:
                httpx.post(f"http://127.0.0.1:{port}/mcp", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.5)

        async def session() -> tuple[Any, Any]:
            transport = StreamableHttpTransport(f"http://127.0.0.1:{port}/mcp",
                                                headers={"x-oda-user": "erin"})  # fmt: skip
            async with Client(transport, timeout=300) as client:
                await client.call_tool("codeagent_init", {})
                started = await client.call_tool("codeagent_start", {})
                await client.call_tool(
                    "codeagent_upload",
                    {"name": "data.csv", "content_base64": base64.b64encode(data).decode()},
                )
                ran = await client.call_tool("codeagent_execute", {"code": UI_SCRIPT})
                await client.call_tool("codeagent_stop", {})
                return started.structured_content, ran.structured_content

        started, ran = asyncio.run(session())
    finally:
        stop_process(proc, grace_s=20)
    assert started["backend"] == "kubernetes", started
    assert ran["status"] == "ok", (ran, log.read_text()[-3000:])
    assert "rows 1000" in ran["stdout"]
    (made,) = [f for f in ran["files"] if f["name"] == "summary.txt"]
    assert made["bytes"] == len(f"1000 {sum(i + 0.5 for i in range(1000)):.1f}\n")
    (ui_ran,) = [r for r in node.started() if r["namespace"] == ns]
    assert ui_ran["network"] == "none" and ui_ran["containers"] == ["sandbox", "io"]
    _deleted(api, ns, ui_ran["name"])


def test_a_pod_without_the_fence_would_reach_the_api_server(
    cluster: Cluster, api: Api, node: NodeAgent, namespaces: Any, analyst_kubeconfig: Path,
    loop: asyncio.AbstractEventLoop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The control: the same run with a fence that allows egress reaches the API server, so
    the test above sees the node enforce the deny-all fence, not a script that cannot connect."""

    def open_fence(owner: Any, *, user: str, namespace: str) -> dict[str, Any]:
        fence = real(owner, user=user, namespace=namespace)
        fence["spec"]["egress"] = [{}]  # every destination
        return fence

    real = manifests.get_sandbox_network_policy
    monkeypatch.setattr(manifests, "get_sandbox_network_policy", open_fence)
    ns = namespaces("t-sbx-")
    kube = Kube(kubeconfig=analyst_kubeconfig)
    pods = PodSandbox(kube, ENV, loop, ui_namespace=ns, poll_s=0.3)
    try:
        captured, _ = _run(pods, "dave", tmp_path, b"timestamp,value\nx,1\n",
                           SCRIPT.format(api_port=urlsplit(cluster.server).port))  # fmt: skip
    finally:
        asyncio.run_coroutine_threadsafe(kube.close(), loop).result(30)
    assert captured.returncode == 0, captured.stderr
    assert "api server: reached" in captured.stdout, captured.stdout
