"""The code agent's MCP tools through fastmcp's in-memory Client, with real sandboxes."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError

from codeagent_helpers import require
from oda_analyst.codeagent import mcp_server
from oda_analyst.codeagent.mcp_server import mcp
from oda_analyst.codeagent.sessions import SessionManager
from oda_analyst.mcptools import USER_ENV

TOOLS = {
    "codeagent_init",
    "codeagent_start",
    "codeagent_upload",
    "codeagent_execute",
    "codeagent_get_artifacts",
    "codeagent_stop",
}
PLOT = """
import pandas as pd, matplotlib.pyplot as plt
df = pd.read_csv('/in/data.csv')
print(df['value'].sum())
df.plot(x='t', y='value', title='test').get_figure().savefig('/out/plot.png')
df.describe().to_csv('/out/describe.csv')
"""


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def manager(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SessionManager]:
    monkeypatch.setenv(USER_ENV, "alice")
    sessions = SessionManager(tmp_path / "sessions", idle_s=60, clock=clock)
    mcp_server.set_manager(sessions)
    yield sessions
    mcp_server.set_manager(None)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def _session(client: Client, backend: str = "auto") -> dict[str, Any]:
    await client.call_tool("codeagent_init", {"backend": backend})
    started = await client.call_tool("codeagent_start", {})
    assert started.structured_content is not None
    return started.structured_content


@pytest.mark.anyio
async def test_tools_have_the_papers_names_and_typed_schemas() -> None:
    async with Client(mcp) as client:
        tools = {t.name: t for t in await client.list_tools()}
    assert set(tools) == TOOLS
    status = tools["codeagent_execute"].output_schema["properties"]["status"]
    assert set(status["enum"]) == {"ok", "refused", "error", "timeout", "killed"}
    assert tools["codeagent_upload"].input_schema["required"] == ["name", "content_base64"]


@pytest.mark.anyio
async def test_lifecycle_upload_execute_and_a_png_as_image(manager: SessionManager) -> None:
    require("gvisor")
    csv = b"t,value\n0,1.5\n1,2.5\n2,4\n"
    async with Client(mcp) as client:
        started = await _session(client)
        assert started["state"] == "started" and started["backend"] == "gvisor"
        up = await client.call_tool(
            "codeagent_upload", {"name": "data.csv", "content_base64": _b64(csv)}
        )
        assert up.structured_content == {
            "name": "data.csv",
            "bytes": len(csv),
            "path_in_sandbox": "/in/data.csv",
        }
        run = (await client.call_tool("codeagent_execute", {"code": PLOT})).structured_content
        assert run["status"] == "ok", run["stderr"]
        assert run["stdout"].strip() == "8.0" and run["backend"] == "gvisor"
        assert sorted(f["name"] for f in run["files"]) == ["describe.csv", "plot.png"]
        arts = await client.call_tool(
            "codeagent_get_artifacts", {"names": ["plot.png", "describe.csv"]}
        )
        image, text = arts.content
        assert image.type == "image" and image.mime_type == "image/png"
        assert base64.b64decode(image.data)[:8] == b"\x89PNG\r\n\x1a\n"
        assert text.type == "text" and text.text.startswith("describe.csv:\n,t,value")
        stopped = await client.call_tool("codeagent_stop", {})
        assert stopped.structured_content == {"stopped": True}
        with pytest.raises(ToolError, match="no_session"):
            await client.call_tool("codeagent_execute", {"code": "print(1)"})
    assert manager.users() == []


@pytest.mark.anyio
async def test_refused_code_comes_back_with_findings(manager: SessionManager) -> None:
    require("bwrap")
    async with Client(mcp) as client:
        await _session(client, backend="bwrap")
        run = (
            await client.call_tool("codeagent_execute", {"code": "import socket\nsocket.socket()"})
        ).structured_content
    assert run["status"] == "refused" and run["exit_code"] is None
    assert run["audit"][0]["severity"] == "high" and "network" in run["audit"][0]["message"]


@pytest.mark.anyio
async def test_one_user_never_sees_another_users_files(
    manager: SessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    require("bwrap")
    async with Client(mcp) as client:
        await _session(client, backend="bwrap")
        await client.call_tool(
            "codeagent_upload", {"name": "alice.csv", "content_base64": _b64(b"secret\n")}
        )
        await client.call_tool(
            "codeagent_execute", {"code": "open('/out/alice.txt', 'w').write('mine')"}
        )
        monkeypatch.setenv(USER_ENV, "bob")
        with pytest.raises(ToolError, match="no_session"):
            await client.call_tool("codeagent_get_artifacts", {"names": ["alice.txt"]})
        bob = await _session(client, backend="bwrap")
        assert bob["user"] == "bob" and bob["inputs"] == [] and bob["outputs"] == []
        run = (
            await client.call_tool(
                "codeagent_execute",
                {"code": "import os\nprint(sorted(os.listdir('/in')), sorted(os.listdir('/out')))"},
            )
        ).structured_content
        assert run["stdout"].strip() == "[] []"
        with pytest.raises(ToolError, match=r"no file 'alice\.txt'"):
            await client.call_tool("codeagent_get_artifacts", {"names": ["alice.txt"]})
        monkeypatch.setenv(USER_ENV, "alice")
        mine = await client.call_tool("codeagent_get_artifacts", {"names": ["alice.txt"]})
        assert mine.content[0].text == "alice.txt:\nmine"


@pytest.mark.anyio
async def test_idle_sessions_are_reaped(manager: SessionManager, clock: Clock) -> None:
    async with Client(mcp) as client:
        await client.call_tool("codeagent_init", {})
        folder = manager.root / "alice"
        assert folder.is_dir()
        clock.now += 61
        assert manager.reap_idle() == ["alice"]
        assert not folder.exists()
        with pytest.raises(ToolError, match=r"no_session.*reaped"):
            await client.call_tool("codeagent_upload", {"name": "d.csv", "content_base64": ""})


@pytest.mark.anyio
async def test_bad_uploads_are_usage_errors(manager: SessionManager) -> None:
    async with Client(mcp) as client:
        await client.call_tool("codeagent_init", {})
        with pytest.raises(ToolError, match=r"invalid file name"):
            await client.call_tool(
                "codeagent_upload", {"name": "../x.csv", "content_base64": _b64(b"x")}
            )
        with pytest.raises(ToolError, match="not valid base64"):
            await client.call_tool("codeagent_upload", {"name": "x.csv", "content_base64": "%%%"})
        with pytest.raises(ToolError, match="not started"):
            await client.call_tool("codeagent_execute", {"code": "print(1)"})


def test_the_reaper_thread_ends_abandoned_sessions(manager: SessionManager, clock: Clock) -> None:
    manager.init("carol")
    clock.now += 61
    manager.start_reaper(every_s=0.01)
    try:
        for _ in range(2000):  # bounded wait for the thread's next pass; no timing asserted
            if not manager.users() and not (manager.root / "carol").exists():
                break
            threading.Event().wait(0.01)
        assert manager.users() == []
        assert not (manager.root / "carol").exists()
    finally:
        manager.stop_reaper()


@pytest.mark.anyio
async def test_two_requests_of_one_user_have_their_own_sessions(manager: SessionManager) -> None:
    """Two requests of alice at once each upload 'r1.csv' and read it back: each sees its own
    (one shared session let the second upload replace the first's input before it ran)."""
    backend = require("gvisor")
    read = "print(open('/in/r1.csv').read().strip())\nopen('/out/figures.json', 'w').write('{}')"
    async with Client(mcp) as client:
        for name, content in (("req-a", b"first"), ("req-b", b"second")):
            await client.call_tool("codeagent_init", {"backend": backend, "session": name})
            await client.call_tool("codeagent_start", {"session": name})
            upload = {"name": "r1.csv", "session": name, "content_base64": _b64(content)}
            await client.call_tool("codeagent_upload", upload)
        runs = {}
        for name in ("req-a", "req-b"):
            got = await client.call_tool("codeagent_execute", {"code": read, "session": name})
            assert got.structured_content is not None
            runs[name] = got.structured_content["stdout"].strip()
        assert runs == {"req-a": "first", "req-b": "second"}
        assert sorted(manager.users()) == ["alice+req-a", "alice+req-b"]
        await client.call_tool("codeagent_stop", {"session": "req-a"})
        # the other request's session, folders and sandbox are untouched
        again = await client.call_tool("codeagent_execute", {"code": read, "session": "req-b"})
        assert again.structured_content is not None
        assert again.structured_content["stdout"].strip() == "second"
        with pytest.raises(ToolError, match="no_session"):
            await client.call_tool("codeagent_execute", {"code": read, "session": "req-a"})
        with pytest.raises(ToolError):  # a session name is a plain name, never a path
            await client.call_tool("codeagent_init", {"session": "../bob"})
    assert not (manager.root / "alice+req-a").exists() and (manager.root / "alice+req-b").is_dir()
