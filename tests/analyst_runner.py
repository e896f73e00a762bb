"""The analyst as the chart's analyst Deployment runs it: ``oda-analyst serve --pipeline-port``
in a process of its own, on loopback ports, with the environment it is given. The operator tests
point the operator at it (``ODA_OPERATOR_PIPELINE_URL``): the operator runs no pipeline itself."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from processes import stop_process

LOOPBACK = "127.0.0.1"
START_S = 240.0  # a cold start loads the retriever's whole stack (catalogue, embeddings)


def _port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def analyst_argv(pipeline_port: int) -> list[str]:
    return [str(Path(sys.executable).parent / "oda-analyst"), "serve", "--host", LOOPBACK,
            "--retriever-port", str(_port()), "--codeagent-port", str(_port()),
            "--metrics-port", str(_port()), "--pipeline-port", str(pipeline_port)]  # fmt: skip


def wait_serving(proc: subprocess.Popen[bytes], url: str, log: Path,
                 timeout: float = START_S) -> None:  # fmt: skip
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the analyst exited ({proc.returncode}): "
                                 f"{log.read_text()[-3000:]}")  # fmt: skip
        try:
            if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    stop_process(proc)
    raise AssertionError(f"the analyst did not serve {url} within {timeout:.0f} s: "
                         f"{log.read_text()[-3000:]}")  # fmt: skip


@contextmanager
def analyst_process(env: dict[str, str], log: Path) -> Iterator[str]:
    """Serve the pipeline port with ``env`` (on top of nothing else: the caller passes the
    whole environment); yields its URL, stopped at the end."""
    port = _port()
    url = f"http://{LOOPBACK}:{port}"
    proc = subprocess.Popen(analyst_argv(port), env=env, stdout=log.open("ab"),
                            stderr=subprocess.STDOUT)  # fmt: skip
    try:
        wait_serving(proc, url, log)
        yield url
    finally:
        stop_process(proc)
