"""The chart's authenticated boundaries as `helm template` renders them: the release's internal
tokens reach exactly the components that call (and serve) the MCP servers and the alert
receiver; the admission webhook's configurations send AnalystQuery writes to the operator's
webhook paths (the ids kopf registers), over TLS with a caBundle that signed the certificate the
operator serves; the operator's settings, read from the rendered environment, trust only its own
ServiceAccount as a creator for others and allow only the release's own model endpoint."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from typing import Any

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtensionOID

from helm_tool import CHART, Helm, locate_helm
from oda_analyst.config import Settings
from oda_analyst.controller.identity import Policy

FULL = "rel-oda-analyst"
SA = f"system:serviceaccount:oda:{FULL}-operator"
VLLM = f"http://{FULL}-vllm-qwen:8000/v1"


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return locate_helm(tmp_path_factory.mktemp("helm-home"))


@pytest.fixture(scope="module")
def default(helm: Helm) -> list[dict[str, Any]]:
    return helm.template()


def _of(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def _named(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (doc,) = [d for d in _of(docs, kind) if d["metadata"]["name"] == name]
    return doc


def _container(docs: list[dict[str, Any]], component: str) -> dict[str, Any]:
    deployment = _named(docs, "Deployment", f"{FULL}-{component}")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def _settings(container: dict[str, Any]) -> Settings:
    """The operator's settings from the container's literal environment values."""
    plain = {k.removeprefix("ODA_").lower(): v for k, v in _env(container).items()
             if k.startswith("ODA_WEBHOOK_") and isinstance(v, str)}  # fmt: skip
    return Settings(**plain)


def _registered_webhooks() -> set[str]:
    """The ids kopf serves the operator's webhooks at (its paths), in a process of their own:
    importing the module here would create kopf's default registry before an in-process
    operator test sets KUBECONFIG, and that registry would then hold no way to log in."""
    probe = (
        "import json, kopf, oda_analyst.controller.webhooks; print(json.dumps(sorted("
        "h.id for h in kopf.get_default_registry()._webhooks.get_all_handlers())))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    return set(json.loads(done.stdout))


def test_every_caller_and_server_of_the_mcp_servers_has_the_release_token(
    default: list[dict[str, Any]],
) -> None:
    secret = _named(default, "Secret", f"{FULL}-internal")
    assert set(secret["data"]) == {"mcpToken", "alertsToken", "modelKey"}
    tokens = [base64.b64decode(v).decode() for v in secret["data"].values()]
    assert len(set(tokens)) == 3 and all(len(t) >= 32 for t in tokens)
    ref = {"secretKeyRef": {"name": f"{FULL}-internal", "key": "mcpToken"}}
    for component in ("analyst", "operator", "ui"):
        assert _env(_container(default, component))["ODA_MCP_TOKEN"] == ref, component
    alerts = {"secretKeyRef": {"name": f"{FULL}-internal", "key": "alertsToken"}}
    operator = _env(_container(default, "operator"))
    assert operator["ODA_OPERATOR_ALERTS_TOKEN"] == alerts
    # the UI signs its users in and the analyst serves: neither holds the alert receiver's key
    for component in ("analyst", "ui"):
        assert "ODA_OPERATOR_ALERTS_TOKEN" not in _env(_container(default, component))


def test_the_releases_model_servers_ask_their_key_of_every_client(helm: Helm) -> None:
    docs = helm.template("-f", str(CHART / "ci" / "gpu-monitoring-values.yaml"))
    ref = {"secretKeyRef": {"name": f"{FULL}-internal", "key": "modelKey"}}
    servers = [d for d in _of(docs, "Deployment") if "-vllm-" in d["metadata"]["name"]]
    assert len(servers) == 2
    for server in servers:
        (container,) = server["spec"]["template"]["spec"]["containers"]
        assert _env(container)["VLLM_API_KEY"] == ref  # vLLM refuses /v1 calls without it
    for component in ("analyst", "operator", "ui"):
        assert _env(_container(docs, component))["ODA_LLM_API_KEY"] == ref, component
    (probe,) = [d for d in _of(docs, "Pod") if d["metadata"]["name"].endswith("-test-connection")]
    assert _env(probe["spec"]["containers"][0])["LLM_KEY"] == ref


def test_an_existing_secret_replaces_the_generated_tokens(helm: Helm) -> None:
    docs = helm.template("--set", "internalAuth.existingSecret=site-tokens")
    assert not [d for d in _of(docs, "Secret") if d["metadata"]["name"] == f"{FULL}-internal"]
    assert _env(_container(docs, "analyst"))["ODA_MCP_TOKEN"]["secretKeyRef"]["name"] == (
        "site-tokens"
    )


def test_the_webhook_reaches_the_operators_handlers_over_tls(
    default: list[dict[str, Any]],
) -> None:
    assert {"stamp-user", "check-query"} <= _registered_webhooks()
    tls = _named(default, "Secret", f"{FULL}-webhook-tls")
    ca = x509.load_pem_x509_certificate(base64.b64decode(tls["data"]["ca.crt"]))
    cert = x509.load_pem_x509_certificate(base64.b64decode(tls["data"]["tls.crt"]))
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_oid(ExtensionOID.SUBJECT_ALTERNATIVE_NAME).value
    assert f"{FULL}-webhook.oda.svc" in names.get_values_for_type(x509.DNSName)
    service = _named(default, "Service", f"{FULL}-webhook")
    (port,) = service["spec"]["ports"]
    operator = _container(default, "operator")
    ports = {p["name"]: p["containerPort"] for p in operator["ports"]}
    assert port["targetPort"] == "webhook" and ports["webhook"] == 9443
    assert _env(operator)["ODA_WEBHOOK_PORT"] == "9443"
    mounts = {m["name"]: m["mountPath"] for m in operator["volumeMounts"]}
    assert _env(operator)["ODA_WEBHOOK_CERT_DIR"] == mounts["webhook-tls"]
    expected = {
        "MutatingWebhookConfiguration": ("stamp-user", ["CREATE"]),
        "ValidatingWebhookConfiguration": ("check-query", ["CREATE", "UPDATE"]),
    }
    for kind, (hook_id, operations) in expected.items():
        (config,) = _of(default, kind)
        (hook,) = config["webhooks"]
        assert hook["clientConfig"]["service"] == {
            "name": f"{FULL}-webhook", "namespace": "oda", "port": port["port"],
            "path": f"/{hook_id}"}  # fmt: skip
        assert hook["clientConfig"]["caBundle"] == tls["data"]["ca.crt"]
        assert hook["failurePolicy"] == "Fail" and hook["sideEffects"] == "None"
        (rule,) = hook["rules"]
        assert rule["resources"] == ["analystqueries"] and rule["operations"] == operations
        assert "namespaceSelector" not in hook  # every namespace, as the operator serves


def test_the_operator_trusts_only_itself_and_the_releases_own_model(helm: Helm,
                                                                     default: list[dict[str, Any]]
                                                                     ) -> None:  # fmt: skip
    policy = Policy.from_settings(_settings(_container(default, "operator")))
    assert policy == Policy(trusted_creators=frozenset({SA}), model_urls=frozenset())
    extra = "webhook.modelBaseUrls[0]=https://models.example.org/v1/"
    docs = helm.template("--set", "vllm.enabled=true", "--set", extra)
    policy = Policy.from_settings(_settings(_container(docs, "operator")))
    assert policy.model_urls == {VLLM, "https://models.example.org/v1"}
    assert policy.trusted_creators == {SA}
    # every model the release serves, and the operator's own endpoint among them
    docs = helm.template("-f", str(CHART / "ci" / "gpu-monitoring-values.yaml"))
    operator = _container(docs, "operator")
    policy = Policy.from_settings(_settings(operator))
    assert policy.model_urls == {VLLM, f"http://{FULL}-vllm-deepseek-r1:8000/v1"}
    assert _env(operator)["ODA_LLM_BASE_URL"] in policy.model_urls
    # an external endpoint instead of vLLM
    docs = helm.template("--set", "llm.baseUrl=https://llm.example.org/v1", "--set", "llm.model=m")
    policy = Policy.from_settings(_settings(_container(docs, "operator")))
    assert policy.model_urls == {"https://llm.example.org/v1"}


def test_served_namespaces_scope_the_webhook(helm: Helm) -> None:
    docs = helm.template(
        "--set", "operator.watchNamespaces={ops,research}", "--set", "alerts.namespace=ops"
    )
    configs = [*_of(docs, "MutatingWebhookConfiguration"),
               *_of(docs, "ValidatingWebhookConfiguration")]  # fmt: skip
    assert len(configs) == 2
    for config in configs:
        (hook,) = config["webhooks"]
        assert hook["namespaceSelector"] == {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In",
             "values": ["ops", "research"]}]}  # fmt: skip


def test_without_the_webhook_nothing_of_it_is_rendered(helm: Helm) -> None:
    docs = helm.template("--set", "webhook.enabled=false")
    kinds = {d["kind"] for d in docs}
    assert not kinds & {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
    operator = _container(docs, "operator")
    assert operator["command"] == ["kopf", "run", "-m", "oda_analyst.controller.handlers"]
    assert not any(k.startswith("ODA_WEBHOOK_") for k in _env(operator))


def test_the_operator_policy_admits_the_api_server_to_the_webhook(
    default: list[dict[str, Any]],
) -> None:
    policy = _named(default, "NetworkPolicy", f"{FULL}-operator-ingress")
    ports = {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}
    assert 9443 in ports


@pytest.mark.parametrize(("setting", "where"), [
    ("webhook.failurePolicy=Sometimes", "/webhook/failurePolicy"),
    ("webhook.modelBaseUrls[0]=models.example.org", "/webhook/modelBaseUrls/0"),
    ("webhook.trustedCreators[0]=a\\,b", "/webhook/trustedCreators/0"),
    ("internalAuth.existingSecret=Not_A_Name", "/internalAuth/existingSecret"),
])  # fmt: skip
def test_the_schema_refuses_bad_values(helm: Helm, setting: str, where: str) -> None:
    done = helm.run("template", "rel", str(CHART), "--namespace", "oda", "--set", setting)
    assert done.returncode != 0
    assert where in done.stderr, done.stderr
