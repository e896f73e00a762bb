"""Pure builders of every object the operator and the analyst create: no I/O, tested without a
cluster.

Ownership decides what Kubernetes' garbage collector removes: a query's sandbox pods (its
summary's and the code agent's scripts') and their network fence belong to the AnalystQuery; a
builder Job belongs to its VKGCache; a scheduled query's runs belong to it. A VKGCache belongs
to no query — several share it — and goes by its TTL or the LRU bound instead. A web UI user's
sandbox pod belongs to nothing: the analyst deletes it once it has read it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from oda_analyst.controller import names
from oda_analyst.controller.port import GraphNeed
from oda_analyst.sandbox_spec import (
    JOB,
    MIB,
    RUNTIME_CLASS,
    SCRIPT,
    SITE,
    PodSizes,
    sandbox_pod,
    user_key,
)

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
    # The gVisor RuntimeClass the sandbox pods ask for (the chart's, named per release).
    runtime_class: str = RUNTIME_CLASS

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
        "command": ["python", "-m", "oda_analyst.pipeline.build_vkg"],
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


# --- the user's sandbox pod -------------------------------------------------------------------


SANDBOX_SITE = SITE  # where the sandbox image keeps odaplot (the code agent's layout)
EXIT_FILE = ".exit"


def _query_sandbox(query: Mapping[str, Any], env: WorkloadEnv, *, user: str, name: str,
                   deadline_s: int, limits: PodSizes | None = None) -> Manifest:  # fmt: skip
    """The code agent's hardened sandbox pod as one of ``query``'s pods: its name, its labels
    (which the query's fence and the chart's deny-all policy select), owned by the query."""
    meta = query["metadata"]
    pod = sandbox_pod(user, namespace=meta["namespace"], image=env.sandbox_image,
                      sizes=limits, runtime_class=env.runtime_class)  # fmt: skip
    pod["metadata"]["name"] = name
    pod["metadata"]["labels"] |= _labels("analysis", instance=env.instance,
                                         **{names.LABEL_QUERY: meta["name"]})  # fmt: skip
    pod["metadata"]["ownerReferences"] = [owner_reference(query)]
    pod["spec"]["activeDeadlineSeconds"] = deadline_s
    sandbox = pod["spec"]["containers"][0]
    sandbox["env"] = [*sandbox["env"], {"name": "PYTHONPATH", "value": SANDBOX_SITE}]
    sandbox["terminationMessagePolicy"] = "FallbackToLogsOnError"
    return pod


# --- the code agent's scripts in the user's sandbox pod -------------------------------------

CODE_RUN = "/opt/oda/run"  # the executor's reply, log and exit status, and the release marker
REQUEST = "request.json"  # the one job the pod's executor runs (odaexec's request line)
READY = ".ready"  # put by ``odapod put`` into the job folder once /in and the job are in place
IO_CONTAINER = "io"  # the container the analyst execs into (``odapod``): it moves the files
SANDBOX_CONTAINER = "sandbox"


def get_code_job(*, limits: PodSizes, source: str) -> dict[str, bytes]:
    """The job folder of one run: the script and the one request its executor answers."""
    request = {"id": 1, "script": f"{JOB}/{SCRIPT}", "wall_s": limits.wall_s,
               "cpu_s": limits.cpu_s, "output_bytes": limits.output_bytes}  # fmt: skip
    return {SCRIPT: source.encode(), REQUEST: (json.dumps(request) + "\n").encode()}


def get_code_pod(owner: Mapping[str, Any] | None, env: WorkloadEnv, *, user: str, pod: str,
                 namespace: str, limits: PodSizes, deadline_s: int) -> Manifest:  # fmt: skip
    """One script of the code agent in the user's sandbox pod, with no network at all and no
    credential: nothing in its spec names the bucket, a Secret or a Service.

    Two containers of the sandbox image share the pod's volumes. ``io`` only waits: the
    analyst execs ``odapod`` in it (as ``kubectl cp`` does) to put the session's uploads into
    /in and the script and its request into the job folder, and later to read /out and the
    executor's reply back. ``sandbox`` waits for the job's ``.ready`` marker, then the code
    agent's executor (``odaexec``, with its wall-clock, CPU and output limits) runs the job
    once, its reply, log and exit status left in the run folder. /in and the job folder are
    read-only to it. ``owner`` (a query) owns the pod; None for a web UI user's run, whose
    pod the analyst deletes once it has read it."""
    if owner is not None:
        spec_pod = _query_sandbox(owner, env, user=user, name=pod, deadline_s=deadline_s,
                                  limits=limits)  # fmt: skip
    else:
        spec_pod = sandbox_pod(user, namespace=namespace, image=env.sandbox_image,
                               sizes=limits, runtime_class=env.runtime_class)  # fmt: skip
        spec_pod["metadata"]["name"] = pod
        spec_pod["metadata"]["labels"] |= _labels("analysis", instance=env.instance)
        spec_pod["spec"]["activeDeadlineSeconds"] = deadline_s
        box = spec_pod["spec"]["containers"][0]
        box["env"] = [*box["env"], {"name": "PYTHONPATH", "value": SANDBOX_SITE}]
        box["terminationMessagePolicy"] = "FallbackToLogsOnError"
    spec = spec_pod["spec"]
    sandbox = spec["containers"][0]
    run = CODE_RUN
    sandbox["command"] = [
        "sh",
        "-c",
        f"while [ ! -e {JOB}/{READY} ]; do sleep 0.2; done; "
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
    spec["volumes"] = [*spec["volumes"],
                       {"name": "job", "emptyDir": {"sizeLimit": "16Mi"}},
                       {"name": "run", "emptyDir": {"sizeLimit": reply_room}}]  # fmt: skip
    io = {
        "name": IO_CONTAINER,
        "image": env.sandbox_image,
        "imagePullPolicy": sandbox["imagePullPolicy"],
        "command": ["python", "-m", "odapod", "wait", str(deadline_s)],
        "env": [{"name": "HOME", "value": "/tmp"},
                {"name": "PYTHONPATH", "value": SANDBOX_SITE},
                {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": sandbox["securityContext"],
        "resources": {"limits": {"cpu": "200m", "memory": "256Mi"},
                      "requests": {"cpu": "10m", "memory": "64Mi"}},
        "volumeMounts": [{"name": "in", "mountPath": "/in"},
                         {"name": "job", "mountPath": JOB},
                         {"name": "out", "mountPath": "/out", "readOnly": True},
                         {"name": "run", "mountPath": run}],
    }  # fmt: skip
    spec["containers"] = [sandbox, io]
    return spec_pod


def get_sandbox_network_policy(owner: Mapping[str, Any] | None, *, user: str,
                               namespace: str) -> Manifest:  # fmt: skip
    """The fence of a user's sandbox pods: no traffic in or out at all, not even DNS (their
    files move through the API server's exec, which needs no pod network). ``owner``: the
    query whose pods it fences (owned by it, selecting them by its name), or None for the
    web UI user's pods in ``namespace`` (one per user, kept)."""
    labels: dict[str, str] = {"oda-analyst.dev/sandbox-user": user_key(user)}
    meta: dict[str, Any]
    if owner is not None:
        q = owner["metadata"]
        labels[names.LABEL_QUERY] = q["name"]
        meta = {"name": names.dns_name(q["name"], q["uid"][:8], "fence", limit=253),
                "namespace": q["namespace"],
                "labels": _labels("analysis", **{names.LABEL_QUERY: q["name"]}),
                "ownerReferences": [owner_reference(owner)]}  # fmt: skip
    else:
        meta = {"name": names.dns_name("sandbox", user_key(user), "fence", limit=253),
                "namespace": namespace, "labels": _labels("analysis")}  # fmt: skip
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": meta,
        "spec": {"podSelector": {"matchLabels": labels}, "policyTypes": ["Ingress", "Egress"],
                 "ingress": [], "egress": []},
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
