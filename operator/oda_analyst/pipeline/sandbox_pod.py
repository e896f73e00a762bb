"""The code agent's scripts, run in the user's sandbox pod: the analyst's ``RemoteSandbox``.

The analyst image holds no sandbox (neither gVisor's runtime nor the data-science Python), and
the analyst must never run a user's analysis code in its own process. So the code agent that
the analyst serves is given this remote: each ``codeagent_execute`` becomes one pod of the
user, the code agent's hardened sandbox pod (gVisor, no service-account token, read-only root,
uid 65534) with **no network at all**: a NetworkPolicy that admits nothing in or out fences it,
and nothing in its spec names the bucket, a Secret or a Service. Its files move through the
Kubernetes API, by exec into the pod's ``io`` container as ``kubectl cp`` does, so the user's
namespace needs no egress rule, DNS name or bucket credential.

Two callers, one path. A query's run (``scoped``: the operator's AnalystQuery) runs in the
query's namespace, its pod and fence owned by the query. A web UI user's run (through the code
agent's MCP server, no query) runs in ``ui_namespace`` (``ODA_SANDBOX_NAMESPACE``), its pod
deleted once read; with no such namespace configured only queries run code.

One run, called in a worker thread (never on the server's loop; the API calls are sent to that
loop and awaited from here):

1. The fence and the pod, named by a digest of the script and its inputs, so a query answered
   again (its operator restarted) adopts the pod made before rather than start one more.
2. Once the pod runs: exec ``odapod put N`` with a tar of the session's uploads (``in/``) and
   the job (the script and the one request the pod's executor, ``odaexec``, answers with the
   run's wall-clock, CPU and output limits) on stdin. Its ``.ready`` marker starts the run.
3. Wait for the ``sandbox`` container to end: a pod that fails, or a container that cannot
   start (its image cannot be pulled) → ``SandboxPodError`` saying why; not started within
   ``start_timeout_s`` → deleted, ``SandboxPodError``; running past the script's limit →
   deleted, a timeout.
4. Exec ``odapod get``: a tar of /out and the executor's reply, log and exit status, unpacked
   into the session's /out as a local run would leave it; then ``odapod release`` lets the pod
   end (Succeeded).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
import logging
import tarfile
import tempfile
import time
from collections.abc import Coroutine, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from oda_analyst.codeagent.backends.capture import Captured
from oda_analyst.codeagent.backends.kubernetes import sizes
from oda_analyst.codeagent.limits import Limits
from oda_analyst.codeagent.workspace import safe_name
from oda_analyst.controller import manifests, names
from oda_analyst.controller.kube import Exec, Kube, KubeError, path_of
from oda_analyst.controller.pods import cannot_start, pod_message
from oda_analyst.controller.port import Analysis, SandboxScope
from oda_analyst.errors import SandboxError
from oda_analyst.sandbox_spec import user_key

T = TypeVar("T")
RUN_MARGIN_S = 30.0  # past the script's own wall-clock limit, the executor's kill comes first
API_TIMEOUT_S = 60.0
COPY_S_PER_MIB = 2.0  # more time an exec that moves files gets, per MiB of them
GET_TIMEOUT_S = 600.0  # reading /out back: up to its size limit (256 MiB)
# What one run takes in: the pod's /in is an emptyDir of 256 MiB, and the tar travels in
# memory through the API server.
MAX_INPUT_BYTES = 128 * 2**20
MAX_FILES = 64  # files of /out one run returns at most (the rest are named as not returned)

log = logging.getLogger(__name__)
_SCOPE: ContextVar[SandboxScope | None] = ContextVar("oda_sandbox_scope", default=None)


@contextlib.contextmanager
def scoped(scope: SandboxScope) -> Iterator[None]:
    """Code run inside this block (and the tasks and threads started from it) runs in
    ``scope``'s pods: the query's namespace, owned by it."""
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


def pack(files: Mapping[str, bytes]) -> bytes:
    """A tar of ``files`` (member name → bytes), as ``odapod put`` takes it (pure)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def unpack(data: bytes) -> dict[str, bytes]:
    """The regular files of a tar ``odapod get`` wrote (member name → bytes; pure)."""
    found: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for member in tar:
            source = tar.extractfile(member) if member.isfile() else None
            if source is not None:
                found[member.name] = source.read()
    return found


@dataclass(frozen=True)
class _Where:
    namespace: str
    owner: dict[str, Any] | None  # the query, or None for a web UI user's run
    pod: str


