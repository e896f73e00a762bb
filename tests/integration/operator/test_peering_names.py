"""kopf's peering object named per release (ODA_OPERATOR_PEERING, which the chart sets to
<fullname>-<namespace>), on the real API server (1.20): the operators of two releases serving
one namespace each announce themselves in their own KopfPeering and both handle resources. Under
one shared name (before: fixed `oda-analyst`) one release's replica would stand by for the
other's, or, with no object of that name, neither would start.

The operators run as processes without --standalone (peering is mandatory: a replica starts
paused until it has seen its peering object); they answer no query here, so their analyst and
bucket addresses are ones nothing answers (they connect lazily).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from k8s_node import wait_for
from kube_cluster import Cluster
from kube_fixtures import Api
from processes import stop_process

pytestmark = pytest.mark.timeout(600)

RESUMED = "Resuming operations"  # kopf's log line when a replica starts handling


def _operator(env: dict[str, str], log: Path, ns: str) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "kopf", "run", "--namespace", ns,
            "-m", "oda_analyst.controller.handlers"]  # fmt: skip
    return subprocess.Popen(argv, env={**os.environ, **env}, stdout=log.open("ab"),
                            stderr=subprocess.STDOUT)  # fmt: skip


def _peers(api: Api, ns: str, name: str) -> dict[str, Any]:
    found = api.get(f"/apis/kopf.dev/v1/namespaces/{ns}/kopfpeerings/{name}") or {}
    return dict(found.get("status") or {})


def test_two_releases_operators_each_peer_in_their_own_object(
    cluster: Cluster, crds: None, api: Api, tmp_path: Path
) -> None:
    ns = f"t-peer-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", ns)
    releases = [f"a-oda-analyst-{ns}", f"b-oda-analyst-{ns}"]  # the chart's peering names
    for name in releases:
        body = {"apiVersion": "kopf.dev/v1", "kind": "KopfPeering",
                "metadata": {"name": name, "namespace": ns}}  # fmt: skip
        api.http.post(f"/apis/kopf.dev/v1/namespaces/{ns}/kopfpeerings",
                      json=body).raise_for_status()  # fmt: skip
    base = {"KUBECONFIG": str(cluster.kubeconfig),
            "ODA_OPERATOR_PIPELINE_URL": "http://127.0.0.1:9",
            "ODA_S3_ENDPOINT": "http://127.0.0.1:9",
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}  # fmt: skip
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for name, log in zip(releases, logs, strict=True):
            procs.append(_operator({**base, "ODA_OPERATOR_PEERING": name}, log, ns))
        for name, log in zip(releases, logs, strict=True):
            wait_for(lambda log=log: RESUMED in log.read_text(), timeout=240,
                     what=f"the operator of peering {name} to become active")  # fmt: skip
            # each operator is the one peer of its own release's object
            wait_for(lambda name=name: len(_peers(api, ns, name)) == 1, timeout=60,
                     what=f"the operator's peer in {name}")  # fmt: skip
        for proc, log in zip(procs, logs, strict=True):
            assert proc.poll() is None, log.read_text()[-3000:]
    finally:
        for proc in procs:
            stop_process(proc)
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
