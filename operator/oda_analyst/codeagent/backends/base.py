"""The one interface every sandbox backend implements, and the job it runs.

A job is a script and two host folders: ``inputs`` appears read-only at ``/in``, ``outputs``
read-write at ``/out``. Nothing else of the host is visible except, read-only, the system's
``/usr``, the sandbox's Python environment and the recipes' helper module. No host environment
variable passes in: the environment is exactly ``sandbox_environ()``.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from oda_analyst import sandbox_spec
from oda_analyst.codeagent.backends.capture import Captured, run_capped
from oda_analyst.codeagent.limits import Limits
from oda_analyst.codeagent.pyenv import SandboxEnv

# The layout is the sandbox pod's too (sandbox_spec, which the operator's pods share).
IN = sandbox_spec.IN
OUT = sandbox_spec.OUT
SITE = sandbox_spec.SITE  # the recipes' helper module (odaplot) and sitecustomize
JOB = sandbox_spec.JOB  # the script, read-only
SCRIPT = sandbox_spec.SCRIPT
UID = sandbox_spec.UID  # nobody: the sandboxed code never runs as root, not even a namespaced one


@dataclass(frozen=True)
class Job:
    """One script to run: the job folder holds ``main.py``; inputs/outputs are the user's."""

    job_dir: Path
    inputs: Path
    outputs: Path
    env: SandboxEnv
    limits: Limits
    argv: tuple[str, ...] | None = None  # what runs inside; default: the script

    def command(self) -> list[str]:
        return list(self.argv) if self.argv is not None else command(self.env)


def site_dir() -> Path:
    """The host folder mounted at /opt/oda/site (part of this package, read-only)."""
    return Path(str(resources.files("oda_analyst.codeagent").joinpath("sandbox_site")))


def sandbox_environ(env: SandboxEnv, limits: Limits) -> dict[str, str]:
    """The whole environment of the sandboxed process (nothing is inherited from the host)."""
    threads = "1"
    return {
        "PATH": f"{env.root}/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "PYTHONPATH": SITE,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": "/tmp/matplotlib",
        "ODA_MPL_CACHE": str(env.mpl_cache),
        # Set again from inside by sitecustomize: this runsc does not apply an OCI RLIMIT_CPU.
        "ODA_CPU_LIMIT_S": str(limits.cpu_s),
        "OMP_NUM_THREADS": threads,
        "OPENBLAS_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
    }


def command(env: SandboxEnv) -> list[str]:
    """What runs inside: the environment's interpreter on the job's script, isolated mode off
    so PYTHONPATH (the helper module) applies, unbuffered so a timeout keeps what was printed."""
    return [str(env.python), f"{JOB}/{SCRIPT}"]


def own_outputs(outputs: Path, uid: int) -> None:
    """Give ``outputs`` (and what is in it) to the host uid the sandboxed code writes as."""
    if os.geteuid() != 0:
        return
    for path in [outputs, *outputs.rglob("*")]:
        os.lchown(path, uid, uid)


def _nothing() -> None:
    return None


def _same(captured: Captured) -> Captured:
    return captured


@dataclass
class Launch:
    """How to start one sandbox on the host, and how to end it."""

    argv: list[str]
    pass_fds: tuple[int, ...] = ()
    preexec: Callable[[], None] | None = None
    kill: Callable[[], None] = _nothing  # end the sandbox now (limits, stop)
    close: Callable[[], None] = _nothing  # remove its temporaries once it has ended
    finish: Callable[[Captured], Captured] = field(default=_same)  # backend's own diagnosis


class Backend(ABC):
    """A place to run a job."""

    name: str

    @abstractmethod
    def unavailable_reason(self) -> str | None:
        """None when this backend can run here, else why not (shown to the user)."""

    @abstractmethod
    def launch(self, job: Job) -> Launch:
        """Prepare a sandbox for ``job`` (mounts, limits, filters); the caller starts it."""

    def run(self, job: Job) -> Captured:
        """Run the job to completion or to a limit; never raise for the code's own failures."""
        launch = self.launch(job)
        try:
            captured = run_capped(launch.argv, wall_s=job.limits.wall_s,
                                  output_bytes=job.limits.output_bytes, pass_fds=launch.pass_fds,
                                  preexec=launch.preexec, on_kill=launch.kill)  # fmt: skip
            launch.kill()
            return launch.finish(captured)
        finally:
            launch.close()
