"""Concurrent AnalystQueries through a real API server: 8 at once against one alone.

Starts what the operator tests start (tests/kube_cluster.py's control plane, the test node
agent, moto holding the `sample` lake, Oxigraph as the graph store), the analyst as the chart
runs it (``oda-analyst serve --pipeline-port``, tests/analyst_runner.py) and the operator as a
process (``kopf run``). One query first, alone (Q2's question for one node), then ``--queries``
more at once (the same question for other nodes, so each builds its own graph as the first did),
over two namespaces and two users; each wall time is from ``kubectl apply`` to the last
Completed. The goal of issue 30 is a ratio of at most 3.

    python bench/operator_concurrency.py [--queries 8] [--analysis]

``--analysis`` asks for the chart as well (the coordinator, a code pod per query). Last line:
    concurrency: queries=8 one_s=… all_s=… ratio=… (goal <= 3)
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
from minio import Minio

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO / "tests"), str(HERE)]

import retrieval_eval  # noqa: E402
from analyst_runner import analyst_process  # noqa: E402
from k8s_node import NodeAgent, image_map  # noqa: E402
from kube_cluster import ADMIN_TOKEN, Cluster, control_plane  # noqa: E402
from oda_analyst.codeagent.pyenv import locate  # noqa: E402
from processes import stop_process  # noqa: E402

LOOPBACK = "127.0.0.1"
GROUP = "oda-analyst.dev"
KEY = "testing"
LAKE_BUCKET, ARTEFACTS = "m100-lake", "oda-artifacts"
PARTS = ("year_month=22-06/plugin=ipmi_pub/metric=total_power",)
AS_OF = "2022-06-15T00:00:00Z"
FINISHED = {"Completed", "Failed", "Rejected"}


def _port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def _tool(name: str) -> str:
    local = Path(sys.executable).parent / name
    found = str(local) if local.exists() else shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} is not installed (scripts/setup_test.sh installs it)")
    return found


@contextmanager
def _server(argv: list[str], log: Path, url: str) -> Iterator[None]:
    proc = subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{argv[0]} did not start: {log.read_text()[-2000:]}")
            try:
                urllib.request.urlopen(url, timeout=1).close()
                break
            except urllib.error.HTTPError:
                break
            except OSError:
                time.sleep(0.2)
        yield
    finally:
        stop_process(proc)


def _lake(s3: str) -> str:
    local = retrieval_eval.sample_lake()
    client = Minio(s3.removeprefix("http://"), access_key=KEY, secret_key=KEY, secure=False)
    client.make_bucket(LAKE_BUCKET)
    for part in PARTS:
        for path in sorted((local / part).rglob("*.parquet")):
            client.fput_object(LAKE_BUCKET, f"lake/{path.relative_to(local)}", str(path))
    return f"s3://{LAKE_BUCKET}/lake"


def _namespace(cluster: Cluster, http: httpx.Client, name: str) -> str:
    cluster.kubectl("create", "namespace", name)
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "oda-analyst-s3"},
              "data": {k: base64.b64encode(KEY.encode()).decode()
                       for k in ("accessKey", "secretKey")}}  # fmt: skip
    http.post(f"/api/v1/namespaces/{name}/secrets", json=secret).raise_for_status()
    deadline = time.monotonic() + 60
    while not (http.get(f"/api/v1/namespaces/{name}/serviceaccounts/default").json()
               .get("secrets")):  # fmt: skip
        if time.monotonic() > deadline:
            raise SystemExit(f"namespace {name} got no service-account token")
        time.sleep(0.5)
    return name


def _question(node: int) -> str:
    item = next(i for i in retrieval_eval.load_items() if i.id == "Q2")
    return str(item.text).replace("node 900", f"node {node}")


def _run(http: httpx.Client, queries: list[tuple[str, str, int, str]], analysis: bool
         ) -> float:  # fmt: skip
    """Apply ``queries`` (namespace, name, node, user) at once; seconds until all finished."""
    bodies = [{"apiVersion": f"{GROUP}/v1alpha1", "kind": "AnalystQuery",
               "metadata": {"name": name, "namespace": ns},
               "spec": {"question": _question(node), "user": user, "referenceTime": AS_OF,
                        "analysis": "auto" if analysis else "none"}}
              for ns, name, node, user in queries]  # fmt: skip
    # Created by the API at once (not one kubectl process after another, which alone took
    # seconds each on a loaded machine and spread the queries' starts over the measurement).
    began = time.monotonic()
    for body in bodies:
        path = f"/apis/{GROUP}/v1alpha1/namespaces/{body['metadata']['namespace']}/analystqueries"
        http.post(path, json=body).raise_for_status()
    waiting = {(ns, name) for ns, name, _, _ in queries}
    phases: dict[tuple[str, str], Any] = {}
    deadline = began + 3600
    while waiting:
        if time.monotonic() > deadline:
            raise SystemExit(f"not finished within an hour: {sorted(waiting)}")
        for ns, name in sorted(waiting):
            found = http.get(f"/apis/{GROUP}/v1alpha1/namespaces/{ns}/analystqueries/{name}")
            status = found.json().get("status") or {} if found.status_code == 200 else {}
            if status.get("phase") in FINISHED:
                phases[(ns, name)] = status
                waiting.discard((ns, name))
        time.sleep(0.5)
    took = time.monotonic() - began
    failed = {k: v.get("message") for k, v in phases.items() if v.get("phase") != "Completed"}
    if failed:
        raise SystemExit(f"queries did not complete: {failed}")
    for (ns, name), status in sorted(phases.items()):
        print(f"  {ns}/{name}: {_steps(status)}", flush=True)
    return took


def _steps(status: dict[str, Any]) -> str:
    """When each step ended (its condition's transition, to the second) and the answer's own
    timings: where the wall time went."""
    at = {c["type"]: c.get("lastTransitionTime", "")[11:19] for c in status.get("conditions") or []}
    timings = {k: round(float(v), 2) for k, v in (status.get("timings") or {}).items()
               if isinstance(v, int | float)}  # fmt: skip
    return f"conditions {at} timings {timings}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=8, help="Queries at once (default 8).")
    parser.add_argument(
        "--analysis",
        action="store_true",
        help="Ask for the chart too (the coordinator and a code pod each).",
    )
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="oda-concurrency-"))
    with ExitStack() as stack:
        cluster = stack.enter_context(control_plane(root / "kube"))
        cluster.kubectl("apply", "--validate=false", "-f", str(REPO / "crds"))
        cluster.kubectl("apply", "-f", str(REPO / "deploy" / "runtimeclass-gvisor.yaml"))
        for crd in ("analystqueries", "vkgcaches"):
            cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                            f"crd/{crd}.{GROUP}")  # fmt: skip
        sandbox = locate()
        site = str(REPO / "operator" / "oda_analyst" / "codeagent" / "sandbox_site")
        visible = [str(Path(sys.executable).parent.parent), str(REPO),
                   *(str(p) for p in sandbox.mounts())]  # fmt: skip
        images = image_map(str(Path(sys.executable).parent), str(sandbox.root / "bin"), visible,
                           site)  # fmt: skip
        (root / "node").mkdir()
        agent = NodeAgent(cluster.server, ADMIN_TOKEN, workdir=root / "node",
                          images=images).start()  # fmt: skip
        stack.callback(agent.stop)
        s3 = f"http://{LOOPBACK}:{_port()}"
        stack.enter_context(_server([_tool("moto_server"), "-H", LOOPBACK, "-p",
                                     s3.rsplit(":", 1)[1]], root / "moto.log",
                                    f"{s3}/moto-api/"))  # fmt: skip
        sparql = f"http://{LOOPBACK}:{_port()}"
        stack.enter_context(_server([_tool("oxigraph"), "serve", "--location",
                                     str(root / "oxigraph"), "--bind",
                                     sparql.removeprefix("http://")], root / "oxigraph.log",
                                    f"{sparql}/query?query=ASK%7B%7D"))  # fmt: skip
        env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "ODA_LAKE": _lake(s3),
               "ODA_S3_ENDPOINT": s3, "ODA_S3_ACCESS_KEY": KEY, "ODA_S3_SECRET_KEY": KEY,
               "ODA_SPARQL_ENDPOINT": sparql, "ODA_DATA_DIR": str(root / "data"),
               "ODA_OPERATOR_BUCKET": ARTEFACTS, "ODA_OPERATOR_POLL_S": "1",
               "ODA_OPERATOR_MAX_QUERIES_PER_USER": str(args.queries),
               "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}  # fmt: skip
        url = stack.enter_context(analyst_process(env, root / "analyst.log"))
        log = root / "operator.log"
        operator = subprocess.Popen(
            [sys.executable, "-m", "kopf", "run", "--standalone", "--namespace", "bench-*",
             "-m", "oda_analyst.controller.handlers"],
            env={**env, "ODA_OPERATOR_PIPELINE_URL": url}, stdout=log.open("wb"),
            stderr=subprocess.STDOUT)  # fmt: skip
        stack.callback(stop_process, operator)
        http = stack.enter_context(httpx.Client(
            base_url=cluster.server, verify=False, timeout=30,
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}))  # fmt: skip
        spaces = [_namespace(cluster, http, f"bench-{i}") for i in range(2)]
        one = _run(http, [(spaces[0], "alone", 930, "alice")], args.analysis)
        print(f"one query alone: {one:.1f} s", flush=True)
        many = [(spaces[i % 2], f"q{i}", 931 + i, ("alice", "bob")[i // 2 % 2])
                for i in range(args.queries)]  # fmt: skip
        every = _run(http, many, args.analysis)
        print(f"{args.queries} queries at once: {every:.1f} s", flush=True)
        ratio = every / one
        print(f"concurrency: queries={args.queries} one_s={one:.1f} all_s={every:.1f} "
              f"ratio={ratio:.2f} (goal <= 3)")  # fmt: skip
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
