"""bubblewrap backend (Debian ``bubblewrap``): for hosts where runsc cannot run, e.g. not root.

Every namespace is new (user, pid, network, ipc, uts, cgroup, mount), the root is an empty
read-only tmpfs holding only the listed read-only binds plus ``/out``, all capabilities are
dropped, the session is new (no terminal injection), the process dies with its parent, and the
seccomp filter of ``seccomp.program()`` is loaded. Limits are rlimits set before bwrap starts
and, as root, a pids and memory cgroup (the kernel does not count RLIMIT_NPROC for uid 0).
Unlike gVisor, the sandboxed code talks to the host kernel directly: this is the weaker backend.
"""

from __future__ import annotations

import os
import resource
import shutil

from oda_analyst.codeagent.backends import seccomp
from oda_analyst.codeagent.backends.base import (
    OUT,
    UID,
    Backend,
    Job,
    Launch,
    own_outputs,
    sandbox_environ,
)
from oda_analyst.codeagent.backends.cgroups import RunCgroup, cgroups_writable
from oda_analyst.codeagent.backends.ocispec import read_only_paths
from oda_analyst.codeagent.limits import Limits


def _rlimits(limits: Limits) -> dict[int, tuple[int, int]]:
    """(soft, hard) per resource; CPU: SIGXCPU at the soft limit, SIGKILL a second later."""
    same = {
        resource.RLIMIT_AS: limits.address_space_bytes,
        resource.RLIMIT_NPROC: limits.processes,
        resource.RLIMIT_NOFILE: limits.open_files,
        resource.RLIMIT_FSIZE: limits.file_bytes,
        resource.RLIMIT_CORE: 0,
    }
    return {resource.RLIMIT_CPU: (limits.cpu_s, limits.cpu_s + 1)} | {
        k: (v, v) for k, v in same.items()
    }


def argv(job: Job, seccomp_fd: int | None) -> list[str]:
    """The bwrap command line of a job (a pure function, tested without running it)."""
    args = [
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--uid",
        str(UID),
        "--gid",
        str(UID),
        "--hostname",
        "sandbox",
        "--clearenv",
    ]
    for key, value in sandbox_environ(job.env, job.limits).items():
        args += ["--setenv", key, value]
    # /tmp first: a read-only bind under /tmp (a sandbox environment in a cache there) must be
    # mounted on top of the sandbox's own /tmp, not hidden beneath it
    args += ["--size", str(job.limits.tmp_bytes), "--tmpfs", "/tmp"]
    for src, dest in read_only_paths(job):
        args += ["--ro-bind", str(src), dest]
    for link, target in (
        ("/bin", "usr/bin"),
        ("/lib", "usr/lib"),
        ("/lib64", "usr/lib64"),
        ("/sbin", "usr/sbin"),
    ):
        args += ["--symlink", target, link]
    args += [
        "--bind",
        str(job.outputs),
        OUT,
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        # Sysctls: hidden under an empty read-only tmpfs (there is no sysrq-trigger here).
        *("--tmpfs", "/proc/sys", "--remount-ro", "/proc/sys"),
        "--remount-ro",
        "/",
        "--chdir",
        "/tmp",
    ]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    return ["bwrap", *args, "--", *job.command()]


class BwrapBackend(Backend):
    """Local bubblewrap sandboxes with a seccomp filter."""

    name = "bwrap"

    def __init__(self, bwrap: str | None = None) -> None:
        self.bwrap = bwrap or shutil.which("bwrap")

    def unavailable_reason(self) -> str | None:
        if self.bwrap is None:
            return "bwrap is not installed (Debian package bubblewrap)"
        if not seccomp.supported():
            return "the bwrap backend's seccomp filter is written for x86_64 only"
        return None

    def launch(self, job: Job) -> Launch:
        assert self.bwrap is not None, "check unavailable_reason() first"
        # uid 65534 inside is this process's own uid outside (bwrap maps it so).
        own_outputs(job.outputs, os.geteuid())
        fd = os.memfd_create("oda-seccomp", 0)
        os.write(fd, seccomp.program())
        os.lseek(fd, 0, os.SEEK_SET)
        group = RunCgroup(job.limits) if cgroups_writable() else None
        limits = _rlimits(job.limits)

        def preexec() -> None:
            if group is not None:
                group.join()
            for kind, pair in limits.items():
                resource.setrlimit(kind, pair)

        closed: list[bool] = []

        def close() -> None:  # idempotent
            if closed:
                return
            closed.append(True)
            if group is not None:
                group.close()
            os.close(fd)

        cmd = argv(job, fd)
        cmd[0] = self.bwrap
        # The process group is killed by the caller; the cgroup takes what escaped it.
        kill = group.close if group is not None else (lambda: None)
        return Launch(argv=cmd, pass_fds=(fd,), preexec=preexec, kill=kill, close=close)
