#!/usr/bin/env bash
# A real Kubernetes API server for the operator's tests, built once and cached outside the repo.
#
# No Debian or PyPI package ships kube-apiserver, but Debian's own `kubernetes` source package
# (1.20.2) builds it offline with Debian's Go. Its vendored reflect2 1.0.1 crashes on Go >= 1.18
# at the first custom-resource create, so it is replaced by Debian's reflect2 1.0.2 sources before
# the build. kube-controller-manager comes from the same tree (service-account tokens and the
# garbage collector that follows owner references); kubectl is Debian's kubernetes-client of the
# same source version, unpacked rather than installed so it never shadows another kubectl.
#
# Prints the folder holding kube-apiserver, kube-controller-manager and kubectl. Needs root and
# apt-get on the first (cold, ~12+ minutes) run; later runs only check the cache.
# Usage: bash scripts/setup_kube.sh        (ODA_CACHE defaults to ~/.cache/oda-analyst)
set -euo pipefail

ODA_CACHE="${ODA_CACHE:-$HOME/.cache/oda-analyst}"
# The cache key: the Debian source version and the reflect2 version swapped in. Bump the recipe
# number when this script's build steps change in a way that changes the binaries.
KUBE_SRC_VERSION="${ODA_KUBE_SRC_VERSION:-1.20.5+really1.20.2-1.1+deb12u1}"
REFLECT2_VERSION="1.0.2"
RECIPE=1
key="${KUBE_SRC_VERSION//[^A-Za-z0-9.]/_}-reflect2-${REFLECT2_VERSION}-r${RECIPE}"
dest="$ODA_CACHE/kube/$key"
bins=(kube-apiserver kube-controller-manager kubectl)

have_all() {
  local b
  for b in "${bins[@]}"; do [ -x "$dest/bin/$b" ] || return 1; done
  command -v etcd >/dev/null 2>&1 || return 1
}

if have_all; then
  echo "$dest/bin"
  exit 0
fi

if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "setup_kube: the API server is not built yet and building it needs root and apt-get" >&2
  exit 2
fi

log() { echo "setup_kube: $*" >&2; }
# The test command runs this beside its own apt-get (Debian packages for the tests): one apt at a
# time, or the second fails on dpkg's lock.
apt_lock=/var/lock/oda-analyst-apt.lock

# One build at a time (two test runs starting together): the second waits, then finds it built.
mkdir -p "$ODA_CACHE/kube"
exec 9>"$ODA_CACHE/kube/.build.lock"
flock 9
if have_all; then
  echo "$dest/bin"
  exit 0
fi
start=$(date +%s)

# Debian's sources: a deb-src entry for the same suite as the machine's packages.
if ! flock "$apt_lock" apt-get source --print-uris kubernetes >/dev/null 2>&1; then
  log "adding a deb-src entry for bookworm"
  cat > /etc/apt/sources.list.d/oda-analyst-deb-src.sources <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  flock "$apt_lock" apt-get update -qq >/dev/null
fi

log "installing the build's Debian packages"
DEBIAN_FRONTEND=noninteractive flock "$apt_lock" apt-get install -y -qq --no-install-recommends \
  golang-go rsync etcd-server "golang-github-modern-go-reflect2-dev=${REFLECT2_VERSION}*" \
  dpkg-dev >/dev/null

work="$ODA_CACHE/kube/build-$key"
rm -rf "$work"
mkdir -p "$work"
cd "$work"
log "fetching the kubernetes source package ($KUBE_SRC_VERSION)"
flock "$apt_lock" apt-get source -qq "kubernetes=$KUBE_SRC_VERSION" >/dev/null
src="$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'kubernetes-*' | head -n1)"
[ -n "$src" ] || { log "apt-get source left no kubernetes-* folder in $work"; exit 1; }

reflect2_src=/usr/share/gocode/src/github.com/modern-go/reflect2
[ -d "$reflect2_src" ] || { log "$reflect2_src is missing"; exit 1; }
log "replacing the vendored reflect2 with Debian's $REFLECT2_VERSION"
rm -rf "$src/vendor/github.com/modern-go/reflect2"
mkdir -p "$src/vendor/github.com/modern-go/reflect2"
# Only the package's own sources (Go and the empty assembly stubs its linkname bodies need).
(cd "$reflect2_src" && find . -maxdepth 1 -type f \( -name '*.go' -o -name '*.s' -o -name LICENSE \) \
  ! -name '*_test.go' -exec cp {} "$src/vendor/github.com/modern-go/reflect2/" \;)
# go.mod and vendor/modules.txt keep naming v1.0.1: -mod=vendor checks that the two agree, not
# what the folder holds, and 1.0.2 has the same API and no new imports.

log "building kube-apiserver and kube-controller-manager (slow: ~12 minutes on 2 cores)"
export GOCACHE="$work/gocache" GOPATH="$work/gopath" GOFLAGS=-mod=vendor GO111MODULE=on
export GOTOOLCHAIN=local KUBE_BUILD_PLATFORMS=linux/amd64
(cd "$src" && make WHAT="cmd/kube-apiserver cmd/kube-controller-manager" >"$work/make.log" 2>&1) || {
  log "the build failed; the last lines of $work/make.log:"; tail -n 30 "$work/make.log" >&2; exit 1; }

log "unpacking Debian's kubectl (kubernetes-client $KUBE_SRC_VERSION)"
(cd "$work" && apt-get download -qq "kubernetes-client=$KUBE_SRC_VERSION" >/dev/null)
dpkg-deb -x "$work"/kubernetes-client_*.deb "$work/client"

tmp_dest="$dest.tmp"
rm -rf "$tmp_dest"
mkdir -p "$tmp_dest/bin"
out="$src/_output/bin"
[ -x "$out/kube-apiserver" ] || out="$(dirname "$(find "$src/_output" -type f -name kube-apiserver | head -n1)")"
cp "$out/kube-apiserver" "$out/kube-controller-manager" "$tmp_dest/bin/"
cp "$work/client/usr/bin/kubectl" "$tmp_dest/bin/"
"$tmp_dest/bin/kube-apiserver" --version >&2
echo "built in $(( $(date +%s) - start )) s from kubernetes $KUBE_SRC_VERSION" > "$tmp_dest/BUILD"
rm -rf "$dest"
mv "$tmp_dest" "$dest"
# The source tree and Go caches are a few GB; only the binaries are worth keeping.
rm -rf "$work"
log "$(cat "$dest/BUILD")"
echo "$dest/bin"
