"""Concurrency on a cold process (STYLE habit 20): the validator from many threads, and the MCP
``query`` tool from many clients at once, each answer equal to the sequential one.

Cold matters: rdflib's pyparsing grammar breaks when several threads make the *first* calls of
its parse actions at once, so each run is a fresh process (``tests/concurrency_probe.py``, or a
fresh ``oda-analyst mcp`` server) whose first parses are the concurrent ones.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport

from fixtures_embeddings import shared_cache_dir
from fixtures_lake import cli_command, tiny_power_lake
from oda_analyst.retriever.answer import AnswerPayload
from processes import stop_process

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


# --- the MCP query tool from many clients on a cold server ---------------------------------------

QUESTIONS = (
    "Retrieve the total power consumption for node 900 on 1 June 2022 from 00:00 to 01:00",
    "the temperature of node 900 on 1 June 2022 from 00:10 to 00:20",  # a clarification
    "the flux capacitor reading of node 900 on 1 June 2022",  # rejected
    "the average ambient temperature of node 900 on 1 June 2022 from 00:00 to 06:00",
)
STARTUP_DEADLINE_S = 180.0  # a guard against a hung start, not a speed assertion
LOOPBACK = "127.0.0.1"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_power_lake(tmp_path_factory.mktemp("lake"))


@pytest.fixture
def server(
    lake: Path, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
    tmp_path: Path,
) -> Iterator[str]:  # fmt: skip
    """A fresh ``oda-analyst mcp`` HTTP server on loopback; yields its base URL."""
    cache = shared_cache_dir(request, tmp_path_factory)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ODA_")}
    env = {**clean, "ODA_LAKE": str(lake), "ODA_DATA_DIR": str(tmp_path / "data"),
           "ODA_CACHE_DIR": str(cache), "ODA_ROW_LIMIT": "5", "HF_HUB_OFFLINE": "1",
           "ODA_MCP_MAX_CONCURRENT": "12"}  # all at once: the parser is what is tested  # fmt: skip
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        port = int(sock.getsockname()[1])
    log = tmp_path / "server.log"
    with log.open("ab") as out:
        proc = subprocess.Popen([*cli_command(), "mcp", "--transport", "http", "--host",
                                 LOOPBACK, "--port", str(port)], env=env, stdout=out,
                                stderr=subprocess.STDOUT)  # fmt: skip
    base = f"http://{LOOPBACK}:{port}"

    def ready() -> bool:
        try:
            return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        deadline = time.monotonic() + STARTUP_DEADLINE_S
        while not ready():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the MCP server did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        yield base
    finally:
        stop_process(proc, grace_s=20)


def _answer(result: Any) -> tuple[Any, ...]:
    """What two answers to one question share (no request id, paths or timings)."""
    a = AnswerPayload.model_validate(result.structured_content)
    csv = Path(a.csv).read_bytes() if a.csv else None
    return (a.status, a.columns, a.rows, a.row_count, a.sparql,
            (a.error or {}).get("code"), csv)  # fmt: skip


@pytest.mark.anyio
async def test_query_from_many_clients_on_a_cold_server(server: str) -> None:
    def client() -> Client[StreamableHttpTransport]:
        return Client(StreamableHttpTransport(f"{server}/mcp"), timeout=300)

    asked = [QUESTIONS[i % len(QUESTIONS)] for i in range(12)]

    async def ask(question: str) -> tuple[Any, ...]:
        async with client() as c:
            return _answer(await c.call_tool("query", {"question": question}))

    burst = await asyncio.gather(*(ask(q) for q in asked), return_exceptions=True)
    async with client() as c:
        sequential = {q: _answer(await c.call_tool("query", {"question": q})) for q in QUESTIONS}
    assert {s[0] for s in sequential.values()} == {"completed", "clarification", "rejected"}
    for question, got in zip(asked, burst, strict=True):
        assert got == sequential[question]
