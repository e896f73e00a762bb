"""The OCI runtime spec (``config.json``) of one gVisor run: a pure function of the job."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from oda_analyst.codeagent.backends.base import (
    IN,
    JOB,
    OUT,
    SITE,
    UID,
    Job,
    sandbox_environ,
    site_dir,
)
from oda_analyst.codeagent.limits import Limits


def rlimits(limits: Limits) -> list[dict[str, Any]]:
    """The process limits, enforced by gVisor's kernel inside the sandbox."""
    pairs = {
        "RLIMIT_CPU": limits.cpu_s,
        "RLIMIT_AS": limits.address_space_bytes,
        "RLIMIT_NPROC": limits.processes,
        "RLIMIT_NOFILE": limits.open_files,
        "RLIMIT_FSIZE": limits.file_bytes,
        "RLIMIT_CORE": 0,
    }
    # CPU: SIGXCPU at the soft limit (reported as the CPU limit), SIGKILL a second later.
    hard = {"RLIMIT_CPU": limits.cpu_s + 1}
    return [{"type": k, "hard": hard.get(k, v), "soft": v} for k, v in pairs.items()]


def _bind(source: Path | str, dest: str, *, writable: bool = False) -> dict[str, Any]:
    return {
        "destination": dest,
        "type": "bind",
        "source": str(source),
        "options": ["rbind", "rw" if writable else "ro", "nosuid", "nodev"],
    }


def read_only_paths(job: Job) -> list[tuple[Path, str]]:
    """Host folders mounted read-only (source, destination)."""
    paths: list[tuple[Path, str]] = [(Path("/usr"), "/usr")]
    paths += [(p, str(p)) for p in job.env.mounts()]
    paths += [(site_dir(), SITE), (job.job_dir, JOB), (job.inputs, IN)]
    return paths


def spec(job: Job, *, cgroups: bool) -> dict[str, Any]:
    """The container: read-only root, only the listed mounts, no network, non-root, no caps."""
    lim = job.limits
    # /tmp first: a read-only bind under /tmp (a sandbox environment in a cache there) must be
    # mounted on top of the sandbox's own /tmp, not hidden beneath it
    mounts: list[dict[str, Any]] = [
        {
            "destination": "/tmp",
            "type": "tmpfs",
            "source": "tmpfs",
            "options": ["nosuid", "nodev", f"size={lim.tmp_bytes}", "mode=1777"],
        }
    ]
    mounts += [_bind(src, dest) for src, dest in read_only_paths(job)]
    mounts.append(_bind(job.outputs, OUT, writable=True))
    mounts.append({"destination": "/proc", "type": "proc", "source": "proc"})
    env = sandbox_environ(job.env, lim)
    linux: dict[str, Any] = {
        "namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount")],
        "maskedPaths": ["/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware"],
        "readonlyPaths": ["/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"],
    }
    if cgroups:
        # A backstop on the host: gVisor's own processes (the ptrace platform's stubs) count too.
        linux["resources"] = {
            "memory": {"limit": lim.memory_bytes},
            "pids": {"limit": 16 * lim.processes + 256},
        }
    return {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False,
            "user": {"uid": UID, "gid": UID, "additionalGids": []},
            "args": job.command(),
            "env": [f"{k}={v}" for k, v in env.items()],
            "cwd": "/tmp",
            "rlimits": rlimits(lim),
            "noNewPrivileges": True,
            "capabilities": {
                k: [] for k in ("bounding", "effective", "inheritable", "permitted", "ambient")
            },
        },
        "root": {"path": "rootfs", "readonly": True},
        "hostname": "sandbox",
        "mounts": mounts,
        "linux": linux,
    }


def make_rootfs(root: Path, job: Job) -> None:
    """An empty root holding only the mount points (the root itself is mounted read-only)."""
    for name in ("usr", "tmp", "proc", "dev", "sys", "etc", IN[1:], OUT[1:]):
        (root / name).mkdir(parents=True, exist_ok=True)
    for dest in [d for _, d in read_only_paths(job)]:
        (root / dest.lstrip("/")).mkdir(parents=True, exist_ok=True)
    for link, target in (
        ("bin", "usr/bin"),
        ("lib", "usr/lib"),
        ("lib64", "usr/lib64"),
        ("sbin", "usr/sbin"),
    ):
        (root / link).symlink_to(target)
    for sub in root.rglob("*"):
        if sub.is_dir() and not sub.is_symlink():
            sub.chmod(0o755)
    root.chmod(0o755)
