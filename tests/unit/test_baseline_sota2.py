"""SoTA#2, the Datalake Query Tool baseline: schema discovery, name-match planning, targeted
queries on the raw lake joined by node and time, inline JSON only — and the shared tool
interface of both baselines' MCP servers. Expected rows come from the Polars oracle."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from fastmcp import Client

from baseline_lake import write_baseline_lake
from oda_analyst.baselines.payload import BaselineAnswer
from oda_analyst.baselines.sota1 import mcp_server as sota1_server
from oda_analyst.baselines.sota2 import mcp_server as sota2_server
from oda_analyst.baselines.sota2 import tool as sota2_tool
from oda_analyst.baselines.sota2.planner import match_metrics, window
from oda_analyst.baselines.sota2.tool import DatalakeQueryTool
from oda_analyst.config import load_settings
from oda_analyst.errors import UsageError
from oda_analyst.retriever import mcp_server as nsa_server
from oda_analyst.retriever.answer import AnswerPayload

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from devset import oracle
from oda_analyst.backends import BACKENDS, mcp_server, open_backend
from oda_analyst.baselines.sota1.tool import ExasageQueryTool

WINDOW = ["2022-06-01T00:00", "2022-06-01T01:00"]


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_baseline_lake(tmp_path_factory.mktemp("lake"))


@pytest.fixture(scope="module")
def table(lake: Path) -> pl.DataFrame:
    return oracle.jobs(lake)


@pytest.fixture(scope="module")
def tool(lake: Path, tmp_path_factory: pytest.TempPathFactory) -> DatalakeQueryTool:
    return DatalakeQueryTool(load_settings(lake=str(lake), data_dir=tmp_path_factory.mktemp("d")))


def _check(answer: BaselineAnswer, spec: dict[str, Any], lake: Path, table: pl.DataFrame) -> None:
    assert answer.status == "completed", answer.answer
    assert answer.columns is not None and answer.rows is not None
    verdict = oracle.expected(spec, lake, table).check(answer.columns, answer.rows)
    assert verdict.ok, verdict.reason


def test_schema_discovery_lists_and_describes_what_the_lake_holds(tool: DatalakeQueryTool) -> None:
    lake = tool.datalake
    assert set(lake.list_plugins()) == {"ipmi", "ganglia", "weather", "job_table"}
    assert {"total_power", "ambient"} <= set(lake.list_metrics("ipmi"))
    cols = {c.name: c.dtype for c in lake.describe("ipmi", "total_power")}
    assert {"timestamp", "node", "value"} <= set(cols)
    assert "job_id" in {c.name for c in lake.describe("job_table", "job_info_marconi100")}


def test_metrics_are_matched_by_name_only() -> None:
    listing = {
        "ipmi": ["total_power", "ambient", "power"],
        "ganglia": ["Gpu0_gpu_utilization"],
        "weather": ["temp"],
        "job_table": ["job_info_marconi100"],
    }
    assert match_metrics("the total power of node 9", listing) == [("ipmi", "total_power")]
    assert match_metrics("ambient and power", listing) == [("ipmi", "ambient"), ("ipmi", "power")]
    assert match_metrics("inlet temperature of all nodes", listing) == []
    assert match_metrics("GPU-0 utilisation", listing) == []
    assert match_metrics("Gpu0_gpu_utilization of node 1", listing) == [
        ("ganglia", "Gpu0_gpu_utilization")
    ]
    assert match_metrics("temp from the weather plugin", listing) == [("weather", "temp")]


def test_windows_it_can_read() -> None:
    a = window("on 1 June 2022 from 20:00 to 23:59")
    assert a is not None and (a[0].hour, a[1].isoformat()) == (20, "2022-06-02T00:00:00+00:00")
    b = window("2022-06-01 08:00 to 2022-06-01 09:30")
    assert b is not None and (b[0].hour, b[1].minute) == (8, 30)
    c = window("on June 1, 2022")
    assert c is not None and (c[1] - c[0]).days == 1
    assert window("in the last 10 hours") is None


def test_readings_and_statistics_equal_the_oracle(
    tool: DatalakeQueryTool, lake: Path, table: pl.DataFrame
) -> None:
    rows = tool.query("total power of nodes 900 and 901 on 1 June 2022 from 00:00 to 01:00")
    assert rows.understood_as and "ipmi/total_power" in rows.understood_as
    _check(
        rows,
        {
            "kind": "readings",
            "metrics": ["ipmi/total_power"],
            "nodes": [900, 901],
            "window": WINDOW,
        },
        lake,
        table,
    )
    stat = tool.query("average ambient of node 900 on 2022-06-01 from 00:00 to 01:00")
    _check(
        stat,
        {
            "kind": "stats",
            "metrics": ["ipmi/ambient"],
            "nodes": [900],
            "fns": ["avg"],
            "by": ["node", "metric"],
            "window": WINDOW,
        },
        lake,
        table,
    )


def test_a_job_is_joined_with_its_readings_by_node_and_time(
    tool: DatalakeQueryTool, lake: Path, table: pl.DataFrame
) -> None:
    chosen = oracle.select_jobs(table, start=oracle.utc(WINDOW[0]), end=oracle.utc(WINDOW[1]))
    job = int(chosen.filter(pl.col("nodes").list.contains(900)).sort("start")["job_id"][0])
    answer = tool.query(f"total power of job {job}")
    spec = {"kind": "job_readings", "jobs": [job], "metrics": ["ipmi/total_power"]}
    assert answer.columns is not None and answer.rows is not None
    verdict = oracle.expected(spec, lake, table).check(answer.columns, answer.rows)
    assert verdict.ok, verdict.reason


def test_it_fails_rather_than_asks_and_has_no_csv(tool: DatalakeQueryTool) -> None:
    answer = tool.query("inlet temperature of all nodes on 1 June 2022 from 00:00 to 01:00")
    assert answer.status == "rejected" and answer.clarification is None
    assert "no metric name of the lake" in answer.answer
    rack = tool.query("total power of rack 45 on 1 June 2022")
    assert rack.status == "rejected" and "rack" in rack.answer
    with pytest.raises(UsageError, match="no clarification"):
        tool.clarify(answer.request_id, "ambient")
    with pytest.raises(UsageError, match="no CSV export"):
        tool.download_csv("anything")


def test_large_results_are_cut_inline_and_say_so(
    tool: DatalakeQueryTool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sota2_tool, "MAX_INLINE_ROWS", 10)
    answer = tool.query("total power of node 900 on 1 June 2022 from 00:00 to 01:00")
    assert answer.status == "completed" and len(answer.rows or []) == 10
    assert answer.results[0]["truncated"] is True
    assert any("no CSV export" in w for w in answer.warnings)


def test_the_answer_shape_is_the_retrievers() -> None:
    assert set(AnswerPayload.model_fields) <= set(BaselineAnswer.model_fields)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_both_servers_offer_the_retrievers_tools(
    tool: DatalakeQueryTool, lake: Path, tmp_path: Path
) -> None:
    async with Client(nsa_server.mcp) as client:
        ours = {t.name for t in await client.list_tools()}
    sota2_server.set_tool(tool)
    try:
        async with Client(sota2_server.mcp) as client:
            names = {t.name for t in await client.list_tools()}
            assert ours <= names
            assert {"list_plugins", "list_metrics", "describe_metric", "run_query"} <= names
            res = await client.call_tool(
                "query", {"question": "ambient of node 900 on 1 June 2022 from 00:00 to 00:10"}
            )
            assert res.structured_content is not None
            assert res.structured_content["status"] == "completed"
            rows = await client.call_tool(
                "run_query",
                {
                    "plugin": "ipmi",
                    "metric": "ambient",
                    "start": "2022-06-01T00:00:00Z",
                    "end": "2022-06-01T00:10:00Z",
                    "nodes": [900],
                },
            )
            assert rows.structured_content is not None
            assert rows.structured_content["row_count"] == res.structured_content["row_count"]
    finally:
        sota2_server.set_tool(None)
    async with Client(sota1_server.mcp) as client:
        assert ours <= {t.name for t in await client.list_tools()}


def test_backends_are_picked_by_name(lake: Path, tmp_path: Path) -> None:
    settings = load_settings(lake=str(lake), data_dir=tmp_path)
    assert isinstance(open_backend("sota1", settings), ExasageQueryTool)
    assert isinstance(open_backend("sota2", settings), DatalakeQueryTool)
    names = {mcp_server(b).name for b in BACKENDS}
    assert names == {"oda-retriever", "oda-sota1-exasage", "oda-sota2-datalake"}
    with pytest.raises(UsageError, match="unknown backend"):
        open_backend("sota3", settings)
