"""Paths of the M100 ExaData layout.

``year_month=YY-MM/plugin=<folder>/metric=<metric>/a_0.parquet``
"""

from __future__ import annotations

from datetime import UTC, datetime

from oda_analyst.lake.schema import folder_name

FILE_NAME = "a_0.parquet"


def year_month(moment: datetime) -> str:
    """The ``YY-MM`` partition value of a moment (UTC)."""
    return moment.astimezone(UTC).strftime("%y-%m")


def months_between(start: datetime, end: datetime) -> list[str]:
    """``YY-MM`` values of every month that [start, end) touches, in order."""
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    months: list[str] = []
    y, m = start.year, start.month
    while (y, m) <= (end.year, end.month):
        first = datetime(y, m, 1, tzinfo=UTC)
        if first < end or (y, m) == (start.year, start.month):
            months.append(f"{y % 100:02d}-{m:02d}")
        y, m = (y + 1, 1) if m == 12 else (y, m + 1)
    return months


def month_bounds(ym: str) -> tuple[datetime, datetime]:
    """[start, end) of a ``YY-MM`` month."""
    yy, mm = (int(p) for p in ym.split("-"))
    start = datetime(2000 + yy, mm, 1, tzinfo=UTC)
    end = datetime(2000 + yy + (mm == 12), 1 if mm == 12 else mm + 1, 1, tzinfo=UTC)
    return start, end


def partition_dir(ym: str, plugin: str, metric: str) -> str:
    """Relative folder of one partition."""
    return f"year_month={ym}/plugin={folder_name(plugin)}/metric={metric}"


def partition_file(ym: str, plugin: str, metric: str) -> str:
    """Relative path of one partition's Parquet file."""
    return f"{partition_dir(ym, plugin, metric)}/{FILE_NAME}"
