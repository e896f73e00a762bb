"""The coordinator's control flow against scripted MCP servers (in-memory fastmcp transport).

The servers are scripted, not models of the subagents: each tool replays the answers a test
gives and records what it was sent, so the tests can hold the coordinator to its contract —
refine a refused request once, retry a busy server within the bound, stop at the dispatch bound,
pass a retriever's clarification to the user and resume it after a restart, keep a bounded
window of turns. The real subagents run in tests/e2e/test_coordinator_appendix_a.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from oda_analyst.config import load_settings
from oda_analyst.coordinator import graph
from oda_analyst.coordinator import state as coordinator_state
from oda_analyst.coordinator.service import Coordinator
from oda_analyst.errors import UsageError
from oda_analyst.mcptools import USER_ENV
from oda_analyst.reading.model import Reading
from oda_analyst.reading.read import read_now

Q2 = ("Retrieve the total power consumption for node 900 from 1 June 2022 20:00 to 23:59 and "
      "plot the time series.")  # fmt: skip


def completed(rows: int = 1) -> dict[str, Any]:
    return {"status": "completed", "request_id": "r-1", "answer": "Total: 1 row.",
            "understood_as": "How many compute nodes M100 has.", "columns": ["count_node"],
            "rows": [[980]], "row_count": rows,
            "results": [{"columns": ["count_node"], "rows": [[980]], "row_count": rows,
                         "explanation": "count", "understood_as": "How many nodes.",
                         "plan": {"metrics": []}}]}  # fmt: skip


def rejected(text: str) -> dict[str, Any]:
    return {"status": "rejected", "request_id": "r-2", "answer": text,
            "error": {"code": "rejected", "message": text, "hint": "rephrase"}}  # fmt: skip


class Script:
    """Replies per tool, in order; every call recorded as (tool, arguments)."""

    def __init__(self) -> None:
        self.replies: dict[str, list[Any]] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def next(self, tool: str, args: dict[str, Any]) -> Any:
        self.calls.append((tool, args))
        reply = self.replies[tool].pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


def retriever_server(script: Script) -> FastMCP:
    mcp = FastMCP("scripted-retriever")

    @mcp.tool
    async def query(question: str, as_of: str | None = None,
                    reading: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
        reply: dict[str, Any] = script.next(
            "query", {"question": question, "as_of": as_of, "reading": reading}
        )
        return reply

    @mcp.tool
    async def clarify(request_id: str, answer: str) -> dict[str, Any]:
        reply: dict[str, Any] = script.next("clarify", {"request_id": request_id, "answer": answer})
        return reply

    return mcp


def codeagent_server(script: Script) -> FastMCP:
    mcp = FastMCP("scripted-codeagent")

    @mcp.tool
    async def codeagent_init(backend: str = "auto", session: str = "default") -> dict[str, Any]:
        reply: dict[str, Any] = script.next("codeagent_init", {"backend": backend})
        return reply

    @mcp.tool
    async def codeagent_stop(session: str = "default") -> dict[str, Any]:
        reply: dict[str, Any] = script.next("codeagent_stop", {})
        return reply

    return mcp


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def make(script: Script, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv(USER_ENV, "alice")
    settings = load_settings(data_dir=tmp_path / "data")

    def build(**options: Any) -> Coordinator:
        return Coordinator(settings, retriever=retriever_server(script),
                           codeagent=codeagent_server(script), glossary={},
                           reader=read_now, **options)  # fmt: skip

    yield build


def ask(coordinator: Coordinator, question: str, **kw: Any) -> Any:
    return asyncio.run(coordinator.ask(question, user="alice", **kw))


def test_a_retrieval_alone_dispatches_once_and_completes(make: Any, script: Script) -> None:
    script.replies["query"] = [completed()]
    answer = ask(make(), "How many nodes are there in M100?")
    assert answer.status == "completed" and answer.exit_code == 0
    assert answer.rows == [[980]] and answer.artifacts == []
    assert answer.dispatches == {"retriever.query": 1}
    assert [t for t, _ in script.calls] == ["query"]


def test_a_refused_request_is_reported_and_the_retriever_had_the_reading(
    make: Any, script: Script
) -> None:
    script.replies["query"] = [rejected("still no"), rejected("never sent")]
    answer = ask(make(), Q2)
    assert answer.status == "rejected" and answer.exit_code == 4
    ((tool, args),) = script.calls  # read once, sent once: no second try with other words
    assert tool == "query" and args["question"] == Q2
    reading = Reading.model_validate(args["reading"])
    assert reading.text == Q2
    assert [c.kind for c in reading.analysis.charts] == ["line"]
    assert reading.analysis.charts[0].in_clause  # 'and plot the time series': the tail
    assert answer.dispatches["retriever.query"] == 1
    assert "still no" in answer.summary


def test_a_busy_server_is_retried_within_the_bound_then_reported(make: Any, script: Script) -> None:
    busy = ToolError("busy: 4 calls are running — retry after 2 s")
    script.replies["query"] = [busy, busy, completed()]
    done = ask(make(max_retries=2, backoff_s=0), "How many nodes are there in M100?")
    assert done.status == "completed"
    assert done.dispatches["retry.retriever.query"] == 2
    script.replies["query"] = [busy, busy, busy]
    failed = ask(make(max_retries=2, backoff_s=0), "How many nodes are there in M100?")
    assert failed.status == "failed" and failed.exit_code == 1
    assert failed.error is not None and "busy" in failed.error["message"]
    assert failed.dispatches["failed.retriever.query"] == 3


def test_the_dispatch_bound_stops_a_request(make: Any, script: Script) -> None:
    cols = ["node_id", "metric_name", "timestamp", "value"]
    rows = [[900, "total_power", "2022-06-01T20:00:13Z", 545.0]]
    readings = {
        "status": "completed",
        "request_id": "r-3",
        "answer": "1 row",
        "columns": cols,
        "rows": rows,
        "row_count": 1,
        "results": [
            {
                "columns": cols,
                "rows": rows,
                "row_count": 1,
                "explanation": "x",
                "understood_as": "Readings of node power (W) for node 900.",
                "plan": {
                    "metrics": [{"plugin": "ipmi", "metric": "total_power"}],
                    "entities": [{"kind": "node", "ids": [900]}],
                },
            }
        ],
    }
    script.replies["query"] = [readings]
    script.replies["codeagent_init"] = [{"user": "alice"}]
    script.replies["codeagent_stop"] = []
    answer = ask(make(max_dispatches=1), Q2)
    assert answer.status == "failed"
    assert answer.error is not None and answer.error["code"] == "dispatch_limit"
    assert [t for t, _ in script.calls] == ["query"]  # the sandbox was never started


def test_a_retriever_clarification_survives_a_restart(make: Any, script: Script) -> None:
    asked = {"status": "clarification", "request_id": "r-9", "answer": "which temperature?",
             "clarification": {"field": "metric", "question": "which temperature?",
                               "candidates": [{"metric": "ambient"}]}}  # fmt: skip
    script.replies["query"] = [asked]
    first = ask(make(), "the temperature of node 900 on 1 June 2022")
    assert first.status == "clarification" and first.exit_code == 3
    assert first.clarification is not None
    assert first.clarification["source"] == "retriever"
    assert first.clarification["candidates"] == [{"metric": "ambient"}]
    script.replies["clarify"] = [completed()]
    again = make()  # a new process: only the checkpoint remains
    assert asyncio.run(again.pending(first.request_id))
    done = asyncio.run(again.clarify(first.request_id, "ambient", user="alice"))
    assert done.status == "completed"
    assert script.calls[-1] == ("clarify", {"request_id": "r-9", "answer": "ambient"})
    assert done.dispatches == {"retriever.query": 1, "retriever.clarify": 1}
    assert not asyncio.run(again.pending(first.request_id))


def test_clarify_of_a_request_that_asked_nothing_is_a_usage_error(make: Any) -> None:
    with pytest.raises(UsageError, match="waits for no clarification"):
        asyncio.run(make().clarify("nope", "ambient", user="alice"))


def test_a_conversation_keeps_a_bounded_window_of_turns(make: Any, script: Script) -> None:
    coordinator = make()
    n = coordinator_state.MAX_TURNS + 3
    script.replies["query"] = [completed() for _ in range(n)]
    for i in range(n):
        ask(coordinator, f"How many nodes are there in M100? ({i})", conversation_id="c-1")

    async def turns() -> list[Any]:
        async with coordinator._saver() as saver:
            compiled = graph.builder.compile(checkpointer=saver)
            snap = await compiled.aget_state({"configurable": {"thread_id": "c-1"}})
            return list(snap.values["turns"])

    kept = asyncio.run(turns())
    assert len(kept) == coordinator_state.MAX_TURNS
    assert kept[-1]["question"].endswith(f"({n - 1})")
    assert kept[0]["question"].endswith(f"({n - coordinator_state.MAX_TURNS})")


def test_spans_nest_request_task_dispatch(make: Any, script: Script) -> None:
    """With a tracer provider installed (the observability package's job), the coordinator's
    spans nest: request → task → dispatch, each dispatch naming its tool and its status."""

    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    script.replies["query"] = [completed()]
    ask(make(), Q2)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    request = spans["coordinator request"]
    task = spans["task retrieve"]
    dispatch = spans["dispatch retriever.query"]
    assert task.parent is not None and task.parent.span_id == request.context.span_id
    assert dispatch.parent is not None and dispatch.parent.span_id == task.context.span_id
    assert dispatch.attributes is not None
    assert dispatch.attributes["oda.tool"] == "query"
    assert dispatch.attributes["oda.status"] == "ok"
    assert "question=" in str(dispatch.attributes["oda.arguments"])
    assert request.attributes is not None and request.attributes["oda.user"] == "alice"
    queries = [s for s in exporter.get_finished_spans() if s.name == "dispatch retriever.query"]
    assert len(queries) == 1  # read once, sent once
