"""Jobs grouped by partition, final state and QoS, selected by submission, and their queue waits
(issue 29): each plan shape is validated, compiled, built into a VKG from a tiny generated lake
and run; every expected figure is computed with plain Polars from the lake's job table.

Before these, a jobs plan grouped by user, node, day or hour only ('cannot group by partition
yet'), selected jobs by their start, end or run (submission was refused as out of scope) and
had no per-job wait.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from oda_analyst.lake.reader import Lake
from oda_analyst.lake.synth import build_spec, generate
from oda_analyst.ontology import namespaces as ns
from oda_analyst.ontology.plan import QueryPlan, output_columns, parse_plan
from oda_analyst.sparql.compiler import compile_plan
from oda_analyst.sparql.executor import execute
from oda_analyst.vkg.builder import build_vkg
from oda_analyst.vkg.request import from_plan
from oda_analyst.vkg.store import OxigraphStore

GRAPH = ns.INSTANCE_NS + "graph/vkg/jobgroups"
START = datetime(2022, 6, 1, 0, 0, tzinfo=UTC)
END = datetime(2022, 6, 1, 1, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Lake:
    out = tmp_path_factory.mktemp("jobgroups-lake")
    generate(build_spec("tiny", metrics="total_power"), out)
    return Lake(out)


@pytest.fixture(scope="module")
def table(lake: Lake) -> pl.DataFrame:
    """Every job of the lake, one row each (its last state), read with plain Polars."""
    return lake.jobs().collect()


def body(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "target": "jobs",
        "entities": [{"kind": "job", "all": True}],
        "window": {"start": START.isoformat(), "end": END.isoformat()},
    }
    return base | over


def run(lake: Lake, plan: QueryPlan, tmp: Path) -> list[dict[str, Any]]:
    store = OxigraphStore(None)
    build_vkg(from_plan(plan, lake), lake, store, GRAPH)
    compiled = compile_plan(plan, graph=GRAPH)
    result = execute(store, compiled, row_limit=100_000, out_dir=tmp, request_id="t")
    assert result.rows is not None
    assert result.columns == output_columns(plan)
    return [{c: float(v) if isinstance(v, Decimal) else v for c, v in zip(result.columns, row,
                                                                        strict=True)}
            for row in result.rows]  # fmt: skip


def _in(column: str) -> pl.Expr:
    return (pl.col(column) >= START) & (pl.col(column) < END)


@pytest.mark.parametrize(
    ("key", "column", "event", "time"),
    [
        ("partition", "partition", "started", "start_time"),
        ("state", "job_state", "ended", "end_time"),
        ("qos", "qos", "started", "start_time"),
    ],
)
def test_jobs_counted_per_job_attribute(
    lake: Lake, table: pl.DataFrame, tmp_path: Path, key: str, column: str, event: str, time: str
) -> None:
    plan = parse_plan(body(job_event=event, aggregations=[{"fn": "count", "of": "job"}],
                           group_by=[key]))  # fmt: skip
    rows = run(lake, plan, tmp_path)
    # a job cancelled before it started has no run: jobs of a start or end event have started
    chosen = table.filter(_in(time) & pl.col("start_time").is_not_null())
    want = dict(chosen.group_by(column).len().iter_rows())
    assert len(want) > 1  # the tiny lake has several groups: the test means something
    assert {r[column]: r["count_job"] for r in rows} == want


def test_cpu_hours_per_partition_are_the_hours_inside_the_window(
    lake: Lake, table: pl.DataFrame, tmp_path: Path
) -> None:
    plan = parse_plan(body(derived=["cpu_hours"], group_by=["partition"],
                           aggregations=[{"fn": "sum", "of": "cpu_hours"},
                                         {"fn": "count", "of": "job"}]))  # fmt: skip
    rows = run(lake, plan, tmp_path)
    inside = (
        pl.min_horizontal(pl.col("end_time"), pl.lit(END))
        - pl.max_horizontal(pl.col("start_time"), pl.lit(START))
    ).dt.total_milliseconds() / 3_600_000
    running = table.filter((pl.col("start_time") < END) & (pl.col("end_time") > START))
    want = (
        running.with_columns((inside * pl.col("num_cpus")).alias("h"))
        .group_by("partition")
        .agg(pl.col("h").sum(), pl.len())
    )
    got = {r["partition"]: (r["sum_cpu_hours"], r["count_job"]) for r in rows}
    assert set(got) == set(want["partition"])
    for part, hours, n in want.iter_rows():
        assert got[part][0] == pytest.approx(hours, rel=1e-9) and got[part][1] == n


def test_jobs_submitted_in_the_window_include_those_that_started_later_or_never(
    lake: Lake, table: pl.DataFrame, tmp_path: Path
) -> None:
    plan = parse_plan(body(job_event="submitted"))
    rows = run(lake, plan, tmp_path)
    want = table.filter(_in("submit_time"))
    assert sorted(r["job_id"] for r in rows) == sorted(want["job_id"].to_list())
    # what a window of runs would not select: jobs that were still waiting when it closed
    later = want.filter(pl.col("start_time").is_null() | (pl.col("start_time") >= END))
    assert later.height > 0
    assert {r["job_id"] for r in rows} >= set(later["job_id"].to_list())


def test_jobs_submitted_per_hour_bucket_by_submission(
    lake: Lake, table: pl.DataFrame, tmp_path: Path
) -> None:
    plan = parse_plan(body(window={"start": START.isoformat(),
                                   "end": datetime(2022, 6, 1, 3, tzinfo=UTC).isoformat()},
                           job_event="submitted", group_by=["hour"],
                           aggregations=[{"fn": "count", "of": "job"}]))  # fmt: skip
    rows = run(lake, plan, tmp_path)
    assert len(rows) == 3
    for row in rows:
        hour = row["hour"]
        lo = hour if isinstance(hour, datetime) else datetime.fromisoformat(str(hour))
        lo = lo.astimezone(UTC)
        hi = lo.replace(hour=lo.hour + 1)
        n = table.filter((pl.col("submit_time") >= lo) & (pl.col("submit_time") < hi)).height
        assert row["count_job"] == n


def test_queue_wait_is_start_minus_submit_in_minutes(
    lake: Lake, table: pl.DataFrame, tmp_path: Path
) -> None:
    plan = parse_plan(body(job_event="started", derived=["queue_wait"],
                           job_fields=["partition"]))  # fmt: skip
    rows = run(lake, plan, tmp_path)
    want = table.filter(_in("start_time")).with_columns(
        ((pl.col("start_time") - pl.col("submit_time")).dt.total_milliseconds() / 60_000).alias("w")
    )
    waits = dict(want.select("job_id", "w").iter_rows())
    assert len(rows) == len(waits) > 0
    for row in rows:
        assert row["queue_wait_min"] == pytest.approx(waits[row["job_id"]], abs=1e-6)
    median = parse_plan(body(job_event="started", derived=["queue_wait"], group_by=["partition"],
                             aggregations=[{"fn": "median", "of": "queue_wait_min"},
                                           {"fn": "count", "of": "job"}]))  # fmt: skip
    per = {r["partition"]: r["median_queue_wait_min"] for r in run(lake, median, tmp_path)}
    for part, group in want.group_by("partition"):
        assert per[str(part[0])] == pytest.approx(group["w"].median(), abs=1e-6)


@pytest.mark.parametrize(
    ("over", "message"),
    [
        # a reading has no partition: per partition groups jobs
        ({"target": "readings", "metrics": [{"plugin": "ipmi", "metric": "total_power"}],
          "entities": [{"kind": "node", "all": True}], "group_by": ["partition"],
          "aggregations": [{"fn": "avg", "of": "value"}]}, "group by"),
        # a wait is per job: no day bucket holds one
        ({"derived": ["queue_wait"], "group_by": ["day"],
          "aggregations": [{"fn": "count", "of": "job"}]}, "per job"),
        # a median of waits needs the waits
        ({"group_by": ["partition"], "aggregations": [{"fn": "median", "of": "queue_wait_min"}]},
         "derived"),
    ],
)  # fmt: skip
def test_plans_the_compiler_cannot_honour_are_refused(over: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_plan(body(**over))


def test_the_graph_holds_the_attributes_a_grouped_plan_reads(lake: Lake) -> None:
    plan = parse_plan(body(job_event="submitted", derived=["queue_wait"], group_by=["state"],
                           aggregations=[{"fn": "count", "of": "job"}]))  # fmt: skip
    assert set(from_plan(plan, lake).job_properties or ()) == {"jobState", "submitTime"}
