"""The retriever's MCP tools through fastmcp's in-memory Client, on a generated lake.

Real components throughout: a lake written by the synthetic generator, the real Retriever with
its embedded graph store and checkpoint store under a temporary ODA_DATA_DIR, and the real
all-MiniLM-L6-v2 index (built once; its vectors are kept in pytest's cache folder). Expected rows
are read from the lake's Parquet files with Polars, independently of the retriever.
"""

from __future__ import annotations

import asyncio
import csv
import io
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError

from fixtures_embeddings import shared_cache_dir
from fixtures_lake import tiny_power_lake
from oda_analyst.config import Settings, get_settings, load_settings
from oda_analyst.errors import UsageError
from oda_analyst.mcptools import USER_ENV
from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.retriever import mcp_server
from oda_analyst.retriever.answer import AnswerPayload
from oda_analyst.retriever.grounding import embeddings
from oda_analyst.retriever.mcp_server import mcp, read_chunk
from oda_analyst.retriever.service import Retriever

POWER_Q = "Retrieve the total power consumption for node 900 on 1 June 2022 from 00:00 to 01:00"
TEMP_Q = "the temperature of node 900 on 1 June 2022 from 00:10 to 00:20"
FLUX_Q = "the flux capacitor reading of node 900 on 1 June 2022"
NO_TIME_Q = "the total power of node 900"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_power_lake(tmp_path_factory.mktemp("lake"))


