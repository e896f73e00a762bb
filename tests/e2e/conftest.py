"""Session fixtures of the retrieval e2e tests: the `sample` lake, the job table, a Retriever.

The lake is generated once into a cache folder outside the repo (``$ODA_E2E_CACHE`` or
``~/.cache/oda-analyst/e2e/sample-<hash>``), keyed by the hash of the generator's sources
(``operator/oda_analyst/lake/synth/*.py``), so CI regenerates it when the generator changes and
reuses it otherwise (``bench/retrieval_eval.py: sample_lake``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "bench") not in sys.path:
    sys.path.insert(0, str(REPO / "bench"))

import retrieval_eval  # noqa: E402
from devset import oracle  # noqa: E402


@pytest.fixture(scope="session")
def sample_lake() -> Path:
    return retrieval_eval.sample_lake()


@pytest.fixture(scope="session")
def job_table(sample_lake: Path) -> pl.DataFrame:
    """The job table deduplicated by the oracle (one row per job), read once."""
    return oracle.jobs(sample_lake)


@pytest.fixture(scope="session")
def retriever(sample_lake: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A Retriever with no model, on the default embedded stores in a temporary data dir."""
    return retrieval_eval.make_retriever(sample_lake, tmp_path_factory.mktemp("oda-data"))


@pytest.fixture(scope="session")
def items() -> dict[str, retrieval_eval.Item]:
    return {i.id: i for i in retrieval_eval.load_items()}
