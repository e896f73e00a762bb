"""The code agent's scripts, run in the user's sandbox pod: the operator's ``RemoteSandbox``.

The operator image holds no sandbox (neither gVisor's runtime nor the data-science Python), and
the operator must never run a user's analysis code in its own process. So the code agent that
the coordinator drives inside the operator is given this remote: each ``codeagent_execute``
becomes one pod of the query's user, the code agent's hardened sandbox pod (gVisor, no
service-account token, read-only root, uid 65534, the query's network fence: the bucket's
endpoint and nothing else), owned by the query.

One run, called in a worker thread of the coordinator's code agent (never on kopf's loop; the
API calls are sent to that loop and awaited from here):

1. Two ConfigMaps — the session's uploads (``/in``) and the job: the script and the one request
   the pod's executor (``odaexec``, the same one the local warm sandbox runs) answers, with the
   run's wall-clock, CPU and output limits. Then the pod, named by a digest of the script and
   its inputs, so an operator restarted mid-query adopts the pod it made rather than start one
   more.
2. Wait: Succeeded → the manifest its publisher put (the script's exit status, stdout, stderr
   and which presigned slot holds which file of /out); Failed, or a container that cannot start
   (its image cannot be pulled) → ``SandboxPodError`` saying why; not started within
   ``start_timeout_s`` → deleted, ``SandboxPodError``; running past the script's limit →
   deleted, a timeout.
3. The files, read from the bucket into the session's /out, as a local run would leave them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from collections.abc import Coroutine, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from oda_analyst.codeagent.backends.capture import Captured
from oda_analyst.codeagent.limits import Limits
from oda_analyst.codeagent.workspace import safe_name
from oda_analyst.controller import manifests, names
from oda_analyst.controller.bucket import Bucket
from oda_analyst.controller.kube import Kube, KubeError, path_of
from oda_analyst.controller.pods import cannot_start, pod_message
from oda_analyst.controller.port import SandboxScope
from oda_analyst.errors import SandboxError

T = TypeVar("T")
SLOTS = 16  # files of /out one run returns at most (the rest are named as not returned)
RUN_MARGIN_S = 30.0  # past the script's own wall-clock limit, the executor's kill comes first
API_TIMEOUT_S = 60.0

_SCOPE: ContextVar[SandboxScope | None] = ContextVar("oda_sandbox_scope", default=None)


@contextlib.contextmanager
def scoped(scope: SandboxScope) -> Iterator[None]:
    """Code run inside this block (and the tasks and threads started from it) runs in
    ``scope``'s pods: the query's namespace, owned by it, publishing under its prefix."""
    token = _SCOPE.set(scope)
    try:
        yield
    finally:
        _SCOPE.reset(token)


class SandboxPodError(SandboxError):
    """The user's sandbox pod could not run the script (not the script's own failure)."""

    code = "sandbox_pod_failed"


def run_digest(source: str, inputs: dict[str, bytes], limits: Limits) -> str:
    """What makes two runs the same run (pure)."""
    h = hashlib.sha256(source.encode())
    h.update(limits.model_dump_json().encode())
    for name in sorted(inputs):
        h.update(b"\0" + name.encode() + b"\0" + hashlib.sha256(inputs[name]).digest())
    return h.hexdigest()


@dataclass
class PodSandbox:
    kube: Kube
    bucket: Bucket
    env: manifests.WorkloadEnv
    loop: asyncio.AbstractEventLoop  # kopf's: the kube client belongs to it
    s3_endpoint: str | None = None
    s3_cidr: str | None = None
    poll_s: float = 0.5
    start_timeout_s: float = 300.0
    name: str = "kubernetes"

    # --- RemoteSandbox --------------------------------------------------------------------

    def unavailable_reason(self) -> str | None:
        if _SCOPE.get() is None:
            return ("the operator runs code only for an AnalystQuery, in its user's sandbox "
                    "pod, and none is being answered here")  # fmt: skip
        if self.loop.is_closed():
            return "the operator is stopping"
        return None

    def run(self, user: str, source: str, inputs: Path, outputs: Path, limits: Limits
            ) -> Captured:  # fmt: skip
        scope = self._scope(user)
        files = {p.name: p.read_bytes() for p in sorted(inputs.iterdir()) if p.is_file()}
        size = len(source.encode()) + sum(len(b) for b in files.values())
        if size > manifests.MAX_CODE_INPUT_BYTES:
            raise SandboxPodError(
                f"the script and its inputs are {size:,} bytes; a sandbox pod takes at most "
                f"{manifests.MAX_CODE_INPUT_BYTES:,} (they travel in a ConfigMap)",
                hint="ask for a shorter window or a coarser granularity",
            )
        meta = scope.query["metadata"]
        pod = names.code_pod_name(meta["name"], meta["uid"], run_digest(source, files, limits))
        base = f"{scope.prefix}sandbox/{pod}/"
        began = time.monotonic()
        self._start(scope, pod, base, source, files, limits)
        finished = self._wait(scope.namespace, pod, limits)
        if finished is None:
            return Captured(None, "", "", time.monotonic() - began, timed_out=True)
        manifest = self._manifest(base)
        if (finished.get("status") or {}).get("phase") == "Failed":
            raise SandboxPodError(f"the sandbox pod {pod} failed: {_why(finished, manifest)}",
                                  hint=_HINT)  # fmt: skip
        if manifest is None:
            raise SandboxPodError(f"the sandbox pod {pod} finished but published no result",
                                  hint=_HINT)  # fmt: skip
        reply = manifest.get("reply")
        if not isinstance(reply, dict):
            log = str(manifest.get("log") or "")[-400:]
            raise SandboxPodError(f"the sandbox pod {pod}'s executor answered nothing: {log}",
                                  hint=_HINT)  # fmt: skip
        for item in manifest.get("files") or []:
            data = self.bucket.get(f"{base}files/{int(item['slot'])}")
            (outputs / safe_name(str(item["name"]))).write_bytes(data)
        stderr = str(reply.get("stderr") or "")
        if manifest.get("skipped"):
            stderr += (f"\n[not returned, over {SLOTS} files: "
                       f"{', '.join(map(str, manifest['skipped']))}]")  # fmt: skip
        return Captured(
            returncode=int(reply["returncode"]),
            stdout=str(reply.get("stdout") or ""),
            stderr=stderr,
            duration_s=time.monotonic() - began,
            timed_out=bool(reply.get("timed_out")),
            output_exceeded=bool(reply.get("output_exceeded")),
        )

    # --- the steps ------------------------------------------------------------------------

    def _scope(self, user: str) -> SandboxScope:
        scope = _SCOPE.get()
        if scope is None:
            raise SandboxError(str(self.unavailable_reason()), hint=_HINT)
        if scope.user != user:  # a query's pods are its own user's, never another's
            raise SandboxError(f"the code agent acts for {user}, the query for {scope.user}",
                               hint="this is a bug of the operator: report it")  # fmt: skip
        return scope

    def _start(self, scope: SandboxScope, pod: str, base: str, source: str,
               files: dict[str, bytes], limits: Limits) -> None:  # fmt: skip
        deadline_s = int(limits.wall_s + self.start_timeout_s + RUN_MARGIN_S)
        expires = timedelta(seconds=deadline_s + 600)
        self.bucket.ensure()
        slots = [self.bucket.presigned_put(f"{base}files/{i}", expires=expires)
                 for i in range(SLOTS)]  # fmt: skip
        manifest_url = self.bucket.presigned_put(f"{base}run.json", expires=expires)
        objects = [
            *manifests.get_code_config_maps(scope.query, pod=pod, inputs=files, source=source,
                                            limits=limits),
            manifests.get_analysis_network_policy(scope.query, user=scope.user,
                                                  s3_endpoint=self.s3_endpoint,
                                                  s3_cidr=self.s3_cidr),
            manifests.get_code_pod(scope.query, self.env, user=scope.user, pod=pod,
                                   limits=limits, slots=slots, manifest_url=manifest_url,
                                   deadline_s=deadline_s),
        ]  # fmt: skip
        for obj in objects:  # create returns an object that exists already: a restart adopts
            self._api(self.kube.create(obj))

    def _wait(self, namespace: str, pod: str, limits: Limits) -> dict[str, Any] | None:
        """The finished pod, or None when it ran past the script's limit (it is deleted)."""
        path = path_of("v1", "pods", namespace, pod)
        began = time.monotonic()
        running: float | None = None
        while True:
            obj = self._api(self.kube.get(path))
            if obj is None:
                raise SandboxPodError(f"the sandbox pod {pod} was deleted before it finished",
                                      hint=_HINT)  # fmt: skip
            status = obj.get("status") or {}
            phase = status.get("phase")
            if phase in ("Succeeded", "Failed"):
                return obj
            stuck = cannot_start(obj)
            now = time.monotonic()
            if stuck is None and running is None and now - began > self.start_timeout_s:
                said = f"{phase or 'Pending'}: {pod_message(obj)}" if status.get("message") \
                    else phase or "Pending"  # fmt: skip
                stuck = f"not started within {self.start_timeout_s:g} s ({said})"
            if stuck is not None:
                self._api(self.kube.delete(path))
                raise SandboxPodError(f"the sandbox pod {pod} cannot run: {stuck}", hint=_HINT)
            if phase == "Running" and running is None:
                running = now
            if running is not None and now - running > limits.wall_s + RUN_MARGIN_S:
                self._api(self.kube.delete(path))
                return None
            time.sleep(self.poll_s)

    def _manifest(self, base: str) -> dict[str, Any] | None:
        key = f"{base}run.json"
        if not self.bucket.exists(key):
            return None
        try:
            found = json.loads(self.bucket.get(key))
        except ValueError:
            return None
        return found if isinstance(found, dict) else None

    def _api(self, call: Coroutine[Any, Any, T]) -> T:
        """Run one API call on kopf's loop and wait for it here (this is a worker thread)."""
        with contextlib.suppress(RuntimeError):
            if asyncio.get_running_loop() is self.loop:
                call.close()
                raise SandboxError("the sandbox pod was waited for on the operator's own loop",
                                   hint="this is a bug of the operator: report it")  # fmt: skip
        if self.loop.is_closed():
            call.close()
            raise SandboxPodError("the operator is stopping", hint="the query resumes when it "
                                  "is started again")  # fmt: skip
        try:
            return asyncio.run_coroutine_threadsafe(call, self.loop).result(API_TIMEOUT_S)
        except KubeError as err:
            raise SandboxPodError(f"the API server refused the sandbox pod: {err.message}",
                                  hint=err.hint) from None  # fmt: skip
        except TimeoutError:
            raise SandboxPodError("the API server did not answer within "
                                  f"{API_TIMEOUT_S:g} s", hint=_HINT) from None  # fmt: skip


_HINT = ("kubectl describe pod in the query's namespace; the pods need the RuntimeClass gvisor "
         "and the image ODA_OPERATOR_SANDBOX_IMAGE")  # fmt: skip


def _why(pod: dict[str, Any], manifest: dict[str, Any] | None) -> str:
    """A failed pod's reason: the executor's own log when it published one (the sandbox's
    Python could not start, say), else what the pod's status says."""
    if manifest is not None and manifest.get("exit") not in (0, None):
        log = str(manifest.get("log") or "").strip().splitlines()
        return f"its executor exited {manifest['exit']}: {log[-1] if log else 'no message'}"
    return pod_message(pod)
