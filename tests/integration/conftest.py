"""Real servers on loopback for integration tests, started by the tests themselves.

Each server fixture is session-scoped, waits until the server answers, yields how to reach it,
and stops the process it started (and only that one) at the end.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

from processes import stop_process

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def venv_tool(name: str) -> str:
    """A console script installed beside this Python (the venv's bin folder), else on PATH."""
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install the dev extras)")
    return found


def wait_until(
    ready: Callable[[], bool], *, timeout: float, what: str, proc: subprocess.Popen[bytes]
) -> None:
    """Poll ``ready`` until it is true; fail with the server's output if it dies or times out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            output = _output(proc)
            pytest.fail(f"{what} exited with code {proc.returncode}:\n{output[-2000:]}")
        if ready():
            return
        time.sleep(0.1)
    pytest.fail(f"{what} did not answer within {timeout:.0f} s")


@dataclass
class Server:
    """A server process started by a fixture."""

    proc: subprocess.Popen[bytes]
    what: str

    def stop(self) -> None:
        stop_process(self.proc)


# A server's output goes to a file, never to a pipe nobody reads: moto logs every request, and
# once 64 KiB of log filled an unread pipe the server blocked on its next write, so a long
# session's S3 calls timed out (seen in the Dask engine test after the S3 lake tests).
_LOGS: dict[int, IO[bytes]] = {}


def _output(proc: subprocess.Popen[bytes]) -> str:
    if proc.stdout is not None:
        return proc.stdout.read().decode(errors="replace")
    log = _LOGS.get(proc.pid)
    if log is None:
        return ""
    log.seek(0)
    return log.read().decode(errors="replace")


def start_server(argv: Sequence[str], what: str) -> Server:
    log = tempfile.TemporaryFile()  # noqa: SIM115 (kept open for the server's life)
    proc = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT)
    _LOGS[proc.pid] = log
    return Server(proc, what)


def _http_answers(url: str) -> Callable[[], bool]:
    def ready() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return True
        except urllib.error.HTTPError:
            return True  # any HTTP answer means the server is up
        except OSError:
            return False

    return ready


@dataclass(frozen=True)
class S3Endpoint:
    """How to reach the loopback S3 server."""

    endpoint_url: str
    access_key: str
    secret_key: str
    region: str

    @property
    def host(self) -> str:
        """``host:port`` as the minio client wants it."""
        return self.endpoint_url.removeprefix("http://")

    def storage_options(self) -> dict[str, str]:
        """Options for Polars ``scan_parquet`` and for ``Lake``."""
        return {
            "aws_endpoint_url": self.endpoint_url,
            "aws_access_key_id": self.access_key,
            "aws_secret_access_key": self.secret_key,
            "aws_region": self.region,
            "aws_allow_http": "true",
        }


@pytest.fixture()
def unused_port() -> int:
    """A free loopback port, e.g. to point a client at an endpoint where nothing listens."""
    return free_port()


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[S3Endpoint]:
    """An S3-compatible server (moto) on a free loopback port, for the whole session."""
    port = free_port()
    server = start_server(
        [venv_tool("moto_server"), "-H", LOOPBACK, "-p", str(port)], "moto_server"
    )
    url = f"http://{LOOPBACK}:{port}"
    try:
        wait_until(
            _http_answers(f"{url}/moto-api/"), timeout=30, what="moto_server", proc=server.proc
        )
        yield S3Endpoint(url, access_key="testing", secret_key="testing", region="us-east-1")
    finally:
        server.stop()


# The real model servers (`llama`, `llama_small_context`) are in tests/conftest.py: the e2e
# tier's coordinator tests share the same session server.
