"""Pure builders of every object the operator creates: no I/O, tested without a cluster.

Ownership decides what Kubernetes' garbage collector removes: a query's analysis pod, its input
ConfigMap and its network fence belong to the AnalystQuery; a builder Job belongs to its
VKGCache; a scheduled query's runs belong to it. A VKGCache belongs to no query — several share
it — and goes by its TTL or the LRU bound instead.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from oda_analyst.codeagent.backends.base import JOB, SCRIPT, SITE
from oda_analyst.codeagent.backends.kubernetes import get_sandbox_pod, user_key
from oda_analyst.codeagent.limits import MIB, Limits
from oda_analyst.controller import names
from oda_analyst.controller.port import GraphNeed

Manifest = dict[str, Any]


@dataclass(frozen=True)
class WorkloadEnv:
    """What the operator's pods are told about the lake and the graph store (not secrets:
    the S3 keys come from ``s3_secret`` by reference)."""

    image: str
    sandbox_image: str
    lake: str
    s3_endpoint: str | None
    s3_region: str
    s3_secret: str
    sparql_endpoint: str | None
    sparql_update_url: str | None = None
    sparql_gsp_url: str | None = None
    # The scan settings, as the operator has them (the builder reads the same settings object;
    # the graph build does not choose its engine from them yet: vkg.engines.engine_for).
    scan_engine: str | None = None
    dask_scheduler: str | None = None
    # The Helm release (app.kubernetes.io/instance) the release's NetworkPolicies admit the
    # builder and sandbox pods by; None outside a chart install.
    instance: str | None = None

    def env(self) -> list[dict[str, Any]]:
        plain = {
            "ODA_LAKE": self.lake,
            "ODA_S3_ENDPOINT": self.s3_endpoint,
            "ODA_S3_REGION": self.s3_region,
            "ODA_SPARQL_ENDPOINT": self.sparql_endpoint,
            "ODA_SPARQL_UPDATE_URL": self.sparql_update_url,
            "ODA_SPARQL_GSP_URL": self.sparql_gsp_url,
            "ODA_SCAN_ENGINE": self.scan_engine,
            "ODA_DASK_SCHEDULER": self.dask_scheduler,
            "ODA_DATA_DIR": "/tmp/oda-data",
        }
        env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in plain.items() if v]
        for name, key in (("ODA_S3_ACCESS_KEY", "accessKey"), ("ODA_S3_SECRET_KEY", "secretKey")):
            env.append({"name": name, "valueFrom": {"secretKeyRef": {
                "name": self.s3_secret, "key": key, "optional": True}}})  # fmt: skip
        return env


def owner_reference(obj: Mapping[str, Any], *, controller: bool = True) -> dict[str, Any]:
    meta = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"],
            "uid": meta["uid"], "controller": controller,
            "blockOwnerDeletion": True}  # fmt: skip


def _labels(component: str, *, instance: str | None = None, **extra: str) -> dict[str, str]:
    labels = {"app.kubernetes.io/part-of": names.PART_OF, names.LABEL_COMPONENT: component}
    if instance:
        labels[names.LABEL_INSTANCE] = instance
    return labels | extra


# Pod Security "restricted": no root, no privilege escalation, no capability, the runtime's
# seccomp filter. Set on the pod and on each container, so neither can be read without it.
RESTRICTED_POD = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_CONTAINER = {"runAsNonRoot": True, "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                        "seccompProfile": {"type": "RuntimeDefault"}}  # fmt: skip


# --- VKGCache and its builder Job ------------------------------------------------------------


def get_vkg_cache(need: GraphNeed, *, namespace: str, owner: str, ttl_seconds: int = 86400,
                  allowed_users: Sequence[str] = ("*",)) -> Manifest:  # fmt: skip
    return {
        "apiVersion": names.API_VERSION,
        "kind": names.CACHE_KIND,
        "metadata": {"name": names.cache_name(need.key), "namespace": namespace,
                     "labels": _labels("vkgcache")},
        "spec": {"key": need.key, "request": need.request,
                 "lake": {"uri": need.lake, "fingerprint": need.fingerprint},
                 "owner": owner, "allowedUsers": list(allowed_users), "ttlSeconds": ttl_seconds},
    }  # fmt: skip


def get_builder_job(cache: Mapping[str, Any], env: WorkloadEnv, *, deadline_s: int = 1800
                    ) -> Manifest:  # fmt: skip
    """The Job that builds the cache's graph from the lake into the shared store."""
    meta, spec = cache["metadata"], cache["spec"]
    name = names.builder_job_name(meta["name"])
    labels = _labels("vkg-builder", instance=env.instance, **{names.LABEL_CACHE: meta["name"]})
    container = {
        "name": "build",
        "image": env.image,
        "command": ["python", "-m", "oda_analyst.controller.workloads.build_vkg"],
        "env": [*env.env(),
                {"name": "ODA_VKG_KEY", "value": spec["key"]},
                {"name": "ODA_VKG_OWNER", "value": spec["owner"]},
                {"name": "ODA_VKG_PLAN", "value": json.dumps(spec["request"], sort_keys=True)}],
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                      "limits": {"memory": "4Gi"}},
        "securityContext": {**RESTRICTED_CONTAINER, "runAsUser": 65534},
    }  # fmt: skip
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": meta["namespace"], "labels": labels,
                     "ownerReferences": [owner_reference(cache)]},
        "spec": {
            "backoffLimit": 1,
            "activeDeadlineSeconds": deadline_s,
            "template": {
                "metadata": {"labels": labels},
                "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False,
                         "enableServiceLinks": False,
                         "securityContext": {**RESTRICTED_POD, "runAsUser": 65534},
                         "containers": [container]},
            },
        },
    }  # fmt: skip


