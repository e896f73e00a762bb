"""The paper's baselines served on their own: ``oda-analyst mcp --backend sota1|sota2 --transport
http`` (and ``serve --backend``) as a real process on loopback, queried with the fastmcp client,
and the coordinator
(``ask --backend``) retrieving through such a server by URL (ODA_SOTA1_MCP_URL,
ODA_SOTA2_MCP_URL) — and refusing a URL that reaches another backend's server."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import polars as pl
import pytest
from click.testing import CliRunner
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp.exceptions import ToolError
from test_mcp_http import Server, _free_port

from baseline_lake import write_baseline_lake
from fixtures_lake import cli_command
from oda_analyst.baselines.payload import BaselineAnswer
from oda_analyst.cli import main
from processes import stop_process

SOTA1_Q = "total_power of node 900 from [2022-06-01 00:00:00] to [2022-06-01 00:10:00]"
PLAIN_Q = "total power of node 900 on 1 June 2022 from 00:00 to 00:10"
USER = "carol"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_baseline_lake(tmp_path_factory.mktemp("lake"))


@pytest.fixture
def env(lake: Path, tmp_path: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ODA_")}
    return {**clean, "ODA_LAKE": str(lake), "ODA_DATA_DIR": str(tmp_path / "server-data"),
            "ODA_ROW_LIMIT": "5", "ODA_MCP_USER": "nobody"}  # fmt: skip


@pytest.fixture
def serve(env: dict[str, str], tmp_path: Path) -> Iterator[Any]:
    started: list[Server] = []

    def start(backend: str) -> Server:
        server = Server(env, tmp_path / f"{backend}-{len(started)}.log", "--backend", backend)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def _power(lake: Path, start: str, end: str) -> list[float]:
    """Node 900's total_power in [start, end), read from the lake's files with Polars."""
    files = str(lake / "year_month=22-06/plugin=ipmi_pub/metric=total_power/*.parquet")
    df = pl.read_parquet(files, hive_partitioning=False).sort("timestamp")
    lo, hi = (pl.lit(t).str.to_datetime(time_zone="UTC") for t in (start, end))
    df = df.filter((pl.col("node").cast(pl.String) == "900") & (pl.col("timestamp") >= lo)
                   & (pl.col("timestamp") < hi))  # fmt: skip
    return [float(v) for v in df["value"]]


def _values(columns: list[str], rows: list[list[Any]]) -> list[float]:
    i = columns.index("value")
    return [float(r[i]) for r in rows]


def _answer(result: Any) -> BaselineAnswer:
    return BaselineAnswer.model_validate(result.structured_content)


@pytest.mark.anyio
async def test_sota1_served_over_http(serve: Any, lake: Path) -> None:
    server = serve("sota1")
    async with server.client(USER) as client:
        assert client.server_info is not None
        name = client.server_info.name
        tools = {t.name for t in await client.list_tools()}
        done = _answer(await client.call_tool("query", {"question": SOTA1_Q}))
        refused = _answer(await client.call_tool("query", {"question": PLAIN_Q}))
        assert done.csv_handle  # 30 rows beyond ODA_ROW_LIMIT=5: a CSV, paged over MCP
        page = await client.call_tool("download_csv", {"handle": done.csv_handle})
        status = await client.call_tool("status", {"request_id": done.request_id})
        with pytest.raises(ToolError, match="has no clarification"):
            await client.call_tool("clarify", {"request_id": done.request_id, "answer": "x"})
    async with server.client("mallory") as other:
        with pytest.raises(ToolError, match="no request"):
            await other.call_tool("status", {"request_id": done.request_id})
    assert name == "oda-sota1-exasage"
    assert tools == {"query", "clarify", "download_csv", "status", "replay"}
    assert done.status == "completed" and done.backend == "sota1"
    text = str(page.structured_content["text"])
    frame = pl.read_csv(text.encode())
    want = _power(lake, "2022-06-01T00:00:00", "2022-06-01T00:10:00")
    assert len(want) == 30 and done.row_count == 30
    assert [round(v, 3) for v in frame["value"].to_list()] == [round(v, 3) for v in want]
    assert refused.status == "rejected"  # not [YYYY-MM-DD HH:MM:SS]: SoTA#1 fails at once
    assert status.structured_content["status"] == "completed"


@pytest.mark.anyio
async def test_sota2_served_over_http_with_its_datalake_api(serve: Any, lake: Path) -> None:
    server = serve("sota2")
    async with server.client(USER) as client:
        tools = {t.name for t in await client.list_tools()}
        plugins = (await client.call_tool("list_plugins", {})).structured_content
        metrics = (await client.call_tool("list_metrics", {"plugin": "ipmi"})).structured_content
        raw = await client.call_tool("run_query", {
            "plugin": "ipmi", "metric": "total_power", "nodes": [900],
            "start": "2022-06-01T00:00:00Z", "end": "2022-06-01T00:10:00Z"})  # fmt: skip
        done = _answer(await client.call_tool("query", {"question": PLAIN_Q}))
    assert {"list_plugins", "list_metrics", "describe_metric", "run_query", "query"} <= tools
    assert "ipmi" in plugins["result"] and "total_power" in metrics["result"]
    want = _power(lake, "2022-06-01T00:00:00", "2022-06-01T00:10:00")
    got = raw.structured_content
    assert got["row_count"] == len(want) == 30
    assert sorted(_values(got["columns"], got["rows"])) == pytest.approx(sorted(want), rel=1e-6)
    assert done.status == "completed" and done.backend == "sota2" and done.csv is None
    assert done.rows is not None and done.columns is not None
    assert sorted(_values(done.columns, done.rows)) == pytest.approx(sorted(want), rel=1e-6)


def _ask(env: dict[str, str], data: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    run_env = {**env, "ODA_DATA_DIR": str(data)}
    result = CliRunner().invoke(main, ["ask", *args, "--json", "--quiet", "--user", USER],
                                env=run_env)  # fmt: skip
    body = json.loads(result.stdout) if result.stdout.strip().startswith("{") else {}
    return result.exit_code, body, result.output


async def _status(server: Server, request_id: str) -> dict[str, Any]:
    async with server.client(USER) as client:
        result = await client.call_tool("status", {"request_id": request_id})
    return dict(result.structured_content or {})


def test_the_coordinator_retrieves_through_a_baseline_served_by_url(
    serve: Any, env: dict[str, str], tmp_path: Path
) -> None:
    """Not an async test: ``ask`` runs its own event loop, as on the command line."""
    server = serve("sota1")
    url = f"{server.base}/mcp"
    local = {k: v for k, v in env.items() if k != "ODA_ROW_LIMIT"}
    code, answer, output = _ask({**local, "ODA_SOTA1_MCP_URL": url}, tmp_path / "client",
                                "--backend", "sota1", SOTA1_Q)  # fmt: skip
    assert code == 0, output
    assert answer["backend"] == "sota1" and answer["row_count"] == 30
    # The retrieval happened in the server process: it knows the request, for this user.
    status = asyncio.run(_status(server, str(answer["retrieval_request_id"])))
    assert status["backend"] == "sota1" and status["status"] == "completed"
    # A URL that reaches another backend's server is refused before any question is sent.
    for variable, backend in (("ODA_RETRIEVER_MCP_URL", "nsa"), ("ODA_SOTA2_MCP_URL", "sota2")):
        code, _, output = _ask({**local, variable: url}, tmp_path / backend, "--backend",
                               backend, SOTA1_Q)  # fmt: skip
        assert code == 2, output
        assert "'oda-sota1-exasage'" in output and f"--backend {backend}" in output


@pytest.mark.anyio
async def test_serve_puts_a_baseline_on_the_retriever_port(
    env: dict[str, str], lake: Path, tmp_path: Path
) -> None:
    ports = [_free_port() for _ in range(3)]
    log = tmp_path / "serve.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [*cli_command(), "serve", "--backend", "sota2", "--host", "127.0.0.1",
             "--retriever-port", str(ports[0]), "--codeagent-port", str(ports[1]),
             "--metrics-port", str(ports[2])],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        health = _wait_healthy(proc, f"http://127.0.0.1:{ports[0]}/healthz", log)
        transport = StreamableHttpTransport(
            f"http://127.0.0.1:{ports[0]}/mcp", headers={"x-oda-user": USER}
        )
        async with Client(transport) as client:
            done = _answer(await client.call_tool("query", {"question": PLAIN_Q}))
    finally:
        stop_process(proc, grace_s=20)
    assert health["server"] == "oda-sota2-datalake"
    assert done.backend == "sota2" and done.rows is not None and done.columns is not None
    want = _power(lake, "2022-06-01T00:00:00", "2022-06-01T00:10:00")
    assert sorted(_values(done.columns, done.rows)) == pytest.approx(sorted(want), rel=1e-6)


def _wait_healthy(proc: subprocess.Popen[bytes], url: str, log: Path) -> dict[str, Any]:
    deadline = time.monotonic() + 120.0  # a guard against a hung start, not a speed assertion
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"serve exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            reply = httpx.get(url, timeout=2)
            if reply.status_code == 200:
                return dict(reply.json())
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    pytest.fail(f"serve did not start:\n{log.read_text()[-3000:]}")
