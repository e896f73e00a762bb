"""A started session's warm executor: one long-lived sandbox that runs each script in a fork.

``codeagent_start`` launches it (the paper's "launches the executor"): the sandbox starts once
with ``python -m odaexec``, which imports pandas, numpy and matplotlib, then runs every job in a
fresh forked child. The imports and the sandbox start are paid once per session instead of once
per script. The sandbox-wide limits (memory, processes, files, mounts, network) hold for the
whole session; the wall-clock and output limits hold per job, enforced inside by the executor
and outside by this class (which kills the whole sandbox if a job overruns by a margin).

Jobs of one session share a sandbox, so a job could leave a process behind that touches later
jobs' files of the same user; users never share one. For a fresh sandbox per script, use
``runner.execute`` without an executor (the CLI and the escape battery do).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

from oda_analyst.codeagent.backends.base import JOB, Backend, Job, Launch
from oda_analyst.codeagent.backends.capture import Captured
from oda_analyst.codeagent.limits import Limits
from oda_analyst.codeagent.pyenv import SandboxEnv
from oda_analyst.errors import SandboxError

START_TIMEOUT_S = 120.0
SESSION_CPU_S = 3600
MARGIN_S = 10.0  # the executor's own kill comes first; this is the host's backstop
_EOF = object()


def _lines(stream: IO[bytes], sink: queue.Queue[Any]) -> None:
    for raw in stream:
        sink.put(raw)
    sink.put(_EOF)


class WarmExecutor:
    """One sandbox serving one session's jobs, one at a time."""

    def __init__(
        self, backend: Backend, env: SandboxEnv, inputs: Path, outputs: Path, limits: Limits
    ) -> None:
        self.backend = backend
        self.limits = limits
        self.jobs = Path(tempfile.mkdtemp(prefix="oda-jobs-"))
        self.jobs.chmod(0o755)
        self._count = 0
        self._closed = False
        # The sandbox's own messages (bwrap, runsc, the executor's import errors), for diagnosis.
        self._log = (self.jobs.parent / f"{self.jobs.name}.log").open("w+b")
        # RLIMIT_CPU counts per process: the long-lived executor gets an hour, each job's fork
        # gets the job's own limit (set by the executor before the script runs).
        job = Job(
            job_dir=self.jobs,
            inputs=inputs,
            outputs=outputs,
            env=env,
            limits=limits.model_copy(update={"cpu_s": SESSION_CPU_S}),
            argv=(str(env.python), "-m", "odaexec"),
        )
        self._launch: Launch = backend.launch(job)
        self._proc = subprocess.Popen(
            self._launch.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            pass_fds=self._launch.pass_fds,
            preexec_fn=self._launch.preexec,  # noqa: PLW1509 - limits and cgroup of the child
            start_new_session=True,
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
        )
        self._replies: queue.Queue[Any] = queue.Queue()
        assert self._proc.stdout is not None
        threading.Thread(
            target=_lines, args=(self._proc.stdout, self._replies), daemon=True
        ).start()
        ready = self._next(START_TIMEOUT_S)
        if not isinstance(ready, dict) or not ready.get("ready"):
            why = self.log_tail()
            self.close()
            raise SandboxError(
                f"the {backend.name} executor did not start: {why}",
                hint="check `oda-analyst code run` with a one-line script",
            )

    def log_tail(self, size: int = 400) -> str:
        self._log.flush()
        self._log.seek(0, os.SEEK_END)
        self._log.seek(max(0, self._log.tell() - size))
        return self._log.read().decode("utf-8", "replace").strip() or "no message"

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    def _next(self, timeout: float) -> dict[str, Any] | None:
        """The next reply line, None at end of stream or after ``timeout``."""
        try:
            item = self._replies.get(timeout=timeout)
        except queue.Empty:
            return None
        if item is _EOF:
            return None
        try:
            reply = json.loads(item)
        except ValueError:
            return None
        return reply if isinstance(reply, dict) else None

    def run(self, source: str, wall_s: float, output_bytes: int, cpu_s: int) -> Captured:
        """Run one script in a fork of the warm interpreter."""
        if not self.alive:
            raise SandboxError("the sandbox has stopped", hint="call codeagent_start again")
        self._count += 1
        script = self.jobs / f"job-{self._count}.py"
        script.write_text(source, "utf-8")
        script.chmod(0o644)
        request = {
            "id": self._count,
            "script": f"{JOB}/{script.name}",
            "wall_s": wall_s,
            "cpu_s": cpu_s,
            "output_bytes": output_bytes,
        }
        start = time.monotonic()
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write((json.dumps(request) + "\n").encode())
            self._proc.stdin.flush()
        except OSError:
            return self._died(start, "the sandbox ended before the job was sent")
        reply = self._next(wall_s + MARGIN_S)
        script.unlink(missing_ok=True)
        if reply is None or reply.get("id") != self._count:
            if self.alive:  # no answer in time: the host's backstop ends the whole sandbox
                self.close()
                return Captured(None, "", "", time.monotonic() - start, timed_out=True)
            return self._died(start, "the sandbox ended during the job (a limit was reached)")
        return Captured(
            returncode=int(reply["returncode"]),
            stdout=str(reply["stdout"]),
            stderr=str(reply["stderr"]),
            duration_s=time.monotonic() - start,
            timed_out=bool(reply["timed_out"]),
            output_exceeded=bool(reply["output_exceeded"]),
        )

    def _died(self, start: float, why: str) -> Captured:
        code = self._proc.poll()
        last = self.log_tail(200)
        self.close()
        detail = f"{why}; exit status {code}; last message: {last}"
        return Captured(
            -signal.SIGKILL, "", f"[{detail}]\n", time.monotonic() - start, sandbox_crashed=True
        )

    def close(self) -> None:
        """End the sandbox and remove its job folder (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._launch.kill()
            self._proc.wait(timeout=30)
        self._launch.close()
        shutil.rmtree(self.jobs, ignore_errors=True)
        self._log.close()
        Path(self._log.name).unlink(missing_ok=True)


def launch_executor(backend: Backend, env: SandboxEnv, inputs: Path, outputs: Path,
                    limits: Limits, attempts: int = 2) -> WarmExecutor:  # fmt: skip
    """A started executor; a launch that dies before it is ready is tried once more (seen
    rarely with bwrap right after the previous sandbox of the session was killed)."""
    for attempt in range(attempts):
        try:
            return WarmExecutor(backend, env, inputs, outputs, limits)
        except SandboxError:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")
