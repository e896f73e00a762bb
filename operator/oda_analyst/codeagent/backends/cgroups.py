"""Host cgroups for one run (pids and memory), where this process may create them.

bubblewrap run by root maps the sandbox to host uid 0, for which the kernel does not count
RLIMIT_NPROC, so as root the process limit comes from a ``pids`` cgroup (and memory from a
``memory`` cgroup). cgroup v2 (one hierarchy with both controllers) and v1 (one per controller)
are both handled. Without write access the caller falls back to rlimits only.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from oda_analyst.codeagent.limits import Limits

ROOT = Path("/sys/fs/cgroup")


def _v2_dir() -> Path | None:
    controllers = ROOT / "cgroup.controllers"
    if controllers.is_file() and {"pids", "memory"} <= set(controllers.read_text().split()):
        return ROOT
    return None


def cgroups_writable() -> bool:
    """True when a run's pids and memory cgroups can be created here."""
    if os.geteuid() != 0:
        return False
    if _v2_dir() is not None:
        return os.access(ROOT, os.W_OK)
    return all(os.access(ROOT / c, os.W_OK) for c in ("pids", "memory"))


class RunCgroup:
    """The cgroup(s) of one run: ``join()`` in the child before exec, ``close()`` after."""

    def __init__(self, limits: Limits) -> None:
        name = f"oda-sandbox-{uuid.uuid4().hex[:12]}"
        self.dirs: list[Path] = []
        v2 = _v2_dir()
        if v2 is not None:
            d = v2 / name
            d.mkdir()
            self.dirs.append(d)
            (d / "pids.max").write_text(str(limits.processes))
            (d / "memory.max").write_text(str(limits.memory_bytes))
            (d / "memory.swap.max").write_text("0")
        else:
            pids, mem = ROOT / "pids" / name, ROOT / "memory" / name
            pids.mkdir()
            self.dirs.append(pids)
            mem.mkdir()
            self.dirs.append(mem)
            (pids / "pids.max").write_text(str(limits.processes))
            (mem / "memory.limit_in_bytes").write_text(str(limits.memory_bytes))

    def join(self) -> None:
        """Move the calling process into the run's cgroups (called in the child)."""
        pid = str(os.getpid())
        for d in self.dirs:
            (d / "cgroup.procs").write_text(pid)

    def close(self) -> None:
        """Kill whatever is left in the cgroups and remove them."""
        for d in self.dirs:
            procs = d / "cgroup.procs"
            for _ in range(50):
                pids = procs.read_text().split() if procs.exists() else []
                if not pids:
                    break
                for p in pids:
                    try:
                        os.kill(int(p), 9)
                    except ProcessLookupError:
                        continue
            try:
                d.rmdir()
            except OSError:
                continue