# --- the analysis in the user's sandbox pod ---------------------------------------------------


def get_input_config_map(query: Mapping[str, Any], files: Mapping[str, str]) -> Manifest:
    """The analysis' read-only inputs (/in): the result CSV and the script."""
    meta = query["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": names.input_config_name(meta["name"], meta["uid"]),
                     "namespace": meta["namespace"],
                     "labels": _labels("analysis", **{names.LABEL_QUERY: meta["name"]}),
                     "ownerReferences": [owner_reference(query)]},
        "data": dict(files),
    }  # fmt: skip


SANDBOX_SITE = SITE  # where the sandbox image keeps odaplot (the code agent's layout)
EXIT_FILE = ".exit"


def _query_sandbox(query: Mapping[str, Any], env: WorkloadEnv, *, user: str, name: str,
                   deadline_s: int, limits: Limits | None = None) -> Manifest:  # fmt: skip
    """The code agent's hardened sandbox pod as one of ``query``'s pods: its name, its labels
    (which the query's fence and the chart's deny-all policy select), owned by the query."""
    meta = query["metadata"]
    pod = get_sandbox_pod(user, namespace=meta["namespace"], image=env.sandbox_image,
                          limits=limits)  # fmt: skip
    pod["metadata"]["name"] = name
    pod["metadata"]["labels"] |= _labels("analysis", instance=env.instance,
                                         **{names.LABEL_QUERY: meta["name"]})  # fmt: skip
    pod["metadata"]["ownerReferences"] = [owner_reference(query)]
    pod["spec"]["activeDeadlineSeconds"] = deadline_s
    sandbox = pod["spec"]["containers"][0]
    sandbox["env"] = [*sandbox["env"], {"name": "PYTHONPATH", "value": SANDBOX_SITE}]
    sandbox["terminationMessagePolicy"] = "FallbackToLogsOnError"
    return pod


def _publisher(env: WorkloadEnv, sandbox: Mapping[str, Any], variables: Mapping[str, str],
               mounts: Sequence[tuple[str, str]]) -> Manifest:  # fmt: skip
    """The container that puts the sandbox's files into the bucket through presigned URLs:
    the same restrictions as the sandbox, its volumes read-only, no credential."""
    return {
        "name": "publish",
        "image": env.image,
        "command": ["python", "-m", "oda_analyst.controller.workloads.publish"],
        "env": [{"name": k, "value": v} for k, v in variables.items()],
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": sandbox["securityContext"],
        "resources": {"limits": {"cpu": "200m", "memory": "256Mi"},
                      "requests": {"cpu": "50m", "memory": "128Mi"}},
        "volumeMounts": [{"name": vol, "mountPath": path, "readOnly": True}
                         for vol, path in mounts],
    }  # fmt: skip


