"""SoTA#1, the EXASAGE Query Tool baseline: its archetypes answer right, malformed input fails.

Every completed answer is compared with the Polars oracle (``bench/devset/oracle.py``), never
with the product's own reader; the lake is generated (``baseline_lake``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from baseline_lake import write_baseline_lake
from oda_analyst.baselines.payload import BaselineAnswer
from oda_analyst.baselines.sota1.archetypes import ARCHETYPES, ORDER
from oda_analyst.baselines.sota1.extract import MalformedInputError, extract
from oda_analyst.baselines.sota1.tool import ExasageQueryTool
from oda_analyst.config import load_settings
from oda_analyst.errors import UsageError
from oda_analyst.ontology.catalogue import load_catalogue

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from devset import oracle

W = "from [2022-06-01 00:00:00] to [2022-06-01 01:00:00]"
WINDOW = ["2022-06-01T00:00", "2022-06-01T01:00"]


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_baseline_lake(tmp_path_factory.mktemp("lake"))


@pytest.fixture(scope="module")
def table(lake: Path) -> pl.DataFrame:
    return oracle.jobs(lake)


@pytest.fixture(scope="module")
def tool(lake: Path, tmp_path_factory: pytest.TempPathFactory) -> ExasageQueryTool:
    data = tmp_path_factory.mktemp("data")
    return ExasageQueryTool(load_settings(lake=str(lake), data_dir=data, row_limit=100_000))


def _job_on_900(table: pl.DataFrame) -> int:
    chosen = oracle.select_jobs(table, start=oracle.utc(WINDOW[0]), end=oracle.utc(WINDOW[1]))
    chosen = chosen.filter(pl.col("nodes").list.contains(900)).sort("start")
    return int(chosen["job_id"][0])


def _check(answer: BaselineAnswer, spec: dict[str, Any], lake: Path, table: pl.DataFrame) -> None:
    assert answer.status == "completed", answer.answer
    assert answer.columns is not None and answer.rows is not None
    verdict = oracle.expected(spec, lake, table).check(answer.columns, answer.rows)
    assert verdict.ok, verdict.reason


def test_there_are_ten_archetypes_each_tried_in_order() -> None:
    assert len(ARCHETYPES) == 10
    assert sorted(ORDER) == sorted(ARCHETYPES)


@pytest.mark.parametrize(
    ("question", "archetype", "spec"),
    [
        (
            f"total_power of node 900 {W}",
            "node_series",
            {"kind": "readings", "metrics": ["ipmi/total_power"], "nodes": [900], "window": WINDOW},
        ),
        (
            f"average ambient of nodes 900 and 901 {W}",
            "node_stat",
            {
                "kind": "stats",
                "metrics": ["ipmi/ambient"],
                "nodes": [900, 901],
                "fns": ["avg"],
                "by": ["node"],
                "window": WINDOW,
            },
        ),
        (
            f"Gpu0_gpu_utilization of rack 45 {W}",
            "rack_series",
            {
                "kind": "readings",
                "metrics": ["ganglia/Gpu0_gpu_utilization"],
                "nodes": "all",
                "window": WINDOW,
            },
        ),
        (
            f"max total_power of rack 45 {W}",
            "rack_stat",
            {
                "kind": "stats",
                "metrics": ["ipmi/total_power"],
                "nodes": "all",
                "fns": ["max"],
                "by": ["rack"],
                "window": WINDOW,
            },
        ),
        (f"how many jobs {W}", "job_count", {"kind": "job_count", "window": WINDOW}),
        (f"jobs {W}", "job_list", {"kind": "job_list", "window": WINDOW}),
        (
            f"which nodes had total_power above 300 {W}",
            "threshold",
            {
                "kind": "where_list",
                "metrics": ["ipmi/total_power"],
                "op": "gt",
                "threshold": 300,
                "window": WINDOW,
            },
        ),
        (
            f"average temp {W}",
            "facility",
            {
                "kind": "stats",
                "metrics": ["weather/temp"],
                "fns": ["avg"],
                "by": ["metric"],
                "window": WINDOW,
            },
        ),
    ],
)
def test_archetypes_answer_like_the_oracle(
    tool: ExasageQueryTool,
    lake: Path,
    table: pl.DataFrame,
    question: str,
    archetype: str,
    spec: dict[str, Any],
) -> None:
    answer = tool.query(question)
    assert answer.results[0]["archetype"] == archetype
    assert answer.sparql and "SELECT" in answer.sparql  # over the VKG, as published
    _check(answer, spec, lake, table)


def test_job_archetypes_read_each_job_over_its_own_run(
    tool: ExasageQueryTool, lake: Path, table: pl.DataFrame
) -> None:
    job = _job_on_900(table)
    series = tool.query(f"total_power of job {job}")
    assert series.results[0]["archetype"] == "job_series"
    _check(
        series,
        {"kind": "job_readings", "jobs": [job], "metrics": ["ipmi/total_power"]},
        lake,
        table,
    )
    stat = tool.query(f"average total_power of job {job}")
    assert stat.results[0]["archetype"] == "job_stat"
    _check(
        stat,
        {"kind": "job_stats", "jobs": [job], "metrics": ["ipmi/total_power"], "fns": ["avg"]},
        lake,
        table,
    )


@pytest.mark.parametrize(
    ("question", "says"),
    [
        ("total_power of node 900 on 1 June 2022 from 00:00 to 01:00", "'June'"),
        ("total_power of node 900 in the last 10 hours", "'last'"),
        ("total_power of node 900 from [2022-06-01 00:00:00]", "1 timestamp"),
        (f"power consumption of node 900 {W}", "fits none of the ten"),
        ("total_power of node 900 from [2022-06-01 01:00:00] to [2022-06-01 00:00:00]", "end"),
        (f"ipmi Gpu0_gpu_utilization of node 900 {W}", "belongs to plugin ganglia"),
    ],
)
def test_malformed_input_fails_at_once(tool: ExasageQueryTool, question: str, says: str) -> None:
    answer = tool.query(question)
    assert answer.status == "rejected"
    assert answer.error is not None and answer.error["code"] == "malformed_input"
    assert says in answer.answer
    assert answer.rows is None and answer.clarification is None


def test_it_is_single_sensor_and_cannot_be_clarified(tool: ExasageQueryTool) -> None:
    answer = tool.query(f"ambient and total_power of node 900 {W}")
    assert answer.status == "completed"
    assert {r[1] for r in answer.rows or []} == {"ambient"}
    assert any("total_power not read" in w for w in answer.warnings)
    with pytest.raises(UsageError, match="no clarification"):
        tool.clarify(answer.request_id, "total_power")


def test_metric_names_are_exact() -> None:
    cat = load_catalogue()
    assert extract(f"Total_Power of node 900 {W}", cat).metric is None
    found = extract(f"ipmi/total_power of node 900 {W}", cat).metric
    assert found is not None and found.name == "total_power"
    with pytest.raises(MalformedInputError):
        extract("total_power of node 900 at 08:00", cat)
