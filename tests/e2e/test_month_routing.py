"""Month-scale plans through the retriever: pushed down into the lake scan, or read as readings.

One generated month (the ``month`` profile over June 2022, three nodes of two racks) is asked
the same questions by two retrievers: one that sends every plan its form allows to the pushdown
(``pushdown_min_readings=0``) and one that never does. Their answers must mean the same: the
same status, ``understood_as``, columns and rows (figures to float rounding), and each is checked
against plain Polars on the Parquet files. Also: "hours above a level" plans, which only the plan
schema can ask yet, and a regenerated lake (same path, another seed) answered afresh.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from fixtures_lake import cli_command
from oda_analyst.config import load_settings
from oda_analyst.lake.synth import build_spec, generate
from oda_analyst.ontology.plan import QueryPlan, parse_plan
from oda_analyst.retriever.service import Retriever

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

JUNE = (datetime(2022, 6, 1, tzinfo=UTC), datetime(2022, 7, 1, tzinfo=UTC))
AS_OF = datetime(2022, 7, 15, tzinfo=UTC)
NODES = "0-1,20"
METRICS = "total_power,ambient," + ",".join(f"Gpu{g}_gpu_temp" for g in range(4))
NEVER = 10**15


@pytest.fixture(scope="module")
def month(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("month")
    generate(build_spec("month", nodes=NODES, metrics=METRICS), out)
    return out


def _retriever(lake: Path, data: Path, min_readings: int) -> Retriever:
    settings = load_settings(
        lake=str(lake), data_dir=data, sparql_endpoint=None, llm_base_url=None,
        pushdown_min_readings=min_readings,
    )  # fmt: skip
    return Retriever(settings)


@pytest.fixture(scope="module")
def pushed(month: Path, tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    return _retriever(month, tmp_path_factory.mktemp("pushed"), 0)


@pytest.fixture(scope="module")
def readings(month: Path, tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    return _retriever(month, tmp_path_factory.mktemp("readings"), NEVER)


def _rows(lake: Path, plugin: str, metric: str) -> pl.DataFrame:
    """One metric's June rows straight from its files (node ids as integers)."""
    files = sorted(lake.glob(f"year_month=22-06/plugin={plugin}_pub/metric={metric}/*.parquet"))
    frame = pl.concat([pl.read_parquet(f) for f in files], how="vertical_relaxed")
    return frame.with_columns(pl.col("node").cast(pl.String).cast(pl.Int64)).filter(
        (pl.col("timestamp") >= JUNE[0]) & (pl.col("timestamp") < JUNE[1])
    )


def _same(got: list[list[Any]], want: list[list[Any]] | list[tuple[Any, ...]], *,
          rel: float = 1e-9) -> None:  # fmt: skip
    """Keys exactly, the last column (the figure) to ``rel``: the two paths agree to float
    rounding; an oracle on Float32 files to Float32 precision (a reading's triple carries the
    value's shortest decimal, 26.9, where Polars reads 26.899999618530273)."""
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert list(g[:-1]) == list(w[:-1])
        assert g[-1] == pytest.approx(w[-1], rel=rel, abs=1e-12)


def _ask_both(pushed: Retriever, readings: Retriever, question: str) -> list[list[Any]]:
    a = pushed.query(question, as_of=AS_OF)
    b = readings.query(question, as_of=AS_OF)
    assert a.status == b.status == "completed", (a.answer, b.answer)
    assert a.results[0]["scan"] is not None and b.results[0]["scan"] is None  # the two paths
    assert a.understood_as == b.understood_as
    assert a.plan == b.plan and a.columns == b.columns
    assert a.rows is not None and b.rows is not None and a.rows
    _same(a.rows, b.rows)
    assert "oda:AggregateObservation" in (a.sparql or "")
    assert "oda:AggregateObservation" not in (b.sparql or "")
    return a.rows