@pytest.fixture(scope="module")
def metric_index(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Warm the process's embedding index from the shared vectors (built once)."""
    cache = shared_cache_dir(request, tmp_path_factory)
    index = embeddings.get_index(load_catalogue(), cache_dir=cache / "embeddings")
    assert index is not None, embeddings.embedder_unavailable_reason()


def _settings(lake: Path, data_dir: Path, row_limit: int) -> Settings:
    return load_settings(lake=str(lake), data_dir=data_dir, row_limit=row_limit, redis_url=None,
                         sparql_endpoint=None)  # fmt: skip


@pytest.fixture
def serve(
    lake: Path, metric_index: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    """``serve(row_limit)`` points the server at a fresh Retriever on a fresh data folder."""
    monkeypatch.setenv(USER_ENV, "alice")

    def start(row_limit: int = 500) -> Settings:
        settings = _settings(lake, tmp_path / "data", row_limit)
        mcp_server.set_retriever(Retriever(settings))
        return settings

    yield start
    mcp_server.reset_retriever()


def _lake_rows(lake: Path, metric: str, start: datetime, end: datetime) -> list[list[Any]]:
    """``[node_id, metric, timestamp ISO Z, value]`` of node 900, straight from Parquet."""
    files = str(lake / f"year_month=22-06/plugin=ipmi_pub/metric={metric}/*.parquet")
    df = (
        pl.read_parquet(files, hive_partitioning=False)
        .filter((pl.col("node").cast(pl.String) == "900") & pl.col("timestamp").is_between(
            start, end, closed="left"))
        .sort("timestamp")
    )  # fmt: skip
    return [[900, metric, t.strftime("%Y-%m-%dT%H:%M:%SZ"), v]
            for t, v in zip(df["timestamp"], df["value"], strict=True)]  # fmt: skip


def _same(rows: list[list[Any]] | None) -> list[tuple[Any, ...]]:
    """Rows with the value as float32: the lake stores float32/int32, the answer a JSON number
    (the shortest decimal of the float32), so compare at the lake's precision."""
    assert rows is not None
    return [(*r[:-1], np.float32(r[-1])) for r in rows]


def _payload(result: Any) -> AnswerPayload:
    return AnswerPayload.model_validate(result.structured_content)


def _utc(hour: int, minute: int) -> datetime:
    return datetime(2022, 6, 1, hour, minute, tzinfo=UTC)


# --- schemas -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_tools_have_typed_schemas_and_paper_names() -> None:
    async with Client(mcp) as client:
        tools = {t.name: t for t in await client.list_tools()}
    assert set(tools) == {"query", "clarify", "download_csv", "status", "replay"}
    for name in ("query", "clarify", "download_csv"):
        assert f"exasage_{name}" in (tools[name].description or "")
    status_enum = tools["query"].output_schema["properties"]["status"]["enum"]
    assert set(status_enum) == {"completed", "clarification", "rejected", "failed"}
    assert tools["query"].input_schema["required"] == ["question"]
    page = tools["download_csv"].input_schema["properties"]["max_bytes"]
    assert (page["minimum"], page["maximum"]) == (mcp_server.MIN_CHUNK_BYTES,
                                                  mcp_server.MAX_CHUNK_BYTES)  # fmt: skip
    assert "next_offset" in tools["download_csv"].output_schema["properties"]


# --- the three outcomes ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_query_returns_the_lake_rows_with_progress(serve: Any, lake: Path) -> None:
    serve(row_limit=500)
    progress: list[str] = []

    async def on_progress(_: float, __: float | None, message: str | None) -> None:
        progress.append(message or "")

    async with Client(mcp) as client:
        result = await client.call_tool("query", {"question": POWER_Q},
                                        progress_handler=on_progress)  # fmt: skip
    answer = _payload(result)
    assert answer.status == "completed"
    assert answer.columns == ["node_id", "metric_name", "timestamp", "value"]
    expected = _lake_rows(lake, "total_power", _utc(0, 0), _utc(1, 0))
    assert _same(answer.rows) == _same(expected) and answer.row_count == len(expected) > 0
    assert answer.csv_handle is None
    assert answer.sparql is not None and "total_power" in answer.sparql
    assert any("input validation" in m for m in progress), progress


@pytest.mark.anyio
async def test_large_result_is_a_handle_paged_by_download_csv(serve: Any, lake: Path) -> None:
    serve(row_limit=5)
    async with Client(mcp) as client:
        answer = _payload(await client.call_tool("query", {"question": POWER_Q}))
        assert answer.status == "completed" and answer.rows is None
        assert answer.csv_handle and answer.csv
        assert answer.row_count is not None
        assert 0 < len(answer.results[0]["preview"]) < answer.row_count  # a preview, labelled
        pages: list[dict[str, Any]] = []
        offset: int | None = 0
        while offset is not None:
            args = {"handle": answer.csv_handle, "offset": offset, "max_bytes": 1024}
            page = (await client.call_tool("download_csv", args)).structured_content
            assert page is not None and page["offset"] == offset
            pages.append(page)
            offset = page["next_offset"]
    text = "".join(p["text"] for p in pages)
    assert text == Path(answer.csv).read_bytes().decode("utf-8")
    assert len(pages) > 1 and all(p["text"].endswith("\n") for p in pages)
    assert {p["total_bytes"] for p in pages} == {len(text.encode())}
    table = list(csv.reader(io.StringIO(text)))
    expected = _lake_rows(lake, "total_power", _utc(0, 0), _utc(1, 0))
    assert table[0] == ["node_id", "metric_name", "timestamp", "value"]
    assert _same([[int(r[0]), r[1], r[2], float(r[3])] for r in table[1:]]) == _same(expected)


@pytest.mark.anyio
async def test_clarification_resumes_with_a_new_retriever(serve: Any, lake: Path) -> None:
    settings = serve(row_limit=500)
    async with Client(mcp) as client:
        asked = _payload(await client.call_tool("query", {"question": TEMP_Q}))
        assert asked.status == "clarification" and asked.clarification is not None
        assert asked.clarification.field == "metric"
        assert "ambient" in {c.get("metric") for c in asked.clarification.candidates}
        waiting = await client.call_tool("status", {"request_id": asked.request_id})
        assert waiting.structured_content["stage"] == "waiting_for_clarification"

        # A restart: a new Retriever with new stores, reading the same checkpoint file.
        mcp_server.set_retriever(Retriever(settings))
        done = _payload(await client.call_tool(
            "clarify", {"request_id": asked.request_id, "answer": "ambient"}))  # fmt: skip
        final = await client.call_tool("status", {"request_id": asked.request_id})
    assert done.status == "completed" and done.request_id == asked.request_id
    assert _same(done.rows) == _same(_lake_rows(lake, "ambient", _utc(0, 10), _utc(0, 20)))
    st = final.structured_content
    assert st["stage"] == "completed" and st["clarification"] is None
    assert any("clarified metric: ambient" in h for h in st["history"])


@pytest.mark.anyio
async def test_a_missing_window_is_asked_for(serve: Any, lake: Path) -> None:
    serve()
    async with Client(mcp) as client:
        asked = _payload(await client.call_tool("query", {"question": NO_TIME_Q}))
        assert asked.status == "clarification" and asked.clarification is not None
        assert asked.clarification.field == "time"
        args = {"request_id": asked.request_id, "answer": "on 1 June 2022 from 00:00 to 00:10"}
        done = _payload(await client.call_tool("clarify", args))
    assert done.status == "completed"
    assert _same(done.rows) == _same(_lake_rows(lake, "total_power", _utc(0, 0), _utc(0, 10)))


@pytest.mark.anyio
async def test_nonsense_is_rejected_with_a_hint(serve: Any) -> None:
    serve()
    async with Client(mcp) as client:
        answer = _payload(await client.call_tool("query", {"question": FLUX_Q}))
    assert answer.status == "rejected" and answer.rows is None and answer.sparql is None
    assert answer.error is not None and answer.error["code"] == "rejected"
    assert answer.error["hint"] and "flux capacitor" in answer.answer


@pytest.mark.anyio
async def test_as_of_anchors_relative_windows(serve: Any, lake: Path) -> None:
    serve()
    args = {"question": "the total power of node 900 in the last 10 minutes",
            "as_of": "2022-06-01T00:30:00Z"}  # fmt: skip
    async with Client(mcp) as client:
        answer = _payload(await client.call_tool("query", args))
    assert answer.status == "completed" and answer.plan is not None
    assert answer.plan["window"] == {"start": "2022-06-01T00:20:00Z",
                                     "end": "2022-06-01T00:30:00Z"}  # fmt: skip
    assert _same(answer.rows) == _same(_lake_rows(lake, "total_power", _utc(0, 20), _utc(0, 30)))


@pytest.mark.anyio
async def test_concurrent_calls_run_side_by_side(serve: Any, lake: Path) -> None:
    """Tools run the synchronous Retriever in worker threads; parallel calls stay correct."""
    serve()
    async with Client(mcp) as client:
        results = await asyncio.gather(
            client.call_tool("query", {"question": POWER_Q}),
            client.call_tool("query", {"question": TEMP_Q}),
            client.call_tool("query", {"question": FLUX_Q}),
            client.call_tool("query", {"question": POWER_Q}),
        )
    answers = [_payload(r) for r in results]
    assert [a.status for a in answers] == ["completed", "clarification", "rejected", "completed"]
    expected = _same(_lake_rows(lake, "total_power", _utc(0, 0), _utc(1, 0)))
    assert _same(answers[0].rows) == expected == _same(answers[3].rows)
    assert len({a.request_id for a in answers}) == 4


# --- errors a model can act on -----------------------------------------------------------------


@pytest.mark.anyio
async def test_errors_are_tool_errors_with_code_and_hint(serve: Any) -> None:
    serve(row_limit=5)
    async with Client(mcp) as client:
        done = _payload(await client.call_tool("query", {"question": POWER_Q}))
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("clarify", {"request_id": "no-such-request", "answer": "ambient"},
             r"^unknown_request: .* — .*ask again"),
            ("clarify", {"request_id": done.request_id, "answer": "ambient"},
             r"^usage_error: .*asks no question — .*ask again"),
            ("download_csv", {"handle": "../../etc/passwd"},
             r"^usage_error: not a download handle"),
            ("download_csv", {"handle": "abc-0123456789abcdef01234567"},
             r"^usage_error: unknown download handle"),
            ("download_csv", {"handle": done.csv_handle, "offset": 10**9},
             r"^usage_error: offset 1000000000 is beyond the end .* — start at 0"),
            ("query", {"question": "   "}, r"^usage_error: the question is empty — "),
            ("query", {"question": POWER_Q, "as_of": "yesterday"},
             r"^usage_error: as_of 'yesterday' is not an ISO 8601 time — "),
            ("status", {"request_id": "no-such-request"}, r"^unknown_request: "),
        ]  # fmt: skip
        for tool, args, pattern in cases:
            with pytest.raises(ToolError, match=pattern):
                await client.call_tool(tool, args)
        with pytest.raises(ToolError):  # schema-level bounds are enforced too
            await client.call_tool("download_csv", {"handle": done.csv_handle, "max_bytes": 10})


@pytest.mark.anyio
async def test_requests_and_files_belong_to_their_user(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    serve(row_limit=5)
    async with Client(mcp) as client:
        asked = _payload(await client.call_tool("query", {"question": TEMP_Q}))
        done = _payload(await client.call_tool("query", {"question": POWER_Q}))
        monkeypatch.setenv(USER_ENV, "bob")
        with pytest.raises(ToolError, match=r"^usage_error: .*belongs to another user"):
            await client.call_tool("clarify", {"request_id": asked.request_id, "answer": "ambient"})
        with pytest.raises(ToolError, match=r"^access_denied: "):
            await client.call_tool("download_csv", {"handle": done.csv_handle})
        with pytest.raises(ToolError, match=r"^access_denied: "):
            await client.call_tool("status", {"request_id": asked.request_id})
        monkeypatch.setenv(USER_ENV, "bad user!")
        with pytest.raises(ToolError, match=r"^usage_error: invalid user name"):
            await client.call_tool("query", {"question": POWER_Q})
        monkeypatch.setenv(USER_ENV, "alice")
        page = await client.call_tool("download_csv", {"handle": done.csv_handle})
    assert page.structured_content["next_offset"] is None


class _Broken(Retriever):
    """A real Retriever whose query hits an internal bug (not an OdaError)."""

    def query(self, *args: Any, **kwargs: Any) -> AnswerPayload:
        raise RuntimeError("secret internals at /srv/oda/private")


@pytest.mark.anyio
async def test_internal_errors_are_masked(serve: Any) -> None:
    settings = serve()
    mcp_server.set_retriever(_Broken(settings))
    async with Client(mcp) as client:
        with pytest.raises(ToolError) as info:
            await client.call_tool("query", {"question": POWER_Q})
    assert str(info.value) == "Error calling tool 'query'"


@pytest.mark.anyio
async def test_default_retriever_comes_from_the_environment(
    lake: Path, metric_index: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ODA_LAKE", str(lake))
    monkeypatch.setenv("ODA_DATA_DIR", str(tmp_path / "env-data"))
    monkeypatch.setenv("ODA_ROW_LIMIT", "7")
    monkeypatch.delenv("ODA_REDIS_URL", raising=False)
    monkeypatch.delenv("ODA_SPARQL_ENDPOINT", raising=False)
    get_settings.cache_clear()
    mcp_server.reset_retriever()
    try:
        async with Client(mcp) as client:
            answer = _payload(await client.call_tool("query", {"question": POWER_Q}))
        assert answer.status == "completed" and answer.csv is not None
        assert Path(answer.csv).is_relative_to(tmp_path / "env-data")
        assert mcp_server.get_retriever().settings.row_limit == 7
    finally:
        mcp_server.reset_retriever()
        get_settings.cache_clear()


# --- paging, byte by byte ----------------------------------------------------------------------


def _pages(path: Path, max_bytes: int) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    offset: int | None = 0
    while offset is not None:
        text, nxt, total = read_chunk(path, offset, max_bytes)
        assert total == path.stat().st_size
        assert nxt is None or nxt > offset  # every page makes progress
        out.append((offset, text))
        offset = nxt
    return out


@pytest.mark.parametrize("max_bytes", [4, 5, 7, 16, 1024])
def test_pages_concatenate_to_the_file_across_multibyte_characters(
    tmp_path: Path, max_bytes: int
) -> None:
    path = tmp_path / "r.csv"
    body = "name,value\r\n" + "".join(f"nœud-é{i},{'°C€' * (i % 5)}\r\n" for i in range(40))
    body += "x" * 50 + "€"  # a last line longer than small pages, no newline at the end
    path.write_text(body, encoding="utf-8", newline="")
    pages = _pages(path, max_bytes)
    assert "".join(t for _, t in pages) == body
    if max_bytes == 1024:  # pages hold whole lines when one fits
        assert all(t.endswith("\n") for _, t in pages[:-1])


def test_empty_file_is_one_empty_page(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    path.write_bytes(b"")
    assert read_chunk(path, 0, 1024) == ("", None, 0)


def test_offsets_outside_the_file_or_inside_a_character_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    path.write_text("é\n", encoding="utf-8")
    with pytest.raises(UsageError, match="beyond the end"):
        read_chunk(path, 4, 1024)
    with pytest.raises(UsageError, match="inside a character"):
        read_chunk(path, 1, 1024)
    assert read_chunk(path, 3, 1024) == ("", None, 3)


@pytest.mark.anyio
async def test_a_pushed_down_scan_reports_its_progress_and_status(
    lake: Path, metric_index: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan routed to the pushdown (threshold 0): the partitions and rows it scanned are in
    the progress notifications, the result's provenance and the status tool."""
    monkeypatch.setenv(USER_ENV, "alice")
    settings = load_settings(lake=str(lake), data_dir=tmp_path / "data", redis_url=None,
                             sparql_endpoint=None, pushdown_min_readings=0)  # fmt: skip
    mcp_server.set_retriever(Retriever(settings))
    progress: list[str] = []

    async def on_progress(_: float, __: float | None, message: str | None) -> None:
        progress.append(message or "")

    question = "average total power of node 900 on 1 June 2022 from 00:00 to 01:00"
    try:
        async with Client(mcp) as client:
            result = await client.call_tool("query", {"question": question},
                                            progress_handler=on_progress)  # fmt: skip
            answer = _payload(result)
            status = await client.call_tool("status", {"request_id": answer.request_id})
    finally:
        mcp_server.reset_retriever()
    values = [r[-1] for r in _lake_rows(lake, "total_power", _utc(0, 0), _utc(1, 0))]
    assert answer.status == "completed" and answer.rows is not None
    assert answer.rows[0][0] == pytest.approx(sum(values) / len(values), rel=1e-9)
    scan = answer.results[0]["scan"]
    assert (scan["partitions_done"], scan["partitions_total"]) == (1, 1)
    assert scan["rows_scanned"] == len(values) > 0
    assert scan["partitions"] == ["22-06/ipmi/total_power"]
    line = f"lake scan of plan 1/1: 1/1 partitions, {len(values):,} rows (22-06/ipmi/total_power)"
    assert line in progress, progress
    assert status.structured_content["scan"] == {
        "plan": "1/1", "done": 1, "total": 1, "rows": len(values),
        "label": "22-06/ipmi/total_power",
    }  # fmt: skip
