"""The `restricted` checker the chart's and the operator's pods are held to refuses what the
Pod Security Standards refuse (so that a test built on it can fail)."""

from __future__ import annotations

from typing import Any

import pytest

from pod_security import RUN_AS_NON_ROOT, pod_specs, restricted_violations

GOOD_CONTAINER = {"name": "c", "securityContext": {
    "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}  # fmt: skip
GOOD = {"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [GOOD_CONTAINER]}  # fmt: skip


def _with(pod: dict[str, Any] | None = None, **container: Any) -> dict[str, Any]:
    ctx = {**GOOD_CONTAINER["securityContext"], **container.pop("securityContext", {})}  # type: ignore[dict-item]
    return {**GOOD, **(pod or {}),
            "containers": [{**GOOD_CONTAINER, **container, "securityContext": ctx}]}  # fmt: skip


def test_a_restricted_pod_passes() -> None:
    assert restricted_violations(GOOD) == []
    # the container may carry what the pod does not
    per_container = {"containers": [{"name": "c", "securityContext": {
        "runAsNonRoot": True, "seccompProfile": {"type": "Localhost", "localhostProfile": "p"},
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}}]}  # fmt: skip
    assert restricted_violations(per_container) == []


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        (_with({"hostNetwork": True}), "hostNetwork"),
        (_with({"hostPID": True}), "hostPID"),
        (_with({"volumes": [{"name": "h", "hostPath": {"path": "/"}}]}), "hostPath"),
        (_with({"securityContext": {"runAsNonRoot": True}}), "no seccompProfile"),
        (_with({"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}),
         "may run as root"),
        (_with(securityContext={"runAsNonRoot": False}), "may run as root"),
        (_with(securityContext={"runAsUser": 0}), "runAsUser is 0"),
        (_with(securityContext={"seccompProfile": {"type": "Unconfined"}}), "Unconfined"),
        (_with(securityContext={"allowPrivilegeEscalation": True}), "allowPrivilegeEscalation"),
        ({**GOOD, "containers": [{"name": "c"}]}, "allowPrivilegeEscalation"),
        (_with(securityContext={"capabilities": {"drop": ["NET_RAW"]}}), "drop ALL"),
        (_with(securityContext={"capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]}}),
         "SYS_ADMIN"),
        (_with(securityContext={"privileged": True}), "privileged"),
        (_with(ports=[{"containerPort": 80, "hostPort": 80}]), "hostPort"),
        (_with(securityContext={"procMount": "Unmasked"}), "procMount"),
        (_with(securityContext={"seLinuxOptions": {"type": "spc_t"}}), "seLinuxOptions"),
        (_with(securityContext={"appArmorProfile": {"type": "Unconfined"}}), "appArmor"),
        (_with({"securityContext": {**GOOD["securityContext"],  # type: ignore[dict-item]
                                    "sysctls": [{"name": "kernel.msgmax", "value": "1"}]}}),
         "kernel.msgmax"),
        ({**GOOD, "initContainers": [{"name": "init"}]}, "container init"),
    ],
)  # fmt: skip
def test_each_rule_refuses(spec: dict[str, Any], said: str) -> None:
    found = restricted_violations(spec)
    assert any(said in line for line in found), found


def test_an_exemption_lifts_one_rule_only() -> None:
    root = _with({"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}},
                 securityContext={"privileged": True})  # fmt: skip
    found = restricted_violations(root, exempt=frozenset({RUN_AS_NON_ROOT}))
    assert found and all("privileged" in line for line in found)


def test_pod_specs_of_every_workload_kind() -> None:
    template = {"metadata": {"labels": {"a": "b"}}, "spec": GOOD}
    kinds = [{"kind": k, "metadata": {"name": "x"}, "spec": {"template": template}}
             for k in ("Deployment", "StatefulSet", "DaemonSet", "Job")]  # fmt: skip
    kinds.append({"kind": "CronJob", "metadata": {"name": "x"},
                  "spec": {"jobTemplate": {"spec": {"template": template}}}})  # fmt: skip
    kinds.append({"kind": "Pod", "metadata": {"name": "x"}, "spec": GOOD})
    kinds.append({"kind": "Service", "metadata": {"name": "x"}, "spec": {}})
    found = [where for doc in kinds for where, _m, _s in pod_specs(doc)]
    assert found == ["Deployment/x", "StatefulSet/x", "DaemonSet/x", "Job/x", "CronJob/x", "Pod/x"]