def test_daily_rack_means_are_the_same_on_both_paths(
    month: Path, pushed: Retriever, readings: Retriever
) -> None:
    rows = _ask_both(pushed, readings, "daily average node power per rack over June 2022")
    want = (
        _rows(month, "ipmi", "total_power")
        .group_by((pl.col("node") // 20).alias("rack"), pl.col("timestamp").dt.date().alias("d"))
        .agg(pl.col("value").cast(pl.Float64).mean())
        .sort("rack", "d")
    )
    assert len(rows) == 2 * 30
    _same(rows, [[r, d.isoformat(), v] for r, d, v in want.iter_rows()])


def test_per_node_maxima_are_the_same_on_both_paths(
    month: Path, pushed: Retriever, readings: Retriever
) -> None:
    rows = _ask_both(
        pushed, readings, "maximum inlet temperature of nodes 0, 1 and 20 in June 2022"
    )
    want = (
        _rows(month, "ipmi", "ambient")
        .group_by("node")
        .agg(pl.col("value").max().cast(pl.Float64))
        .sort("node")
    )
    _same(rows, list(want.iter_rows()), rel=1e-7)


def test_hottest_nodes_over_their_gpus_are_the_same_on_both_paths(
    month: Path, pushed: Retriever, readings: Retriever
) -> None:
    question = (
        "the 2 nodes with the highest maximum GPU temperature among nodes 0, 1 and 20 "
        "from 1 June 2022 to 3 June 2022"
    )
    rows = _ask_both(pushed, readings, question)
    a = pushed.query(question, as_of=AS_OF)
    assert a.plan is not None
    window = a.plan["window"]
    lo, hi = (datetime.fromisoformat(window[k].replace("Z", "+00:00")) for k in ("start", "end"))
    frames = [_rows(month, "ganglia", f"Gpu{g}_gpu_temp") for g in range(4)]
    want = (
        pl.concat(frames)
        .filter((pl.col("timestamp") >= lo) & (pl.col("timestamp") < hi))
        .group_by("node")
        .agg(pl.col("value").max().cast(pl.Float64))
        .sort(["value", "node"], descending=[True, False])
        .head(2)
    )
    _same(rows, list(want.iter_rows()))


# -- hours above a level: the plan schema (the rules do not plan these questions yet) ----------


# Levels fall between the readings' one-digit decimals, as a typed level does (27 °C): the
# oracle's Float32 comparison and the readings' decimal one then agree on every row.


def _hours_plan(level: float, nodes: list[int], group_by: list[str]) -> QueryPlan:
    return parse_plan(
        {"target": "readings", "metrics": [{"plugin": "ipmi", "metric": "ambient"}],
         "entities": [{"kind": "node", "ids": nodes}],
         "window": {"start": "2022-06-01T00:00:00Z", "end": "2022-07-01T00:00:00Z"},
         "filters": [{"about": "value", "op": "gt", "value": level}],
         "aggregations": [{"fn": "hours"}], "group_by": group_by}
    )  # fmt: skip


def _run_both(pushed: Retriever, readings: Retriever, plan: QueryPlan) -> list[list[Any]]:
    a = pushed.stage2.run(plan, user="tester", request_id="hours-a")
    b = readings.stage2.run(plan, user="tester", request_id="hours-b")
    assert a.scan is not None and b.scan is None
    assert a.result.columns == b.result.columns
    got, other = [list(r) for r in a.result.rows], [list(r) for r in b.result.rows]
    _same(got, other)
    return got


def test_hours_above_a_level_for_one_node(
    month: Path, pushed: Retriever, readings: Retriever
) -> None:
    inlet = _rows(month, "ipmi", "ambient").filter(pl.col("node") == 0)
    level = round(float(inlet["value"].quantile(0.9)), 1) + 0.05  # type: ignore[arg-type]
    rows = _run_both(pushed, readings, _hours_plan(level, [0], []))
    hits = inlet.filter(pl.col("value") > level).height
    assert rows == [[hits * 20 / 3600]]  # the same bits: count x period, then / 3600
    assert 0 < rows[0][0] < 30 * 24


def test_hours_above_a_level_per_node_and_day(
    month: Path, pushed: Retriever, readings: Retriever
) -> None:
    inlet = _rows(month, "ipmi", "ambient")
    level = round(float(inlet["value"].quantile(0.95)), 1) + 0.05  # type: ignore[arg-type]
    rows = _run_both(pushed, readings, _hours_plan(level, [0, 1, 20], ["node", "day"]))
    want = (
        inlet.filter(pl.col("value") > level)
        .group_by("node", pl.col("timestamp").dt.date().alias("d"))
        .agg((pl.len() * 20 / 3600).alias("hours"))
        .sort("node", "d")
    )
    # days without a reading above the level have no row on either path
    assert 0 < want.height < 3 * 30
    _same(rows, [[n, d, h] for n, d, h in want.iter_rows()])


def test_an_hours_question_is_the_same_on_both_paths(
    month: Path, pushed: Retriever, readings: Retriever
) -> None:
    inlet = _rows(month, "ipmi", "ambient").filter(pl.col("node") == 1)
    level = round(float(inlet["value"].quantile(0.8)), 1) + 0.05  # type: ignore[arg-type]
    question = f"how many hours was node 1's inlet above {level:g} °C in June 2022"
    rows = _ask_both(pushed, readings, question)
    assert rows == [[inlet.filter(pl.col("value") > level).height * 20 / 3600]]


# -- a rewritten lake is answered afresh ----------------------------------------------------------


def test_a_regenerated_month_gives_the_new_value(month: Path, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    shutil.copytree(month, lake)
    retriever = _retriever(lake, tmp_path / "data", 0)
    question = "average power of node 0 in June 2022"
    first = retriever.query(question, as_of=AS_OF)
    old = float(_rows(lake, "ipmi", "total_power").filter(pl.col("node") == 0)["value"].mean())  # type: ignore[arg-type]
    assert first.rows == [[pytest.approx(old, rel=1e-9)]]
    again = retriever.query(question, as_of=AS_OF)
    assert again.results[0]["vkg"]["cached"] and again.rows == first.rows
    for part in lake.glob("year_month=22-06/plugin=ipmi_pub/metric=total_power"):
        shutil.rmtree(part)
    generate(build_spec("month", nodes="0", metrics="total_power", seed=7), lake)
    new = float(_rows(lake, "ipmi", "total_power").filter(pl.col("node") == 0)["value"].mean())  # type: ignore[arg-type]
    assert new != pytest.approx(old, rel=1e-6)
    fresh = retriever.query(question, as_of=AS_OF)
    assert fresh.results[0]["vkg"]["key"] != first.results[0]["vkg"]["key"]
    assert not fresh.results[0]["vkg"]["cached"]
    assert fresh.rows == [[pytest.approx(new, rel=1e-9)]]


def test_ask_shows_the_scan_on_stderr_and_in_the_json(month: Path, tmp_path: Path) -> None:
    env = {**os.environ, "ODA_LAKE": str(month), "ODA_DATA_DIR": str(tmp_path / "data"),
           "ODA_PUSHDOWN_MIN_READINGS": "0"}  # fmt: skip
    for key in ("ODA_LLM_BASE_URL", "ODA_SPARQL_ENDPOINT", "ODA_REDIS_URL"):
        env.pop(key, None)
    question = "daily average node power per rack over June 2022"
    args = ["ask", question, "--as-of", AS_OF.isoformat()]
    text = subprocess.run([*cli_command(), *args], env=env, capture_output=True, text=True,
                          timeout=600, check=False)  # fmt: skip
    assert text.returncode == 0, text.stderr
    rows = _rows(month, "ipmi", "total_power").height
    line = f"lake scan of plan 1/1: 1/1 partitions, {rows:,} rows (22-06/ipmi/total_power)"
    assert line in text.stderr
    as_json = subprocess.run([*cli_command(), *args, "--json"], env=env, capture_output=True,
                             text=True, timeout=600, check=False)  # fmt: skip
    assert as_json.returncode == 0, as_json.stderr
    answer = json.loads(as_json.stdout)
    scan = answer["results"][0]["scan"]
    assert scan["partitions"] == ["22-06/ipmi/total_power"] and scan["cached"]  # built above
    assert answer["results"][0]["vkg"]["cached"] and len(answer["rows"]) == 2 * 30
