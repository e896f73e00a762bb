#!/usr/bin/env bash
# Set-up shared by the main job and the tests: a Python 3.11 virtual environment cached outside
# the repo (re-installed only when pyproject.toml changes) and the Debian packages the tests use.
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
  "$ODA_VENV/bin/pip" install -q -e "$repo[dev,embeddings]"
  echo "$want" > "$stamp"
fi

# The real model server of the integration tier (llama.cpp + SmolLM2-135M): built once, cached.
ODA_CACHE="$ODA_CACHE" ODA_VENV="$ODA_VENV" bash "$repo/scripts/setup_model.sh"

# Debian packages the integration tests start as real servers.
apt_needed=()
# chromium and chromium-driver: the web UI's browser tests (Playwright drives /usr/bin/chromium).
# postgresql: the web UI's Postgres history test runs a throwaway server (initdb + pg_ctl).
# prometheus and prometheus-alertmanager: the alert tests (a rule fires, Alertmanager posts to
# the operator's webhook receiver).
for pkg_bin in "redis-server:redis-server" "runsc:runsc" "bubblewrap:bwrap" \
               "chromium:chromium" "chromium-driver:chromedriver" "postgresql:pg_ctlcluster" \
               "prometheus:prometheus" "prometheus-alertmanager:prometheus-alertmanager"; do
  pkg="${pkg_bin%%:*}"; bin="${pkg_bin##*:}"
  command -v "$bin" >/dev/null 2>&1 || apt_needed+=("$pkg")
done
if [ "${#apt_needed[@]}" -gt 0 ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Debian packages: ${apt_needed[*]}" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "${apt_needed[@]}" >/dev/null
  else
    echo "setup: missing ${apt_needed[*]} (install them; their tests will be skipped)" >&2
  fi
fi

# The code agent's sandbox Python environment (a separate venv, built once per key). Two set-ups
# at once wait for one build (without the lock each deleted the other's half-built folder).
ODA_CACHE="$ODA_CACHE" flock "$ODA_CACHE/.sandbox-env.lock" \
  "$ODA_VENV/bin/python" -m oda_analyst.codeagent.pyenv build >/dev/null \
  || echo "setup: the sandbox Python environment did not build (code agent tests will fail)" >&2

export ODA_VENV
export PATH="$ODA_VENV/bin:$PATH"
# Models come from installed packages only: never reach for a hub at run time.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