def get_analysis_pod(query: Mapping[str, Any], env: WorkloadEnv, *, user: str,
                     targets: Mapping[str, str], deadline_s: int = 900) -> Manifest:  # fmt: skip
    """The code agent's hardened sandbox pod (gVisor, read-only root, uid 65534, no token)
    running the analysis script from /in, plus a publisher that puts /out into the bucket
    through presigned URLs (``targets``: file name → URL), so neither holds a credential."""
    meta = query["metadata"]
    pod = _query_sandbox(query, env, user=user, deadline_s=deadline_s,
                         name=names.analysis_pod_name(meta["name"], meta["uid"]))  # fmt: skip
    spec = pod["spec"]
    sandbox = spec["containers"][0]
    # The script's own exit status is kept for the publisher, which reports it.
    sandbox["command"] = [
        "sh",
        "-c",
        f'python /in/analysis.py; s=$?; echo "$s" > /out/{EXIT_FILE}; exit "$s"',
    ]
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] != "in"] + [
        {"name": "in", "configMap": {"name": names.input_config_name(meta["name"], meta["uid"])}}
    ]
    publisher = _publisher(env, sandbox, {
        "ODA_PUBLISH_DIR": "/out",
        "ODA_PUBLISH_TARGETS": json.dumps(dict(targets), sort_keys=True),
        "ODA_PUBLISH_WAIT_S": str(deadline_s)}, [("out", "/out")])  # fmt: skip
    spec["containers"] = [sandbox, publisher]
    return pod


# --- the code agent's scripts in the user's sandbox pod -------------------------------------

CODE_RUN = "/opt/oda/run"  # the executor's reply, log and exit status, for the publisher
REQUEST = "request.json"  # the one job the pod's executor runs (odaexec's request line)
# A ConfigMap holds at most 1 MiB: the inputs and the script together stay below it.
MAX_CODE_INPUT_BYTES = 900_000


def _config_map(query: Mapping[str, Any], name: str, files: Mapping[str, bytes]) -> Manifest:
    meta = query["metadata"]
    data, binary = {}, {}
    for key, raw in files.items():
        try:
            data[key] = raw.decode("utf-8")
        except UnicodeDecodeError:
            binary[key] = base64.b64encode(raw).decode()
    cm: Manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": meta["namespace"],
                     "labels": _labels("analysis", **{names.LABEL_QUERY: meta["name"]}),
                     "ownerReferences": [owner_reference(query)]},
        "data": data,
    }  # fmt: skip
    if binary:
        cm["binaryData"] = binary
    return cm


def get_code_config_maps(query: Mapping[str, Any], *, pod: str, inputs: Mapping[str, bytes],
                         source: str, limits: Limits) -> list[Manifest]:  # fmt: skip
    """The code pod's two read-only volumes: the session's uploads (``/in``) and the job (the
    script and the one request its executor answers, at the code agent's job folder)."""
    request = {"id": 1, "script": f"{JOB}/{SCRIPT}", "wall_s": limits.wall_s,
               "cpu_s": limits.cpu_s, "output_bytes": limits.output_bytes}  # fmt: skip
    job = {SCRIPT: source.encode(), REQUEST: (json.dumps(request) + "\n").encode()}
    return [_config_map(query, names.code_config_name(pod, "in"), inputs),
            _config_map(query, names.code_config_name(pod, "job"), job)]  # fmt: skip


