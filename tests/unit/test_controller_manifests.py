"""The operator's pure manifest builders: what each object asks of the cluster, and that every
one is a valid object for current Kubernetes (kubernetes-validate, strict: no unknown fields)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import kubernetes_validate
import pytest

from oda_analyst.codeagent.backends.kubernetes import get_sandbox_pod, sizes
from oda_analyst.codeagent.limits import Limits
from oda_analyst.config import get_settings
from oda_analyst.controller import manifests, names
from oda_analyst.controller.context import workload_env
from oda_analyst.controller.port import GraphNeed
from pod_security import pod_specs, restricted_violations

K8S = "1.30.0"  # the oldest schema set kubernetes-validate ships that has CEL in CRDs
ENV = manifests.WorkloadEnv(
    image="oda-analyst/analyst:0.1.0", sandbox_image="oda-analyst/sandbox:0.1.0",
    lake="s3://m100/lake", s3_endpoint="http://minio.lake:9000", s3_region="us-east-1",
    s3_secret="oda-analyst-s3", sparql_endpoint="http://oxigraph:7878",
)  # fmt: skip
KEY = "0123456789abcdef" * 4


def _query(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": names.API_VERSION, "kind": names.QUERY_KIND,
            "metadata": {"name": "q2", "namespace": "ops", "uid": "1234abcd-0000-0000",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"question": "total power of node 900", "user": "alice@example.org",
                     **spec}}  # fmt: skip


def _cache() -> dict[str, Any]:
    need = GraphNeed(key=KEY, request={"target": "readings"}, lake="s3://m100/lake",
                     fingerprint="f00d")  # fmt: skip
    cache = manifests.get_vkg_cache(need, namespace="ops", owner="alice")
    cache["metadata"]["uid"] = "cafe0000-1111"
    return cache


def _valid(obj: dict[str, Any]) -> None:
    kubernetes_validate.validate(obj, K8S, strict=True)


def test_vkg_cache_is_named_by_its_key_and_belongs_to_no_query() -> None:
    cache = _cache()
    assert cache["metadata"]["name"] == names.cache_name(KEY) == f"vkg-{KEY[:40]}"
    assert "ownerReferences" not in cache["metadata"]
    assert cache["spec"]["key"] == KEY and cache["spec"]["lake"]["fingerprint"] == "f00d"


def test_builder_job_reads_the_lake_with_referenced_keys_and_belongs_to_its_cache() -> None:
    job = manifests.get_builder_job(_cache(), ENV)
    _valid(job)
    ref = job["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["name"], ref["uid"]) == ("VKGCache", f"vkg-{KEY[:40]}",
                                                      "cafe0000-1111")  # fmt: skip
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["automountServiceAccountToken"] is False
    (c,) = pod["containers"]
    assert c["command"][-1] == "oda_analyst.pipeline.build_vkg"
    env = {e["name"]: e for e in c["env"]}
    assert env["ODA_VKG_KEY"]["value"] == KEY
    assert json.loads(env["ODA_VKG_PLAN"]["value"]) == {"target": "readings"}
    assert env["ODA_LAKE"]["value"] == "s3://m100/lake"
    assert "ODA_DASK_SCHEDULER" not in env  # unset settings are not passed as empty strings
    dask = manifests.WorkloadEnv(**{**ENV.__dict__, "scan_engine": "auto",
                                    "dask_scheduler": "tcp://dask:8786"})  # fmt: skip
    job_env = manifests.get_builder_job(_cache(), dask)["spec"]["template"]["spec"]
    passed = {e["name"]: e.get("value") for e in job_env["containers"][0]["env"]}
    assert passed["ODA_DASK_SCHEDULER"] == "tcp://dask:8786"
    # Credentials by reference only: nothing secret in the manifest.
    assert env["ODA_S3_SECRET_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "oda-analyst-s3"
    assert "value" not in env["ODA_S3_SECRET_KEY"]
    assert c["terminationMessagePolicy"] == "FallbackToLogsOnError"


def test_scheduled_run_is_the_question_at_the_run_time_owned_by_the_schedule() -> None:
    parent = _query(schedule="0 * * * *", historyLimit=2)
    run = manifests.get_scheduled_run(parent, datetime(2026, 1, 1, 5, 0, tzinfo=UTC))
    assert run["metadata"]["name"] == "q2-20260101050000"
    assert run["spec"]["referenceTime"] == "2026-01-01T05:00:00Z"
    assert "schedule" not in run["spec"] and "historyLimit" not in run["spec"]
    assert run["spec"]["question"] == parent["spec"]["question"]
    assert run["metadata"]["labels"][names.LABEL_SCHEDULE] == "q2"
    assert run["metadata"]["ownerReferences"][0]["name"] == "q2"


@pytest.mark.parametrize("user", ["alice", "Bob.Smith+ops@example.org", "x" * 128])
def test_names_stay_dns_labels(user: str) -> None:
    pod = manifests.get_code_pod(_query(user=user), ENV, user=user, namespace="ops",
                                 pod=names.analysis_pod_name("q2", "1234abcd-0000"),
                                 limits=sizes(Limits()), deadline_s=60)  # fmt: skip
    name = pod["metadata"]["name"]
    assert len(name) <= 63 and name == name.lower()
    assert names.dns_name("a" * 100) != names.dns_name("a" * 99 + "b")
    assert len(names.dns_name("a" * 100)) == 63


def test_code_pod_runs_one_job_of_the_code_agent_in_the_users_gvisor_sandbox() -> None:
    limits = Limits(wall_s=30, cpu_s=20, output_bytes=65536)
    pod_name = names.code_pod_name("q2", "1234abcd-0000", "f" * 64)
    pod = manifests.get_code_pod(_query(), ENV, user="alice@example.org", pod=pod_name,
                                 namespace="ops", limits=sizes(limits),
                                 deadline_s=400)  # fmt: skip
    _valid(pod)
    meta, spec = pod["metadata"], pod["spec"]
    assert meta["name"] == pod_name and len(pod_name) <= 63
    assert meta["ownerReferences"][0]["uid"] == "1234abcd-0000-0000"
    # The query's fence and the chart's deny-all policy select it by these labels.
    assert meta["labels"][names.LABEL_QUERY] == "q2"
    assert meta["labels"][names.LABEL_COMPONENT] == "analysis"
    assert spec["runtimeClassName"] == "gvisor" and spec["automountServiceAccountToken"] is False
    assert spec["activeDeadlineSeconds"] == 400
    sandbox, io = spec["containers"]
    assert (sandbox["name"], io["name"]) == (manifests.SANDBOX_CONTAINER, manifests.IO_CONTAINER)
    assert sandbox["image"] == io["image"] == ENV.sandbox_image
    assert sandbox["securityContext"]["readOnlyRootFilesystem"] is True
    assert io["securityContext"] == sandbox["securityContext"]
    # the sandbox starts the job once io has put it in place (its .ready marker)
    assert "while [ ! -e /opt/oda/job/.ready ]" in sandbox["command"][-1]
    assert "python -m odaexec < /opt/oda/job/request.json" in sandbox["command"][-1]
    assert io["command"] == ["python", "-m", "odapod", "wait", "400"]
    mounts = {m["mountPath"]: (m["name"], m.get("readOnly", False))
              for m in sandbox["volumeMounts"]}  # fmt: skip
    assert mounts["/in"] == ("in", True) and mounts["/opt/oda/job"] == ("job", True)
    assert mounts["/out"] == ("out", False) and mounts["/opt/oda/run"] == ("run", False)
    io_mounts = {m["mountPath"]: (m["name"], m.get("readOnly", False))
                 for m in io["volumeMounts"]}  # fmt: skip
    assert io_mounts == {"/in": ("in", False), "/opt/oda/job": ("job", False),
                         "/out": ("out", True), "/opt/oda/run": ("run", False)}  # fmt: skip
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert set(volumes) == {"in", "out", "tmp", "job", "run"}
    assert all("emptyDir" in v for v in volumes.values())  # no ConfigMap, no Secret, no PVC
    assert sandbox["resources"]["limits"]["memory"] == f"{limits.memory_bytes // 2**20}Mi"


def test_code_pod_has_no_network_and_no_credential() -> None:
    """Nothing in the sandbox pod reaches the bucket: no S3 address or key in any container's
    environment, no value from a Secret, no publisher, no service-account token, no Service
    links; its fence denies every packet in and out (not even DNS)."""
    limits = sizes(Limits())
    for owner in (_query(), None):  # a query's run, and a web UI user's
        pod = manifests.get_code_pod(owner, ENV, user="alice", pod="p", namespace="ui",
                                     limits=limits, deadline_s=60)  # fmt: skip
        _valid(pod)
        spec = pod["spec"]
        assert spec["hostNetwork"] is False and spec["enableServiceLinks"] is False
        assert spec["automountServiceAccountToken"] is False
        assert [c["image"] for c in spec["containers"]] == [ENV.sandbox_image] * 2
        for c in spec["containers"]:
            env = {e["name"]: e for e in c.get("env") or []}
            assert not [e for e in env.values() if "valueFrom" in e], c["name"]
            assert not [k for k in env if "S3" in k or k.startswith(("AWS", "ODA_PUBLISH"))]
            assert "envFrom" not in c
            assert not any(ENV.s3_endpoint in json.dumps(x) for x in env.values())
        assert "minio" not in json.dumps(pod) and "secret" not in json.dumps(pod).lower()
        fence = manifests.get_sandbox_network_policy(owner, user="alice", namespace="ui")
        _valid(fence)
        assert fence["spec"]["policyTypes"] == ["Ingress", "Egress"]
        assert fence["spec"]["ingress"] == [] and fence["spec"]["egress"] == []
        labels = pod["metadata"]["labels"]
        assert all(labels.get(k) == v
                   for k, v in fence["spec"]["podSelector"]["matchLabels"].items())  # fmt: skip
    # a query's fence is its own (owned by it, selecting its pods only); a UI user's is kept
    owned = manifests.get_sandbox_network_policy(_query(), user="alice", namespace="x")
    assert owned["metadata"]["namespace"] == "ops"
    assert owned["metadata"]["ownerReferences"][0]["uid"] == "1234abcd-0000-0000"
    assert owned["spec"]["podSelector"]["matchLabels"][names.LABEL_QUERY] == "q2"
    kept = manifests.get_sandbox_network_policy(None, user="alice", namespace="ui")
    assert kept["metadata"]["namespace"] == "ui" and "ownerReferences" not in kept["metadata"]


def test_code_job_carries_the_script_and_the_one_request() -> None:
    limits = Limits(wall_s=30, cpu_s=20, output_bytes=65536)
    job = manifests.get_code_job(limits=sizes(limits), source="print(1)\n")
    assert job["main.py"] == b"print(1)\n"
    request = json.loads(job["request.json"])
    assert request == {"id": 1, "script": "/opt/oda/job/main.py", "wall_s": 30.0, "cpu_s": 20,
                       "output_bytes": 65536}  # fmt: skip


def _every_pod_the_operator_makes(env: manifests.WorkloadEnv) -> list[dict[str, Any]]:
    limits = Limits(wall_s=30, cpu_s=20, output_bytes=65536)
    return [
        manifests.get_builder_job(_cache(), env),
        manifests.get_code_pod(None, env, user="alice", pod="ui-code", namespace="ui",
                               limits=sizes(limits), deadline_s=60),
        manifests.get_code_pod(_query(), env, user="alice", pod="q2-code", namespace="ops",
                               limits=sizes(limits), deadline_s=60),
        get_sandbox_pod("alice", namespace="ops", image=env.sandbox_image),
    ]  # fmt: skip


def test_every_pod_the_operator_makes_meets_pod_security_restricted() -> None:
    # The same rules the chart's pods are held to (tests/pod_security.py), with no exemption:
    # a namespace enforcing `restricted` admits the builder Job and the sandbox pods.
    checked = 0
    for manifest in _every_pod_the_operator_makes(ENV):
        for where, _meta, spec in pod_specs(manifest):
            assert not restricted_violations(spec), where
            checked += 1
    assert checked == 4


def test_the_operators_pods_carry_its_release_label_when_it_has_one() -> None:
    # The release's NetworkPolicies admit the builder and analysis pods by it.
    released = manifests.WorkloadEnv(**{**ENV.__dict__, "instance": "rel"})
    builder, analysis, code, _sandbox = _every_pod_the_operator_makes(released)
    for manifest in (builder, analysis, code):
        for where, meta, _spec in pod_specs(manifest):
            assert meta["labels"][names.LABEL_INSTANCE] == "rel", where
    for manifest in _every_pod_the_operator_makes(ENV):
        for where, meta, _spec in pod_specs(manifest):
            assert names.LABEL_INSTANCE not in meta["labels"], where


def test_sandbox_pods_ask_for_the_release_runtime_class(monkeypatch: pytest.MonkeyPatch) -> None:
    # The chart names the RuntimeClass per release (two releases in one cluster each have their
    # own) and tells the operator and the analyst (ODA_OPERATOR_RUNTIME_CLASS); every sandbox
    # pod they make asks for that one, the builder Job (no user code) for none.
    monkeypatch.setenv("ODA_OPERATOR_RUNTIME_CLASS", "rel-oda-analyst-oda-gvisor")
    get_settings.cache_clear()
    try:
        env = workload_env(get_settings())
    finally:
        get_settings.cache_clear()
    assert env.runtime_class == "rel-oda-analyst-oda-gvisor"
    made = _every_pod_the_operator_makes(env)
    classes = [spec.get("runtimeClassName") for m in made[:3] for _w, _m, spec in pod_specs(m)]
    assert classes == [None, "rel-oda-analyst-oda-gvisor", "rel-oda-analyst-oda-gvisor"]
    assert manifests.WorkloadEnv(**{**ENV.__dict__}).runtime_class == "gvisor"  # the default
