"""Choosing a backend: ``auto`` is gVisor, then bwrap; with neither, no code runs at all."""

from __future__ import annotations

from typing import Literal

from oda_analyst.codeagent.backends.base import Backend
from oda_analyst.codeagent.backends.bwrap import BwrapBackend
from oda_analyst.codeagent.backends.gvisor import GVisorBackend
from oda_analyst.errors import SandboxUnavailableError, UsageError

BackendName = Literal["auto", "gvisor", "bwrap"]
NAMES: tuple[str, ...] = ("auto", "gvisor", "bwrap")


def _make(name: str) -> Backend:
    if name == "gvisor":
        return GVisorBackend()
    if name == "bwrap":
        return BwrapBackend()
    raise UsageError(f"unknown sandbox backend {name!r}", hint="use auto, gvisor or bwrap")


def choose(name: str = "auto") -> Backend:
    """The backend to run with; SandboxUnavailableError (never an unsandboxed run) when none can."""
    if name != "auto":
        backend = _make(name)
        reason = backend.unavailable_reason()
        if reason is not None:
            raise SandboxUnavailableError(
                f"the {name} sandbox cannot run here: {reason}",
                hint="install it, or pick another with --backend",
            )
        return backend
    reasons = []
    for candidate in ("gvisor", "bwrap"):
        backend = _make(candidate)
        reason = backend.unavailable_reason()
        if reason is None:
            return backend
        reasons.append(f"{candidate}: {reason}")
    raise SandboxUnavailableError(
        "no sandbox can run here, so no code runs (" + "; ".join(reasons) + ")",
        hint="install the Debian package bubblewrap or runsc (as root: `apt-get install "
        "bubblewrap`); the test command's set-up (scripts/setup_test.sh) does",
    )