def get_code_pod(query: Mapping[str, Any], env: WorkloadEnv, *, user: str, pod: str,
                 limits: Limits, slots: Sequence[str], manifest_url: str,
                 deadline_s: int) -> Manifest:  # fmt: skip
    """One script of the code agent in the user's sandbox pod: the code agent's executor
    (``odaexec``, with its wall-clock, CPU and output limits) runs the job once and leaves its
    reply in a volume of its own; the publisher puts each file of /out into one of ``slots``
    (presigned PUT URLs) and then a manifest naming them, with the reply, to ``manifest_url``."""
    spec_pod = _query_sandbox(query, env, user=user, name=pod, deadline_s=deadline_s,
                              limits=limits)  # fmt: skip
    spec = spec_pod["spec"]
    sandbox = spec["containers"][0]
    run = CODE_RUN
    sandbox["command"] = [
        "sh",
        "-c",
        f"python -m odaexec < {JOB}/{REQUEST} > {run}/reply.jsonl 2> {run}/sandbox.log; "
        f's=$?; echo "$s" > {run}/{EXIT_FILE}; exit "$s"',
    ]
    sandbox["env"] = [*sandbox["env"],
                      {"name": "MPLBACKEND", "value": "Agg"},
                      {"name": "PYTHONUNBUFFERED", "value": "1"},
                      {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
                      # the executor itself (imports, its loop); each job gets its own limit
                      {"name": "ODA_CPU_LIMIT_S", "value": str(limits.cpu_s + 60)}]  # fmt: skip
    sandbox["volumeMounts"] = [*sandbox["volumeMounts"],
                               {"name": "job", "mountPath": JOB, "readOnly": True},
                               {"name": "run", "mountPath": run}]  # fmt: skip
    reply_room = f"{(2 * limits.output_bytes + 2 * MIB) // MIB}Mi"
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] != "in"] + [
        {"name": "in", "configMap": {"name": names.code_config_name(pod, "in")}},
        {"name": "job", "configMap": {"name": names.code_config_name(pod, "job")}},
        {"name": "run", "emptyDir": {"sizeLimit": reply_room}},
    ]
    publisher = _publisher(env, sandbox, {
        "ODA_PUBLISH_DIR": "/out",
        "ODA_PUBLISH_RUN_DIR": run,
        "ODA_PUBLISH_SLOTS": json.dumps(list(slots)),
        "ODA_PUBLISH_MANIFEST": manifest_url,
        "ODA_PUBLISH_WAIT_S": str(deadline_s)}, [("out", "/out"), ("run", run)])  # fmt: skip
    spec["containers"] = [sandbox, publisher]
    return spec_pod


def get_analysis_network_policy(query: Mapping[str, Any], *, user: str, s3_endpoint: str | None,
                                s3_cidr: str | None) -> Manifest:  # fmt: skip
    """The analysis pod may reach the bucket's endpoint and nothing else (the publisher needs
    it; the sandboxed code has nothing to send: its inputs are already in /in)."""
    meta = query["metadata"]
    egress: list[dict[str, Any]] = []
    if s3_endpoint and s3_cidr:
        parts = urlsplit(s3_endpoint)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        egress.append({"to": [{"ipBlock": {"cidr": s3_cidr}}],
                       "ports": [{"protocol": "TCP", "port": port}]})  # fmt: skip
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": names.dns_name(meta["name"], meta["uid"][:8], "fence", limit=253),
                     "namespace": meta["namespace"],
                     "labels": _labels("analysis", **{names.LABEL_QUERY: meta["name"]}),
                     "ownerReferences": [owner_reference(query)]},
        "spec": {
            "podSelector": {"matchLabels": {names.LABEL_QUERY: meta["name"],
                                            "oda-analyst.dev/sandbox-user": user_key(user)}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": egress,
        },
    }  # fmt: skip


# --- scheduled queries ------------------------------------------------------------------------


def get_scheduled_run(parent: Mapping[str, Any], run_time: datetime) -> Manifest:
    """One run of a scheduled query: the same question, the run's time as its reference."""
    meta, spec = parent["metadata"], parent["spec"]
    child_spec = {k: v for k, v in spec.items() if k not in {"schedule", "historyLimit"}}
    child_spec["referenceTime"] = run_time.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": names.API_VERSION,
        "kind": names.QUERY_KIND,
        "metadata": {
            "name": names.dns_name(meta["name"], run_time.strftime("%Y%m%d%H%M%S"), limit=253),
            "namespace": meta["namespace"],
            "labels": {**_labels("scheduled-run"), names.LABEL_SCHEDULE: meta["name"]},
            "annotations": {names.ANNOTATION_RUN_TIME: child_spec["referenceTime"]},
            "ownerReferences": [owner_reference(parent)],
        },
        "spec": child_spec,
    }
