"""Run one host command with a wall-clock limit and bounded stdout/stderr.

Shared by the local backends: the command (``runsc run …``, ``bwrap …``) starts in its own
session so a timeout can kill its whole process group; each stream is read up to the output limit
and the run is killed as soon as either stream goes past it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Captured:
    """What the host saw of one command."""

    returncode: int | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    output_exceeded: bool = False
    sandbox_crashed: bool = False


class _Reader(threading.Thread):
    def __init__(self, stream: object, limit: int, on_exceeded: Callable[[], None]) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.limit = limit
        self.on_exceeded = on_exceeded
        self.chunks: list[bytes] = []
        self.size = 0
        self.exceeded = False

    def run(self) -> None:
        read = self.stream.read  # type: ignore[attr-defined]
        while True:
            chunk: bytes = read(65536)
            if not chunk:
                return
            room = self.limit - self.size
            if room > 0:
                self.chunks.append(chunk[:room])
            self.size += len(chunk)
            if self.size > self.limit and not self.exceeded:
                self.exceeded = True
                self.on_exceeded()

    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", errors="replace")


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        return


def run_capped(
    argv: Sequence[str],
    *,
    wall_s: float,
    output_bytes: int,
    pass_fds: Sequence[int] = (),
    preexec: Callable[[], None] | None = None,
    on_kill: Callable[[], None] | None = None,
    env: dict[str, str] | None = None,
) -> Captured:
    """Run ``argv``; kill it (and call ``on_kill``) past ``wall_s`` or ``output_bytes``."""
    start = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=tuple(pass_fds),
        start_new_session=True,
        preexec_fn=preexec,  # noqa: PLW1509 - sets limits and the cgroup of the child only
        env=env if env is not None else {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
    )
    killed = threading.Event()

    def kill() -> None:
        if not killed.is_set():
            killed.set()
            _kill_group(proc)
            if on_kill is not None:
                on_kill()

    out = _Reader(proc.stdout, output_bytes, kill)
    err = _Reader(proc.stderr, output_bytes, kill)
    out.start()
    err.start()
    timed_out = False
    try:
        proc.wait(timeout=wall_s)
    except subprocess.TimeoutExpired:
        timed_out = not killed.is_set()
        kill()
        proc.wait()
    out.join(timeout=10)
    err.join(timeout=10)
    _kill_group(proc)  # stragglers that left the group's leader behind
    return Captured(
        returncode=proc.returncode,
        stdout=out.text(),
        stderr=err.text(),
        duration_s=time.monotonic() - start,
        timed_out=timed_out,
        output_exceeded=out.exceeded or err.exceeded,
    )
