"""Stopping the server processes the tests start (Redis, Oxigraph, moto, MCP servers)."""

from __future__ import annotations

import subprocess
from typing import Any


def stop_process(proc: subprocess.Popen[Any], grace_s: float = 10.0) -> None:
    """SIGTERM (servers shut down cleanly: Redis writes its RDB/AOF), SIGKILL after ``grace_s``;
    its stdout pipe is closed."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    if proc.stdout:
        proc.stdout.close()
