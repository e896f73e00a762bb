"""The chart's web UI (templates/ui.yaml), as `helm template` renders it: the pod runs
`oda-analyst ui` with flags and settings the product has, its coordinator reaches the analyst
Services, users come from the mounted Secret, the session key and history follow the values,
the probes hit a route that answers without sign-in, and its NetworkPolicy opens exactly the
peers it needs. The lint and `kubernetes-validate --strict` of every scenario (which now include
the UI) are in test_helm_chart.py."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml
from starlette.routing import Route
from starlette.testclient import TestClient

from helm_tool import CHART, Helm, locate_helm
from oda_analyst.cli import main as cli_main
from oda_analyst.config import Settings
from oda_analyst.webui.app import create_app
from oda_analyst.webui.auth import hash_password, load_credentials
from oda_analyst.webui.history import History

EXTERNAL = ["-f", str(CHART / "ci" / "external-stores-values.yaml")]
GPU = ["-f", str(CHART / "ci" / "gpu-monitoring-values.yaml")]


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return locate_helm(tmp_path_factory.mktemp("helm-home"))


def _render(helm: Helm, *args: str) -> list[dict[str, Any]]:
    return helm.template(*args)


def _named(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (doc,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def _ui(docs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    pod = _named(docs, "Deployment", "rel-oda-analyst-ui")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return pod, container


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def _pods(docs: list[dict[str, Any]], labels: dict[str, str]) -> list[dict[str, Any]]:
    return [d["spec"]["template"] for d in docs if d["kind"] == "Deployment"
            and labels.items() <= d["spec"]["template"]["metadata"]["labels"].items()]  # fmt: skip


def test_ui_runs_the_cli_command_with_flags_and_settings_it_has(helm: Helm) -> None:
    for args in ([], EXTERNAL, GPU):
        _, c = _ui(_render(helm, *args))
        assert c["command"] == ["oda-analyst", "ui"]
        flags = {opt for p in cli_main.commands["ui"].params for opt in p.opts}
        assert {a.split("=", 1)[0] for a in c["args"]} <= flags
        assert "--host=0.0.0.0" in c["args"]
        # every variable is one the product reads (a misspelt name would be silently ignored)
        for name in _env(c):
            assert name.startswith("ODA_") and name[4:].lower() in Settings.model_fields, name


def test_the_coordinator_reaches_the_analyst_services(helm: Helm) -> None:
    docs = _render(helm, "--set", "analyst.ports.retriever=9001")
    env = _env(_ui(docs)[1])
    for name, svc in (("ODA_RETRIEVER_MCP_URL", "retriever"), ("ODA_CODEAGENT_MCP_URL",
                                                                "codeagent")):  # fmt: skip
        service = _named(docs, "Service", f"rel-oda-analyst-{svc}")
        (port,) = service["spec"]["ports"]
        assert env[name] == f"http://rel-oda-analyst-{svc}:{port['port']}/mcp"
    assert env["ODA_RETRIEVER_MCP_URL"].endswith(":9001/mcp")


def test_users_come_from_the_secret_mounted_where_the_setting_points(
    helm: Helm, tmp_path: Path
) -> None:
    docs = _render(helm, "--set", "ui.users.existingSecret=ops-users", "--set", "ui.users.key=lst")
    pod, c = _ui(docs)
    env = _env(c)
    users_file = Path(env["ODA_UI_USERS_FILE"])
    (mount,) = [m for m in c["volumeMounts"] if m["name"] == "users"]
    assert mount["readOnly"] is True and users_file.parent == Path(mount["mountPath"])
    (volume,) = [v for v in pod["volumes"] if v["name"] == "users"]
    assert volume["secret"] == {"secretName": "ops-users",
                                "items": [{"key": "lst", "path": users_file.name}]}  # fmt: skip
    # the Secret's value as the README makes it is what the UI loads from that file
    (tmp_path / users_file.name).write_text(f"alice:{hash_password('pw')}\n")
    assert set(load_credentials(tmp_path / users_file.name, None)) == {"alice"}
    # OIDC alone needs no users Secret
    pod, c = _ui(_render(helm, *EXTERNAL, "--set", "ui.auth=oidc"))
    assert "ODA_UI_USERS_FILE" not in _env(c) and all(v["name"] != "users" for v in pod["volumes"])


def test_a_generated_session_key_is_a_secret_of_the_release(helm: Helm) -> None:
    docs = _render(helm)
    ref = _env(_ui(docs)[1])["ODA_UI_SECRET"]["secretKeyRef"]
    secret = _named(docs, "Secret", ref["name"])
    assert len(base64.b64decode(secret["data"][ref["key"]])) >= 32
    # another render makes another key: nothing fixed ships in the chart
    again = _named(_render(helm), "Secret", ref["name"])
    assert again["data"] != secret["data"]
    external = _render(helm, *EXTERNAL)
    assert _env(_ui(external)[1])["ODA_UI_SECRET"] == {
        "secretKeyRef": {"name": "ui-session", "key": "key"}
    }
    generated = [d for d in external if d["metadata"]["name"].endswith("-ui-session")]
    assert not generated


def test_history_is_in_redis_when_there_is_one_else_sqlite_on_scratch(helm: Helm) -> None:
    env = _env(_ui(_render(helm))[1])
    assert env["ODA_UI_HISTORY"] == "redis"
    assert env["ODA_REDIS_URL"] == "redis://rel-oda-analyst-redis:6379/0"
    pod, c = _ui(_render(helm, "--set", "redis.enabled=false"))
    env = _env(c)
    assert env["ODA_UI_HISTORY"] == "sqlite" and "ODA_REDIS_URL" not in env
    # SQLite goes under ODA_DATA_DIR, which is a writable scratch volume of a read-only root
    data = next(m for m in c["volumeMounts"] if m["mountPath"] == env["ODA_DATA_DIR"])
    assert {"name": data["name"], "emptyDir": {}} in pod["volumes"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    env = _env(_ui(_render(helm, *EXTERNAL))[1])
    assert env["ODA_UI_HISTORY"] == "postgres"
    assert env["ODA_UI_POSTGRES_URL"] == {"secretKeyRef": {"name": "ui-postgres", "key": "url"}}


def test_oidc_settings_come_from_values_and_the_client_secret_from_a_secret(helm: Helm) -> None:
    env = _env(_ui(_render(helm, *EXTERNAL))[1])
    assert env["ODA_UI_AUTH"] == "both"
    assert env["ODA_UI_OIDC_ISSUER"] == "https://sso.dc.example.org/realms/ops"
    assert env["ODA_UI_OIDC_CLIENT_ID"] == "oda-analyst"
    assert env["ODA_UI_OIDC_CLIENT_SECRET"] == {
        "secretKeyRef": {"name": "ui-oidc", "key": "clientSecret"}
    }
    assert env["ODA_UI_PUBLIC_URL"] == "https://analyst.dc.example.org"
    default = _env(_ui(_render(helm))[1])
    assert default["ODA_UI_AUTH"] == "password"
    assert not [n for n in default if n.startswith("ODA_UI_OIDC")]


def test_the_probes_hit_a_route_that_answers_without_sign_in(helm: Helm, tmp_path: Path) -> None:
    _, c = _ui(_render(helm))
    port = {p["name"]: p["containerPort"] for p in c["ports"]}
    for probe in ("readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"]["port"] in port
        path = c[probe]["httpGet"]["path"]
        app = create_app(None, {}, History(tmp_path / "h.sqlite"), secret="s")  # type: ignore[arg-type]
        assert path in {r.path for r in app.routes if isinstance(r, Route)}
        assert TestClient(app).get(path, follow_redirects=False).status_code == 200


def test_the_service_reaches_the_ui_port(helm: Helm) -> None:
    docs = _render(helm, "--set", "ui.port=9090", "--set", "ui.service.type=LoadBalancer")
    _, c = _ui(docs)
    assert "--port=9090" in c["args"]
    svc = _named(docs, "Service", "rel-oda-analyst-ui")
    assert svc["spec"]["type"] == "LoadBalancer"
    assert svc["spec"]["ports"] == [{"name": "http", "port": 9090, "targetPort": "http"}]
    assert {"name": "http", "containerPort": 9090} in c["ports"]


def test_the_network_policy_opens_the_ui_port_and_only_the_peers_it_needs(helm: Helm) -> None:
    for args in ([], EXTERNAL, GPU):
        docs = _render(helm, *args)
        policy = _named(docs, "NetworkPolicy", "rel-oda-analyst-ui")["spec"]
        (ui_pod,) = _pods(docs, policy["podSelector"]["matchLabels"])
        assert ui_pod["metadata"]["labels"]["app.kubernetes.io/component"] == "ui"
        assert set(policy["policyTypes"]) == {"Ingress", "Egress"}
        (ingress,) = policy["ingress"]
        assert ingress["ports"] == [{"port": ui_pod["spec"]["containers"][0]["ports"][0]
                                     ["containerPort"]}]  # fmt: skip
        reached = set()
        for rule in policy["egress"]:
            for peer in rule["to"]:
                if "podSelector" not in peer:
                    continue
                pods = _pods(docs, peer["podSelector"]["matchLabels"])
                assert pods, peer
                for pod in pods:  # several with several vLLM models
                    served = {p["containerPort"] for c in pod["spec"]["containers"]
                              for p in c["ports"]}  # fmt: skip
                    assert {p["port"] for p in rule["ports"]} <= served, rule
                    reached.add(pod["metadata"]["labels"]["app.kubernetes.io/component"])
        dns = [r for r in policy["egress"] if {"port": 53, "protocol": "UDP"} in r["ports"]]
        assert dns
        values = yaml.safe_load((CHART / "values.yaml").read_text())
        for arg in args[1::2]:
            values = {**values, **yaml.safe_load(Path(arg).read_text())}
        want = {"analyst"} | {c for c in ("redis", "vllm") if values[c]["enabled"]}
        assert reached == want, args
    # the external scenario's extra rules (model gateway, stores, provider) are added verbatim
    policy = _named(_render(helm, *EXTERNAL), "NetworkPolicy", "rel-oda-analyst-ui")["spec"]
    extra = yaml.safe_load((CHART / "ci" / "external-stores-values.yaml").read_text())
    assert policy["egress"][-3:] == extra["networkPolicy"]["uiEgressTo"]
    assert policy["ingress"][0]["from"] == extra["networkPolicy"]["uiIngressFrom"]


def test_the_analyst_and_redis_policies_let_the_ui_in(helm: Helm) -> None:
    docs = _render(helm)
    labels = _pods(docs, {"app.kubernetes.io/component": "ui"})[0]["metadata"]["labels"]
    for name in ("rel-oda-analyst-analyst-ingress", "rel-oda-analyst-redis-ingress"):
        rules = _named(docs, "NetworkPolicy", name)["spec"]["ingress"]
        peers = [p for r in rules for p in r.get("from", [])]
        assert any(p["podSelector"]["matchLabels"].items() <= labels.items() for p in peers), name


def test_ui_disabled_renders_no_ui_object(helm: Helm) -> None:
    docs = _render(helm, "--set", "ui.enabled=false")
    assert not [d for d in docs if d["metadata"]["labels"].get("app.kubernetes.io/component")
                == "ui"]  # fmt: skip


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (["--set", "ui.port=http"], "at '/ui/port': got string, want integer"),
        (["--set", "ui.port=70000"], "at '/ui/port'"),
        (["--set", "ui.auth=ldap"], "at '/ui/auth': value must be one of"),
        (["--set", "ui.history=files"], "at '/ui/history': value must be one of"),
        (["--set", "ui.users.existingSecret="], "at '/ui/users/existingSecret'"),
        (["--set", "ui.auth=oidc"], "at '/ui/oidc/issuer': minLength: got 0, want 1"),
        (["--set", "ui.oidc.issuer=sso.example.org"], "at '/ui/oidc/issuer'"),
        (["--set", "ui.history=postgres"], "at '/ui/postgres/existingSecret'"),
        (["--set", "ui.history=redis", "--set", "redis.enabled=false"],
         "ui.history: redis needs a Redis"),
        (["--set", "ui.bogus=1"], "additional properties 'bogus' not allowed"),
    ],
)  # fmt: skip
def test_wrong_ui_values_are_refused_readably(helm: Helm, setting: list[str], message: str) -> None:
    done = helm.run("template", "rel", str(CHART), *setting)
    assert done.returncode != 0
    assert message in done.stderr, done.stderr
