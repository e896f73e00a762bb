#!/usr/bin/env bash
# What only the tests need, on top of scripts/setup.sh (source that first): the dev tools
# (pytest, ruff, mypy, import-linter…), the real model server of the integration tier, the
# Debian packages the tests start as real servers, and the sandbox's Python environment.
# Source it: `. scripts/setup_test.sh`.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

dev_stamp="$ODA_VENV/.oda-dev-stamp"
dev_want="$( (echo "$repo"; cat "$repo/pyproject.toml") | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$dev_stamp" 2>/dev/null)" != "$dev_want" ]; then
  echo "setup: installing the test tools" >&2
  "$ODA_VENV/bin/pip" install -q -e "$repo[dev,embeddings]"
  echo "$dev_want" > "$dev_stamp"
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
    # The same lock as scripts/setup_kube.sh, which the test command runs beside this.
    flock /var/lock/oda-analyst-apt.lock apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive flock /var/lock/oda-analyst-apt.lock \
      apt-get install -y -qq --no-install-recommends \
      "${apt_needed[@]}" >/dev/null
  else
    echo "setup: missing ${apt_needed[*]} (install them; their tests will be skipped)" >&2
  fi
fi

# axe-core (Deque's accessibility engine, from the npm registry) for the web UI's browser tests,
# which inject its axe.min.js into the page: installed here, never fetched while a test runs.
axe_version="4.14.1"
axe_dir="$ODA_CACHE/axe-core-$axe_version"
if [ ! -f "$axe_dir/node_modules/axe-core/axe.min.js" ]; then
  if command -v npm >/dev/null 2>&1; then
    echo "setup: installing axe-core $axe_version (npm)" >&2
    npm install -s --prefix "$axe_dir" --no-audit --no-fund --no-save "axe-core@$axe_version" \
      >/dev/null || echo "setup: axe-core did not install (the accessibility test will skip)" >&2
  else
    echo "setup: npm is missing: axe-core not installed (the accessibility test will skip)" >&2
  fi
fi
export ODA_AXE_JS="$axe_dir/node_modules/axe-core/axe.min.js"

# The code agent's sandbox Python environment (a separate venv, built once per key; two builds
# at once, a set-up's and a first `code run`'s, wait for one under the module's own lock).
ODA_CACHE="$ODA_CACHE" "$ODA_VENV/bin/python" -m oda_analyst.codeagent.pyenv build >/dev/null \
  || echo "setup: the sandbox Python environment did not build (code agent tests will fail)" >&2

