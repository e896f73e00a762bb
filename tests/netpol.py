"""Which pods a NetworkPolicy admits, read as a CNI enforcing networking.k8s.io/v1 would: label
selectors (matchLabels and matchExpressions), a peer without namespaceSelector meaning the
policy's own namespace, namespaces known by their kubernetes.io/metadata.name label."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Labels = Mapping[str, str]


def selects(selector: Mapping[str, Any], labels: Labels) -> bool:
    """A LabelSelector against a set of labels (the empty selector selects everything)."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def peer_admits(peer: Mapping[str, Any], *, policy_namespace: str, labels: Labels,
                namespace: str) -> bool:  # fmt: skip
    if "ipBlock" in peer:
        return False  # pods are told apart by labels here, never by address
    ns_selector = peer.get("namespaceSelector")
    if ns_selector is None:
        in_namespace = namespace == policy_namespace
    else:
        in_namespace = selects(ns_selector, {"kubernetes.io/metadata.name": namespace})
    return in_namespace and selects(peer.get("podSelector") or {}, labels)


def ingress_admits(policy: Mapping[str, Any], *, labels: Labels, namespace: str,
                   port: int | None = None) -> bool:  # fmt: skip
    """Whether ``policy`` lets a pod with ``labels`` in ``namespace`` reach the pods it selects
    (on ``port``, when given)."""
    policy_ns = policy["metadata"]["namespace"]
    for rule in policy["spec"].get("ingress") or []:
        ports: Sequence[Mapping[str, Any]] = rule.get("ports") or []
        if port is not None and ports and all(p.get("port") != port for p in ports):
            continue
        peers = rule.get("from")
        if peers is None:
            return True  # a rule without `from` admits every source
        if any(peer_admits(p, policy_namespace=policy_ns, labels=labels, namespace=namespace)
               for p in peers):  # fmt: skip
            return True
    return False
