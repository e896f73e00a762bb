"""Kubernetes backend as pure manifest builders: a pod per user under gVisor, and its fence.

Nothing here talks to a cluster. The pod itself is ``sandbox_spec``'s (which the analyst's
sandbox pods share, ``controller.manifests.get_code_pod``); this adds the code agent's limits
and the fence: a NetworkPolicy that selects only that pod and allows nothing in or out.
"""

from __future__ import annotations

from typing import Any

from oda_analyst import sandbox_spec
from oda_analyst.codeagent.limits import Limits
from oda_analyst.sandbox_spec import PodSizes, sandbox_labels, sandbox_pod

APP = sandbox_spec.APP
USER_LABEL = sandbox_spec.USER_LABEL
USER_ANNOTATION = sandbox_spec.USER_ANNOTATION
RUNTIME_CLASS = sandbox_spec.RUNTIME_CLASS
user_key = sandbox_spec.user_key


def sizes(limits: Limits | None) -> PodSizes:
    """What of ``limits`` the pod spec carries."""
    lim = limits or Limits()
    return PodSizes(memory_bytes=lim.memory_bytes, out_dir_bytes=lim.out_dir_bytes,
                    tmp_bytes=lim.tmp_bytes, wall_s=lim.wall_s, cpu_s=lim.cpu_s,
                    output_bytes=lim.output_bytes)  # fmt: skip


def get_sandbox_pod(
    user: str,
    *,
    namespace: str,
    image: str,
    limits: Limits | None = None,
    inputs_claim: str | None = None,
) -> dict[str, Any]:
    """The user's sandbox pod; ``inputs_claim`` names a PVC for /in (else an emptyDir)."""
    return sandbox_pod(user, namespace=namespace, image=image, sizes=sizes(limits),
                       inputs_claim=inputs_claim)  # fmt: skip


def get_deny_all_network_policy(user: str, *, namespace: str) -> dict[str, Any]:
    """No traffic in or out of the user's sandbox pod (not even DNS)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": f"codeagent-{user_key(user)}-deny-all", "namespace": namespace,
                     "labels": sandbox_labels(user)},
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
