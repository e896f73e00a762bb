"""The operator's admission webhook on the real API server (1.20), with two users.

The operator's webhook module runs in this process (kopf serves it on a loopback port, HTTPS with
a certificate this test signs); the webhook configurations are the chart's own (`helm template`,
templates/webhook.yaml: rules, operations, paths, failure policy), with their clientConfig pointed
at that port and the test's CA, since this API server reaches no Service (no kube-proxy, no
cluster DNS), and scoped to the test's namespace by a label. alice and bob authenticate with
static tokens and may create, update and patch AnalystQueries there; the admin stands for the
operator's own ServiceAccount (the one trusted creator).
"""

from __future__ import annotations

import base64
import ipaddress
import os
import socket
import ssl
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kopf.testing import KopfRunner
from prometheus_client.parser import text_string_to_metric_families

from helm_tool import locate_helm
from k8s_node import wait_for
from kube_cluster import USER_TOKENS, USERS_GROUP, Cluster
from kube_fixtures import GROUP, Api
from oda_analyst.config import get_settings

pytestmark = pytest.mark.timeout(600)

QUERIES = f"/apis/{GROUP}/v1alpha1/namespaces/{{ns}}/analystqueries"
OWN_MODEL = "http://oda-oda-analyst-vllm-qwen.oda.svc:8000/v1"
QUESTION = "Retrieve the total power of node 900 on 1 June 2022 from 20:00 to 23:59"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serving_cert(folder: Path) -> bytes:
    """A CA and a certificate for 127.0.0.1 signed by it (tls.crt, tls.key); the CA's PEM."""
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "oda-test-webhook-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))  # fmt: skip
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(ca_key, hashes.SHA256()))  # fmt: skip
    (folder / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "tls.key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))  # fmt: skip
    return ca.public_bytes(serialization.Encoding.PEM)


def _chart_webhooks(tmp: Path, url: str, ca: bytes, ns: str) -> list[dict[str, Any]]:
    """The chart's webhook configurations, sent to ``url`` and scoped to namespace ``ns``."""
    helm = locate_helm(tmp / "helm-home")
    docs = helm.template("--show-only", "templates/webhook.yaml")
    configs = [d for d in docs if d["kind"].endswith("WebhookConfiguration")]
    assert {d["kind"] for d in configs} == {"MutatingWebhookConfiguration",
                                           "ValidatingWebhookConfiguration"}  # fmt: skip
    for doc in configs:
        doc["metadata"]["name"] += f"-{ns}"
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"{url}{path}",
                                    "caBundle": base64.b64encode(ca).decode()}  # fmt: skip
            hook["namespaceSelector"] = {"matchLabels": {"oda-identity-test": ns}}
    return configs


def _tls_up(port: int, ca: bytes) -> bool:
    ctx = ssl.create_default_context(cadata=ca.decode())
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as raw, \
                ctx.wrap_socket(raw, server_hostname="127.0.0.1"):  # fmt: skip
            return True
    except OSError:
        return False


@pytest.fixture()
def metrics_port() -> int:
    """Where the operator under test serves its /metrics (ODA_OPERATOR_METRICS_PORT)."""
    return _port()


