"""A test-only node agent: the scheduler and kubelet of one fake node, for a cluster without them.

It registers a Node, binds every unscheduled pod to it, and runs each bound pod's containers as
local processes — concurrently, as a kubelet would — with the pod's command, args and env
(plain values, Secret and ConfigMap references resolved through the API), its volumes
(``emptyDir``, ``configMap``, ``secret``) mounted at their ``mountPath`` by bubblewrap over the
host's own root, and then patches the pod's status: Running, then Succeeded or Failed with each
container's exit code (and, under ``FallbackToLogsOnError``, its last log lines as message).

An image is a stand-in: ``images`` maps an image name (without tag) to the folders its
``PATH`` starts with and the host paths it needs visible (bound again over a ``/tmp`` volume).
Each container's status turns ``terminated`` when it exits, while the pod's other containers
run on, as a kubelet reports it.

The node serves the kubelet's ``/exec`` endpoint (``k8s_exec``; its address and port are in the
Node's status), so ``pods/exec`` through the API server runs a command as the container runs
(its volumes, environment, image and network) while that container runs.

Of the pod spec it enforces the network: a pod that the NetworkPolicies of its namespace deny
all egress (every policy selecting it with policyType Egress has no egress rule) runs, and is
exec'd into, in a network namespace of its own with nothing but loopback, so it can reach
nothing, not the API server, not the bucket, not another pod; other pods share the host's
network (this node has no CNI to enforce partial rules). And a container whose securityContext
says ``readOnlyRootFilesystem`` sees the host's folders (its image's stand-in) read-only, its
volumes writable. It does not enforce the user (the processes run as the test's user) or
runtimeClassName; ``runs`` records each pod it ran (with ``network``: ``none`` or ``host``,
and ``readOnlyRoot`` per container), so tests can check what was asked for.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from k8s_exec import KubeletExec
from netpol import selects


@dataclass(frozen=True)
class Image:
    path: tuple[str, ...]
    visible: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    # Folders of the image itself (target -> host folder), over an empty tmpfs at their top
    # folder so nothing is created on the host (``/opt/oda/site`` hides the host's /opt).
    files: Mapping[str, str] = field(default_factory=dict)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class NodeAgent:
    def __init__(self, server: str, token: str, *, workdir: Path, images: Mapping[str, Image],
                 name: str = "oda-test-node") -> None:  # fmt: skip
        self.name = name
        self.images = dict(images)
        self.workdir = workdir
        self.http = httpx.Client(base_url=server, verify=False, timeout=30,
                                 headers={"Authorization": f"Bearer {token}"})  # fmt: skip
        self.runs: list[dict[str, Any]] = []
        self._started: dict[str, list[subprocess.Popen[bytes]]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._held: tuple[str, ...] = ()
        self._held_parts: tuple[str, ...] = ()
        self._thread = threading.Thread(target=self._loop, name="node-agent", daemon=True)
        self.bwrap = shutil.which("bwrap")
        if self.bwrap is None:
            raise RuntimeError("bubblewrap (bwrap) is needed to mount pod volumes")
        # (namespace, pod) -> how its containers run, for exec: container name -> (spec,
        # volumes, env, image, isolated, process)
        self._live: dict[tuple[str, str], dict[str, tuple[Any, ...]]] = {}
        self.kubelet = KubeletExec(self.exec_argv, workdir)

    # --- life -----------------------------------------------------------------------------

    def start(self) -> NodeAgent:
        self.kubelet.start()
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": {"kubernetes.io/hostname": self.name}},
        }
        resp = self.http.post("/api/v1/nodes", json=node)
        if resp.status_code not in (201, 409):
            raise RuntimeError(f"cannot register node: {resp.text}")
        self._node_ready()
        self._thread.start()
        return self

    def _node_ready(self) -> None:
        status = {
            "status": {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "test node",
                        "lastHeartbeatTime": _now(),
                        "lastTransitionTime": _now(),
                    }
                ],
                "capacity": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                "allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                # where the API server finds this node's kubelet (pods/exec)
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": self.kubelet.port}},
            }
        }
        self.http.patch(
            f"/api/v1/nodes/{self.name}/status",
            json=status,
            headers={"Content-Type": "application/merge-patch+json"},
        )

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        with self._lock:
            for procs in self._started.values():
                for proc in procs:
                    if proc.poll() is None:
                        proc.kill()
        self.kubelet.stop()
        self.http.close()

    def hold(self, *suffixes: str) -> None:
        """Leave pods whose name ends with one of ``suffixes`` Pending (none: release all)."""
        self._held = suffixes

    def hold_containing(self, *parts: str) -> None:
        """Leave pods whose name contains one of ``parts`` Pending, unbound (none: release)."""
        self._held_parts = parts

    def started(self, prefix: str = "") -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.runs if r["name"].startswith(prefix)]

    # --- the loop -------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(httpx.HTTPError):  # restarting or stopping: try again
                self._tick()
            self._stop.wait(0.3)

    def _tick(self) -> None:
        pods = self.http.get("/api/v1/pods").json().get("items", [])
        for pod in pods:
            meta, spec = pod["metadata"], pod["spec"]
            uid = meta["uid"]
            if meta.get("deletionTimestamp"):
                if spec.get("nodeName") == self.name:
                    self._kill(uid)
                    self.http.request("DELETE",
                                      f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                                      json={"gracePeriodSeconds": 0})  # fmt: skip
                continue
            if self._held and meta["name"].endswith(self._held):
                continue
            if any(part in meta["name"] for part in self._held_parts):
                continue
            if not spec.get("nodeName"):
                self._bind(pod)
            elif spec["nodeName"] == self.name and uid not in self._started:
                phase = (pod.get("status") or {}).get("phase", "Pending")
                if phase == "Pending":
                    with self._lock:
                        self._started[uid] = []
                    threading.Thread(target=self._run_pod, args=(pod,), daemon=True).start()

    def _bind(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta["name"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": self.name},
        }
        self.http.post(
            f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/binding", json=binding
        )

    def _kill(self, uid: str) -> None:
        with self._lock:
            for proc in self._started.get(uid, []):
                if proc.poll() is None:
                    proc.kill()

    # --- one pod --------------------------------------------------------------------------

    def _status(self, pod: dict[str, Any], status: dict[str, Any]) -> None:
        if self._stop.is_set():  # the node is going (its client closed): a pod it killed
            return
        meta = pod["metadata"]
        self.http.patch(
            f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status",
            json={"status": status},
            headers={"Content-Type": "application/merge-patch+json"},
        )

    def _get(self, path: str) -> dict[str, Any] | None:
        resp = self.http.get(path)
        return resp.json() if resp.status_code == 200 else None

    def _volumes(self, pod: dict[str, Any], root: Path) -> dict[str, Path]:
        ns = pod["metadata"]["namespace"]
        out: dict[str, Path] = {}
        for vol in pod["spec"].get("volumes") or []:
            path = root / "volumes" / vol["name"]
            path.mkdir(parents=True, exist_ok=True)
            if "configMap" in vol:
                cm = self._get(f"/api/v1/namespaces/{ns}/configmaps/{vol['configMap']['name']}")
                for key, text in ((cm or {}).get("data") or {}).items():
                    (path / key).write_text(text)
                for key, b64 in ((cm or {}).get("binaryData") or {}).items():
                    (path / key).write_bytes(base64.b64decode(b64))
            elif "secret" in vol:
                sec = self._get(f"/api/v1/namespaces/{ns}/secrets/{vol['secret']['secretName']}")
                for key, b64 in ((sec or {}).get("data") or {}).items():
                    (path / key).write_bytes(base64.b64decode(b64))
            os.chmod(path, 0o777)
            out[vol["name"]] = path
        return out

    def _env(self, ns: str, container: dict[str, Any]) -> dict[str, str]:
        env: dict[str, str] = {}
        for item in container.get("env") or []:
            if "value" in item:
                env[item["name"]] = str(item["value"])
                continue
            ref = item.get("valueFrom") or {}
            if "secretKeyRef" in ref:
                r = ref["secretKeyRef"]
                sec = self._get(f"/api/v1/namespaces/{ns}/secrets/{r['name']}") or {}
                b64 = (sec.get("data") or {}).get(r["key"])
                if b64 is not None:
                    env[item["name"]] = base64.b64decode(b64).decode()
            elif "configMapKeyRef" in ref:
                r = ref["configMapKeyRef"]
                cm = self._get(f"/api/v1/namespaces/{ns}/configmaps/{r['name']}") or {}
                value = (cm.get("data") or {}).get(r["key"])
                if value is not None:
                    env[item["name"]] = value
        return env

    def isolated(self, pod: dict[str, Any]) -> bool:
        """Whether the namespace's NetworkPolicies deny ``pod`` all egress (and it does not
        ask for the host's network)."""
        if pod["spec"].get("hostNetwork"):
            return False
        ns, labels = pod["metadata"]["namespace"], pod["metadata"].get("labels") or {}
        found = self._get(f"/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies") or {}
        egress = [p["spec"] for p in found.get("items") or []
                  if "Egress" in (p["spec"].get("policyTypes") or [])
                  and selects(p["spec"].get("podSelector") or {}, labels)]  # fmt: skip
        return bool(egress) and not any(spec.get("egress") for spec in egress)

    def exec_argv(self, namespace: str, pod: str, container: str,
                  command: list[str]) -> list[str] | str:  # fmt: skip
        """How the node runs ``command`` in a running container (or why it cannot)."""
        with self._lock:
            found = self._live.get((namespace, pod), {}).get(container)
        if found is None:
            return f"container {container} of pod {namespace}/{pod} is not on this node"
        spec, volumes, env, image, isolated, proc = found
        if proc.poll() is not None:
            return f"container {container} of pod {namespace}/{pod} is not running"
        return self._argv({**spec, "command": command, "args": []}, volumes, env, image,
                          isolated=isolated)  # fmt: skip

    def _argv(self, container: dict[str, Any], volumes: Mapping[str, Path], env: dict[str, str],
              image: Image, *, isolated: bool = False) -> list[str]:  # fmt: skip
        assert self.bwrap is not None
        argv = [self.bwrap, "--die-with-parent", "--dev", "/dev", "--proc", "/proc"]
        if isolated:  # no network but loopback: what a deny-all NetworkPolicy leaves
            argv.append("--unshare-net")
        # a read-only root: the host's folders stand in for the image's, bound read-only (the
        # volumes, bound below, stay writable)
        bind = "--ro-bind" if _read_only_root(container) else "--bind"
        for entry in sorted(os.listdir("/")):
            full = f"/{entry}"
            if entry in ("proc", "dev"):
                continue
            if os.path.islink(full):
                argv += ["--symlink", os.readlink(full), full]
            elif os.path.isdir(full):
                argv += [bind, full, full]
        # The image's own folders first: a kubelet mounts the volumes over the image.
        tops = []
        for target, source in image.files.items():
            top = "/" + target.strip("/").split("/")[0]
            argv += ["--tmpfs", top, "--ro-bind", source, target]
            tops.append(top)
        for mount in container.get("volumeMounts") or []:
            flag = "--ro-bind" if mount.get("readOnly") else "--bind"
            argv += [flag, str(volumes[mount["name"]]), mount["mountPath"]]
        for path in image.visible:  # what the image holds, even under a /tmp volume
            argv += ["--ro-bind", path, path]
        if bind == "--ro-bind":  # the image's own folders too, once every mount point is made
            for top in tops:
                argv += ["--remount-ro", top]
        full_env = {"PATH": ":".join([*image.path, "/usr/local/bin", "/usr/bin", "/bin"]),
                    "HOME": "/tmp", **image.env, **env}  # fmt: skip
        argv += ["--clearenv"]
        for key, value in full_env.items():
            argv += ["--setenv", key, value]
        argv += ["--chdir", container.get("workingDir") or "/"]
        command = [*(container.get("command") or []), *(container.get("args") or [])]
        return [*argv, "--", *command]

    def _run_pod(self, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        root = self.workdir / meta["uid"]
        containers = spec["containers"]
        key = (meta["namespace"], meta["name"])
        try:
            root.mkdir(parents=True, exist_ok=True)
            volumes = self._volumes(pod, root)
            isolated = self.isolated(pod)
            procs, logs, live = [], [], {}
            for c in containers:
                image = self.images.get(c["image"].rsplit(":", 1)[0])
                if image is None:
                    raise RuntimeError(f"image {c['image']} is not known to the test node")
                log = root / f"{c['name']}.log"
                logs.append(log)
                env = self._env(meta["namespace"], c)
                argv = self._argv(c, volumes, env, image, isolated=isolated)
                procs.append(subprocess.Popen(argv, stdout=log.open("wb"),
                                              stderr=subprocess.STDOUT))  # fmt: skip
                live[c["name"]] = (c, volumes, env, image, isolated, procs[-1])
            with self._lock:
                self._started[meta["uid"]] = procs
                self._live[key] = live
                self.runs.append({"namespace": meta["namespace"], "name": meta["name"],
                                  "uid": meta["uid"],
                                  "runtimeClassName": spec.get("runtimeClassName"),
                                  "network": "none" if isolated else "host",
                                  "readOnlyRoot": [_read_only_root(c) for c in containers],
                                  "containers": [c["name"] for c in containers]})  # fmt: skip
            started = _now()
            states: list[dict[str, Any]] = [{"running": {"startedAt": started}}
                                            for _ in containers]  # fmt: skip
            self._status(pod, {"phase": "Running", "startTime": started, "hostIP": "127.0.0.1",
                               "podIP": "127.0.0.1",
                               "conditions": [{"type": "Ready", "status": "True"}],
                               "containerStatuses": _statuses(containers, states)})  # fmt: skip
            codes: list[int | None] = [None] * len(procs)
            while any(code is None for code in codes):  # each container's end as it comes
                changed = False
                for i, proc in enumerate(procs):
                    if codes[i] is None and proc.poll() is not None:
                        codes[i] = proc.returncode
                        states[i] = _terminated(containers[i], proc.returncode, logs[i],
                                                started)  # fmt: skip
                        changed = True
                if changed and any(code is None for code in codes):
                    self._status(pod, {"containerStatuses": _statuses(containers, states)})
                time.sleep(0.1)
        except Exception as exc:  # a pod the node cannot run fails, as on a real node
            self._status(pod, {"phase": "Failed", "reason": "NodeAgentError",
                               "message": str(exc)[:1000]})  # fmt: skip
            return
        finally:
            with self._lock:
                self._live.pop(key, None)
        phase = "Succeeded" if all(code == 0 for code in codes) else "Failed"
        self._status(pod, {"phase": phase, "containerStatuses": _statuses(containers, states),
                           "conditions": [{"type": "Ready", "status": "False"}]})  # fmt: skip


def _read_only_root(container: Mapping[str, Any]) -> bool:
    return bool((container.get("securityContext") or {}).get("readOnlyRootFilesystem"))


def _terminated(container: dict[str, Any], code: int, log: Path, started: str) -> dict[str, Any]:
    message = ""
    if code and container.get("terminationMessagePolicy") == "FallbackToLogsOnError":
        message = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
    return {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                           "message": message, "startedAt": started,
                           "finishedAt": _now()}}  # fmt: skip


