"""A real Kubernetes control plane on loopback for the operator's tests: etcd, kube-apiserver and
kube-controller-manager (service-account tokens, Jobs, garbage collection by owner reference,
namespace deletion), the binaries built by scripts/setup_kube.sh.

No scheduler and no kubelet: the test node agent (``k8s_node``) binds and runs pods.
The admin (and two users, alice and bob, with no rights of their own) authenticate with static
tokens; ``kubeconfig`` files point at the server with
``insecure-skip-tls-verify`` (the server's certificate is self-signed at start).
"""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from processes import stop_process

REPO = Path(__file__).resolve().parents[1]
LOOPBACK = "127.0.0.1"
ADMIN_TOKEN = "oda-test-admin-token"
# Two people without any right of their own (the tests bind what they need to USERS_GROUP):
# the identity webhook's tests create queries as each of them.
USER_TOKENS = {"alice": "oda-test-alice-token", "bob": "oda-test-bob-token"}
USERS_GROUP = "oda-test-users"


class KubeUnavailableError(RuntimeError):
    """The binaries are not built (and cannot be here)."""


def kube_bin() -> Path:
    """The folder of kube-apiserver, kube-controller-manager and kubectl (building them the
    first time: scripts/setup_kube.sh, ~12+ minutes cold, then cached)."""
    env = dict(os.environ)
    done = subprocess.run(["bash", str(REPO / "scripts" / "setup_kube.sh")], env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        raise KubeUnavailableError(done.stderr.strip()[-2000:] or "setup_kube.sh failed")
    return Path(done.stdout.strip().splitlines()[-1])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def write_kubeconfig(path: Path, server: str, token: str, *, namespace: str = "default") -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "test", "cluster": {"server": server,
                                                  "insecure-skip-tls-verify": True}}],
        "users": [{"name": "test", "user": {"token": token}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test",
                                                  "namespace": namespace}}],
        "current-context": "test",
    }  # fmt: skip
    path.write_text(yaml.safe_dump(config))
    return path


@dataclass
class Cluster:
    server: str
    kubeconfig: Path
    bin: Path
    root: Path

    def kubectl(self, *args: str, check: bool = True, input: str | None = None,
                kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
        env = {**os.environ, "KUBECONFIG": str(kubeconfig or self.kubeconfig),
               "HOME": str(self.root)}  # fmt: skip
        done = subprocess.run([str(self.bin / "kubectl"), *args], env=env, input=input,
                              capture_output=True, text=True, check=False, timeout=120)  # fmt: skip
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {done.stderr}")
        return done


def _ready(url: str, token: str) -> bool:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=2, context=ctx) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _wait(ready: object, proc: subprocess.Popen[bytes], what: str, log: Path,
          timeout: float = 120) -> None:  # fmt: skip
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited {proc.returncode}: {log.read_text()[-3000:]}")
        if callable(ready) and ready():
            return
        time.sleep(0.3)
    raise RuntimeError(f"{what} did not become ready in {timeout:.0f} s: "
                       f"{log.read_text()[-3000:]}")  # fmt: skip


@contextmanager
def control_plane(root: Path) -> Iterator[Cluster]:
    """etcd + kube-apiserver + kube-controller-manager under ``root``; stopped at exit."""
    bin_dir = kube_bin()
    etcd = shutil.which("etcd")
    openssl = shutil.which("openssl")
    if etcd is None or openssl is None:
        raise KubeUnavailableError("etcd (Debian etcd-server) or openssl is missing")
    root.mkdir(parents=True, exist_ok=True)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        etcd_port, peer_port, api_port = _free_port(), _free_port(), _free_port()
        log = root / "etcd.log"
        procs.append(subprocess.Popen(
            [etcd, "--data-dir", str(root / "etcd"), "--name", "test",
             "--listen-client-urls", f"http://{LOOPBACK}:{etcd_port}",
             "--advertise-client-urls", f"http://{LOOPBACK}:{etcd_port}",
             "--listen-peer-urls", f"http://{LOOPBACK}:{peer_port}",
             "--initial-advertise-peer-urls", f"http://{LOOPBACK}:{peer_port}",
             "--initial-cluster", f"test=http://{LOOPBACK}:{peer_port}",
             "--unsafe-no-fsync"],
            stdout=log.open("wb"), stderr=subprocess.STDOUT))  # fmt: skip
        _wait(lambda: _ready(f"http://{LOOPBACK}:{etcd_port}/health", ""), procs[-1], "etcd",
              log)  # fmt: skip
        sa_key = root / "sa.key"
        subprocess.run([openssl, "genrsa", "-out", str(sa_key), "2048"], check=True,
                       capture_output=True)  # fmt: skip
        tokens = root / "tokens.csv"
        tokens.write_text(
            f"{ADMIN_TOKEN},admin,admin-uid,system:masters\n"
            + "".join(
                f"{token},{user},{user}-uid,{USERS_GROUP}\n" for user, token in USER_TOKENS.items()
            )
        )
        log = root / "apiserver.log"
        procs.append(subprocess.Popen(
            [str(bin_dir / "kube-apiserver"),
             f"--etcd-servers=http://{LOOPBACK}:{etcd_port}",
             f"--bind-address={LOOPBACK}", f"--advertise-address={LOOPBACK}",
             f"--secure-port={api_port}", "--insecure-port=0",
             f"--cert-dir={root / 'certs'}",
             f"--token-auth-file={tokens}",
             "--authorization-mode=RBAC",
             f"--service-account-key-file={sa_key}",
             f"--service-account-signing-key-file={sa_key}",
             "--service-account-issuer=https://kubernetes.default.svc",
             "--service-cluster-ip-range=10.96.0.0/16",
             "--enable-priority-and-fairness=false",
             "--v=1"],
            stdout=log.open("wb"), stderr=subprocess.STDOUT))  # fmt: skip
        server = f"https://{LOOPBACK}:{api_port}"
        _wait(lambda: _ready(f"{server}/readyz", ADMIN_TOKEN), procs[-1], "kube-apiserver", log,
              timeout=180)  # fmt: skip
        kubeconfig = write_kubeconfig(root / "admin.kubeconfig", server, ADMIN_TOKEN)
        log = root / "controller-manager.log"
        procs.append(subprocess.Popen(
            [str(bin_dir / "kube-controller-manager"),
             f"--kubeconfig={kubeconfig}",
             "--controllers=serviceaccount,serviceaccount-token,garbagecollector,job,namespace",
             f"--service-account-private-key-file={sa_key}",
             "--use-service-account-credentials=false",
             "--leader-elect=false", "--port=0", "--secure-port=0",
             "--concurrent-gc-syncs=5", "--v=1"],
            stdout=log.open("wb"), stderr=subprocess.STDOUT))  # fmt: skip
        cluster = Cluster(server=server, kubeconfig=kubeconfig, bin=bin_dir, root=root)
        _wait(lambda: _default_sa(cluster), procs[-1], "kube-controller-manager", log)
        yield cluster
    finally:
        for proc in reversed(procs):
            stop_process(proc)


def _default_sa(cluster: Cluster) -> bool:
    """The controller-manager is working once the default namespace's account has a token."""
    done = cluster.kubectl("get", "serviceaccount", "default", "-n", "default", "-o",
                           "jsonpath={.secrets[0].name}", check=False)  # fmt: skip
    return done.returncode == 0 and bool(done.stdout.strip())