def _decisions(port: int) -> dict[tuple[str, str], float]:
    """The webhook's decisions so far, as the operator's /metrics says them."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    return {(s.labels["webhook"], s.labels["decision"]): s.value
            for family in text_string_to_metric_families(text)
            if family.name == "oda_operator_webhook_decisions"
            for s in family.samples if s.name.endswith("_total")}  # fmt: skip


def _counted(before: dict[tuple[str, str], float], port: int) -> dict[tuple[str, str], float]:
    after = _decisions(port)
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v != before.get(k, 0.0)}


@pytest.fixture()
def webhook_ns(cluster: Cluster, crds: None, api: Api, tmp_path: Path,
               metrics_port: int) -> Iterator[str]:  # fmt: skip
    """A namespace where alice and bob may write AnalystQueries and every such write goes
    through the operator's webhook."""
    ns = f"t-id-{uuid.uuid4().hex[:8]}"
    api.http.post("/api/v1/namespaces", json={"metadata": {"name": ns, "labels": {
        "oda-identity-test": ns}}}).raise_for_status()  # fmt: skip
    rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/" + ns
    api.http.post(f"{rbac}/roles", json={"metadata": {"name": "query-author"}, "rules": [
        {"apiGroups": [GROUP], "resources": ["analystqueries"],
         "verbs": ["get", "list", "create", "update", "patch"]}]}).raise_for_status()  # fmt: skip
    api.http.post(f"{rbac}/rolebindings", json={
        "metadata": {"name": "query-authors"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "query-author"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                      "name": USERS_GROUP}]}).raise_for_status()  # fmt: skip
    port = _port()
    ca = _serving_cert(tmp_path / "certs")
    env = {"KUBECONFIG": str(cluster.kubeconfig), "ODA_WEBHOOK_PORT": str(port),
           "ODA_WEBHOOK_HOST": "127.0.0.1", "ODA_WEBHOOK_CERT_DIR": str(tmp_path / "certs"),
           "ODA_WEBHOOK_TRUSTED_CREATORS": "admin",
           "ODA_WEBHOOK_MODEL_URLS": OWN_MODEL,
           # the operator asks its analyst's and its bucket's addresses at start (it runs no
           # pipeline itself and connects lazily); the webhook needs neither, so addresses
           # nothing answers do. Outside CI the developer's shell may set them; CI does not.
           "ODA_OPERATOR_PIPELINE_URL": "http://127.0.0.1:9",
           "ODA_S3_ENDPOINT": "http://127.0.0.1:9",
           # the operator's /metrics, where its webhook decisions are counted
           "ODA_OPERATOR_METRICS_PORT": str(metrics_port),
           "ODA_OPERATOR_METRICS_HOST": "127.0.0.1"}  # fmt: skip
    configs = _chart_webhooks(tmp_path, f"https://127.0.0.1:{port}", ca, ns)
    saved = dict(os.environ)
    os.environ.update(env)
    get_settings.cache_clear()
    made: list[str] = []
    try:
        args = ["run", "--standalone", "--namespace", ns, "-m", "oda_analyst.controller.webhooks"]
        with KopfRunner(args, timeout=120) as runner:
            wait_for(lambda: runner.future.done() or _tls_up(port, ca), timeout=60,
                     what="the operator's webhook on its port")  # fmt: skip
            assert not runner.future.done(), runner.output[-3000:]
            for doc in configs:
                path = f"/apis/admissionregistration.k8s.io/v1/{doc['kind'].lower()}s"
                api.http.post(path, json=doc).raise_for_status()
                made.append(f"{path}/{doc['metadata']['name']}")
            yield ns
            for path in made:
                api.http.delete(path)
            made.clear()
    finally:
        for path in made:
            api.http.delete(path)
        os.environ.clear()
        os.environ.update(saved)
        get_settings.cache_clear()
        api.http.delete(f"/api/v1/namespaces/{ns}")


def _as(cluster: Cluster, user: str) -> httpx.Client:
    return httpx.Client(base_url=cluster.server, verify=False, timeout=30,
                        headers={"Authorization": f"Bearer {USER_TOKENS[user]}"})  # fmt: skip


def _query(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1alpha1", "kind": "AnalystQuery",
            "metadata": {"name": name}, "spec": {"question": QUESTION, **spec}}  # fmt: skip


def _refused(response: httpx.Response, *words: str) -> None:
    assert response.status_code == 403, (response.status_code, response.text)
    message = response.json()["message"]
    assert "admission webhook" in message, message
    for word in words:
        assert word in message, message


def _put_changed(client: httpx.Client, url: str, user: str) -> httpx.Response:
    """A PUT of the object as read with ``spec.user`` changed, read again on a conflict.

    The operator writes the query in between (kopf's progress annotations while query_changed
    retries against the unreachable analyst), so a PUT of what was read may carry a stale
    resourceVersion: the API server answers 409 before any webhook sees it, as it does to any
    client, and a client then reads again. A custom resource takes no PUT without one.
    """
    for _ in range(20):
        current = client.get(url).json()
        current["spec"]["user"] = user
        response = client.put(url, json=current)
        if response.status_code != 409:
            return response
    raise AssertionError(f"every PUT of {url} met a conflict: {response.text}")


def _user_of(api: Api, ns: str, name: str) -> str:
    obj = api.query(ns, name)
    assert obj is not None
    return str(obj["spec"]["user"])


