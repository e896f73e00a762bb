"""The operator in the test process (kopf.testing.KopfRunner) with an environment of its own,
for the e2e tests that need settings the shared ``operator`` fixture does not set."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from kopf.testing import KopfRunner

from oda_analyst.config import get_settings


@contextmanager
def operator_in_process(env: dict[str, str], namespace: str) -> Iterator[KopfRunner]:
    """Run the operator for ``namespace`` with ``env`` on top of this process's environment;
    the environment and the cached settings are restored afterwards."""
    saved = dict(os.environ)
    os.environ.update(env)
    get_settings.cache_clear()
    args = ["run", "--standalone", "--namespace", namespace,
            "-m", "oda_analyst.controller.handlers"]  # fmt: skip
    try:
        with KopfRunner(args, timeout=120) as runner:
            yield runner
    finally:
        os.environ.clear()
        os.environ.update(saved)
        get_settings.cache_clear()
    assert runner.exception is None, runner.output[-3000:]