@dataclass
class PodSandbox:
    kube: Kube
    env: manifests.WorkloadEnv
    loop: asyncio.AbstractEventLoop  # the server's: the kube client belongs to it
    ui_namespace: str | None = None  # where a web UI user's pods run; None: queries only
    poll_s: float = 0.5
    start_timeout_s: float = 300.0
    name: str = "kubernetes"

    # --- RemoteSandbox --------------------------------------------------------------------

    def unavailable_reason(self) -> str | None:
        if _SCOPE.get() is None and self.ui_namespace is None:
            return ("the analyst runs code only for an AnalystQuery, in its user's sandbox "
                    "pod, and none is being answered here (set ODA_SANDBOX_NAMESPACE for the "
                    "web UI's users)")  # fmt: skip
        if self.loop.is_closed():
            return "the analyst is stopping"
        return None

    def run(self, user: str, source: str, inputs: Path, outputs: Path, limits: Limits, *,
            name: str | None = None) -> Captured:  # fmt: skip
        """``name``: a query's pod of its own name (its summary's), else one named by the
        digest of the script and its inputs (the code agent's)."""
        try:
            return self._run(user, source, inputs, outputs, limits, name)
        except SandboxError:
            raise
        except Exception as exc:  # said, not masked as the MCP server's "Error calling tool"
            log.exception("the sandbox pod run for %s failed", user)
            raise SandboxPodError(f"the sandbox pod run failed: {type(exc).__name__}: {exc}",
                                  hint=_HINT) from exc  # fmt: skip

    def _run(self, user: str, source: str, inputs: Path, outputs: Path, limits: Limits,
             name: str | None) -> Captured:  # fmt: skip
        files = {p.name: p.read_bytes() for p in sorted(inputs.iterdir()) if p.is_file()}
        size = len(source.encode()) + sum(len(b) for b in files.values())
        if size > MAX_INPUT_BYTES:
            raise SandboxPodError(
                f"the script and its inputs are {size:,} bytes; a sandbox pod takes at most "
                f"{MAX_INPUT_BYTES:,}",
                hint="ask for a shorter window or a coarser granularity",
            )
        where = self._where(user, run_digest(source, files, limits), name)
        pod_sizes = sizes(limits)
        deadline_s = int(limits.wall_s + self.start_timeout_s + RUN_MARGIN_S) + 600
        began = time.monotonic()
        pod = manifests.get_code_pod(where.owner, self.env, user=user, pod=where.pod,
                                     namespace=where.namespace, limits=pod_sizes,
                                     deadline_s=deadline_s)  # fmt: skip
        self._api(self.kube.create(manifests.get_sandbox_network_policy(
            where.owner, user=user, namespace=where.namespace)))  # fmt: skip
        self._api(self.kube.create(pod))
        try:
            if not self._wait_running(where):  # one read before (a restart): run it again
                self._gone(where)
                self._api(self.kube.create(pod))
                if not self._wait_running(where):
                    raise SandboxPodError(f"the sandbox pod {where.pod} ended before its "
                                          "script ran", hint=_HINT)  # fmt: skip
            job = manifests.get_code_job(limits=pod_sizes, source=source)
            tar = pack({**{f"in/{safe_name(k)}": v for k, v in files.items()},
                        **{f"job/{k}": v for k, v in job.items()}})  # fmt: skip
            self._exec(
                where,
                ["python", "-m", "odapod", "put", str(len(tar))],
                stdin=tar,
                timeout=API_TIMEOUT_S + COPY_S_PER_MIB * len(tar) / 2**20,
            )
            if not self._wait_done(where, limits):
                self._api(self.kube.delete(path_of("v1", "pods", where.namespace, where.pod)))
                return Captured(None, "", "", time.monotonic() - began, timed_out=True)
            got = unpack(
                self._exec(where, ["python", "-m", "odapod", "get"], timeout=GET_TIMEOUT_S).stdout
            )
            with contextlib.suppress(SandboxError):  # the pod ends at its deadline anyway
                self._exec(where, ["python", "-m", "odapod", "release"])
        finally:
            if where.owner is None:  # a web UI run's pod: nothing owns it, nothing keeps it
                with contextlib.suppress(SandboxError):
                    self._api(self.kube.delete(path_of("v1", "pods", where.namespace,
                                                       where.pod)))  # fmt: skip
        return self._captured(where.pod, got, outputs, time.monotonic() - began)

    # --- the steps ------------------------------------------------------------------------

    def _where(self, user: str, digest: str, name: str | None = None) -> _Where:
        scope = _SCOPE.get()
        if scope is None:
            if self.ui_namespace is None:
                raise SandboxError(str(self.unavailable_reason()), hint=_HINT)
            pod = names.dns_name("codeagent", user_key(user), digest[:10])
            return _Where(self.ui_namespace, None, pod)
        if scope.user != user:  # a query's pods are its own user's, never another's
            raise SandboxError(f"the code agent acts for {user}, the query for {scope.user}",
                               hint="this is a bug of the analyst: report it")  # fmt: skip
        meta = scope.query["metadata"]
        pod = name or names.code_pod_name(meta["name"], meta["uid"], digest)
        return _Where(scope.namespace, scope.query, pod)

    def _poll(self, where: _Where) -> dict[str, Any]:
        obj = self._api(self.kube.get(path_of("v1", "pods", where.namespace, where.pod)))
        if obj is None:
            raise SandboxPodError(f"the sandbox pod {where.pod} was deleted before it "
                                  "finished", hint=_HINT)  # fmt: skip
        phase = (obj.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed") and not _ended(obj, manifests.SANDBOX_CONTAINER):
            raise SandboxPodError(f"the sandbox pod {where.pod} ended before its script ran: "
                                  f"{pod_message(obj)}", hint=_HINT)  # fmt: skip
        return obj

    def _wait_running(self, where: _Where) -> bool:
        """Until the pod's io container runs (an exec can reach it): True; False when the pod
        found has ended already, its run read by an analyst before (the query resumed)."""
        began = time.monotonic()
        path = path_of("v1", "pods", where.namespace, where.pod)
        while True:
            obj = self._poll(where)
            status = obj.get("status") or {}
            if _running(obj, manifests.IO_CONTAINER):
                return True
            if status.get("phase") in ("Succeeded", "Failed"):
                return False
            stuck = cannot_start(obj)
            if stuck is None and time.monotonic() - began > self.start_timeout_s:
                phase = status.get("phase") or "Pending"
                said = f"{phase}: {pod_message(obj)}" if status.get("message") else phase
                stuck = f"not started within {self.start_timeout_s:g} s ({said})"
            if stuck is not None:
                self._api(self.kube.delete(path))
                raise SandboxPodError(f"the sandbox pod {where.pod} cannot run: {stuck}",
                                      hint=_HINT)  # fmt: skip
            time.sleep(self.poll_s)

    def _gone(self, where: _Where) -> None:
        """Delete the pod and wait until the API server no longer has it."""
        path = path_of("v1", "pods", where.namespace, where.pod)
        self._api(self.kube.delete(path))
        began = time.monotonic()
        while self._api(self.kube.get(path)) is not None:
            if time.monotonic() - began > API_TIMEOUT_S:
                raise SandboxPodError(f"the sandbox pod {where.pod} of a run before is not "
                                      "gone", hint=_HINT)  # fmt: skip
            time.sleep(self.poll_s)

    def _wait_done(self, where: _Where, limits: Limits) -> bool:
        """Until the sandbox container has ended; False when it ran past the script's limit."""
        began = time.monotonic()
        while True:
            obj = self._poll(where)
            if _ended(obj, manifests.SANDBOX_CONTAINER):
                return True
            if time.monotonic() - began > limits.wall_s + RUN_MARGIN_S:
                return False
            time.sleep(self.poll_s)

    def _exec(self, where: _Where, command: list[str], *, stdin: bytes | None = None,
              timeout: float = API_TIMEOUT_S) -> Exec:  # fmt: skip
        done = self._api(self.kube.exec(where.namespace, where.pod, manifests.IO_CONTAINER,
                                        command, stdin=stdin, timeout=timeout),
                         timeout=timeout)  # fmt: skip
        if done.exit_code != 0:
            said = (done.stderr.decode("utf-8", "replace").strip() or done.message)[-400:]
            raise SandboxPodError(f"the sandbox pod {where.pod} did not take `{command[-1]}` "
                                  f"(exit {done.exit_code}): {said}", hint=_HINT)  # fmt: skip
        return done

    def _captured(self, pod: str, got: dict[str, bytes], outputs: Path,
                  duration_s: float) -> Captured:  # fmt: skip
        code = got.get("run/.exit", b"").decode().strip()
        log = got.get("run/sandbox.log", b"").decode("utf-8", "replace")
        reply = _reply(got.get("run/reply.jsonl", b""))
        if reply is None:
            why = f"its executor exited {code}" if code not in ("", "0") else "no reply"
            tail = log.strip().splitlines()
            raise SandboxPodError(f"the sandbox pod {pod}'s executor answered nothing ({why}): "
                                  f"{tail[-1] if tail else 'no message'}",
                                  hint=_HINT)  # fmt: skip
        returned = sorted(k.removeprefix("out/") for k in got if k.startswith("out/"))
        for name in returned[:MAX_FILES]:
            (outputs / safe_name(name)).write_bytes(got[f"out/{name}"])
        stderr = str(reply.get("stderr") or "")
        if returned[MAX_FILES:]:
            stderr += (f"\n[not returned, over {MAX_FILES} files: "
                       f"{', '.join(returned[MAX_FILES:])}]")  # fmt: skip
        return Captured(
            returncode=int(reply["returncode"]),
            stdout=str(reply.get("stdout") or ""),
            stderr=stderr,
            duration_s=duration_s,
            timed_out=bool(reply.get("timed_out")),
            output_exceeded=bool(reply.get("output_exceeded")),
        )

    def _api(self, call: Coroutine[Any, Any, T], *, timeout: float = API_TIMEOUT_S) -> T:
        """Run one API call on the server's loop and wait for it here (a worker thread)."""
        with contextlib.suppress(RuntimeError):
            if asyncio.get_running_loop() is self.loop:
                call.close()
                raise SandboxError("the sandbox pod was waited for on the server's own loop",
                                   hint="this is a bug of the analyst: report it")  # fmt: skip
        if self.loop.is_closed():
            call.close()
            raise SandboxPodError("the analyst is stopping", hint="the query resumes when it "
                                  "is started again")  # fmt: skip
        try:
            return asyncio.run_coroutine_threadsafe(call, self.loop).result(timeout + 30)
        except KubeError as err:
            raise SandboxPodError(f"the API server refused the sandbox pod: {err.message}",
                                  hint=err.hint) from None  # fmt: skip
        except TimeoutError:
            raise SandboxPodError("the API server did not answer within "
                                  f"{timeout:g} s", hint=_HINT) from None  # fmt: skip


ANALYSIS_LIMITS = Limits(wall_s=600, cpu_s=600)  # a query's summary of a whole result


def analyse(pods: PodSandbox, analysis: Analysis) -> dict[str, bytes]:
    """A query's analysis script in its user's sandbox pod (the same path as the code agent's
    scripts, owned by the query); the files of ``analysis.outputs`` it wrote. A script that
    fails, times out or leaves an output unwritten is a ``SandboxError`` saying so."""
    with tempfile.TemporaryDirectory(prefix="oda-analysis-") as tmp:
        inputs, outputs = Path(tmp, "in"), Path(tmp, "out")
        inputs.mkdir()
        outputs.mkdir()
        for name, text in analysis.inputs.items():
            (inputs / safe_name(name)).write_text(text)
        meta = analysis.scope.query["metadata"]
        with scoped(analysis.scope):
            ran = pods.run(analysis.scope.user, analysis.script, inputs, outputs,
                           ANALYSIS_LIMITS,
                           name=names.analysis_pod_name(meta["name"], meta["uid"]))  # fmt: skip
        if ran.timed_out:
            raise SandboxError(f"the analysis ran past {ANALYSIS_LIMITS.wall_s:g} s",
                               hint="ask for a shorter window")  # fmt: skip
        if ran.returncode != 0:
            tail = ran.stderr.strip().splitlines()
            raise SandboxError(f"the analysis script exited {ran.returncode}: "
                               f"{tail[-1] if tail else 'no message'}", hint=_HINT)  # fmt: skip
        missing = [n for n in analysis.outputs if not (outputs / n).is_file()]
        if missing:
            raise SandboxError(f"the analysis wrote no {', '.join(missing)}", hint=_HINT)
        return {n: (outputs / n).read_bytes() for n in analysis.outputs}


_HINT = ("kubectl describe pod in the sandbox's namespace; the pods need the RuntimeClass "
         "ODA_OPERATOR_RUNTIME_CLASS and the image ODA_OPERATOR_SANDBOX_IMAGE, and the analyst "
         "the pods/exec right there")  # fmt: skip


def _container(pod: Mapping[str, Any], name: str) -> dict[str, Any]:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == name:
            return dict(cs.get("state") or {})
    return {}


def _running(pod: Mapping[str, Any], name: str) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase == "Running" and "running" in _container(pod, name)


def _ended(pod: Mapping[str, Any], name: str) -> bool:
    return "terminated" in _container(pod, name)


def _reply(raw: bytes) -> dict[str, Any] | None:
    """The executor's answer to the job (its first line says it is ready; skip that)."""
    for line in reversed(raw.decode("utf-8", "replace").splitlines()):
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and "returncode" in item:
            return item
    return None
