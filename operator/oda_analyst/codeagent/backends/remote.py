"""A sandbox that runs elsewhere: the session's job goes out, its /out comes back.

The local backends (gVisor, bubblewrap) start a sandbox on this host. A remote sandbox is for a
process that must not run user code itself — the Kubernetes operator, whose adapter runs each
script in the user's own sandbox pod. The session manager hands it the script and the session's
two folders; it returns what the host would have seen of a local run, with the files the code
wrote copied into ``outputs``. The audit has happened before (``runner.execute``), so a refused
script never leaves the process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from oda_analyst.codeagent.backends.capture import Captured
from oda_analyst.codeagent.limits import Limits


class RemoteSandbox(Protocol):
    name: str  # reported as the run's backend

    def unavailable_reason(self) -> str | None:
        """None when scripts can be run now, else why not (shown to the user)."""
        ...

    def run(self, user: str, source: str, inputs: Path, outputs: Path, limits: Limits
            ) -> Captured:  # fmt: skip
        """Run ``source`` with ``inputs`` at /in for ``user`` within ``limits``; copy what it
        wrote to /out into ``outputs``. Raises ``SandboxError`` when the sandbox itself could
        not run (not for the code's own failures, which are the returned exit status)."""
        ...
