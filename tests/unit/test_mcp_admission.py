"""Bounded work behind the MCP tools: a full server answers "busy … retry after N s", a call past
its time limit ends with "timeout", and a call whose client went away stops (never starts when
it was still waiting). The Retriever is a stand-in that blocks until the test lets it go, so each
state is reached by events, never by timing."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError

from oda_analyst.errors import RequestCancelledError
from oda_analyst.mcptools import USER_ENV
from oda_analyst.retriever import mcp_server
from oda_analyst.retriever.admission import Gate
from oda_analyst.retriever.answer import AnswerPayload
from oda_analyst.retriever.mcp_server import mcp
from oda_analyst.retriever.service import Retriever

GUARD_S = 60.0  # a hung test fails instead of hanging; no assertion depends on it


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class _Held(Retriever):
    """Answers each question once the test releases it; records what started and how it ended."""

    def __init__(self) -> None:  # no lake, store or checkpoints: nothing here reads data
        self.release = threading.Event()
        self.started: list[str] = []
        self.ended: list[str] = []
        self.lock = threading.Lock()
        self.first_started = threading.Event()

    def query(self, question: str, *, user: str = "anonymous", as_of: Any = None,
              progress: Any = None, reading: Any = None) -> AnswerPayload:  # fmt: skip
        with self.lock:
            self.started.append(question)
        self.first_started.set()
        assert self.release.wait(GUARD_S)
        try:
            progress("after the wait")  # the checkpoint a real request passes between stages
        except RequestCancelledError:
            with self.lock:
                self.ended.append(f"{question}: cancelled")
            raise
        with self.lock:
            self.ended.append(f"{question}: answered")
        return AnswerPayload(status="rejected", request_id=question, answer="held")


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Held]:
    monkeypatch.setenv(USER_ENV, "alice")
    retriever = _Held()
    mcp_server.set_retriever(retriever)
    yield retriever
    retriever.release.set()
    mcp_server.reset_retriever()
    mcp_server.set_gate(None)


async def _until(condition: Any) -> None:
    with anyio.fail_after(GUARD_S):
        while not condition():
            await anyio.sleep(0.01)


@pytest.mark.anyio
async def test_a_full_server_answers_busy_with_a_retry_time(held: _Held) -> None:
    gate = Gate(workers=1, queue=1, timeout_s=GUARD_S)
    mcp_server.set_gate(gate)
    answers: dict[str, Any] = {}
    async with Client(mcp) as client:

        async def ask(question: str) -> None:
            answers[question] = await client.call_tool("query", {"question": question})

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, "first")
            await _until(held.first_started.is_set)
            tg.start_soon(ask, "second")
            await _until(lambda: gate.admitted == 2)
            with pytest.raises(ToolError, match=r"^busy: .* retry after \d+ s — "):
                await client.call_tool("query", {"question": "third"})
            held.release.set()
    assert sorted(answers) == ["first", "second"]
    assert held.started == ["first", "second"]  # the refused call never started
    assert gate.admitted == 0


@pytest.mark.anyio
async def test_a_call_past_its_time_limit_is_stopped(held: _Held) -> None:
    gate = Gate(workers=1, queue=0, timeout_s=0.5)
    mcp_server.set_gate(gate)
    async with Client(mcp) as client:
        with pytest.raises(ToolError, match=r"^timeout: the query call took longer than 0.5 s"):
            await client.call_tool("query", {"question": "slow"})
        held.release.set()
        await _until(lambda: gate.admitted == 0)  # its thread ended, its slot is free again
    assert held.ended == ["slow: cancelled"]  # it stopped at its next checkpoint


@pytest.mark.anyio
async def test_a_cancelled_call_stops_and_a_waiting_one_never_starts(held: _Held) -> None:
    gate = Gate(workers=1, queue=2, timeout_s=GUARD_S)
    mcp_server.set_gate(gate)
    async with Client(mcp) as client:
        async with anyio.create_task_group() as tg:
            running, waiting = anyio.CancelScope(), anyio.CancelScope()

            async def ask(question: str, scope: anyio.CancelScope) -> None:
                with scope:
                    await client.call_tool("query", {"question": question})

            tg.start_soon(ask, "running", running)
            await _until(held.first_started.is_set)
            tg.start_soon(ask, "waiting", waiting)
            await _until(lambda: gate.admitted == 2)
            waiting.cancel()  # the client gives up on both
            running.cancel()
            await _until(lambda: gate.admitted == 1)  # the waiting call left the queue
            held.release.set()
            await _until(lambda: gate.admitted == 0)
        answer = await client.call_tool("query", {"question": "after"})  # the server still serves
    assert answer.structured_content["request_id"] == "after"
    assert held.started == ["running", "after"]
    assert held.ended == ["running: cancelled", "after: answered"]
