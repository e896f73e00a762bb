"""The user's sandbox pod as plain data: its file layout and its hardened pod spec.

A leaf (it imports nothing of ours) because two sides build these pods and may not import each
other: the code agent's Kubernetes backend (``codeagent.backends.kubernetes``) and the
analyst's sandbox pods (``controller.manifests.get_code_pod``), which import-linter keeps away
from the code agent. The pod runs under a gVisor ``runtimeClassName`` (``gvisor`` unless told), no
service-account token, a read-only root filesystem, uid 65534, no capabilities, the runtime's
seccomp profile and resource limits; ``/in`` is read-only, ``/out`` and ``/tmp`` are
size-limited ``emptyDir`` volumes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

IN = "/in"
OUT = "/out"
SITE = "/opt/oda/site"  # the recipes' helper module (odaplot) and sitecustomize
JOB = "/opt/oda/job"  # the script, read-only
SCRIPT = "main.py"
UID = 65534  # nobody: the sandboxed code never runs as root, not even a namespaced one
MIB = 2**20

APP = "oda-codeagent-sandbox"
USER_LABEL = "oda-analyst.dev/sandbox-user"
USER_ANNOTATION = "oda-analyst.dev/user"
RUNTIME_CLASS = "gvisor"


@dataclass(frozen=True)
class PodSizes:
    """What of one run's limits the pod spec carries (``codeagent.limits.Limits`` has the
    rest; its defaults are these)."""

    memory_bytes: int = 1024 * MIB
    out_dir_bytes: int = 256 * MIB
    tmp_bytes: int = 256 * MIB
    wall_s: float = 60.0
    cpu_s: int = 60
    output_bytes: int = 1 * MIB


def user_key(user: str) -> str:
    """A DNS- and label-safe key for any user name (names may hold '@', '+', '.')."""
    return "u-" + hashlib.sha256(user.encode()).hexdigest()[:16]


def sandbox_labels(user: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": APP, "app.kubernetes.io/part-of": "oda-analyst",
            USER_LABEL: user_key(user)}  # fmt: skip


def sandbox_pod(
    user: str,
    *,
    namespace: str,
    image: str,
    sizes: PodSizes | None = None,
    inputs_claim: str | None = None,
    runtime_class: str = RUNTIME_CLASS,
) -> dict[str, Any]:
    """The user's sandbox pod; ``inputs_claim`` names a PVC for /in (else an emptyDir);
    ``runtime_class`` is the gVisor RuntimeClass (a chart names its own per release)."""
    lim = sizes or PodSizes()
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
            "labels": sandbox_labels(user),
            "annotations": {USER_ANNOTATION: user},
        },
        "spec": {
            "runtimeClassName": runtime_class,
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
