"""Names shared by the CRDs, the manifests and the handlers (one place, so they cannot drift)."""

from __future__ import annotations

import hashlib
import re

GROUP = "oda-analyst.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
QUERY_PLURAL = "analystqueries"
CACHE_PLURAL = "vkgcaches"
QUERY_KIND = "AnalystQuery"
CACHE_KIND = "VKGCache"

FINALIZER = f"{GROUP}/cleanup"
# The KopfPeering/ClusterKopfPeering the replicas share, when nothing names one: the default of
# ODA_OPERATOR_PEERING (config.py); the chart names one per release (<fullname>-<namespace>).
PEERING = "oda-analyst"
PART_OF = "oda-analyst"
LABEL_QUERY = f"{GROUP}/query"
LABEL_CACHE = f"{GROUP}/vkgcache"
LABEL_SCHEDULE = f"{GROUP}/scheduled-by"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_INSTANCE = "app.kubernetes.io/instance"  # the Helm release
ANNOTATION_RUN_TIME = f"{GROUP}/run-time"

PENDING = "Pending"
BUILDING = "BuildingVKG"
RETRIEVING = "Retrieving"
ANALYSING = "Analysing"
WAITING = "WaitingForClarification"
COMPLETED = "Completed"
REJECTED = "Rejected"
FAILED = "Failed"
SCHEDULED = "Scheduled"
TERMINAL = frozenset({COMPLETED, REJECTED, FAILED})

_DNS = re.compile(r"[^a-z0-9-]+")


def dns_name(*parts: str, limit: int = 63) -> str:
    """A DNS-1123 label from ``parts``; too long a name keeps its head and a hash of the rest,
    so two long names never collide."""
    raw = "-".join(parts).lower()
    name = _DNS.sub("-", raw).strip("-") or "x"
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(raw.encode()).hexdigest()[:10]
    return f"{name[: limit - 11].rstrip('-')}-{digest}"


def cache_name(key: str) -> str:
    """The VKGCache resource of a graph key: one resource per graph, whoever asked first."""
    return f"vkg-{key[:40]}"


def builder_job_name(cache: str) -> str:
    return dns_name(cache, "build")


def analysis_pod_name(query: str, uid: str) -> str:
    # The uid keeps a re-created query of the same name from adopting an old pod.
    return dns_name(query, uid[:8], "analysis")


def code_pod_name(query: str, uid: str, digest: str) -> str:
    """One code-agent script's pod: the digest of the script and its inputs, so a restarted
    operator that runs the same script again adopts the pod instead of starting another."""
    return dns_name(query, uid[:8], "code", digest[:10])
