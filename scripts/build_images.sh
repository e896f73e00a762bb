#!/usr/bin/env bash
# Builds the product and sandbox images (images/*/Dockerfile) from the repository root with the
# first container builder found (docker, podman or buildah). No builder runs on the test
# machines; there the tests check the Dockerfiles instead (tests/unit/test_images.py).
# Usage: scripts/build_images.sh [REGISTRY/PREFIX] [TAG]   (default ghcr.io/oda-analyst, 0.1.0)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="${1:-ghcr.io/oda-analyst}"
tag="${2:-0.1.0}"
builder=""
for b in docker podman buildah; do
  if command -v "$b" >/dev/null 2>&1; then builder="$b"; break; fi
done
if [ -z "$builder" ]; then
  echo "build_images: no container builder (docker, podman or buildah) on this machine" >&2
  exit 2
fi
for dir in "$repo"/images/*/; do
  name="$(basename "$dir")"
  if [ "$builder" = buildah ]; then
    buildah bud -f "$dir/Dockerfile" -t "$prefix/$name:$tag" "$repo"
  else
    "$builder" build -f "$dir/Dockerfile" -t "$prefix/$name:$tag" "$repo"
  fi
done
