"""Whom an in-process MCP call acts for, when one process serves several users at once.

The coordinator (and the web UI over it) calls the retriever's and the code agent's servers
in-process. It once said whom a call was for by setting ODA_MCP_USER in the process environment,
which every concurrent request shares: Bob's request could run as Alice. ``acting_as`` is a
context variable instead, inherited by the server session a request connects.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client, FastMCP

from oda_analyst.config import load_settings
from oda_analyst.coordinator.service import Coordinator
from oda_analyst.errors import UsageError
from oda_analyst.mcptools import USER_ENV, acting_as, current_user
from oda_analyst.reading.read import read_now


def whoami_server(seen: list[str], delay_s: float = 0.05) -> FastMCP:
    mcp = FastMCP("whoami")

    @mcp.tool
    async def query(question: str, as_of: str | None = None,
                    reading: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
        await asyncio.sleep(delay_s)  # both requests are in flight at once
        user = current_user()
        seen.append(user)
        return {"status": "completed", "request_id": f"r-{user}", "answer": user,
                "understood_as": "who", "columns": ["user"], "rows": [[user]], "row_count": 1,
                "results": [{"columns": ["user"], "rows": [[user]], "row_count": 1,
                             "explanation": "who", "understood_as": "who",
                             "plan": {"metrics": []}}]}  # fmt: skip

    return mcp


def test_concurrent_in_process_clients_each_act_for_their_own_user() -> None:
    seen: list[str] = []
    server = whoami_server(seen)

    async def call(user: str) -> str:
        with acting_as(user):
            async with Client(server) as client:
                result = await client.call_tool("query", {"question": "who"})
        return str(result.data["answer"])

    async def both() -> list[str]:
        return list(await asyncio.gather(call("alice"), call("bob"), call("carol")))

    assert asyncio.run(both()) == ["alice", "bob", "carol"]
    assert sorted(seen) == ["alice", "bob", "carol"]


def test_acting_as_overrides_the_environment_and_ends_with_its_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(USER_ENV, "service")
    with acting_as("alice"):
        assert current_user() == "alice"
    assert current_user() == "service"


def test_a_bad_acting_as_name_is_a_usage_error_naming_its_source() -> None:
    with acting_as("bad user!"), pytest.raises(UsageError, match="in-process caller"):
        current_user()


def test_concurrent_coordinator_requests_reach_the_retriever_as_their_own_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(USER_ENV, raising=False)
    seen: list[str] = []
    coordinator = Coordinator(
        load_settings(data_dir=tmp_path / "data"),
        retriever=whoami_server(seen),
        codeagent=FastMCP("unused-codeagent"),
        glossary={},
        reader=read_now,
    )

    async def both() -> list[Any]:
        return list(
            await asyncio.gather(
                coordinator.ask("How many nodes are there?", user="alice"),
                coordinator.ask("How many nodes are there?", user="bob"),
            )
        )

    alice, bob = asyncio.run(both())
    assert alice.rows == [["alice"]] and bob.rows == [["bob"]]
    assert sorted(seen) == ["alice", "bob"]
    assert USER_ENV not in os.environ  # the coordinator leaves the process environment alone
