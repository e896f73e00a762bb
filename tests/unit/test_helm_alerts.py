"""The chart's alert receiver and vLLM scale-to-zero wiring, as `helm template` renders them:
the templates ConfigMap is the shipped file and the operator reads it where it is mounted, the
Service reaches the receiver's port through the NetworkPolicy, the vLLM Deployments start at
zero with the labels the operator selects them by, and only a namespaced Role lets it scale."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
import yaml

from helm_tool import CHART, Helm, locate_helm
from oda_analyst.controller.alerts import parse_templates
from oda_analyst.controller.model_scale import LABEL_MODEL, SELECTOR

K8S = "1.30.0"


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return locate_helm(tmp_path_factory.mktemp("helm-home"))


def _render(helm: Helm, *args: str) -> list[dict[str, Any]]:
    return helm.template(*args)


def _one(docs: list[dict[str, Any]], kind: str, suffix: str) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(suffix)]
    return found


def _operator(docs: list[dict[str, Any]]) -> dict[str, Any]:
    pod = _one(docs, "Deployment", "-operator")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return {"pod": pod, "container": container,
            "env": {e["name"]: e.get("value") for e in container["env"]}}  # fmt: skip


def test_receiver_reads_the_shipped_templates_where_the_configmap_is_mounted(helm: Helm) -> None:
    docs = _render(helm)
    cm = _one(docs, "ConfigMap", "-alert-templates")
    shipped = (CHART / "files" / "alert-templates.yaml").read_text()
    assert yaml.safe_load(cm["data"]["alert-templates.yaml"]) == yaml.safe_load(shipped)
    parse_templates(yaml.safe_load(cm["data"]["alert-templates.yaml"]))
    op = _operator(docs)
    path = op["env"]["ODA_OPERATOR_ALERT_TEMPLATES"]
    (mount,) = [m for m in op["container"]["volumeMounts"] if path.startswith(m["mountPath"])]
    (volume,) = [v for v in op["pod"]["volumes"] if v["name"] == mount["name"]]
    assert volume["configMap"]["name"] == cm["metadata"]["name"]
    assert path.endswith("/alert-templates.yaml")
    assert op["env"]["ODA_OPERATOR_ALERTS_NAMESPACE"] == "oda"


def test_alertmanager_reaches_the_receiver_through_service_and_policy(helm: Helm) -> None:
    docs = _render(helm, "--set", "alerts.port=9200")
    svc = _one(docs, "Service", "-alerts")
    (port,) = svc["spec"]["ports"]
    op = _operator(docs)
    named = {p["name"]: p["containerPort"] for p in op["container"]["ports"]}
    assert port["port"] == 9200 and named[port["targetPort"]] == 9200
    assert op["env"]["ODA_OPERATOR_ALERTS_PORT"] == "9200"
    pod_labels = _one(docs, "Deployment", "-operator")["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    policy = _one(docs, "NetworkPolicy", "-operator-ingress")
    assert {"port": 9200} in policy["spec"]["ingress"][0]["ports"]
    for doc in (svc, _one(docs, "ConfigMap", "-alert-templates")):
        kubernetes_validate.validate(doc, K8S, strict=True)


def test_answer_webhook_and_templates_override(helm: Helm) -> None:
    own = "templates:\n  Hot:\n    questions: ['Retrieve the inlet temperature of node {node} " \
          "from {start} to {end}']\n"  # fmt: skip
    docs = _render(helm, "--set", "alerts.answerWebhook=https://chat.example.org/hook",
                   "--set-string", f"alerts.templatesOverride={own}")  # fmt: skip
    cm = _one(docs, "ConfigMap", "-alert-templates")
    assert list(parse_templates(yaml.safe_load(cm["data"]["alert-templates.yaml"])).templates) \
        == ["Hot"]  # fmt: skip
    env = _operator(docs)["env"]
    assert env["ODA_OPERATOR_ALERTS_WEBHOOK"] == "https://chat.example.org/hook"


def test_alerts_off_leaves_no_receiver(helm: Helm) -> None:
    docs = _render(helm, "--set", "alerts.enabled=false")
    assert not [d for d in docs if d["metadata"]["name"].endswith(("-alerts", "-alert-templates"))]
    assert not [k for k in _operator(docs)["env"] if k.startswith("ODA_OPERATOR_ALERTS")]


def test_vllm_starts_at_zero_selected_by_the_operator_s_labels(helm: Helm) -> None:
    docs = _render(helm, "--set", "vllm.enabled=true", "--set",
                   "vllm.scaleToZero.idleSeconds=120")  # fmt: skip
    dep = _one(docs, "Deployment", "-vllm-qwen")
    assert dep["spec"]["replicas"] == 0
    assert dep["metadata"]["labels"].items() >= {**SELECTOR, LABEL_MODEL: "qwen"}.items()
    env = _operator(docs)["env"]
    assert env["ODA_OPERATOR_VLLM_NAMESPACE"] == "oda"
    assert env["ODA_OPERATOR_VLLM_IDLE_S"] == "120"
    assert env["ODA_LLM_MODEL"] == "qwen"  # the served name the operator looks the model up by
    role = _one(docs, "Role", "-operator-vllm")
    assert role["metadata"]["namespace"] == "oda"
    assert role["rules"] == [{"apiGroups": ["apps"], "resources": ["deployments"],
                              "verbs": ["list", "patch"]}]  # fmt: skip
    binding = _one(docs, "RoleBinding", "-operator-vllm")
    sa = _operator(docs)["pod"]["serviceAccountName"]
    assert binding["subjects"][0]["name"] == sa and binding["roleRef"]["name"] == \
        role["metadata"]["name"]  # fmt: skip
    for doc in (role, binding, dep):
        kubernetes_validate.validate(doc, K8S, strict=True)


def test_without_scale_to_zero_vllm_stays_up_and_the_operator_cannot_scale(helm: Helm) -> None:
    docs = _render(helm, "--set", "vllm.enabled=true", "--set", "vllm.scaleToZero.enabled=false")
    assert _one(docs, "Deployment", "-vllm-qwen")["spec"]["replicas"] == 1
    assert not [d for d in docs if d["kind"] in {"Role", "RoleBinding"}]
    assert "ODA_OPERATOR_VLLM_NAMESPACE" not in _operator(docs)["env"]


@pytest.mark.parametrize(("setting", "message"), [
    ("alerts.perMinute=0", "at '/alerts/perMinute'"),
    ("alerts.answerWebhook=chat.example.org", "at '/alerts/answerWebhook'"),
    ("alerts.bogus=1", "additional properties 'bogus' not allowed"),
    ("vllm.scaleToZero.idleSeconds=0", "at '/vllm/scaleToZero/idleSeconds'"),
])  # fmt: skip
def test_wrong_alert_and_scale_values_are_refused(helm: Helm, setting: str, message: str) -> None:
    done = helm.run("template", "rel", str(CHART), "--set", setting)
    assert done.returncode != 0
    assert message in done.stderr, done.stderr
