"""The Helm chart (charts/oda-analyst) as `helm` itself renders it: lint and template for the
default values and every ci/*-values.yaml scenario, each rendered manifest valid for current
Kubernetes (kubernetes-validate --strict), each custom resource valid against its CRD, the wiring
between objects right, and values.schema.json refusing wrong values with the field's path.

helm v4 comes from scripts/setup_helm.sh (extracted once from a pinned PyPI wheel into the cache).
"""

from __future__ import annotations

import re
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from helm_tool import CHART, REPO, Helm, locate_helm
from oda_analyst.cli import main as cli_main
from oda_analyst.controller import metrics, names

SCENARIOS = ["default", *sorted(p.name for p in (CHART / "ci").glob("*-values.yaml"))]
K8S = "1.30.0"  # the oldest schema set kubernetes-validate ships that has CEL in CRDs
# Kinds whose CRDs the chart ships: validated against those CRDs' schemas.
CRD_KINDS = {"AnalystQuery", "VKGCache", "ClusterKopfPeering", "KopfPeering"}
# Prometheus Operator kinds: no schema is available offline, so they are checked by hand below.
PROMETHEUS_KINDS = {"ServiceMonitor", "PrometheusRule"}


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return locate_helm(tmp_path_factory.mktemp("helm-home"))


def _values_args(scenario: str) -> list[str]:
    return [] if scenario == "default" else ["-f", str(CHART / "ci" / scenario)]


def _render(helm: Helm, *args: str) -> list[dict[str, Any]]:
    return helm.template("--include-crds", *args)


@pytest.fixture(scope="module")
def rendered(helm: Helm) -> dict[str, list[dict[str, Any]]]:
    return {s: _render(helm, *_values_args(s)) for s in SCENARIOS}


def _crd_schemas() -> dict[str, dict[str, Any]]:
    schemas = {}
    for path in (REPO / "crds").glob("*.yaml"):
        for crd in yaml.safe_load_all(path.read_text()):
            if crd:
                version = crd["spec"]["versions"][0]
                schemas[crd["spec"]["names"]["kind"]] = version["schema"]["openAPIV3Schema"]
    return schemas


