"""`helm install` of charts/oda-analyst with its default values onto the real API server (1.20,
see conftest): the CRDs, the RBAC and every workload object are created and owned by the
release, and `helm uninstall` removes them again. There is no kubelet here, so the pods stay
Pending; what the install proves is that the server accepts every object as the chart renders it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
import yaml

from helm_tool import CHART, Helm, locate_helm
from kube_cluster import Cluster


@pytest.fixture()
def helm(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    found = locate_helm(tmp_path_factory.mktemp("helm-home"))
    return Helm(binary=found.binary, home=found.home, env={"KUBECONFIG": str(cluster.kubeconfig)})


@pytest.fixture()
def release(cluster: Cluster, helm: Helm) -> Iterator[tuple[str, str]]:
    ns = f"t-helm-{uuid.uuid4().hex[:8]}"
    name = "oda"
    # The release's RuntimeClass is its own (<fullname>-<namespace>-gvisor): the session's
    # `gvisor` one is neither adopted nor deleted by it.
    yield name, ns
    helm.run("uninstall", name, "-n", ns, "--wait=false")
    cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def test_install_with_default_values_creates_every_object(
    cluster: Cluster, helm: Helm, release: tuple[str, str]
) -> None:
    name, ns = release
    # --take-ownership: other tests of the session may have applied the CRDs already (kubectl,
    # or another release, which keeps them); the release adopts them rather than failing on a
    # name clash.
    # --server-side=false: helm 4 applies server-side by default, and a 1.20 server's typed
    # patch refuses the CRDs' CEL rules (x-kubernetes-validations, unknown before 1.25); a
    # client-side create lets it drop them and keep the rest of the schema.
    done = helm.run("install", name, str(CHART), "-n", ns, "--create-namespace",
                    "--take-ownership", "--server-side=false", timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    manifest = helm.run("get", "manifest", name, "-n", ns)
    assert manifest.returncode == 0, manifest.stderr
    expected = [d for d in yaml.safe_load_all(manifest.stdout) if d]
    assert {d["kind"] for d in expected} >= {
        "Deployment", "StatefulSet", "Service", "ServiceAccount", "ClusterRole",
        "ClusterRoleBinding", "NetworkPolicy", "RuntimeClass", "PodDisruptionBudget",
        "CustomResourceDefinition",
    }  # fmt: skip
    # the server has no policy/v1 before 1.21: the chart asks and renders what it serves
    assert {d["apiVersion"] for d in expected if d["kind"] == "PodDisruptionBudget"} == {
        "policy/v1beta1"
    }
    assert [d["metadata"]["name"] for d in expected if d["kind"] == "RuntimeClass"] == [
        f"{name}-oda-analyst-{ns}-gvisor"
    ]
    for doc in expected:
        kind, obj = doc["kind"], doc["metadata"]["name"]
        args = [kind.lower(), obj, "-o", "json"]
        if doc["metadata"].get("namespace"):
            args += ["-n", doc["metadata"]["namespace"]]
        got = json.loads(cluster.kubectl("get", *args).stdout)
        assert got["metadata"]["annotations"]["meta.helm.sh/release-name"] == name, (kind, obj)
    for crd in ("analystqueries.oda-analyst.dev", "vkgcaches.oda-analyst.dev"):
        got = json.loads(cluster.kubectl("get", "crd", crd, "-o", "json").stdout)
        assert got["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    # the web UI is part of the default install, and an upgrade keeps its generated session
    # key (the chart looks the live Secret up), so it does not sign everyone out
    ui = {(d["kind"], d["metadata"]["name"]) for d in expected if "-ui" in d["metadata"]["name"]}
    session = f"{name}-oda-analyst-ui-session"
    assert ui == {("Deployment", f"{name}-oda-analyst-ui"), ("Service", f"{name}-oda-analyst-ui"),
                  ("NetworkPolicy", f"{name}-oda-analyst-ui"), ("Secret", session)}  # fmt: skip
    key = json.loads(cluster.kubectl("get", "secret", session, "-n", ns, "-o", "json").stdout)
    # so is the generated Redis password: Redis and its clients read the one Secret
    redis_secret = f"{name}-oda-analyst-redis"
    password = json.loads(
        cluster.kubectl("get", "secret", redis_secret, "-n", ns, "-o", "json").stdout
    )
    # the release's internal tokens and the webhook's CA are generated the same way
    generated = {
        s: json.loads(cluster.kubectl("get", "secret", s, "-n", ns, "-o", "json").stdout)
        for s in (f"{name}-oda-analyst-internal", f"{name}-oda-analyst-webhook-tls")
    }
    # no operator runs here (no kubelet), so its admission webhook does not answer: a query is
    # refused rather than created unchecked (failurePolicy Fail)
    example = (CHART / "README.md").read_text().split("```yaml\n", 1)[1].split("```", 1)[0]
    unchecked = cluster.kubectl("apply", "-n", ns, "-f", "-", input=example, check=False)
    assert unchecked.returncode != 0 and "failed calling webhook" in unchecked.stderr
    upgraded = helm.run("upgrade", name, str(CHART), "-n", ns, "--server-side=false",
                        "--set", "ui.replicas=2", timeout=300)  # fmt: skip
    assert upgraded.returncode == 0, upgraded.stderr
    for secret, before in generated.items():
        after = json.loads(cluster.kubectl("get", "secret", secret, "-n", ns, "-o", "json").stdout)
        assert after["data"] == before["data"], secret
    kinds = "mutatingwebhookconfigurations,validatingwebhookconfigurations"
    webhooks = json.loads(cluster.kubectl("get", kinds, "-o", "json").stdout)
    bundles = {h["clientConfig"]["caBundle"] for w in webhooks["items"] for h in w["webhooks"]
               if w["metadata"]["name"].startswith(f"{name}-oda-analyst-{ns}-")}  # fmt: skip
    assert bundles == {generated[f"{name}-oda-analyst-webhook-tls"]["data"]["ca.crt"]}
    kept = json.loads(cluster.kubectl("get", "secret", session, "-n", ns, "-o", "json").stdout)
    assert kept["data"] == key["data"]
    kept_password = json.loads(
        cluster.kubectl("get", "secret", redis_secret, "-n", ns, "-o", "json").stdout
    )
    assert kept_password["data"] == password["data"] and password["data"]["password"]
    # the CRDs as the chart installed them take the chart README's example query, and refuse
    # a query without a user (without the webhook, which would set it)
    unhooked = helm.run("upgrade", name, str(CHART), "-n", ns, "--server-side=false", "--set",
                        "ui.replicas=2", "--set", "webhook.enabled=false", timeout=300)  # fmt: skip
    assert unhooked.returncode == 0, unhooked.stderr
    cluster.kubectl("apply", "-n", ns, "-f", "-", input=example)
    stored = json.loads(
        cluster.kubectl("get", "aq", "node900-power", "-n", ns, "-o", "json").stdout
    )
    assert stored["spec"]["user"] == "alice"
    bad = yaml.safe_load(example)
    del bad["spec"]["user"]
    bad["metadata"]["name"] = "no-user"
    # --validate=false: the server itself refuses it, not kubectl from the published schema
    refused = cluster.kubectl("apply", "--validate=false", "-n", ns, "-f", "-",
                              input=json.dumps(bad), check=False)  # fmt: skip
    assert refused.returncode != 0 and "spec.user: Required value" in refused.stderr
    cluster.kubectl("delete", "aq", "node900-power", "-n", ns, "--wait=false")
    status = helm.run("status", name, "-n", ns, "-o", "json")
    assert json.loads(status.stdout)["info"]["status"] == "deployed"

    done = helm.run("uninstall", name, "-n", ns, "--wait=false")
    assert done.returncode == 0, done.stderr
    left = cluster.kubectl("get", "deployments,statefulsets,services", "-n", ns, "-o", "name")
    assert left.stdout.strip() == ""


def test_served_namespaces_bound_the_operators_rights(
    cluster: Cluster, helm: Helm, release: tuple[str, str]
) -> None:
    # With watchNamespaces the API server grants the operator's ServiceAccount its namespaced
    # rights in the served namespace only (a Role there), and cluster-wide only what kopf reads.
    name, ns = release
    served, other = f"{ns}-served", f"{ns}-other"
    for namespace in (ns, served, other):
        cluster.kubectl("create", "namespace", namespace)
    try:
        done = helm.run("install", name, str(CHART), "-n", ns, "--take-ownership",
                        "--server-side=false", "--set", f"operator.watchNamespaces={{{served}}}",
                        "--set", f"alerts.namespace={served}", timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr
        sa = f"system:serviceaccount:{ns}:{name}-oda-analyst-operator"

        def can(*args: str) -> bool:
            said = cluster.kubectl("auth", "can-i", *args, "--as", sa, check=False)
            return said.stdout.strip() == "yes"

        for verb, resource in (("list", "pods"), ("create", "jobs.batch"),
                               ("watch", "analystqueries.oda-analyst.dev")):  # fmt: skip
            assert can(verb, resource, "-n", served), (verb, resource)
            assert not can(verb, resource, "-n", other), (verb, resource)
            assert not can(verb, resource, "-n", ns), (verb, resource)
        assert can("list", "customresourcedefinitions.apiextensions.k8s.io")
        assert not can("get", "secrets", "-n", served)
        # the sandbox pods are the analyst's: the operator makes none, fences none, execs none
        sandbox = (("create", "pods"), ("create", "pods", "--subresource=exec"),
                   ("get", "pods", "--subresource=exec"),
                   ("create", "networkpolicies.networking.k8s.io"))  # fmt: skip
        for asked in sandbox:
            assert not can(*asked, "-n", served), asked
        # the analyst: the users' pods, exec into them and their fences, in the served namespace
        # and the web UI's sandbox namespace (the release's), nowhere else
        analyst = f"system:serviceaccount:{ns}:{name}-oda-analyst-analyst"
        for asked in sandbox:
            for where, allowed in ((served, True), (ns, True), (other, False)):
                said = cluster.kubectl("auth", "can-i", *asked, "-n", where, "--as", analyst,
                                       check=False).stdout.strip()  # fmt: skip
                assert (said == "yes") == allowed, (asked, where, said)
        assert cluster.kubectl("auth", "can-i", "get", "secrets", "-n", served, "--as", analyst,
                               check=False).stdout.strip() == "no"  # fmt: skip
    finally:
        helm.run("uninstall", name, "-n", ns, "--wait=false")
        for namespace in (served, other):
            cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
