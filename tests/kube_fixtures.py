"""Fixtures of the operator tests: the control plane, S3 (moto) holding the lake, an Oxigraph
server as the shared graph store, the test node, a namespace per test, and the operator's
environment. Imported by the conftest of each operator test folder.
"""

from __future__ import annotations

import base64
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from minio import Minio

from analyst_runner import analyst_process
from k8s_node import NodeAgent, image_map, wait_for
from kube_cluster import (
    ADMIN_TOKEN,
    REPO,
    Cluster,
    KubeUnavailableError,
    control_plane,
    write_kubeconfig,
)
from oda_analyst.codeagent.pyenv import locate
from processes import stop_process

LOOPBACK = "127.0.0.1"
LAKE_BUCKET = "m100-lake"
ARTIFACT_BUCKET = "oda-artifacts"
S3_KEY, S3_SECRET = "testing", "testing"
GROUP = "oda-analyst.dev"


def _port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def _tool(name: str) -> str:
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed (scripts/setup.sh installs it)")
    return found


def _serve(argv: list[str], log: Path, url: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{argv[0]} exited: {log.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return proc
        except urllib.error.HTTPError:
            return proc
        except OSError:
            time.sleep(0.2)
    stop_process(proc)
    pytest.fail(f"{argv[0]} did not answer at {url}")


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    try:
        with control_plane(tmp_path_factory.mktemp("kube")) as c:
            yield c
    except KubeUnavailableError as exc:
        if os.geteuid() != 0:
            pytest.skip(f"no Kubernetes API server here (building it needs root): {exc}")
        raise


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = _port()
    url = f"http://{LOOPBACK}:{port}"
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    proc = _serve([_tool("moto_server"), "-H", LOOPBACK, "-p", str(port)], log,
                  f"{url}/moto-api/")  # fmt: skip
    try:
        yield url
    finally:
        stop_process(proc)


@pytest.fixture(scope="session")
def oxigraph(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = _port()
    root = tmp_path_factory.mktemp("oxigraph")
    url = f"http://{LOOPBACK}:{port}"
    proc = _serve(
        [
            _tool("oxigraph"),
            "serve",
            "--location",
            str(root / "db"),
            "--bind",
            f"{LOOPBACK}:{port}",
        ],
        root / "oxigraph.log",
        f"{url}/query?query=ASK%7B%7D",
    )
    try:
        yield url
    finally:
        stop_process(proc)


# The partitions the operator tests' questions read (Q2: total power; Q6: ambient and power),
# and the months around them so the lake's listing looks like the real one.
LAKE_PARTS = (
    "year_month=22-05",
    "year_month=22-06/plugin=ipmi_pub/metric=total_power",
    "year_month=22-06/plugin=ipmi_pub/metric=ambient",
    "year_month=22-06/plugin=job_table",
)


@pytest.fixture(scope="session")
def s3_lake(s3: str) -> tuple[str, Path]:
    """The `sample` lake's partitions above, in the lake bucket; (s3 URI, local folder)."""

    bench = str(REPO / "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import retrieval_eval  # noqa: PLC0415 (bench/ joins sys.path in the e2e conftest)

    local = retrieval_eval.sample_lake()
    client = Minio(s3.removeprefix("http://"), access_key=S3_KEY, secret_key=S3_SECRET,
                   secure=False)  # fmt: skip
    client.make_bucket(LAKE_BUCKET)
    for part in LAKE_PARTS:
        for path in sorted((local / part).rglob("*.parquet")):
            client.fput_object(LAKE_BUCKET, f"lake/{path.relative_to(local)}", str(path))
    return f"s3://{LAKE_BUCKET}/lake", local


@pytest.fixture(scope="session")
def node(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeAgent]:
    sandbox = locate()
    site = str(REPO / "operator" / "oda_analyst" / "codeagent" / "sandbox_site")
    visible = [str(Path(sys.executable).parent.parent), str(REPO),
               *(str(p) for p in sandbox.mounts())]  # fmt: skip
    images = image_map(str(Path(sys.executable).parent), str(sandbox.root / "bin"), visible,
                       site)  # fmt: skip
    agent = NodeAgent(cluster.server, ADMIN_TOKEN, workdir=tmp_path_factory.mktemp("node"),
                      images=images).start()  # fmt: skip
    try:
        yield agent
    finally:
        agent.stop()


@dataclass
class Api:
    """Admin access to the API server for the tests' own reads."""

    http: httpx.Client

    def get(self, path: str) -> dict[str, Any] | None:
        r = self.http.get(path)
        return r.json() if r.status_code == 200 else None

    def query(self, ns: str, name: str) -> dict[str, Any] | None:
        return self.get(f"/apis/{GROUP}/v1alpha1/namespaces/{ns}/analystqueries/{name}")

    def items(self, path: str, **labels: str) -> list[dict[str, Any]]:
        params = {"labelSelector": ",".join(f"{k}={v}" for k, v in labels.items())} \
            if labels else None  # fmt: skip
        return list(self.http.get(path, params=params).json().get("items", []))

    def events(self, ns: str, name: str) -> list[dict[str, Any]]:
        return [e for e in self.items(f"/api/v1/namespaces/{ns}/events")
                if e.get("involvedObject", {}).get("name") == name]  # fmt: skip


@pytest.fixture(scope="session")
def api(cluster: Cluster) -> Iterator[Api]:
    with httpx.Client(base_url=cluster.server, verify=False, timeout=30,
                      headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as http:  # fmt: skip
        yield Api(http)


@pytest.fixture(scope="session")
def crds(cluster: Cluster) -> None:
    """The CRDs from crds/, applied as they ship, and established. kubectl 1.20 checks a CRD
    against its own schema of CRDs, which predates CEL, so it is told not to (--validate=false);
    the 1.20 server drops the CEL rules and keeps the rest."""
    cluster.kubectl("apply", "--validate=false", "-f", str(REPO / "crds"))
    cluster.kubectl("apply", "-f", str(REPO / "deploy" / "runtimeclass-gvisor.yaml"))
    for name in ("analystqueries", "vkgcaches"):
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                        f"crd/{name}.{GROUP}")  # fmt: skip


@pytest.fixture()
def namespaces(cluster: Cluster, api: Api) -> Iterator[Any]:
    """A factory of fresh namespaces (``namespaces("t-k-")``), each with the S3 Secret. At the
    end their custom resources are deleted first (the operator, still running, removes its
    finalizers), then the namespaces; nothing waits for either."""
    made: list[str] = []

    def make(prefix: str) -> str:
        ns = f"{prefix}{uuid.uuid4().hex[:8]}"
        cluster.kubectl("create", "namespace", ns)
        made.append(ns)
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "oda-analyst-s3"},
                  "data": {"accessKey": base64.b64encode(S3_KEY.encode()).decode(),
                           "secretKey": base64.b64encode(S3_SECRET.encode()).decode()}}  # fmt: skip
        api.http.post(f"/api/v1/namespaces/{ns}/secrets", json=secret).raise_for_status()
        wait_for(lambda: _has_token(api, ns), timeout=60,
                 what="the namespace's default service account and its token")  # fmt: skip
        return ns

    yield make
    for ns in made:
        cluster.kubectl("delete", "analystqueries,vkgcaches", "--all", "-n", ns, "--wait=false",
                        check=False)  # fmt: skip
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def _has_token(api: Api, ns: str) -> bool:
    sa = api.get(f"/api/v1/namespaces/{ns}/serviceaccounts/default")
    return bool(sa and sa.get("secrets"))


@pytest.fixture(scope="session")
def analyst_env(cluster: Cluster, s3: str, s3_lake: tuple[str, Path], oxigraph: str,
                tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:  # fmt: skip
    """The environment the operator and its analyst share (the chart's common env)."""
    data = tmp_path_factory.mktemp("operator-data")
    return {
        "KUBECONFIG": str(cluster.kubeconfig),
        "ODA_LAKE": s3_lake[0],
        "ODA_S3_ENDPOINT": s3,
        "ODA_S3_ACCESS_KEY": S3_KEY,
        "ODA_S3_SECRET_KEY": S3_SECRET,
        "ODA_SPARQL_ENDPOINT": oxigraph,
        "ODA_DATA_DIR": str(data),
        "ODA_OPERATOR_BUCKET": ARTIFACT_BUCKET,
        "ODA_OPERATOR_POLL_S": "1",
        # Every test here makes one graph per namespace, the LRU test three.
        "ODA_OPERATOR_VKG_CAPACITY": "2",
        "ODA_OPERATOR_GC_INTERVAL_S": "2",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }


@pytest.fixture(scope="session")
def analyst(analyst_env: dict[str, str], analyst_kubeconfig: Path,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:  # fmt: skip
    """The analyst the operators of these tests talk to (the chart's analyst Deployment, as
    one process on loopback, with the service account of deploy/analyst-rbac.yaml for the
    sandbox pods it starts, so that RBAC is tested too); yields the URL of its pipeline port."""
    log = tmp_path_factory.mktemp("analyst") / "analyst.log"
    env = {**os.environ, **analyst_env, "KUBECONFIG": str(analyst_kubeconfig)}
    with analyst_process(env, log) as url:
        yield url


@pytest.fixture(scope="session")
def operator_env(analyst_env: dict[str, str], analyst: str) -> dict[str, str]:
    """The operator's environment (also what KopfRunner's in-process operator reads): the
    shared one, and where its analyst serves the pipeline."""
    return {**analyst_env, "ODA_OPERATOR_PIPELINE_URL": analyst}


def _service_account_kubeconfig(cluster: Cluster, api: Api, name: str) -> Path:
    sa_path = f"/api/v1/namespaces/oda-analyst/serviceaccounts/{name}"
    secrets = wait_for(lambda: (api.get(sa_path) or {}).get("secrets"), timeout=60,
                       what=f"the service-account token of {name}")  # fmt: skip
    secret = api.get(f"/api/v1/namespaces/oda-analyst/secrets/{secrets[0]['name']}") or {}
    token = base64.b64decode(secret["data"]["token"]).decode()
    return write_kubeconfig(cluster.root / f"{name}.kubeconfig", cluster.server, token)


@pytest.fixture(scope="session")
def analyst_kubeconfig(cluster: Cluster, api: Api) -> Path:
    """A kubeconfig of the analyst's own service account, bound to deploy/analyst-rbac.yaml
    and nothing else."""
    cluster.kubectl("apply", "-f", str(REPO / "deploy" / "operator-rbac.yaml"))  # the namespace
    cluster.kubectl("apply", "-f", str(REPO / "deploy" / "analyst-rbac.yaml"))
    return _service_account_kubeconfig(cluster, api, "oda-analyst-analyst")


@pytest.fixture(scope="session")
def operator_kubeconfig(cluster: Cluster, api: Api) -> Path:
    """A kubeconfig of the operator's own service account, bound to deploy/operator-rbac.yaml
    and nothing else: an operator run with it proves the RBAC is enough."""
    cluster.kubectl("apply", "-f", str(REPO / "deploy" / "operator-rbac.yaml"))
    return _service_account_kubeconfig(cluster, api, "oda-analyst-operator")