def _of(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def _named(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (doc,) = [d for d in _of(docs, kind) if d["metadata"]["name"] == name]
    return doc


def _of_operator(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The operator's objects of ``kind`` (the analyst has RBAC objects of its own)."""
    return [d for d in _of(docs, kind) if d["metadata"]["name"].endswith("-operator")]


def _pod_specs(docs: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(pod template metadata, pod spec) of every workload and bare Pod."""
    out = []
    for d in docs:
        if d["kind"] in {"Deployment", "StatefulSet"}:
            out.append((d["spec"]["template"]["metadata"], d["spec"]["template"]["spec"]))
        elif d["kind"] == "Pod":
            out.append((d["metadata"], d["spec"]))
    return out


def _grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]
            for v in rule["verbs"]}  # fmt: skip


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


# --- helm lint and template ----------------------------------------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_chart_lints_clean(helm: Helm, scenario: str) -> None:
    done = helm.run("lint", str(CHART), "--strict", *_values_args(scenario))
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_rendered_manifest_is_valid_kubernetes(rendered: dict[str, list[dict[str, Any]]],
                                                     scenario: str) -> None:  # fmt: skip
    docs = rendered[scenario]
    crds = _crd_schemas()
    validator_of = {kind: jsonschema.Draft7Validator(schema) for kind, schema in crds.items()}
    checked = 0
    for doc in docs:
        where = f"{doc['kind']}/{doc['metadata']['name']}"
        if doc["kind"] in CRD_KINDS:
            errors = [e.message for e in validator_of[doc["kind"]].iter_errors(doc)]
            assert not errors, f"{where}: {errors}"
        elif doc["kind"] in PROMETHEUS_KINDS:
            assert doc["apiVersion"] == "monitoring.coreos.com/v1", where
            assert doc["spec"], where
        else:
            try:
                kubernetes_validate.validate(doc, K8S, strict=True)
            except kubernetes_validate.ValidationError as err:
                pytest.fail(f"{where}: {err.message} at {list(err.path)}")
        checked += 1
    assert checked == len(docs) > 10


def test_chart_crds_are_the_repository_crds() -> None:
    # The chart ships the product's CRDs as templates (files/crds/, rendered by
    # templates/crds.yaml) and kopf's peering CRDs in crds/; together they must not drift from
    # the repository's, which the operator's tests run against.
    ours = {
        p.name: p.read_bytes() for d in ("crds", "files/crds") for p in (CHART / d).glob("*.yaml")
    }
    repo = {p.name: p.read_bytes() for p in (REPO / "crds").glob("*.yaml")}
    assert ours == repo
    assert {p.name for p in (CHART / "crds").glob("*.yaml")} == {"peering.yaml"}


def test_product_crds_are_upgraded_by_the_release_and_kept_by_uninstall(helm: Helm) -> None:
    # Helm never upgrades what crds/ holds: the product's CRDs are templates, so `helm upgrade`
    # applies a changed one; helm.sh/resource-policy: keep leaves them (and the queries stored
    # under them) when the release is uninstalled. Each is the repository's file, unchanged but
    # for that annotation and the release's labels.
    docs = _of(helm.template("--show-only", "templates/crds.yaml"), "CustomResourceDefinition")
    repo = {d["metadata"]["name"]: d for p in (REPO / "crds").glob("*.yaml")
            for d in yaml.safe_load_all(p.read_text()) if d}  # fmt: skip
    assert {d["spec"]["names"]["kind"] for d in docs} == {"AnalystQuery", "VKGCache"}
    for doc in docs:
        meta = doc["metadata"]
        assert meta["annotations"] == {"helm.sh/resource-policy": "keep"}
        assert meta["labels"]["app.kubernetes.io/instance"] == "rel"
        want = repo[meta["name"]]
        assert {**doc, "metadata": {"name": meta["name"]}} == want
    # a server before 1.25 (no CEL) is given them without their CEL rules, which it would drop
    # anyway but which helm's check against its OpenAPI schema refuses; the rest is the same
    old = _of(helm.template("--show-only", "templates/crds.yaml", "--kube-version", "1.24.0"),
              "CustomResourceDefinition")  # fmt: skip
    assert "x-kubernetes-validations" in str(docs) and "x-kubernetes-validations" not in str(old)

    def without_cel(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: without_cel(v) for k, v in node.items() if k != "x-kubernetes-validations"}
        return [without_cel(v) for v in node] if isinstance(node, list) else node

    assert old == without_cel(docs)
    # a second release in the same cluster leaves them to the first
    done = helm.run("template", "rel", str(CHART), "--set", "crds.install=false")
    assert done.returncode == 0, done.stderr
    assert "kind: CustomResourceDefinition" not in done.stdout


def test_crds_are_also_installable_alone(helm: Helm) -> None:
    # For a CRD-only install (`... | kubectl apply -f -`): the product's CRDs from the templates,
    # kopf's peering CRDs from `helm show crds`.
    done = helm.run("show", "crds", str(CHART))
    assert done.returncode == 0, done.stderr
    kinds = {d["spec"]["names"]["kind"] for d in yaml.safe_load_all(done.stdout) if d}
    assert kinds == {"ClusterKopfPeering", "KopfPeering"}
    product = helm.template("--show-only", "templates/crds.yaml")
    assert {d["spec"]["names"]["kind"] for d in product} == {"AnalystQuery", "VKGCache"}


# --- wiring between objects ----------------------------------------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_services_select_pods_and_name_their_ports(rendered: dict[str, list[dict[str, Any]]],
                                                   scenario: str) -> None:  # fmt: skip
    docs = rendered[scenario]
    pods = [(m.get("labels", {}), s) for m, s in _pod_specs(docs) if m.get("name") is None]
    for svc in _of(docs, "Service"):
        selector = svc["spec"]["selector"]
        matching = [s for labels, s in pods if selector.items() <= labels.items()]
        assert matching, f"Service {svc['metadata']['name']} selects no pod"
        ports = {p["name"] for s in matching for c in s["containers"] for p in c.get("ports", [])}
        for port in svc["spec"]["ports"]:
            assert port["targetPort"] in ports, (svc["metadata"]["name"], port)
    for kind in ("Deployment", "StatefulSet"):
        for d in _of(docs, kind):
            sel = d["spec"]["selector"]["matchLabels"]
            assert sel.items() <= d["spec"]["template"]["metadata"]["labels"].items()


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_urls_in_settings_name_services_of_the_release(rendered: dict[str, list[dict[str, Any]]],
                                                       scenario: str) -> None:  # fmt: skip
    docs = rendered[scenario]
    services = {s["metadata"]["name"]: s for s in _of(docs, "Service")}
    for _meta, spec in _pod_specs(docs):
        for container in spec["containers"]:
            for name, value in _env(container).items():
                if not isinstance(value, str) or "://rel-" not in value:
                    continue
                host, _, rest = value.split("://", 1)[1].partition(":")
                port = int(rest.split("/", 1)[0])
                assert host in services, f"{name}={value}: no Service {host}"
                assert port in {p["port"] for p in services[host]["spec"]["ports"]}, value


def test_operator_rbac_is_the_repository_rbac(rendered: dict[str, list[dict[str, Any]]]) -> None:
    deploy = [d for d in yaml.safe_load_all((REPO / "deploy" / "operator-rbac.yaml").read_text())
              if d]  # fmt: skip
    (want,) = _of(deploy, "ClusterRole")
    for scenario, docs in rendered.items():
        (role,) = _of_operator(docs, "ClusterRole")
        served = [r for r in _of(docs, "Role") if r["metadata"]["name"] == role["metadata"]["name"]]
        if not served:
            assert role["rules"] == want["rules"]
        else:  # watchNamespaces: the same rights, split into the cluster's and each namespace's
            for ns_role in served:
                split = _grants(role["rules"]) | _grants(ns_role["rules"])
                assert split == _grants(want["rules"]) - {
                    ("kopf.dev", "clusterkopfpeerings", v)
                    for v in ("get", "list", "watch", "patch")
                }, scenario
                assert "secrets" not in str(ns_role["rules"])
        (binding,) = _of_operator(docs, "ClusterRoleBinding")
        assert binding["roleRef"]["name"] == role["metadata"]["name"]
        (operator,) = [
            d for d in _of(docs, "Deployment") if d["metadata"]["name"].endswith("-operator")
        ]
        sa = operator["spec"]["template"]["spec"]["serviceAccountName"]
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": "oda"}]
        assert "Secret" not in str(role["rules"]) and "secrets" not in str(role["rules"])


def test_operator_runs_the_handlers_with_the_settings_it_reads(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    docs = rendered["default"]
    operator = _named(docs, "Deployment", "rel-oda-analyst-operator")
    (container,) = operator["spec"]["template"]["spec"]["containers"]
    assert container["command"] == [
        "kopf",
        "run",
        "-m",
        "oda_analyst.controller.handlers",
        "-m",
        "oda_analyst.controller.webhooks",
    ]
    assert "--all-namespaces" in container["args"] and "--standalone" in container["args"]
    env = _env(container)
    assert env["ODA_OPERATOR_S3_SECRET"] == "oda-analyst-lake"
    assert env["ODA_S3_ACCESS_KEY"] == {"secretKeyRef": {"name": "oda-analyst-lake",
                                                         "key": "accessKey"}}  # fmt: skip
    assert env["ODA_SPARQL_ENDPOINT"] == "http://rel-oda-analyst-oxigraph:7878/query"
    assert env["ODA_REDIS_URL"] == "redis://rel-oda-analyst-redis:6379/0"
    assert "ODA_LLM_BASE_URL" not in env  # no model by default: the rules answer
    assert not _of(docs, "ClusterKopfPeering")


def test_several_operator_replicas_peer(rendered: dict[str, list[dict[str, Any]]]) -> None:
    cluster_wide = rendered["gpu-monitoring-values.yaml"]
    (peering,) = _of(cluster_wide, "ClusterKopfPeering")
    # the release's own peering object, which the operator names to kopf (handlers.py:
    # settings.peering.name from ODA_OPERATOR_PEERING)
    assert peering["metadata"]["name"] == "rel-oda-analyst-oda"
    operator = _named(cluster_wide, "Deployment", "rel-oda-analyst-operator")
    (container,) = operator["spec"]["template"]["spec"]["containers"]
    assert "--standalone" not in container["args"]
    assert _env(container)["ODA_OPERATOR_PEERING"] == "rel-oda-analyst-oda"
    namespaced = rendered["external-stores-values.yaml"]
    peerings = _of(namespaced, "KopfPeering")
    assert {p["metadata"]["namespace"] for p in peerings} == {"ops", "research"}
    (op,) = [
        d for d in _of(namespaced, "Deployment") if d["metadata"]["name"].endswith("-operator")
    ]
    assert {p["metadata"]["name"] for p in peerings} == {
        _env(op["spec"]["template"]["spec"]["containers"][0])["ODA_OPERATOR_PEERING"]
    }


def _cluster_scoped(helm: Helm, release: str, namespace: str, *args: str) -> set[tuple[str, str]]:
    done = helm.run("template", release, str(CHART), "--namespace", namespace, *args)
    assert done.returncode == 0, done.stderr
    docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    return {(d["kind"], d["metadata"]["name"]) for d in docs
            if "namespace" not in d["metadata"]}  # fmt: skip


@pytest.mark.parametrize("release", ["other", "rel"])
def test_a_second_release_shares_no_cluster_wide_object(helm: Helm, release: str) -> None:
    # Cluster-scoped objects are named per release and namespace (the RuntimeClass, kopf's
    # ClusterKopfPeering, the RBAC, the webhook configurations): a second release, even of the
    # same name in another namespace, creates its own (the CRDs: crds.install=false, README).
    replicas = ("--set", "operator.replicas=2")
    first = _cluster_scoped(helm, "rel", "oda", *replicas)
    second = _cluster_scoped(helm, release, "oda-two", *replicas, "--set", "crds.install=false")
    assert {k for k, _ in first} >= {"RuntimeClass", "ClusterKopfPeering",
                                     "CustomResourceDefinition"}  # fmt: skip
    assert {k for k, _ in second} >= {"RuntimeClass", "ClusterKopfPeering"}
    if release == "rel":  # ClusterRoles are named by release only (a known limit, README)
        first = {(k, n) for k, n in first if not k.startswith("ClusterRole")}
    assert not first & second


def test_serve_flags_exist_in_the_cli(rendered: dict[str, list[dict[str, Any]]]) -> None:
    serve = cli_main.commands["serve"]
    flags = {opt for p in serve.params for opt in p.opts}
    analyst = _named(rendered["default"], "Deployment", "rel-oda-analyst-analyst")
    (container,) = analyst["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["oda-analyst", "serve"]
    for arg in container["args"]:
        assert arg.split("=", 1)[0] in flags, arg


def test_sandbox_pods_get_no_network(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for scenario, docs in rendered.items():
        fences = [p for p in _of(docs, "NetworkPolicy")
                  if p["metadata"]["name"].endswith("-sandbox-deny-all")]  # fmt: skip
        assert fences, scenario
        for fence in fences:
            # the labels the analyst puts on the sandbox pods (controller/manifests.py)
            assert fence["spec"]["podSelector"]["matchLabels"] == {
                "app.kubernetes.io/part-of": names.PART_OF,
                names.LABEL_COMPONENT: "analysis",
            }
            assert set(fence["spec"]["policyTypes"]) == {"Ingress", "Egress"}
            assert "egress" not in fence["spec"] and "ingress" not in fence["spec"]
    served = {p["metadata"]["namespace"] for p in _of(rendered["external-stores-values.yaml"],
                                                      "NetworkPolicy")
              if p["metadata"]["name"].endswith("-sandbox-deny-all")}  # fmt: skip
    assert served == {"ops", "research", "oda"}  # the served ones and the web UI's sandbox


def _sandbox_runtime_classes(docs: list[dict[str, Any]]) -> set[str]:
    """What the operator and the analyst are told to ask for (ODA_OPERATOR_RUNTIME_CLASS)."""
    return {_env(c)["ODA_OPERATOR_RUNTIME_CLASS"] for d in _of(docs, "Deployment")
            if d["metadata"]["name"].endswith(("-operator", "-analyst"))
            for c in d["spec"]["template"]["spec"]["containers"]}  # fmt: skip


def test_gvisor_runtime_class_is_the_one_the_sandbox_asks_for(
    rendered: dict[str, list[dict[str, Any]]], helm: Helm
) -> None:
    (rc,) = _of(rendered["default"], "RuntimeClass")
    assert (rc["metadata"]["name"], rc["handler"]) == ("rel-oda-analyst-oda-gvisor", "runsc")
    assert _sandbox_runtime_classes(rendered["default"]) == {"rel-oda-analyst-oda-gvisor"}
    # none created: the cluster's own, `gvisor` unless named
    assert not _of(rendered["external-stores-values.yaml"], "RuntimeClass")
    assert _sandbox_runtime_classes(rendered["external-stores-values.yaml"]) == {"gvisor"}
    named = helm.template("--set", "gvisor.createRuntimeClass=false",
                          "--set", "gvisor.runtimeClassName=runsc-nodes")  # fmt: skip
    assert _sandbox_runtime_classes(named) == {"runsc-nodes"} and not _of(named, "RuntimeClass")


def test_vllm_serves_each_model_on_gpus(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["gpu-monitoring-values.yaml"]
    models = yaml.safe_load((CHART / "ci" / "gpu-monitoring-values.yaml").read_text())["vllm"]
    for model in models["models"]:
        dep = _named(docs, "Deployment", f"rel-oda-analyst-vllm-{model['name']}")
        spec = dep["spec"]["template"]["spec"]
        (c,) = spec["containers"]
        assert c["resources"]["limits"]["nvidia.com/gpu"] == model["gpus"]
        assert c["readinessProbe"]["httpGet"]["path"] == "/health"
        args = c["args"]
        assert args[0] == model["model"]
        assert f"--max-model-len={model['maxModelLen']}" in args
        assert "--enable-auto-tool-choice" in args
        assert f"--tool-call-parser={model['toolCallParser']}" in args
        reasoning = [a for a in args if a.startswith("--reasoning-parser")]
        assert reasoning == ([f"--reasoning-parser={model['reasoningParser']}"]
                             if model.get("reasoningParser") else [])  # fmt: skip
        assert spec["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec[
            "tolerations"
        ]
        claim = next(v for v in spec["volumes"] if v["name"] == "models")
        pvc = _named(docs, "PersistentVolumeClaim", claim["persistentVolumeClaim"]["claimName"])
        assert pvc["spec"]["resources"]["requests"]["storage"] == model["cache"]["size"]
    analyst = _named(docs, "Deployment", "rel-oda-analyst-analyst")
    env = _env(analyst["spec"]["template"]["spec"]["containers"][0])
    first = models["models"][0]["name"]
    assert env["ODA_LLM_BASE_URL"] == f"http://rel-oda-analyst-vllm-{first}:8000/v1"
    assert env["ODA_LLM_MODEL"] == first


def test_service_monitor_scrapes_the_metrics_port(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    docs = rendered["gpu-monitoring-values.yaml"]
    monitors = {m["metadata"]["name"]: m for m in _of(docs, "ServiceMonitor")}
    assert set(monitors) == {"rel-oda-analyst", "rel-oda-analyst-operator"}
    scraped = {}
    for monitor in monitors.values():
        assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        sel = monitor["spec"]["selector"]["matchLabels"]
        (svc,) = [s for s in _of(docs, "Service")
                  if sel.items() <= s["metadata"]["labels"].items()]  # fmt: skip
        assert [e["port"] for e in monitor["spec"]["endpoints"]] == [
            p["name"] for p in svc["spec"]["ports"]
        ]
        scraped[monitor["metadata"]["name"]] = svc
    # the operator's: its Service reaches the operator container's metrics port, which the
    # operator serves (ODA_OPERATOR_METRICS_PORT) and its NetworkPolicy admits
    svc = scraped["rel-oda-analyst-operator"]
    assert svc["metadata"]["name"] == "rel-oda-analyst-operator-metrics"
    operator = _named(docs, "Deployment", "rel-oda-analyst-operator")
    (container,) = operator["spec"]["template"]["spec"]["containers"]
    port = next(p["containerPort"] for p in container["ports"] if p["name"] == "metrics")
    assert _env(container)["ODA_OPERATOR_METRICS_PORT"] == str(port)
    assert (
        svc["spec"]["selector"].items()
        <= operator["spec"]["template"]["metadata"]["labels"].items()
    )
    ingress = _named(docs, "NetworkPolicy", "rel-oda-analyst-operator-ingress")
    assert {"port": port} in ingress["spec"]["ingress"][0]["ports"]
    (rule,) = _of(docs, "PrometheusRule")
    groups = {g["name"]: g["rules"] for g in rule["spec"]["groups"]}
    assert all(a["expr"] and a["alert"] for g in groups.values() for a in g)
    # the operator's health rules read what controller/metrics.py exports, from its own job
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"),
                "gauge": ("",)}  # fmt: skip
    exported = {family.name + suffix for family in metrics.REGISTRY.collect()
                for suffix in suffixes.get(family.type, ())}  # fmt: skip
    own = groups["oda-analyst-operator"]
    assert {a["alert"] for a in own} >= {"OdaAnalystOperatorMetricsDown",
                                         "OdaAnalystOperatorReconcileErrors",
                                         "OdaAnalystOperatorStalled", "OdaAnalystQueriesQueued",
                                         "OdaAnalystQueriesFailing"}  # fmt: skip
    read = {n for a in own for n in re.findall(r"\b(oda_operator_\w+)\{", a["expr"])}
    assert read and read <= exported, read - exported
    assert all('job="rel-oda-analyst-operator-metrics"' in a["expr"] for a in own)
    assert not _of(rendered["default"], "ServiceMonitor")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_disruption_budgets_cover_the_operator_and_the_analyst(
    rendered: dict[str, list[dict[str, Any]]], scenario: str
) -> None:
    docs = rendered[scenario]
    budgets = {b["metadata"]["name"]: b for b in _of(docs, "PodDisruptionBudget")}
    assert set(budgets) == {"rel-oda-analyst-operator", "rel-oda-analyst-analyst"}
    for component in ("operator", "analyst"):
        budget = budgets[f"rel-oda-analyst-{component}"]
        assert budget["apiVersion"] == "policy/v1"  # policy/v1beta1 on a server before 1.21
        assert budget["spec"]["maxUnavailable"] == 1  # a drain never waits on a lone replica
        sel = budget["spec"]["selector"]["matchLabels"]
        pods = [(d, d["spec"]["template"]["metadata"]["labels"]) for d in _of(docs, "Deployment")]
        (selected,) = [d for d, labels in pods if sel.items() <= labels.items()]
        assert selected["metadata"]["name"] == f"rel-oda-analyst-{component}"


def test_disruption_budgets_can_be_turned_off(helm: Helm) -> None:
    docs = helm.template("--set", "operator.podDisruptionBudget.enabled=false",
                         "--set", "analyst.podDisruptionBudget.maxUnavailable=2")  # fmt: skip
    (budget,) = _of(docs, "PodDisruptionBudget")
    assert (budget["metadata"]["name"], budget["spec"]["maxUnavailable"]) == (
        "rel-oda-analyst-analyst", 2)  # fmt: skip


def test_bundled_minio_is_the_lake(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["trial-minio-values.yaml"]
    secret = _named(docs, "Secret", "rel-oda-analyst-minio")
    assert set(secret["stringData"]) == {"accessKey", "secretKey"}
    operator = _named(docs, "Deployment", "rel-oda-analyst-operator")
    env = _env(operator["spec"]["template"]["spec"]["containers"][0])
    assert env["ODA_S3_ENDPOINT"] == "http://rel-oda-analyst-minio:9000"
    assert env["ODA_OPERATOR_S3_SECRET"] == "rel-oda-analyst-minio"


def test_product_containers_run_as_non_root(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for scenario, docs in rendered.items():
        for meta, spec in _pod_specs(docs):
            if meta["labels"]["app.kubernetes.io/component"] == "vllm":
                continue  # vLLM's image runs as root; its pod holds no product credential
            for c in spec["containers"]:
                ctx = {**spec.get("securityContext", {}), **c.get("securityContext", {})}
                assert ctx.get("runAsNonRoot") is True, (scenario, c["name"])
                assert ctx.get("allowPrivilegeEscalation") is False, (scenario, c["name"])


def test_example_query_in_the_chart_readme_is_a_valid_analyst_query() -> None:
    text = (CHART / "README.md").read_text()
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    query = yaml.safe_load(block)
    assert query["kind"] == "AnalystQuery"
    errors = list(jsonschema.Draft7Validator(_crd_schemas()["AnalystQuery"]).iter_errors(query))
    assert not errors, [e.message for e in errors]


# --- values that are refused ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (["--set", "operator.replicas=0"], "at '/operator/replicas': minimum: got 0, want 1"),
        (["--set", "image.pullPolicy=Sometimes"], "at '/image/pullPolicy': value must be one of"),
        (["--set", "lake.uri=/data/lake"], "at '/lake/uri'"),
        (["--set", "lake.bogus=1"], "additional properties 'bogus' not allowed"),
        (["--set", "analyst.ports.metrics=70000"], "at '/analyst/ports/metrics'"),
        (["--set", "minio.enabled=true"], "at '/minio/rootPassword': minLength: got 0, want 8"),
        (["--set", "vllm.enabled=true", "--set", "vllm.models[0].name=Qwen_7B"],
         "at '/vllm/models/0"),
        (["--set", "monitoring.serviceMonitor.interval=often"],
         "at '/monitoring/serviceMonitor/interval'"),
        (["--set", "oxigraph.enabled=false"],
         "sparql.endpoint: the operator's builder pods and the retriever must share"),
        (["--set", "langfuse.host=https://langfuse.example.org"],
         "langfuse.existingSecret: name the Secret"),
        (["--set", "lake.s3.existingSecret="], "lake.s3.existingSecret: name the Secret"),
        (["--set", "lake.s3.create=true"], "lake.s3.accessKey: the lake's S3 access key"),
        (["--set", "operator.watchNamespaces={ops}"],
         "alerts.namespace: the alert receiver creates its queries there"),
        (["--set", "redis.persistence.mode=zip"], "at '/redis/persistence/mode'"),
    ],
)  # fmt: skip
def test_wrong_values_are_refused_readably(helm: Helm, setting: list[str], message: str) -> None:
    done = helm.run("template", "rel", str(CHART), *setting)
    assert done.returncode != 0
    assert message in done.stderr, done.stderr
