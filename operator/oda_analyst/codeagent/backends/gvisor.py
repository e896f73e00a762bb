"""gVisor backend: ``runsc run`` on an OCI bundle whose root is read-only (Debian ``runsc``).

gVisor's user-space kernel (the Sentry) answers every system call of the sandboxed code; the host
sees only the Sentry's small, seccomp-filtered set. The network is ``none`` (loopback only), the
code runs as uid 65534 with no capabilities, and each run is a fresh sandbox.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import replace
from pathlib import Path

from oda_analyst.codeagent.backends.base import UID, Backend, Job, Launch, own_outputs
from oda_analyst.codeagent.backends.capture import Captured
from oda_analyst.codeagent.backends.cgroups import cgroups_writable
from oda_analyst.codeagent.backends.ocispec import make_rootfs, spec


@functools.cache
def _probe(runsc: str) -> str | None:
    """Run ``true`` once in a throw-away sandbox: the only sure test that runsc works here."""
    try:
        done = subprocess.run(
            [runsc, "--network=none", "do", "true"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"runsc does not start here: {exc}"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return f"runsc does not run here: {last[:200]}"
    return None


class GVisorBackend(Backend):
    """Local gVisor sandboxes (needs root, as Debian's runsc runs here)."""

    name = "gvisor"

    def __init__(self, runsc: str | None = None) -> None:
        self.runsc = runsc or shutil.which("runsc")

    def unavailable_reason(self) -> str | None:
        if self.runsc is None:
            return "runsc is not installed (Debian package runsc)"
        if os.geteuid() != 0:
            return "runsc needs root here (use bwrap, or run as root)"
        return _probe(self.runsc)

    def launch(self, job: Job) -> Launch:
        assert self.runsc is not None, "check unavailable_reason() first"
        runsc = self.runsc
        own_outputs(job.outputs, UID)  # the code runs as uid 65534 in gVisor and on the host
        tmp = Path(tempfile.mkdtemp(prefix="oda-gvisor-"))
        bundle, state = tmp / "bundle", tmp / "state"
        bundle.mkdir()
        state.mkdir()
        make_rootfs(bundle / "rootfs", job)
        cgroups = cgroups_writable()
        (bundle / "config.json").write_text(json.dumps(spec(job, cgroups=cgroups)), "utf-8")
        cid = f"oda-{uuid.uuid4().hex[:12]}"
        panic_log = tmp / "panic.log"
        base = [runsc, "--root", str(state), "--network=none", f"--panic-log={panic_log}"]
        if not cgroups:
            base.append("--ignore-cgroups")

        def kill() -> None:
            for args in (["kill", "--all", cid, "KILL"], ["delete", "--force", cid]):
                subprocess.run([*base, *args], capture_output=True, timeout=30, check=False)

        def close() -> None:
            kill()
            shutil.rmtree(tmp, ignore_errors=True)

        return Launch(
            argv=[*base, "run", "--bundle", str(bundle), cid],
            kill=kill,
            close=close,
            finish=lambda captured: _with_panic(captured, panic_log),
        )


def _with_panic(result: Captured, panic_log: Path) -> Captured:
    """A Sentry that panicked (e.g. out of host processes under a fork bomb) ended the run:
    say so instead of passing its exit status off as the code's."""
    try:
        text = panic_log.read_text("utf-8", errors="replace")
    except OSError:
        return result
    first = next((line for line in text.splitlines() if line.startswith("panic:")), None)
    if first is None:
        return result
    note = f"\n[gVisor sandbox crashed and was removed: {first[:160]}]\n"
    return replace(result, stderr=result.stderr + note, sandbox_crashed=True)