def _statuses(containers: Sequence[dict[str, Any]],
              states: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:  # fmt: skip
    return [{"name": c["name"], "image": c["image"], "ready": "running" in state,
             "restartCount": 0, "imageID": "", "started": "running" in state, "state": state}
            for c, state in zip(containers, states, strict=True)]  # fmt: skip


def wait_for(check: Any, *, timeout: float, what: str, every: float = 0.5) -> Any:
    """Poll ``check()`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


def image_map(venv_bin: str, sandbox_bin: str | None, visible: Sequence[str],
              sandbox_site: str) -> dict[str, Image]:  # fmt: skip
    """The two images the operator uses, as local stand-ins. The analyst image holds the code
    under test (this checkout's package first, whatever the venv has installed), as the image
    built from it would."""
    code = str(Path(__file__).resolve().parents[1] / "operator")
    images = {"oda-analyst/analyst": Image(path=(venv_bin,), visible=tuple(visible),
                                           env={"PYTHONPATH": code})}  # fmt: skip
    if sandbox_bin is not None:
        images["oda-analyst/sandbox"] = Image(
            path=(sandbox_bin,),
            visible=tuple(visible),
            env={"MPLBACKEND": "Agg"},
            files={"/opt/oda/site": sandbox_site},
        )
    return images
