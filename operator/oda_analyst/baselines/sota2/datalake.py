"""The Datalake Query API: what SoTA#2 can do with the raw lake, and nothing more.

List the plugins and their metrics, describe a metric's columns, and run one targeted query —
one plugin/metric, optionally some nodes, a window, a value condition — returning rows. There is
no ontology, no topology (racks, rooms) and no relation between sources: joining a metric with
the job table is the caller's job (``planner.join_job_readings``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import polars as pl

from oda_analyst.errors import UsageError
from oda_analyst.lake import Lake

JOB_TABLE = "job_table"
Op = Literal["gt", "ge", "lt", "le"]


@dataclass(frozen=True)
class ColumnInfo:
    name: str
    dtype: str


class Datalake:
    """The query API over one lake (local or S3), read with Polars."""

    def __init__(self, lake: Lake) -> None:
        self.lake = lake

    def list_plugins(self) -> list[str]:
        return self.lake.plugins()

    def list_metrics(self, plugin: str) -> list[str]:
        return self.lake.metrics(plugin)

    def describe(self, plugin: str, metric: str) -> list[ColumnInfo]:
        """The columns a query of ``plugin/metric`` returns, with their types."""
        if plugin == JOB_TABLE:
            schema = self.lake.jobs().collect_schema()
        else:
            schema = self.lake.scan(plugin, metric).collect_schema()
        return [ColumnInfo(name, str(dtype)) for name, dtype in schema.items()]

    def query(self, plugin: str, metric: str, *, start: datetime, end: datetime,
              nodes: Sequence[int] | None = None, op: Op | None = None,
              value: float | None = None) -> pl.DataFrame:  # fmt: skip
        """Rows of one metric in [start, end): timestamp, metric, the plugin's tags, value."""
        if plugin == JOB_TABLE:
            raise UsageError("the job table is read with jobs()", hint="call jobs(start, end)")
        lf = self.lake.scan(plugin, metric, start=start, end=end,
                            nodes=None if nodes is None else [str(n) for n in nodes])  # fmt: skip
        if op is not None and value is not None:
            x = pl.col("value")
            lf = lf.filter({"gt": x > value, "ge": x >= value, "lt": x < value,
                            "le": x <= value}[op])  # fmt: skip
        return lf.collect()

    def jobs(self, *, start: datetime | None = None, end: datetime | None = None,
             job_ids: Sequence[int] | None = None) -> pl.DataFrame:  # fmt: skip
        """Job-table rows (one per job) that ran in [start, end), or of these ids."""
        return self.lake.jobs(start=start, end=end, job_ids=job_ids).collect()
