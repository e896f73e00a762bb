"""Audit, then run one script in a sandbox on a workspace, and say what happened."""

from __future__ import annotations

import tempfile
from pathlib import Path

from oda_analyst.codeagent.auditor import audit, blocking
from oda_analyst.codeagent.backends.base import SCRIPT, Backend, Job
from oda_analyst.codeagent.backends.capture import Captured
from oda_analyst.codeagent.backends.remote import RemoteSandbox
from oda_analyst.codeagent.backends.select import choose
from oda_analyst.codeagent.executor import WarmExecutor
from oda_analyst.codeagent.limits import Limits
from oda_analyst.codeagent.pyenv import SandboxEnv, ensure
from oda_analyst.codeagent.result import Finding, RunResult
from oda_analyst.codeagent.workspace import Workspace
from oda_analyst.observability import instrument

SIGKILL, SIGXCPU, SIGXFSZ = 9, 24, 25


def _signal_of(code: int | None) -> int | None:
    """The signal that ended the process, from either convention (-N or 128+N)."""
    if code is None:
        return None
    if code < 0:
        return -code
    if code > 128:
        return code - 128
    return None


def classify(cap: Captured, limits: Limits) -> tuple[str, str | None]:
    """``(status, note)`` of a finished run."""
    if cap.timed_out:
        return "timeout", f"wall-clock limit of {limits.wall_s:g} s reached; the sandbox was killed"
    if cap.output_exceeded:
        return "killed", f"printed more than {limits.output_bytes} bytes; the sandbox was killed"
    if cap.sandbox_crashed:
        return "killed", (
            "the sandbox itself ended during the run (a limit, or the code killing "
            "its own processes) and was removed"
        )
    sig = _signal_of(cap.returncode)
    if sig == SIGXCPU:
        return "killed", f"CPU limit of {limits.cpu_s} s reached"
    if sig == SIGXFSZ:
        return "killed", f"a file grew past {limits.file_bytes} bytes"
    if sig == SIGKILL:
        return "killed", (
            f"killed by the sandbox (memory limit {limits.memory_bytes // 2**20} MiB "
            f"or process limit {limits.processes})"
        )
    if cap.returncode == 0:
        return "ok", None
    return "error", None


def execute(
    source: str,
    workspace: Workspace,
    *,
    backend: Backend | str = "auto",
    limits: Limits | None = None,
    env: SandboxEnv | None = None,
    audited: bool = True,
    executor: WarmExecutor | None = None,
    remote: RemoteSandbox | None = None,
    user: str = "",
) -> RunResult:
    """Audit ``source``; refuse it, or run it with ``/in`` and ``/out`` of ``workspace`` (traced
    as one span, counted by backend and outcome).

    ``audited=False`` still reports the findings but runs the code anyway: only the escape
    battery uses it, to prove the sandbox holds what the auditor would have refused.
    With ``executor`` (a started session's warm sandbox) the script runs in it instead of a
    fresh sandbox; with ``remote`` it runs there, for ``user``, and nothing runs on this host.
    """
    with instrument.sandbox_run(source, warm=executor is not None) as span:
        result = _execute(source, workspace, backend=backend, limits=limits, env=env,
                          audited=audited, executor=executor, remote=remote,
                          user=user)  # fmt: skip
        instrument.sandbox_done(
            span, backend=result.backend, status=result.status, exit_code=result.exit_code,
            duration_s=result.duration_s, findings=len(result.audit),
            files=[f.name for f in result.files], note=result.note,
        )  # fmt: skip
    return result


def _execute(
    source: str,
    workspace: Workspace,
    *,
    backend: Backend | str = "auto",
    limits: Limits | None = None,
    env: SandboxEnv | None = None,
    audited: bool = True,
    executor: WarmExecutor | None = None,
    remote: RemoteSandbox | None = None,
    user: str = "",
) -> RunResult:
    lim = limits or Limits()
    findings = audit(source)
    high = blocking(findings) if audited else []
    if high:
        return RunResult(
            status="refused",
            exit_code=None,
            audit=findings,
            backend="none",
            limits=lim,
            note="the static auditor refused the code: " + "; ".join(f.message for f in high),
        )
    if remote is not None:
        cap = remote.run(user, source, workspace.inputs, workspace.outputs, lim)
        return _result(cap, workspace, findings, remote.name, lim)
    if executor is not None:
        cap = executor.run(
            source, wall_s=lim.wall_s, output_bytes=lim.output_bytes, cpu_s=lim.cpu_s
        )
        return _result(cap, workspace, findings, executor.backend.name, lim)
    chosen = choose(backend) if isinstance(backend, str) else backend
    sandbox_env = env or ensure()
    with tempfile.TemporaryDirectory(prefix="oda-job-") as tmp:
        job_dir = Path(tmp)
        job_dir.chmod(0o755)
        script = job_dir / SCRIPT
        script.write_text(source, "utf-8")
        script.chmod(0o644)
        job = Job(
            job_dir=job_dir,
            inputs=workspace.inputs,
            outputs=workspace.outputs,
            env=sandbox_env,
            limits=lim,
        )
        cap = chosen.run(job)
    return _result(cap, workspace, findings, chosen.name, lim)


def _result(
    cap: Captured, workspace: Workspace, findings: list[Finding], backend: str, lim: Limits
) -> RunResult:
    status, note = classify(cap, lim)
    removed = workspace.enforce_out_limit(lim.out_dir_bytes)
    if removed:
        extra = f"removed from out/ (over {lim.out_dir_bytes} bytes or not a file): {removed}"
        note = f"{note}; {extra}" if note else extra
    return RunResult(
        status=status,
        exit_code=cap.returncode,
        stdout=cap.stdout,
        stderr=cap.stderr,
        files=workspace.outputs_list(),
        audit=findings,
        backend=backend,
        limits=lim,
        duration_s=round(cap.duration_s, 3),
        note=note,
    )
