"""Kubernetes backend as pure manifest builders: a pod per user under gVisor, and its fence.

Nothing here talks to a cluster; the operator creates these objects. The pod runs with
``runtimeClassName: gvisor``, no service-account token, a read-only root filesystem, uid 65534,
no capabilities, the runtime's seccomp profile and resource limits; ``/in`` is read-only, ``/out``
and ``/tmp`` are size-limited ``emptyDir`` volumes. The NetworkPolicy selects only that pod and
allows nothing in or out.
"""

from __future__ import annotations

import hashlib
from typing import Any

from oda_analyst.codeagent.backends.base import IN, OUT, UID
from oda_analyst.codeagent.limits import MIB, Limits

APP = "oda-codeagent-sandbox"
USER_LABEL = "oda-analyst.dev/sandbox-user"
USER_ANNOTATION = "oda-analyst.dev/user"
RUNTIME_CLASS = "gvisor"


def user_key(user: str) -> str:
    """A DNS- and label-safe key for any user name (names may hold '@', '+', '.')."""
    return "u-" + hashlib.sha256(user.encode()).hexdigest()[:16]


def _labels(user: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": APP, "app.kubernetes.io/part-of": "oda-analyst",
            USER_LABEL: user_key(user)}  # fmt: skip


def get_sandbox_pod(
    user: str,
    *,
    namespace: str,
    image: str,
    limits: Limits | None = None,
    inputs_claim: str | None = None,
) -> dict[str, Any]:
    """The user's sandbox pod; ``inputs_claim`` names a PVC for /in (else an emptyDir)."""
    lim = limits or Limits()
    memory = f"{lim.memory_bytes // MIB}Mi"
    inputs: dict[str, Any] = (
        {"persistentVolumeClaim": {"claimName": inputs_claim, "readOnly": True}}
        if inputs_claim
        else {"emptyDir": {"sizeLimit": "256Mi"}}
    )
    container = {
        "name": "sandbox",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-m", "odaexec"],
        "env": [{"name": "HOME", "value": "/tmp"}, {"name": "MPLCONFIGDIR",
                                                    "value": "/tmp/matplotlib"}],
        "securityContext": {
            "runAsNonRoot": True, "runAsUser": UID, "runAsGroup": UID,
            "readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
            "privileged": False, "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "resources": {
            "limits": {"cpu": "1", "memory": memory, "ephemeral-storage": "512Mi"},
            "requests": {"cpu": "100m", "memory": memory},
        },
        "volumeMounts": [
            {"name": "in", "mountPath": IN, "readOnly": True},
            {"name": "out", "mountPath": OUT},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"codeagent-{user_key(user)}",
            "namespace": namespace,
            "labels": _labels(user),
            "annotations": {USER_ANNOTATION: user},
        },
        "spec": {
            "runtimeClassName": RUNTIME_CLASS,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "hostNetwork": False,
            "hostPID": False,
            "hostIPC": False,
            "restartPolicy": "Never",
            "activeDeadlineSeconds": 3600,
            "securityContext": {"runAsNonRoot": True, "runAsUser": UID, "fsGroup": UID,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [container],
            "volumes": [
                {"name": "in", **inputs},
                {"name": "out", "emptyDir": {"sizeLimit": f"{lim.out_dir_bytes // MIB}Mi"}},
                {"name": "tmp", "emptyDir": {"medium": "Memory",
                                             "sizeLimit": f"{lim.tmp_bytes // MIB}Mi"}},
            ],
        },
    }  # fmt: skip


def get_deny_all_network_policy(user: str, *, namespace: str) -> dict[str, Any]:
    """No traffic in or out of the user's sandbox pod (not even DNS)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": f"codeagent-{user_key(user)}-deny-all", "namespace": namespace,
                     "labels": _labels(user)},
        "spec": {
            "podSelector": {"matchLabels": {USER_LABEL: user_key(user)}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": [],
        },
    }  # fmt: skip


def get_manifests(user: str, *, namespace: str, image: str,
                  limits: Limits | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Everything one user's sandbox needs, in creation order (the fence first)."""
    return [get_deny_all_network_policy(user, namespace=namespace),
            get_sandbox_pod(user, namespace=namespace, image=image, limits=limits)]  # fmt: skip
