"""The retriever's MCP server as a real process: streamable HTTP on loopback, and stdio.

Each server is the console script (``oda-analyst mcp``) with ODA_LAKE and ODA_DATA_DIR pointing
at a generated lake and a temporary data folder, and ODA_CACHE_DIR at the catalogue's embedding
vectors (computed once, kept in pytest's cache folder) so a server only loads the model.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import polars as pl
import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
from fastmcp.exceptions import ToolError

from fixtures_embeddings import shared_cache_dir
from fixtures_lake import cli_command, tiny_power_lake
from oda_analyst.retriever.answer import AnswerPayload
from processes import stop_process

POWER_Q = "Retrieve the total power consumption for node 900 on 1 June 2022 from 00:00 to 01:00"
TEMP_Q = "the temperature of node 900 on 1 June 2022 from 00:10 to 00:20"
FLUX_Q = "the flux capacitor reading of node 900 on 1 June 2022"
STARTUP_DEADLINE_S = 120.0  # a guard against a hung start, not a speed assertion


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _cli() -> list[str]:
    return cli_command()


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_power_lake(tmp_path_factory.mktemp("lake"))


@pytest.fixture(scope="module")
def cache(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_cache_dir(request, tmp_path_factory)


@pytest.fixture
def env(lake: Path, cache: Path, tmp_path: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ODA_")}
    return {**clean, "ODA_LAKE": str(lake), "ODA_DATA_DIR": str(tmp_path / "data"),
            "ODA_CACHE_DIR": str(cache), "ODA_ROW_LIMIT": "5", "HF_HUB_OFFLINE": "1",
            "ODA_MCP_USER": "carol"}  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``oda-analyst mcp --transport http`` on a loopback port; its output goes to a log file.
    ``extra`` are more options of ``mcp`` (``--backend sota1``)."""

    def __init__(self, env: dict[str, str], log: Path, *extra: str) -> None:
        self.port = _free_port()
        self.log = log
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [*_cli(), "mcp", "--transport", "http", "--host", "127.0.0.1",
                 "--port", str(self.port), *extra],
                env=env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        self._wait_ready()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_DEADLINE_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"the MCP server exited ({self.proc.returncode}):\n{self.output()}")
            try:
                if httpx.get(f"{self.base}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.stop()
        pytest.fail(f"the MCP server did not start:\n{self.output()}")

    def client(self, user: str | None) -> Client[StreamableHttpTransport]:
        headers = {"x-oda-user": user} if user else None
        return Client(StreamableHttpTransport(f"{self.base}/mcp", headers=headers), timeout=300)

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        stop_process(self.proc, grace_s=20)


@pytest.fixture
def servers(env: dict[str, str], tmp_path: Path) -> Iterator[Any]:
    started: list[Server] = []

    def start() -> Server:
        server = Server(env, tmp_path / f"server-{len(started)}.log")
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def _payload(result: Any) -> AnswerPayload:
    return AnswerPayload.model_validate(result.structured_content)


def _lake_values(lake: Path, metric: str, start: str, end: str) -> list[np.float32]:
    files = str(lake / f"year_month=22-06/plugin=ipmi_pub/metric={metric}/*.parquet")
    df = pl.read_parquet(files, hive_partitioning=False).sort("timestamp")
    lo, hi = (pl.lit(t).str.to_datetime(time_zone="UTC") for t in (start, end))
    df = df.filter((pl.col("node").cast(pl.String) == "900") & (pl.col("timestamp") >= lo)
                   & (pl.col("timestamp") < hi))  # fmt: skip
    return [np.float32(v) for v in df["value"]]


@pytest.mark.anyio
async def test_http_query_pages_and_users(servers: Any, lake: Path) -> None:
    server = servers()
    health = httpx.get(f"{server.base}/healthz", timeout=5).json()
    assert health == {"status": "ok", "server": "oda-retriever"}
    async with server.client("alice") as alice:
        answer = _payload(await alice.call_tool("query", {"question": POWER_Q}))
        assert answer.status == "completed" and answer.rows is None and answer.csv_handle
        text, offset = "", 0
        pages = 0
        while offset is not None:
            args = {"handle": answer.csv_handle, "offset": offset, "max_bytes": 2048}
            page = (await alice.call_tool("download_csv", args)).structured_content
            text += page["text"]
            offset = page["next_offset"]
            pages += 1
    assert pages > 1
    assert answer.csv is not None and text == Path(answer.csv).read_bytes().decode()
    values = [np.float32(line.rsplit(",", 1)[1]) for line in text.splitlines()[1:]]
    assert values == _lake_values(lake, "total_power", "2022-06-01T00:00:00", "2022-06-01T01:00:00")

    async with server.client("bob") as bob:
        with pytest.raises(ToolError, match=r"^access_denied: "):
            await bob.call_tool("download_csv", {"handle": answer.csv_handle})
        with pytest.raises(ToolError, match=r"^access_denied: "):
            await bob.call_tool("status", {"request_id": answer.request_id})
    async with server.client(None) as anonymous:  # no header: the server's ODA_MCP_USER
        with pytest.raises(ToolError, match=r"^access_denied: "):
            await anonymous.call_tool("download_csv", {"handle": answer.csv_handle})


@pytest.mark.anyio
async def test_http_clarification_survives_a_server_restart(servers: Any, lake: Path) -> None:
    first = servers()
    async with first.client("alice") as client:
        asked = _payload(await client.call_tool("query", {"question": TEMP_Q}))
    assert asked.status == "clarification" and asked.clarification is not None
    assert "ambient" in {c.get("metric") for c in asked.clarification.candidates}
    first.stop()

    second = servers()
    async with second.client("alice") as client:
        args = {"request_id": asked.request_id, "answer": "ambient"}
        done = _payload(await client.call_tool("clarify", args))
        with pytest.raises(ToolError, match=r"^usage_error: .*asks no question — "):
            await client.call_tool("clarify", args)
    assert done.status == "completed" and done.request_id == asked.request_id
    assert done.csv is not None  # 30 rows > ODA_ROW_LIMIT=5
    lines = Path(done.csv).read_text().splitlines()[1:]
    got = [np.float32(line.rsplit(",", 1)[1]) for line in lines]
    assert got == _lake_values(lake, "ambient", "2022-06-01T00:10:00", "2022-06-01T00:20:00")


@pytest.mark.anyio
async def test_stdio_transport(env: dict[str, str], tmp_path: Path, lake: Path) -> None:
    cmd = _cli()
    transport = StdioTransport(command=cmd[0], args=[*cmd[1:], "mcp"], env=env,
                               log_file=tmp_path / "stdio.log")  # fmt: skip
    async with Client(transport, timeout=300) as client:
        names = {t.name for t in await client.list_tools()}
        rejected = _payload(await client.call_tool("query", {"question": FLUX_Q}))
        done = _payload(await client.call_tool("query", {"question": POWER_Q}))
        status = await client.call_tool("status", {"request_id": done.request_id})
    assert names == {"query", "clarify", "download_csv", "status", "replay"}
    assert rejected.status == "rejected" and rejected.error is not None
    expected = _lake_values(lake, "total_power", "2022-06-01T00:00:00", "2022-06-01T01:00:00")
    assert done.status == "completed" and done.row_count == len(expected) and done.csv_handle
    assert status.structured_content["stage"] == "completed"
