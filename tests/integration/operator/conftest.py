"""A real kube-apiserver 1.20 (with etcd and kube-controller-manager) for the CRD tests."""

from __future__ import annotations

from kube_fixtures import api, cluster, crds  # noqa: F401 (fixtures)