def test_spec_user_is_the_creator_and_never_changes(
    cluster: Cluster, api: Api, webhook_ns: str, metrics_port: int
) -> None:
    ns = webhook_ns
    path = QUERIES.format(ns=ns)
    before = _decisions(metrics_port)
    with _as(cluster, "alice") as alice, _as(cluster, "bob") as bob:
        # stamped: alice writes no user, the query is hers
        made = alice.post(path, json=_query("by-alice"))
        assert made.status_code == 201, made.text
        assert made.json()["spec"]["user"] == "alice"
        # bob writes his own name: kept; he writes alice's: refused, nothing created
        assert bob.post(path, json=_query("by-bob", user="bob")).status_code == 201
        _refused(bob.post(path, json=_query("bob-as-alice", user="alice")), "'alice'", "'bob'")
        assert api.query(ns, "bob-as-alice") is None
        # a change of spec.user is refused, to anyone and by anyone, in any form of write
        merge = {"Content-Type": "application/merge-patch+json"}
        _refused(bob.patch(f"{path}/by-alice", json={"spec": {"user": "bob"}}, headers=merge),
                 "spec.user cannot change")  # fmt: skip
        _refused(alice.patch(f"{path}/by-alice", json={"spec": {"user": "carol"}},
                             headers=merge), "spec.user cannot change")  # fmt: skip
        _refused(_put_changed(alice, f"{path}/by-alice", "bob"), "spec.user cannot change")
        assert _user_of(api, ns, "by-alice") == "alice"
        assert _user_of(api, ns, "by-bob") == "bob"
        # other changes go through (the clarification answers a user appends)
        answered = alice.patch(f"{path}/by-alice", json={"spec": {"clarifications": ["ambient"]}},
                               headers=merge)  # fmt: skip
        assert answered.status_code == 200, answered.text
    # the operator (the trusted creator) creates a scheduled run or an alert query for its user
    run = api.http.post(path, json=_query("run-for-bob", user="bob"))
    assert run.status_code == 201, run.text
    assert _user_of(api, ns, "run-for-bob") == "bob"
    # each answer is counted on the operator's /metrics: alice's stamped; bob's and the run's
    # kept; bob-as-alice refused before validation; three creates and alice's answer allowed;
    # the three changes of spec.user refused, each at least once (the API server asks again
    # when a write it refused began from its cache rather than etcd: 1.20 did, twice each)
    # The operator's own writes also pass the validating webhook (kopf's progress annotations
    # and finalizers while query_changed retries against the unreachable analyst), as many as
    # the retries that fit in the test: the allowed count is at least the users' four.
    counted = _counted(before, metrics_port)
    refused = counted.pop(("check-query", "refused"))
    allowed = counted.pop(("check-query", "allowed"))
    assert counted == {
        ("stamp-user", "stamped"): 1, ("stamp-user", "kept"): 2, ("stamp-user", "refused"): 1,
    }  # fmt: skip
    assert 3 <= refused <= 6
    assert allowed >= 4


def test_an_unlisted_model_endpoint_is_refused(cluster: Cluster, api: Api, webhook_ns: str) -> None:
    ns = webhook_ns
    path = QUERIES.format(ns=ns)
    merge = {"Content-Type": "application/merge-patch+json"}
    with _as(cluster, "alice") as alice:
        elsewhere = {"baseUrl": "https://models.example.net/v1", "name": "qwen"}
        _refused(alice.post(path, json=_query("leaky", model=elsewhere)),
                 "spec.model.baseUrl", "models.example.net", OWN_MODEL)  # fmt: skip
        assert api.query(ns, "leaky") is None
        own = {"baseUrl": OWN_MODEL + "/", "name": "qwen"}
        made = alice.post(path, json=_query("own-model", model=own))
        assert made.status_code == 201, made.text
        # moving an existing query to another endpoint is refused the same way
        _refused(alice.patch(f"{path}/own-model", json={"spec": {"model": elsewhere}},
                             headers=merge), "models.example.net")  # fmt: skip
        obj = api.query(ns, "own-model")
        assert obj is not None and obj["spec"]["model"]["baseUrl"] == own["baseUrl"]
    # not even the trusted creator may name another endpoint
    _refused(api.http.post(path, json=_query("leaky-run", user="bob", model=elsewhere)),
             "spec.model.baseUrl")  # fmt: skip
