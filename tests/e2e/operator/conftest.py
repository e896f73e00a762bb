"""The operator e2e tier: a real API server, the test node, S3 and a shared graph store, and the
operator itself in this process (kopf.testing.KopfRunner) for the namespaces ``t-k-*``."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest
from kopf.testing import KopfRunner

from oda_analyst.config import get_settings

OPERATED = "t-k-"


@pytest.fixture(scope="session")
def liveness_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# Module scope: the operator runs in this process with the operator's ODA_* environment, which
# must be gone before the other e2e tests run in the same session.
@pytest.fixture(scope="module")
def operator(operator_env: dict[str, str], crds: None, node: object,
             liveness_port: int) -> Iterator[KopfRunner]:  # fmt: skip

    saved = dict(os.environ)
    os.environ.update(operator_env)
    get_settings.cache_clear()
    args = ["run", "--standalone", "--namespace", f"{OPERATED}*",
            "--liveness", f"http://127.0.0.1:{liveness_port}/healthz",
            "-m", "oda_analyst.controller.handlers"]  # fmt: skip
    try:
        with KopfRunner(args, timeout=120) as runner:
            yield runner
    finally:
        os.environ.clear()
        os.environ.update(saved)
        get_settings.cache_clear()
    assert runner.exception is None, runner.output[-3000:]
