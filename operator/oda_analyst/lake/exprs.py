"""Pure helpers that turn a request (window, tag filters) into Polars expressions per file schema.

Predicates are written against each file's own column types (Categorical or plain string tags,
aware or naive timestamps) so that Polars can push them into the Parquet reader; casts to the
stable output types come after the filter.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

import polars as pl
import pyarrow as pa

from oda_analyst.errors import UsageError
from oda_analyst.lake.layout import month_bounds


def as_utc(moment: datetime | None, name: str) -> datetime | None:
    """Aware UTC datetime; a naive one is taken to be UTC already."""
    if moment is None:
        return None
    if not isinstance(moment, datetime):
        raise UsageError(f"{name} must be a datetime, not {type(moment).__name__}")
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def check_window(start: datetime | None, end: datetime | None) -> None:
    """Raise UsageError for an empty window [start, end)."""
    if start is not None and end is not None and start >= end:
        raise UsageError(
            f"empty time window: start {start.isoformat()} is not before end {end.isoformat()}",
            hint="the window is [start, end): give an end after the start",
        )


def months_touching(
    months: Iterable[str], start: datetime | None, end: datetime | None
) -> list[str]:
    """The ``YY-MM`` months (of those given) that overlap [start, end); None is unbounded."""
    picked = []
    for month in months:
        first, after = month_bounds(month)
        if (end is None or first < end) and (start is None or after > start):
            picked.append(month)
    return picked


def months_back(moment: datetime, back: int) -> datetime:
    """Midnight UTC on the first day of the month ``back`` months before ``moment``'s month."""
    index = moment.year * 12 + moment.month - 1 - back
    return datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)


def _is_integer(dtype: pa.DataType) -> bool:
    if pa.types.is_dictionary(dtype):
        dtype = dtype.value_type
    return bool(pa.types.is_integer(dtype))


def is_in(column: str, dtype: pa.DataType, values: Sequence[str]) -> pl.Expr:
    """``column IN values`` typed like the file's column, so Polars pushes it into the scan."""
    if _is_integer(dtype):
        numbers = [int(v) for v in values if v.lstrip("-").isdigit()]
        return pl.col(column).is_in(numbers)
    return pl.col(column).is_in(list(values))


def time_bounds(dtype: pa.DataType, start: datetime | None, end: datetime | None) -> pl.Expr:
    """``start <= timestamp < end`` with literals in the column's own time zone convention."""
    naive = isinstance(dtype, pa.TimestampType) and dtype.tz is None
    expr = pl.lit(True)
    if start is not None:
        expr = expr & (pl.col("timestamp") >= (start.replace(tzinfo=None) if naive else start))
    if end is not None:
        expr = expr & (pl.col("timestamp") < (end.replace(tzinfo=None) if naive else end))
    return expr


def as_utc_ms(column: str, dtype: pa.DataType) -> pl.Expr:
    expr = pl.col(column)
    if isinstance(dtype, pa.TimestampType) and dtype.tz is None:
        expr = expr.dt.replace_time_zone("UTC")
    return expr.cast(pl.Datetime("ms", "UTC"))


def stringify(dtype: pa.DataType, expr: pl.Expr) -> pl.Expr:
    # Dictionary columns come back as Categorical; the contract promises plain strings.
    if (
        pa.types.is_dictionary(dtype)
        or pa.types.is_string(dtype)
        or pa.types.is_large_string(dtype)
    ):
        return expr.cast(pl.String)
    return expr
