"""The operator e2e tier: a real API server, the test node, S3 and a shared graph store, and the
operator itself in this process (kopf.testing.KopfRunner) for the namespaces ``t-k-*``."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator

import httpx
import pytest
from kopf.testing import KopfRunner

from oda_analyst.config import get_settings

OPERATED = "t-k-"


@pytest.fixture(scope="session")
def liveness_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def metrics_port() -> int:
    """Where the module's operator serves its /metrics (ODA_OPERATOR_METRICS_PORT)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _until_serving(runner: KopfRunner, port: int, timeout: float = 120) -> None:
    """Wait for the operator's liveness endpoint; an operator that exited (or never answers)
    fails the module at once with its output, not each test after a 15-minute wait for a phase
    it never sets (seen once in a full run: the queries of ``t-k-*`` were never picked up)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not runner.future.done():
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    result = runner.future.result() if runner.future.done() else None
    output = result.output[-3000:] if result is not None else "(still running)"
    pytest.fail(f"the operator is not serving its liveness endpoint on {port}: {output}")


# Module scope: the operator runs in this process with the operator's ODA_* environment, which
# must be gone before the other e2e tests run in the same session.
@pytest.fixture(scope="module")
def operator(operator_env: dict[str, str], crds: None, node: object,
             liveness_port: int, metrics_port: int) -> Iterator[KopfRunner]:  # fmt: skip

    saved = dict(os.environ)
    os.environ.update(operator_env)
    os.environ.update({"ODA_OPERATOR_METRICS_PORT": str(metrics_port),
                       "ODA_OPERATOR_METRICS_HOST": "127.0.0.1"})  # fmt: skip
    get_settings.cache_clear()
    args = ["run", "--standalone", "--namespace", f"{OPERATED}*",
            "--liveness", f"http://127.0.0.1:{liveness_port}/healthz",
            "-m", "oda_analyst.controller.handlers"]  # fmt: skip
    try:
        with KopfRunner(args, timeout=120) as runner:
            _until_serving(runner, liveness_port)
            yield runner
    finally:
        os.environ.clear()
        os.environ.update(saved)
        get_settings.cache_clear()
    assert runner.exception is None, runner.output[-3000:]
