"""The chart's lifecycle on the real API server (1.20, see conftest) with the real helm binary:
two releases side by side in one cluster, a changed CRD applied by `helm upgrade`, and
`helm uninstall` with queries (and their finalizers) still there, as the chart README's
"Uninstall" says. There is no kubelet here (no operator runs), so a finalizer the operator would
have removed stays: the case the README's commands are for.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from helm_tool import CHART, Helm, locate_helm
from kube_cluster import Cluster

GROUP = "oda-analyst.dev"
QUERIES_CRD = f"analystqueries.{GROUP}"
FINALIZER = f"{GROUP}/cleanup"  # controller/names.py: what kopf puts on every query
# helm 4 applies server-side by default; a 1.20 server refuses the CRDs' CEL rules that way
# (test_helm_install.py says more), so every install and upgrade here is client-side.
CLIENT_SIDE = "--server-side=false"


@pytest.fixture()
def helm(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    found = locate_helm(tmp_path_factory.mktemp("helm-home"))
    return Helm(binary=found.binary, home=found.home, env={"KUBECONFIG": str(cluster.kubeconfig)})


@pytest.fixture()
def releases(cluster: Cluster, helm: Helm) -> Iterator[list[tuple[str, str]]]:
    """(release, namespace) pairs the test installs; uninstalled and deleted at the end (the
    CRDs stay: they are kept, and the other tests of the session use them)."""
    made: list[tuple[str, str]] = []
    yield made
    for name, ns in made:
        helm.run("uninstall", name, "-n", ns, "--wait=false")
        cluster.kubectl("delete", "analystqueries,vkgcaches", "--all", "-n", ns, "--wait=false",
                        check=False)  # fmt: skip
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def _get(cluster: Cluster, *args: str) -> dict[str, Any] | None:
    done = cluster.kubectl("get", *args, "-o", "json", check=False)
    return json.loads(done.stdout) if done.returncode == 0 else None


def _install(helm: Helm, name: str, ns: str, *args: str, chart: Path = CHART) -> None:
    done = helm.run("install", name, str(chart), "-n", ns, "--create-namespace", CLIENT_SIDE,
                    *args, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_two_releases_share_no_cluster_wide_object(
    cluster: Cluster, helm: Helm, releases: list[tuple[str, str]]
) -> None:
    # Each release with two operator replicas (kopf's ClusterKopfPeering) and its own
    # RuntimeClass; the second leaves the CRDs to the first (crds.install=false). The first
    # takes over the CRDs the session's other tests applied (--take-ownership); the second
    # installs without it, so any object the two would share refuses its install.
    suffix = uuid.uuid4().hex[:6]
    first, second = (f"a{suffix}", f"t-two-a-{suffix}"), (f"b{suffix}", f"t-two-b-{suffix}")
    replicas = ("--set", "operator.replicas=2", "--set", "webhook.enabled=false")
    releases.append(first)
    _install(helm, *first, *replicas, "--take-ownership")
    releases.append(second)
    _install(helm, *second, *replicas, "--set", "crds.install=false")
    for name, ns in (first, second):
        full = f"{name}-oda-analyst"
        runtime = _get(cluster, "runtimeclass", f"{full}-{ns}-gvisor")
        assert runtime is not None and runtime["handler"] == "runsc"
        assert runtime["metadata"]["annotations"]["meta.helm.sh/release-name"] == name
        peering = _get(cluster, "clusterkopfpeering", f"{full}-{ns}")
        assert peering is not None
        operator = _get(cluster, "deployment", f"{full}-operator", "-n", ns)
        assert operator is not None
        env = {e["name"]: e.get("value")
               for e in operator["spec"]["template"]["spec"]["containers"][0]["env"]}  # fmt: skip
        assert env["ODA_OPERATOR_PEERING"] == f"{full}-{ns}"
        assert env["ODA_OPERATOR_RUNTIME_CLASS"] == f"{full}-{ns}-gvisor"
        # the disruption budgets, as a 1.20 server serves them (policy/v1 from 1.21)
        budgets = _get(cluster, "poddisruptionbudgets.v1beta1.policy", "-n", ns)
        assert budgets is not None
        assert {b["metadata"]["name"] for b in budgets["items"]} == {f"{full}-operator",
                                                                     f"{full}-analyst"}  # fmt: skip
    crd = _get(cluster, "crd", QUERIES_CRD)
    assert crd is not None
    assert crd["metadata"]["annotations"]["meta.helm.sh/release-name"] == first[0]
    # uninstalling one leaves the other's cluster-wide objects, and the CRDs
    done = helm.run("uninstall", *first[:1], "-n", first[1], "--wait=false")
    assert done.returncode == 0, done.stderr
    assert _get(cluster, "runtimeclass", f"{first[0]}-oda-analyst-{first[1]}-gvisor") is None
    assert _get(cluster, "runtimeclass", f"{second[0]}-oda-analyst-{second[1]}-gvisor")
    assert _get(cluster, "clusterkopfpeering", f"{second[0]}-oda-analyst-{second[1]}")
    assert _get(cluster, "crd", QUERIES_CRD) is not None


def _changed_chart(tmp: Path) -> Path:
    """The chart with one change to the AnalystQuery CRD, made as a developer would, in its
    file: a new optional field spec.priority and a printer column for it."""
    chart = tmp / "oda-analyst"
    shutil.copytree(CHART, chart)
    path = chart / "files" / "crds" / "analystquery.yaml"
    text = path.read_text()
    column = "        - {name: User, type: string, jsonPath: .spec.user}\n"
    field = "              properties:\n                question:\n"
    assert text.count(column) == 1 and text.count(field) == 1
    priority = "                priority: {type: integer, minimum: 0, maximum: 9}\n"
    text = text.replace(column, f"{column}{column.replace('User', 'Priority')}")
    text = text.replace(field, field.replace("properties:\n", f"properties:\n{priority}"))
    text = text.replace("Priority, type: string, jsonPath: .spec.user", "Priority, "
                        "type: integer, jsonPath: .spec.priority")  # fmt: skip
    path.write_text(text)
    assert yaml.safe_load(text)["spec"]["versions"][0]["schema"]  # still one valid document
    return chart


def _query(name: str, **spec: Any) -> str:
    body = {"apiVersion": f"{GROUP}/v1alpha1", "kind": "AnalystQuery",
            "metadata": {"name": name, "finalizers": [FINALIZER]},
            "spec": {"question": "Retrieve the total power of node 900 on 1 June 2022",
                     "user": "alice", **spec}}  # fmt: skip
    return json.dumps(body)


def _schema_fields(cluster: Cluster) -> set[str]:
    crd = _get(cluster, "crd", QUERIES_CRD)
    assert crd is not None
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return set(spec["properties"])


def test_upgrade_applies_a_changed_crd_and_uninstall_keeps_the_queries(
    cluster: Cluster, helm: Helm, releases: list[tuple[str, str]], tmp_path: Path
) -> None:
    name, ns = f"u{uuid.uuid4().hex[:6]}", f"t-crd-{uuid.uuid4().hex[:6]}"
    # no operator runs here: without its webhook a query is created as written
    off = ("--set", "webhook.enabled=false")
    releases.append((name, ns))
    _install(helm, name, ns, *off, "--take-ownership")
    assert "priority" not in _schema_fields(cluster)
    # a query written before the upgrade: the field the old CRD does not know is pruned (by the
    # server: kubectl's own check, from the published schema, would refuse it first)
    cluster.kubectl("apply", "--validate=false", "-n", ns, "-f", "-",
                    input=_query("before", priority=3))  # fmt: skip
    stored = _get(cluster, "aq", "before", "-n", ns)
    assert stored is not None and "priority" not in stored["spec"]
    try:
        changed = _changed_chart(tmp_path)
        done = helm.run("upgrade", name, str(changed), "-n", ns, CLIENT_SIDE, *off, timeout=300)
        assert done.returncode == 0, done.stderr
        # the server has the changed CRD: the new field is kept, its column printed
        assert "priority" in _schema_fields(cluster)
        cluster.kubectl("apply", "--validate=false", "-n", ns, "-f", "-",
                        input=_query("after", priority=3))  # fmt: skip
        stored = _get(cluster, "aq", "after", "-n", ns)
        assert stored is not None and stored["spec"]["priority"] == 3
        table = cluster.kubectl("get", "aq", "after", "-n", ns).stdout
        assert "PRIORITY" in table.splitlines()[0]
        # the query stored under the old CRD is still there, unchanged
        assert _get(cluster, "aq", "before", "-n", ns) is not None
    finally:  # the session's other tests run against the repository's CRDs
        back = helm.run("upgrade", name, str(CHART), "-n", ns, CLIENT_SIDE, *off, timeout=300)
        assert back.returncode == 0, back.stderr
    assert "priority" not in _schema_fields(cluster)

    # `helm uninstall` with queries and their finalizers present: the release's objects go;
    # the CRDs (helm.sh/resource-policy: keep) and the queries stay
    done = helm.run("uninstall", name, "-n", ns, "--wait=false")
    assert done.returncode == 0, done.stderr
    assert "kept" in done.stdout + done.stderr and QUERIES_CRD in done.stdout + done.stderr
    left = cluster.kubectl("get", "deployments,statefulsets,services,runtimeclasses", "-n", ns,
                           "-l", f"app.kubernetes.io/instance={name}", "-o", "name")  # fmt: skip
    assert left.stdout.strip() == ""
    assert _get(cluster, "crd", QUERIES_CRD) is not None
    for query in ("before", "after"):
        kept = _get(cluster, "aq", query, "-n", ns)
        assert kept is not None and kept["metadata"]["finalizers"] == [FINALIZER]
    # with no operator left to remove its finalizer, a deleted query waits for ever (and so
    # would its namespace); the README's command removes the finalizer, and it goes
    cluster.kubectl("delete", "aq", "before", "-n", ns, "--wait=false")
    stuck = _get(cluster, "aq", "before", "-n", ns)
    assert stuck is not None and stuck["metadata"].get("deletionTimestamp")
    readme = (CHART / "README.md").read_text()
    patch = '{"metadata":{"finalizers":null}}'
    assert f"--type=merge -p '{patch}'" in readme
    cluster.kubectl("patch", "aq", "before", "-n", ns, "--type=merge", "-p", patch)
    assert _get(cluster, "aq", "before", "-n", ns) is None
