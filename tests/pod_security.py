"""The Pod Security Standards' `restricted` profile (which includes `baseline`), as the API
server's PodSecurity admission checks a pod spec (Kubernetes 1.30 policy versions), written out
so that the chart's rendered pods and the operator's manifest builders are held to the same rules
without a cluster: https://kubernetes.io/docs/concepts/security/pod-security-standards/

`restricted_violations` returns one readable line per broken rule (empty: the pod would be
admitted into a namespace labelled pod-security.kubernetes.io/enforce=restricted).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

# baseline: the volume types restricted allows (everything else, hostPath first, is refused)
ALLOWED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                   "persistentVolumeClaim", "projected", "secret"}  # fmt: skip
SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
                "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies",
                "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
                "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"}  # fmt: skip
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t"}
SECCOMP_OK = {"RuntimeDefault", "Localhost"}

# Rule names, so that an exemption names the one rule it lifts (never a whole pod).
RUN_AS_NON_ROOT = "runAsNonRoot"
RULES = ("host namespaces", "privileged", "capabilities", "volumes", "hostPorts", "appArmor",
         "seLinux", "procMount", "sysctls", "allowPrivilegeEscalation", RUN_AS_NON_ROOT,
         "runAsUser", "seccompProfile")  # fmt: skip


def pod_specs(doc: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any], Mapping[str, Any]]]:
    """(kind/name, pod metadata, pod spec) of every pod a manifest makes: a bare Pod, or the pod
    template of a workload (a CronJob's through its Job template)."""
    where = f"{doc['kind']}/{doc['metadata']['name']}"
    kind = doc["kind"]
    if kind == "Pod":
        yield where, doc["metadata"], doc["spec"]
    elif kind in {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}:
        template = doc["spec"]["template"]
        yield where, template.get("metadata", {}), template["spec"]
    elif kind == "CronJob":
        template = doc["spec"]["jobTemplate"]["spec"]["template"]
        yield where, template.get("metadata", {}), template["spec"]


def _containers(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [*spec.get("initContainers", []), *spec.get("containers", []),
            *spec.get("ephemeralContainers", [])]  # fmt: skip


def restricted_violations(spec: Mapping[str, Any], *, exempt: frozenset[str] = frozenset()
                          ) -> list[str]:  # fmt: skip
    """The rules of `restricted` that ``spec`` (a PodSpec) breaks, one line each; rules named
    in ``exempt`` are not checked."""
    found: list[tuple[str, str]] = []
    pod_ctx: Mapping[str, Any] = spec.get("securityContext") or {}
    containers = _containers(spec)

    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(flag):
            found.append(("host namespaces", f"{flag} is true"))
    for vol in spec.get("volumes", []):
        kinds = set(vol) - {"name"}
        if not kinds <= ALLOWED_VOLUMES:
            found.append(("volumes", f"volume {vol['name']} is {sorted(kinds)}"))
    for sysctl in pod_ctx.get("sysctls", []):
        if sysctl["name"] not in SAFE_SYSCTLS:
            found.append(("sysctls", f"sysctl {sysctl['name']}"))
    found += _profile_rules("pod", pod_ctx)

    pod_non_root = pod_ctx.get("runAsNonRoot") is True
    pod_seccomp = (pod_ctx.get("seccompProfile") or {}).get("type")
    if pod_seccomp is not None and pod_seccomp not in SECCOMP_OK:
        found.append(("seccompProfile", f"pod seccompProfile {pod_seccomp}"))
    if pod_ctx.get("runAsUser") == 0:
        found.append(("runAsUser", "pod runAsUser is 0"))

    for c in containers:
        name = f"container {c['name']}"
        ctx: Mapping[str, Any] = c.get("securityContext") or {}
        if ctx.get("privileged"):
            found.append(("privileged", f"{name} is privileged"))
        caps = ctx.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            found.append(("capabilities", f"{name} does not drop ALL capabilities"))
        added = set(caps.get("add") or []) - {"NET_BIND_SERVICE"}
        if added:
            found.append(("capabilities", f"{name} adds {sorted(added)}"))
        for port in c.get("ports", []):
            if port.get("hostPort"):
                found.append(("hostPorts", f"{name} uses hostPort {port['hostPort']}"))
        if ctx.get("procMount", "Default") != "Default":
            found.append(("procMount", f"{name} procMount {ctx['procMount']}"))
        found += _profile_rules(name, ctx)
        if ctx.get("allowPrivilegeEscalation") is not False:
            found.append(("allowPrivilegeEscalation",
                          f"{name} does not set allowPrivilegeEscalation: false"))  # fmt: skip
        non_root = ctx.get("runAsNonRoot")
        if non_root is False or (non_root is None and not pod_non_root):
            found.append((RUN_AS_NON_ROOT, f"{name} may run as root (runAsNonRoot not true)"))
        if ctx.get("runAsUser") == 0:
            found.append(("runAsUser", f"{name} runAsUser is 0"))
        seccomp = (ctx.get("seccompProfile") or {}).get("type")
        if seccomp is None and pod_seccomp is None:
            found.append(("seccompProfile", f"{name} has no seccompProfile (nor has the pod)"))
        elif seccomp is not None and seccomp not in SECCOMP_OK:
            found.append(("seccompProfile", f"{name} seccompProfile {seccomp}"))
    return [line for rule, line in found if rule not in exempt]


def _profile_rules(name: str, ctx: Mapping[str, Any]) -> list[tuple[str, str]]:
    """AppArmor and SELinux: the runtime's default or a profile on the node, never lifted."""
    found = []
    armor = (ctx.get("appArmorProfile") or {}).get("type")
    if armor not in (None, "RuntimeDefault", "Localhost"):
        found.append(("appArmor", f"{name} appArmorProfile {armor}"))
    se = ctx.get("seLinuxOptions") or {}
    if se.get("type", "") not in SELINUX_TYPES or se.get("user") or se.get("role"):
        found.append(("seLinux", f"{name} seLinuxOptions {dict(se)}"))
    return found
