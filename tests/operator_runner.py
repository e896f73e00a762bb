"""The operator in the test process (kopf.testing.KopfRunner) with an environment of its own,
for the e2e tests that need settings the shared ``operator`` fixture does not set. The pipeline
runs where the chart runs it, in an analyst process of its own with the same environment
(``analyst_runner``), which the operator reaches over HTTP."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kopf.testing import KopfRunner

from analyst_runner import analyst_process
from oda_analyst.config import get_settings


@contextmanager
def operator_in_process(env: dict[str, str], namespace: str) -> Iterator[KopfRunner]:
    """Run the operator for ``namespace`` with ``env`` on top of this process's environment,
    and its analyst with the same; the environment and the cached settings are restored
    afterwards."""
    saved = dict(os.environ)
    log = Path(tempfile.mkdtemp(prefix="oda-analyst-")) / "analyst.log"
    with analyst_process({**saved, **env}, log) as url:
        os.environ.update(env)
        os.environ["ODA_OPERATOR_PIPELINE_URL"] = url
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
