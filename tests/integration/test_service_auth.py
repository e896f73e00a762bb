"""Every internal HTTP service of a release refuses a caller without the release's token.

Real servers on loopback: ``oda-analyst serve`` (the retriever's and the code agent's MCP
servers), ``oda-analyst mcp --backend sota1`` (a baseline's server, same guard) and the
operator's alert receiver (uvicorn, as the operator runs it). A caller that merely says who it is
(an ``x-oda-user`` header, a proxy's identity headers, a wrong token) is refused with 401
before any tool runs; the coordinator's own client (``mcptools.call_headers``) gets through; a
server asked to listen beyond loopback without a token does not start.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport

from alerting import free_port
from fixtures_lake import cli_command
from oda_analyst.config import get_settings
from oda_analyst.controller.alert_receiver import Receiver, build_app, rate_limit, start
from oda_analyst.controller.alerts import load_templates
from oda_analyst.mcptools import call_headers
from processes import stop_process

pytestmark = pytest.mark.integration

TOKEN = "release-token-" + "x" * 32
# What a pod that copied the release's labels (so a NetworkPolicy lets it through, as loopback
# lets these tests through) can send: nothing, the user header, the identity headers an
# authenticating proxy would set, a guessed token, the token under another scheme.
# fmt: off
SPOOFS: list[dict[str, str]] = [
    {},
    {"x-oda-user": "alice"},
    {"x-oda-user": "alice", "x-forwarded-user": "admin", "x-remote-user": "admin",
     "x-remote-group": "system:masters"},
    {"authorization": "Bearer not-the-token", "x-oda-user": "alice"},
    {"authorization": f"Basic {TOKEN}"},
]
# fmt: on


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ODA_")}
    return {**clean, "ODA_DATA_DIR": str(tmp_path / "data"), "ODA_LAKE": str(tmp_path / "lake"),
            "HF_HUB_OFFLINE": "1", **extra}  # fmt: skip


def _wait_up(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the server exited ({proc.returncode}): {log.read_text()[-3000:]}")
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.3)
    pytest.fail(f"no answer at {url}: {log.read_text()[-3000:]}")


@pytest.fixture
def analyst(tmp_path: Path) -> Iterator[dict[str, str]]:
    """``oda-analyst serve`` with the release's token; the URLs of its two MCP servers."""
    ports = {"retriever": free_port(), "codeagent": free_port(), "metrics": free_port()}
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*cli_command(), "serve", "--host", "127.0.0.1",
             "--retriever-port", str(ports["retriever"]),
             "--codeagent-port", str(ports["codeagent"]), "--metrics-port", str(ports["metrics"])],
            env=_env(tmp_path, ODA_MCP_TOKEN=TOKEN), stdout=out,
            stderr=subprocess.STDOUT)  # fmt: skip
    try:
        _wait_up(proc, f"http://127.0.0.1:{ports['retriever']}/healthz", log)
        _wait_up(proc, f"http://127.0.0.1:{ports['codeagent']}/mcp", log)
        yield {name: f"http://127.0.0.1:{ports[name]}/mcp" for name in ("retriever", "codeagent")}
    finally:
        stop_process(proc)


def _mcp_initialize(url: str, headers: dict[str, str]) -> httpx.Response:
    """The first request any MCP client sends, with these headers."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "spoof", "version": "1"}}}  # fmt: skip
    return httpx.post(url, json=body, timeout=30, headers={
        "accept": "application/json, text/event-stream", **headers})  # fmt: skip


def _refused(response: httpx.Response) -> None:
    assert response.status_code == 401, (response.status_code, response.text[:500])
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.json()["error"] == "unauthenticated"


def test_mcp_servers_refuse_callers_without_the_token(analyst: dict[str, str]) -> None:
    for url in analyst.values():
        for headers in SPOOFS:
            _refused(_mcp_initialize(url, headers))
        # the probes' route says only that the server is up
        assert httpx.get(url.replace("/mcp", "/healthz"), timeout=5).status_code in {200, 404}
        assert _mcp_initialize(url, {"authorization": f"Bearer {TOKEN}"}).status_code == 200


@pytest.mark.anyio
async def test_the_coordinators_client_sends_the_token(
    analyst: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ODA_MCP_TOKEN", TOKEN)
    get_settings.cache_clear()
    try:
        tools = {analyst["retriever"]: "query", analyst["codeagent"]: "codeagent_init"}
        for url, tool in tools.items():
            async with Client(StreamableHttpTransport(url, headers=call_headers("alice"))) as c:
                assert tool in {t.name for t in await c.list_tools()}
    finally:
        get_settings.cache_clear()


def test_a_baseline_server_refuses_callers_without_the_token(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "sota1.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*cli_command(), "mcp", "--backend", "sota1", "--transport", "http",
             "--host", "127.0.0.1", "--port", str(port)],
            env=_env(tmp_path, ODA_MCP_TOKEN=TOKEN), stdout=out,
            stderr=subprocess.STDOUT)  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        _wait_up(proc, url, log)
        for headers in SPOOFS:
            _refused(_mcp_initialize(url, headers))
        assert _mcp_initialize(url, {"authorization": f"Bearer {TOKEN}"}).status_code == 200
    finally:
        stop_process(proc)


def test_no_server_listens_beyond_loopback_without_a_token(tmp_path: Path) -> None:
    """An install that forgot the token fails at start with what to set, never serves open."""
    ports = [str(free_port()) for _ in range(3)]
    done = subprocess.run(
        [*cli_command(), "serve", "--host", "0.0.0.0", "--retriever-port", ports[0],
         "--codeagent-port", ports[1], "--metrics-port", ports[2]],
        env=_env(tmp_path), capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode != 0, done.stdout[-2000:]
    assert "ODA_MCP_TOKEN" in done.stderr, done.stderr[-2000:]


class _Created:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    async def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        self.bodies.append(body)
        return {**body, "metadata": {**body["metadata"], "uid": "u1"}}


TEMPLATES = Path(__file__).resolve().parents[2] / "charts/oda-analyst/files/alert-templates.yaml"
FIRING = {"version": "4", "status": "firing", "receiver": "oda", "alerts": [{
    "status": "firing", "labels": {"alertname": "NodePowerSpike", "node": "900"},
    "annotations": {}, "startsAt": "2022-06-01T10:00:00Z", "fingerprint": "f1"}]}  # fmt: skip


@pytest.mark.anyio
async def test_the_alert_receiver_refuses_callers_without_the_token() -> None:
    created = _Created()
    receiver = Receiver(templates=load_templates(TEMPLATES), create=created, namespace="ops",
                        user="oncall", limit=rate_limit(60))  # fmt: skip
    port = free_port()
    running = start(build_app(receiver, token=TOKEN), "127.0.0.1", port)
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=base, timeout=10) as http:
            for _ in range(100):
                try:
                    if (await http.get("/healthz")).status_code == 200:
                        break
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
            for headers in SPOOFS:
                _refused(await http.post("/alerts", json=FIRING, headers=headers))
            assert created.bodies == []  # nothing reached the API server
            ok = await http.post("/alerts", json=FIRING,
                                 headers={"authorization": f"Bearer {TOKEN}"})  # fmt: skip
            assert ok.status_code == 200, ok.text
            assert len(created.bodies) == 1
    finally:
        await running.stop()
