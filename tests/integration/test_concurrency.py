"""Concurrency on a cold process (STYLE habit 20): the validator from many threads, and the MCP
``query`` tool from many clients at once, each answer equal to the sequential one.

Cold matters: rdflib's pyparsing grammar breaks when several threads make the *first* calls of
its parse actions at once, so each run is a fresh process (``tests/concurrency_probe.py``, or a
fresh ``oda-analyst mcp`` server) whose first parses are the concurrent ones.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

PROBE = Path(__file__).resolve().parents[1] / "concurrency_probe.py"


def _probe(*args: str) -> Any:
    # One hash seed for both runs: a CONSTRUCT's implicit variables come from a set.
    env = {**os.environ, "PYTHONHASHSEED": "17"}
    done = subprocess.run([sys.executable, str(PROBE), *args], env=env, capture_output=True,
                          text=True, check=True, timeout=600)  # fmt: skip
    return json.loads(done.stdout.splitlines()[-1])


def test_validate_from_many_threads_on_a_cold_process() -> None:
    expected = _probe("sequential")
    assert expected and not [r for r in expected if "crash" in r]
    runs = _probe("threads", "--threads", "8", "--rounds", "1")
    assert len(runs) == 8
    for run in runs:
        assert run == expected
