"""`oda-analyst serve` as a real process, and the coordinator talking to it over HTTP.

The served process holds both MCP servers (streamable HTTP) and the Prometheus endpoint; the
coordinator in this process reaches them only by URL (ODA_RETRIEVER_MCP_URL and
ODA_CODEAGENT_MCP_URL), the user travelling in the x-oda-user header. Expected rows are read
from the lake's Parquet files with Polars.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import polars as pl
import pytest

from codeagent_helpers import png_size, require
from fixtures_embeddings import shared_cache_dir
from fixtures_lake import cli_command, tiny_power_lake
from oda_analyst import analyst
from oda_analyst.codeagent import pyenv
from oda_analyst.config import load_settings
from processes import stop_process

pytestmark = pytest.mark.integration
STARTUP_DEADLINE_S = 180.0  # a guard against a hung start, not a speed assertion
QUESTION = ("Retrieve the total power consumption for node 900 on 1 June 2022 from 00:00 to "
            "01:00 and plot the time series")  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_power_lake(tmp_path_factory.mktemp("lake"))


@pytest.fixture(scope="module")
def served(
    lake: Path, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, int]]:
    cache = shared_cache_dir(request, tmp_path_factory)
    data = tmp_path_factory.mktemp("served")
    ports = {"retriever": _free_port(), "codeagent": _free_port(), "metrics": _free_port()}
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ODA_")}
    # The sandbox's Python environment is where this process finds it (ODA_CACHE), while the
    # embedding vectors come from the shared test cache (ODA_CACHE_DIR).
    env = {**clean, "ODA_LAKE": str(lake), "ODA_DATA_DIR": str(data), "ODA_CACHE_DIR": str(cache),
           "ODA_CACHE": str(pyenv.default_cache()), "HF_HUB_OFFLINE": "1"}  # fmt: skip
    log = data / "serve.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [*cli_command(), "serve", "--host", "127.0.0.1",
             "--retriever-port", str(ports["retriever"]),
             "--codeagent-port", str(ports["codeagent"]),
             "--metrics-port", str(ports["metrics"])],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    deadline = time.monotonic() + STARTUP_DEADLINE_S
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"serve exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
            try:
                ok = httpx.get(f"http://127.0.0.1:{ports['retriever']}/healthz", timeout=2)
                httpx.get(f"http://127.0.0.1:{ports['codeagent']}/mcp", timeout=2)
                if ok.status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"serve did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.3)
        yield ports
    finally:
        stop_process(proc, grace_s=20)


def test_metrics_endpoint_serves_the_default_registry(served: dict[str, int]) -> None:
    reply = httpx.get(f"http://127.0.0.1:{served['metrics']}/metrics", timeout=10)
    assert reply.status_code == 200
    assert "text/plain" in reply.headers["content-type"]
    assert "python_info" in reply.text  # prometheus_client's default collectors


def test_coordinator_over_http_retrieves_and_charts(
    served: dict[str, int], lake: Path, tmp_path: Path
) -> None:
    _any_sandbox()
    settings = load_settings(
        data_dir=tmp_path / "client",
        retriever_mcp_url=f"http://127.0.0.1:{served['retriever']}/mcp",
        codeagent_mcp_url=f"http://127.0.0.1:{served['codeagent']}/mcp",
    )
    coordinator = analyst.build_coordinator(settings)
    assert coordinator.targets["retriever"] == settings.retriever_mcp_url  # no in-process server
    answer = asyncio.run(coordinator.ask(QUESTION, user="dora", out_dir=tmp_path / "out"))
    assert answer.status == "completed", (answer.summary, answer.error)
    files = str(lake / "year_month=22-06/plugin=ipmi_pub/metric=total_power/*.parquet")
    lo, hi = (pl.lit(t).str.to_datetime(time_zone="UTC")
              for t in ("2022-06-01T00:00:00", "2022-06-01T01:00:00"))  # fmt: skip
    expected = (
        pl.read_parquet(files, hive_partitioning=False)
        .filter((pl.col("node").cast(pl.String) == "900") & (pl.col("timestamp") >= lo)
                & (pl.col("timestamp") < hi))
        .sort("timestamp")["value"]
    )  # fmt: skip
    assert answer.rows is not None
    assert [np.float32(r[-1]) for r in answer.rows] == [np.float32(v) for v in expected]
    charts = [a for a in answer.artifacts if a.media_type == "image/png"]
    assert len(charts) == 1 and png_size(Path(charts[0].path)) == (1200, 660)
    assert answer.dispatches["codeagent.upload"] == 1


def _any_sandbox() -> None:
    for name in ("gvisor", "bwrap"):
        try:
            require(name)
            return
        except pytest.skip.Exception:
            continue
    pytest.skip("no sandbox (runsc or bwrap) runs here")
