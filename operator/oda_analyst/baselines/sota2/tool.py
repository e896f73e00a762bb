"""The Datalake Query Tool: the planner's lake queries, joined by node and time, as inline JSON.

No graph and no validation beyond the lake's own (a metric must exist to be scanned). Results
are inline JSON only — there is no CSV export — so a result beyond ``MAX_INLINE_ROWS`` rows is
cut there and says so (``truncated``); no clarification either (``clarify`` refuses).
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from oda_analyst.baselines.payload import (
    AnswerStatus,
    BaselineAnswer,
    completed,
    failed,
    new_request_id,
)
from oda_analyst.baselines.sota2.datalake import Datalake
from oda_analyst.baselines.sota2.planner import LakePlan, plan
from oda_analyst.config import Settings, get_settings
from oda_analyst.errors import OdaError, UsageError
from oda_analyst.lake import Lake

BACKEND = "sota2"
MAX_INLINE_ROWS = 50_000
STAT_EXPR = {
    "avg": pl.col("value").mean(),
    "max": pl.col("value").max(),
    "min": pl.col("value").min(),
    "sum": pl.col("value").sum(),
    "std": pl.col("value").std(ddof=1),
}


def _readings(frame: pl.DataFrame) -> pl.DataFrame:
    """A lake query's rows in the answer's column names (node_id when the plugin has nodes)."""
    cols = [
        pl.col("metric").cast(pl.String).alias("metric_name"),
        pl.col("timestamp"),
        pl.col("value").cast(pl.Float64),
    ]
    if "node" in frame.columns:
        cols.insert(0, pl.col("node").cast(pl.String).cast(pl.Int64).alias("node_id"))
    return frame.select(cols)


def join_job_readings(jobs: pl.DataFrame, readings: pl.DataFrame) -> pl.DataFrame:
    """Step 5's join: each job's rows are its nodes' readings inside its own run."""
    runs = (
        jobs.select(
            pl.col("job_id").cast(pl.Int64),
            pl.col("node_list").alias("node_id"),
            pl.col("start_time"),
            pl.col("end_time"),
        )
        .explode("node_id")
        .with_columns(pl.col("node_id").cast(pl.Int64))
    )
    return (
        runs.join(readings, on="node_id", how="inner")
        .filter(
            (pl.col("timestamp") >= pl.col("start_time"))
            & (pl.col("timestamp") < pl.col("end_time"))
        )
        .select("job_id", "node_id", "metric_name", "timestamp", "value")
    )


def run_plan(lp: LakePlan, lake: Datalake) -> pl.DataFrame:
    """One targeted query per source, joined and shaped as the plan says."""
    if lp.form == "job_count":
        assert lp.start is not None and lp.end is not None
        table = lake.jobs(start=lp.start, end=lp.end)
        if lp.nodes:
            table = table.filter(
                pl.col("node_list").list.eval(pl.element().is_in(list(lp.nodes))).list.any()
            )
        return pl.DataFrame({"count_job": [table.height]})
    op, value = lp.threshold if lp.threshold else (None, None)
    job_table = None
    start, end, nodes = lp.start, lp.end, lp.nodes
    if lp.jobs:
        job_table = lake.jobs(job_ids=list(lp.jobs)).filter(
            pl.col("start_time").is_not_null() & pl.col("end_time").is_not_null()
        )
        if job_table.height == 0:
            return pl.DataFrame(
                schema={
                    "job_id": pl.Int64,
                    "node_id": pl.Int64,
                    "metric_name": pl.String,
                    "value": pl.Float64,
                }
            )
        nodes = tuple(int(n) for ns in job_table["node_list"].to_list() for n in ns or [])
        start = start or job_table["start_time"].min()  # type: ignore[assignment]
        end = end or job_table["end_time"].max()  # type: ignore[assignment]
    assert start is not None and end is not None
    parts = [
        _readings(lake.query(p, m, start=start, end=end, nodes=nodes, op=op, value=value))
        for p, m in lp.metrics
    ]
    rows = pl.concat(parts, how="diagonal_relaxed")
    if job_table is not None:
        rows = join_job_readings(job_table, rows)
    keys = [k for k in ("job_id", "node_id") if k in rows.columns] + ["metric_name"]
    if lp.form == "node_count":
        return pl.DataFrame({"count_node": [rows["node_id"].n_unique()]})
    if lp.form == "nodes":
        return rows.group_by("node_id").agg(pl.len().alias("count_value")).sort("node_id")
    if lp.stat:
        return rows.group_by(keys).agg(STAT_EXPR[lp.stat].alias(f"{lp.stat}_value")).sort(keys)
    return rows.sort([*keys, "timestamp"])


def _json_rows(frame: pl.DataFrame) -> list[list[Any]]:
    out = []
    for row in frame.iter_rows():
        out.append(
            [v.isoformat().replace("+00:00", "Z") if isinstance(v, datetime) else v for v in row]
        )
    return out


class DatalakeQueryTool:
    """SoTA#2 over a lake (default: the settings')."""

    def __init__(self, settings: Settings | None = None, *, lake: Lake | None = None) -> None:
        self.settings = settings or get_settings()
        self.datalake = Datalake(lake or Lake.from_settings(self.settings))

    def query(
        self, question: str, *, user: str = "anonymous", as_of: datetime | None = None
    ) -> BaselineAnswer:
        """Plan by name match, query the raw lake, join, answer inline (or fail)."""
        del user, as_of  # no access control of its own; no relative times
        rid = new_request_id(BACKEND)
        timings: dict[str, float] = {}
        began = time.perf_counter()
        try:
            lp = plan(question, self.datalake)
            timings["planning"] = round(time.perf_counter() - began, 4)
            t0 = time.perf_counter()
            frame = run_plan(lp, self.datalake)
            timings["lake_queries"] = round(time.perf_counter() - t0, 4)
        except OdaError as err:
            status: AnswerStatus = "rejected" if err.exit_code == 4 else "failed"
            return failed(BACKEND, err, request_id=rid, status=status, timings=timings)
        truncated = frame.height > MAX_INLINE_ROWS
        shown = frame.head(MAX_INLINE_ROWS)
        res = {
            "columns": list(frame.columns),
            "rows": _json_rows(shown),
            "row_count": shown.height,
            "truncated": truncated,
            "csv": None,
            "csv_handle": None,
            "preview": [],
            "notes": [],
            "sparql": None,
            "explanation": f"lake queries: {lp.describe()}",
            "plan": {"lake_plan": lp.describe()},
        }
        warnings = (
            [
                f"result cut at {MAX_INLINE_ROWS:,} of {frame.height:,} rows: this tool has "
                "no CSV export"
            ]
            if truncated
            else []
        )
        text = f"{lp.describe()}: {frame.height:,} row(s)."
        return completed(
            BACKEND,
            [res],
            request_id=rid,
            answer=text,
            timings=timings,
            warnings=warnings,
            understood_as=lp.describe(),
        )

    def clarify(self, request_id: str, answer: str, *, user: str = "anonymous") -> BaselineAnswer:
        raise UsageError(
            f"request {request_id} asked nothing: the Datalake Query Tool has no clarification",
            hint="ask again naming the metric as the lake spells it, the nodes and the window",
        )

    def download_csv(self, handle: str, *, user: str = "anonymous") -> Path:
        raise UsageError(
            "the Datalake Query Tool has no CSV export: results come back inline only",
            hint="narrow the window or the nodes so the result fits inline",
        )
