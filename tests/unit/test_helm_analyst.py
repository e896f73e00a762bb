"""The chart's split of the work: the operator orchestrates (small, no pipeline) and reaches the
analyst Deployment's pipeline port over its Service; the analyst, sized for the retriever's stack,
starts the users' sandbox pods with a ServiceAccount of its own and no more rights than that;
only the operator may call the pipeline port. Rendered by `helm` itself, for the default values
and every ci/*-values.yaml scenario."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from helm_tool import CHART, REPO, Helm, locate_helm
from netpol import ingress_admits
from oda_analyst.cli import main as cli_main
from oda_analyst.config import Settings

SCENARIOS = ["default", *sorted(p.name for p in (CHART / "ci").glob("*-values.yaml"))]
COMPONENT = "app.kubernetes.io/component"
MIB = 2**20


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    helm: Helm = locate_helm(tmp_path_factory.mktemp("helm-home"))
    args = {s: [] if s == "default" else ["-f", str(CHART / "ci" / s)] for s in SCENARIOS}
    return {s: helm.template(*a) for s, a in args.items()}


def _values(scenario: str) -> dict[str, Any]:
    if scenario == "default":
        return {}
    loaded: dict[str, Any] = yaml.safe_load((CHART / "ci" / scenario).read_text())
    return loaded


def _of(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def _named(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (doc,) = [d for d in _of(docs, kind) if d["metadata"]["name"] == name]
    return doc


def _container(docs: list[dict[str, Any]], deployment: str) -> dict[str, Any]:
    spec = _named(docs, "Deployment", deployment)["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    return dict(container)


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def _bytes(quantity: str) -> int:
    units = {"Ki": 2**10, "Mi": MIB, "Gi": 2**30}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return int(float(quantity.removesuffix(suffix)) * factor)
    return int(quantity)


def _millicores(quantity: str) -> int:
    return (
        int(quantity.removesuffix("m")) if quantity.endswith("m") else int(float(quantity) * 1000)
    )


def _grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]
            for v in rule["verbs"]}  # fmt: skip


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_operator_reaches_the_analysts_pipeline_port_by_its_service(
    rendered: dict[str, list[dict[str, Any]]], scenario: str
) -> None:
    docs = rendered[scenario]
    operator = _env(_container(docs, "rel-oda-analyst-operator"))
    url = operator["ODA_OPERATOR_PIPELINE_URL"]
    service = _named(docs, "Service", "rel-oda-analyst-pipeline")
    (port,) = service["spec"]["ports"]
    assert url == f"http://rel-oda-analyst-pipeline:{port['port']}"
    analyst = _container(docs, "rel-oda-analyst-analyst")
    assert f"--pipeline-port={port['port']}" in analyst["args"]
    assert {"name": "pipeline", "containerPort": port["port"]} in analyst["ports"]
    assert port["targetPort"] == "pipeline"
    labels = _named(docs, "Deployment", "rel-oda-analyst-analyst")["spec"]["template"]["metadata"]
    assert service["spec"]["selector"].items() <= labels["labels"].items()
    # the bounds are settings the operator reads
    bounds = {k: operator[k] for k in operator if k.startswith("ODA_OPERATOR_MAX_QUERIES")}
    assert set(bounds) == {"ODA_OPERATOR_MAX_QUERIES", "ODA_OPERATOR_MAX_QUERIES_PER_NAMESPACE",
                           "ODA_OPERATOR_MAX_QUERIES_PER_USER"}  # fmt: skip
    settings = Settings.model_validate({k.removeprefix("ODA_").lower(): v
                                        for k, v in bounds.items()})  # fmt: skip
    # no more at once than the analyst replicas run: the rest wait where status says so
    values = _values(scenario).get("analyst", {})
    replicas, per_replica = (
        max(1, values.get("replicas", 1)),
        values.get("pipelineMaxConcurrent", 8),
    )
    cluster = _values(scenario).get("operator", {}).get("maxQueries", {}).get("cluster", 32)
    assert settings.operator_max_queries == min(cluster, replicas * per_replica)
    assert settings.operator_max_queries_per_user >= 1


def test_pipeline_port_flag_exists_in_the_cli() -> None:
    flags = {opt for p in cli_main.commands["serve"].params for opt in p.opts}
    assert "--pipeline-port" in flags


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_operator_is_sized_down_and_the_analyst_for_the_work(
    rendered: dict[str, list[dict[str, Any]]], scenario: str
) -> None:
    docs = rendered[scenario]
    operator = _container(docs, "rel-oda-analyst-operator")["resources"]
    analyst = _container(docs, "rel-oda-analyst-analyst")["resources"]
    if "resources" not in _values(scenario).get("operator", {}):
        assert _millicores(operator["requests"]["cpu"]) <= 100
        assert _bytes(operator["requests"]["memory"]) <= 256 * MIB
        assert _bytes(operator["limits"]["memory"]) <= 512 * MIB
    if "resources" not in _values(scenario).get("analyst", {}):
        assert _millicores(analyst["requests"]["cpu"]) >= 1000
        assert _bytes(analyst["requests"]["memory"]) >= 2 * 2**30
    assert _bytes(analyst["limits"]["memory"]) > _bytes(operator["limits"]["memory"])


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_analyst_starts_sandbox_pods_with_its_own_account_and_no_more(
    rendered: dict[str, list[dict[str, Any]]], scenario: str
) -> None:
    docs = rendered[scenario]
    pod = _named(docs, "Deployment", "rel-oda-analyst-analyst")["spec"]["template"]["spec"]
    sa = pod["serviceAccountName"]
    assert sa == "rel-oda-analyst-analyst" and pod["automountServiceAccountToken"] is True
    assert _named(docs, "ServiceAccount", sa)
    watched = _values(scenario).get("operator", {}).get("watchNamespaces") or []
    roles = [r for r in [*_of(docs, "ClusterRole"), *_of(docs, "Role")]
             if r["metadata"]["name"] == "rel-oda-analyst-analyst"]  # fmt: skip
    kinds = {r["kind"] for r in roles}
    assert kinds == ({"Role"} if watched else {"ClusterRole"}), scenario
    values = _values(scenario)
    ui_sandbox = values.get("analyst", {}).get("sandboxNamespace") or (
        "oda" if values.get("ui", {}).get("enabled", True) else None)  # fmt: skip
    if watched:  # the served namespaces and the web UI's sandbox namespace
        also = [ui_sandbox] if ui_sandbox else []
        assert {r["metadata"]["namespace"] for r in roles} == {*watched, *also}
    want = {("", "pods", v) for v in ("get", "list", "create", "delete")} | {
        # the sandbox pods' files move in and out by exec (they have no network)
        ("", "pods/exec", "get"), ("", "pods/exec", "create"),
        ("networking.k8s.io", "networkpolicies", "get"),
        ("networking.k8s.io", "networkpolicies", "create"),
    }  # fmt: skip
    (deployed,) = [
        d
        for d in yaml.safe_load_all((REPO / "deploy" / "analyst-rbac.yaml").read_text())
        if d and d["kind"] == "ClusterRole"
    ]
    assert _grants(deployed["rules"]) == want  # the repository's copy, for installs without Helm
    for role in roles:
        assert _grants(role["rules"]) == want  # pipeline/sandbox_pod.py's calls, nothing more
    bindings = [b for b in [*_of(docs, "ClusterRoleBinding"), *_of(docs, "RoleBinding")]
                if b["metadata"]["name"] == "rel-oda-analyst-analyst"]  # fmt: skip
    assert len(bindings) == len(roles)
    for binding in bindings:
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": "oda"}]
    env = _env(_container(docs, "rel-oda-analyst-analyst"))
    for name in ("ODA_OPERATOR_SANDBOX_IMAGE", "ODA_OPERATOR_BUCKET", "ODA_OPERATOR_INSTANCE",
                 "ODA_PIPELINE_MAX_CONCURRENT"):  # fmt: skip
        assert env.get(name), name
    assert env.get("ODA_SANDBOX_NAMESPACE") == ui_sandbox  # the web UI's code: pods there


def test_only_the_operator_may_call_the_pipeline_port(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    docs = rendered["default"]
    policy = _named(docs, "NetworkPolicy", "rel-oda-analyst-analyst-ingress")
    port = _named(docs, "Service", "rel-oda-analyst-pipeline")["spec"]["ports"][0]["port"]
    operator = _named(docs, "Deployment", "rel-oda-analyst-operator")
    release = dict(operator["spec"]["template"]["metadata"]["labels"])
    assert release[COMPONENT] == "operator"
    for component, admitted in (("operator", True), ("ui", False), ("test", False),
                                ("analysis", False)):  # fmt: skip
        labels = {**release, COMPONENT: component}
        assert ingress_admits(policy, labels=labels, namespace="oda", port=port) is admitted, \
            component  # fmt: skip
    # and the MCP ports stay open to the web UI
    mcp = _named(docs, "Service", "rel-oda-analyst-retriever")["spec"]["ports"][0]["port"]
    assert ingress_admits(policy, labels={**release, COMPONENT: "ui"}, namespace="oda", port=mcp)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_operator_no_longer_manages_the_sandbox_pods(
    rendered: dict[str, list[dict[str, Any]]], scenario: str
) -> None:
    """It reads a failed Job's pods and creates none: every sandbox pod (a query's summary, the
    code agent's scripts, a web UI user's), its fence and the exec into it are the analyst's."""
    docs = rendered[scenario]
    roles = [r for r in [*_of(docs, "ClusterRole"), *_of(docs, "Role")]
             if r["metadata"]["name"] == "rel-oda-analyst-operator"]  # fmt: skip
    grants = set().union(*(_grants(r["rules"]) for r in roles))
    assert ("", "pods", "list") in grants
    assert not {(r, v) for _g, r, v in grants
                if r in ("pods", "pods/exec", "configmaps", "networkpolicies")
                and v in ("create", "delete")}, grants  # fmt: skip
