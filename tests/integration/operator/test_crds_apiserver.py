"""The CRDs on a real API server (1.20): installed from crds/ as they ship, listed under the
short names and the `oda` category, and a bad AnalystQuery refused by the server itself with a
message that names the field. (CEL rules are not enforced by 1.20: tests/unit/test_crds.py.)"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import yaml

from kube_cluster import Cluster
from kube_fixtures import Api

pytestmark = pytest.mark.timeout(900)


def _apply(cluster: Cluster, ns: str, spec: dict[str, Any], name: str = "q") -> Any:
    """kubectl apply with its client-side check off, so what refuses a bad object is the API
    server itself (kubectl would check the same schema, which the server publishes)."""
    body = {
        "apiVersion": "oda-analyst.dev/v1alpha1",
        "kind": "AnalystQuery",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }
    return cluster.kubectl(
        "apply", "--validate=false", "-f", "-", input=yaml.safe_dump(body), check=False
    )


@pytest.fixture()
def ns(cluster: Cluster) -> Any:
    name = f"crd-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def test_valid_query_is_stored_with_defaults_and_listed(crds: None, cluster: Cluster,
                                                        api: Api, ns: str) -> None:  # fmt: skip
    done = _apply(cluster, ns, {"question": "total power of node 900 on 1 June 2022",
                                "user": "alice"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    obj = api.query(ns, "q")
    assert obj is not None
    assert obj["spec"]["backend"] == "oda" and obj["spec"]["analysis"] == "auto"  # defaults
    for listing in (["get", "aq"], ["get", "oda"], ["get", "analystqueries.oda-analyst.dev"]):
        out = cluster.kubectl(*listing, "-n", ns).stdout
        assert "q " in out or out.splitlines()[1].startswith("q"), out
    header = cluster.kubectl("get", "aq", "-n", ns).stdout.splitlines()[0].split()
    assert header == ["NAME", "PHASE", "STAGE", "USER", "AGE"]
    assert cluster.kubectl("get", "vkgc", "-n", ns).returncode == 0


def test_status_is_a_subresource(crds: None, cluster: Cluster, api: Api, ns: str) -> None:
    _apply(cluster, ns, {"question": "total power of node 900", "user": "alice"})
    path = f"/apis/oda-analyst.dev/v1alpha1/namespaces/{ns}/analystqueries/q"
    merge = {"Content-Type": "application/merge-patch+json"}
    api.http.patch(path, json={"status": {"phase": "Completed"}}, headers=merge)
    assert ((api.query(ns, "q") or {}).get("status") or {}).get("phase") is None
    r = api.http.patch(path + "/status", json={"status": {"phase": "Completed"}}, headers=merge)
    assert r.status_code == 200, r.text
    assert (api.query(ns, "q") or {})["status"]["phase"] == "Completed"
    r = api.http.patch(path + "/status", json={"status": {"phase": "Done"}}, headers=merge)
    assert r.status_code == 422 and "status.phase" in r.json()["message"]


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"question": "total power of node 900"}, "spec.user: Required value"),
        ({"question": "hi", "user": "alice"}, "spec.question: Invalid value"),
        (
            {"question": "total power", "user": "alice", "referenceTime": "yesterday"},
            "spec.referenceTime: Invalid value",
        ),
        (
            {"question": "total power", "user": "alice", "backend": "chatgpt"},
            'spec.backend: Unsupported value: "chatgpt"',
        ),
        (
            {"question": "total power", "user": "alice", "timeouts": {"totalSeconds": 1}},
            "spec.timeouts.totalSeconds: Invalid value",
        ),
    ],
)
def test_invalid_query_is_rejected_by_the_api_server(crds: None, cluster: Cluster, api: Api,
                                                     ns: str, spec: dict[str, Any], says: str
                                                     ) -> None:  # fmt: skip
    done = _apply(cluster, ns, spec, name="bad")
    assert done.returncode != 0
    assert says in done.stderr, done.stderr
    assert done.stderr.startswith('The AnalystQuery "bad" is invalid: '), done.stderr
    assert api.query(ns, "bad") is None
