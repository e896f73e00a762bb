"""A real kube-apiserver 1.20 (with etcd and kube-controller-manager) for the CRD tests: the
fixtures ``cluster``, ``api`` and ``crds`` of tests/kube_fixtures.py (registered in
tests/conftest.py, so this tier and the operator e2e tier share one control plane)."""
