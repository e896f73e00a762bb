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

from codeagent_helpers import require
from oda_analyst.codeagent import mcp_server as code_server
from oda_analyst.codeagent.sessions import SessionManager
from oda_analyst.config import get_settings, load_settings
from oda_analyst.mcptools import USER_ENV
from oda_analyst.retriever import mcp_server as retriever_server

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


@pytest.fixture(scope="module")
def coordinator_wiring(
    retriever: Any, sample_lake: Path, tmp_path_factory: pytest.TempPathFactory
) -> Any:
    """The in-process MCP servers a coordinator talks to: the retriever's (serving the session's
    Retriever, so graphs and caches are shared) and the code agent's (real sandboxes), with the
    settings of a fresh data dir. Skips when no sandbox runs here. Module-scoped: the
    environment it sets is undone after the module, so other tests never see it."""

    runnable = []
    for name in ("gvisor", "bwrap"):
        try:
            runnable.append(require(name))
        except pytest.skip.Exception:
            continue
    if not runnable:
        pytest.skip("no sandbox (runsc or bwrap) runs here")
    data = tmp_path_factory.mktemp("coordinator")
    mp = pytest.MonkeyPatch()
    mp.setenv("ODA_LAKE", str(sample_lake))
    mp.setenv("ODA_DATA_DIR", str(data))
    mp.delenv("ODA_LLM_BASE_URL", raising=False)
    mp.setenv(USER_ENV, "analyst")  # the coordinator sets it for the in-process servers
    get_settings.cache_clear()
    retriever_server.set_retriever(retriever)
    code_server.set_manager(SessionManager(data / "sessions"))
    try:
        yield {"settings": load_settings(), "retriever": retriever_server.mcp,
               "codeagent": code_server.mcp}  # fmt: skip
    finally:
        retriever_server.set_retriever(None)
        code_server.set_manager(None)
        mp.undo()
        get_settings.cache_clear()
