"""Pure Polars expressions over the job table: overlap with a window, last-state dedupe, node lists.

The job table holds one row per Slurm state poll, so one job appears many times and its columns
change as it moves from PENDING to RUNNING to a final state. These functions turn polls into one
row per job.
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

# How far a job has progressed. A later poll never moves a job backwards except on requeue, so
# the most advanced state is the most trustworthy "last" state even when polls are duplicated
# or files are read out of order.
STATE_RANK: dict[str, int] = {
    "PENDING": 0,
    "CONFIGURING": 1,
    "RUNNING": 1,
    "SUSPENDED": 1,
    "COMPLETING": 1,
    "REQUEUED": 1,
    "RESIZING": 1,
    "COMPLETED": 2,
    "FAILED": 2,
    "CANCELLED": 2,
    "TIMEOUT": 2,
    "OUT_OF_MEMORY": 2,
    "NODE_FAIL": 2,
    "PREEMPTED": 2,
    "BOOT_FAIL": 2,
    "DEADLINE": 2,
}
_UNKNOWN_STATE_RANK = 1
_ROW = "__row"
_RANK = "__state_rank"


def state_rank() -> pl.Expr:
    """Rank of ``job_state`` (0 pending, 1 active, 2 final; unknown states count as active)."""
    return (
        pl.col("job_state")
        .cast(pl.String)
        .replace_strict(STATE_RANK, default=_UNKNOWN_STATE_RANK, return_dtype=pl.Int8)
    )


def dedupe_last_state(polls: pl.LazyFrame) -> pl.LazyFrame:
    """One row per ``job_id``: the poll that is "last" by this rule, in order of precedence:

    1. the most advanced ``job_state`` (final > running > pending, see STATE_RANK);
    2. then the latest non-null ``end_time`` (a null end time counts as earliest);
    3. then the latest non-null ``last_sched_eval``;
    4. then the poll read last (months in order, files by name, rows in file order).

    Output rows are ordered by ``job_id``.
    """
    columns = polls.collect_schema().names()
    keys = [_RANK] + [c for c in ("end_time", "last_sched_eval") if c in columns] + [_ROW]
    return (
        polls.with_row_index(_ROW)
        .with_columns(state_rank().alias(_RANK))
        .sort(["job_id", *keys], nulls_last=False)
        .unique(subset="job_id", keep="last", maintain_order=True)
        .drop(_ROW, _RANK)
    )


def overlap_filter(start: datetime | None, end: datetime | None) -> pl.Expr:
    """Jobs that ran during [start, end): started before ``end``, not ended by ``start``.

    With any bound given, a job that never started (null ``start_time``) does not overlap.
    """
    expr = pl.lit(True)
    if start is not None or end is not None:
        expr = pl.col("start_time").is_not_null()
    if end is not None:
        expr = expr & (pl.col("start_time") < end)
    if start is not None:
        expr = expr & (pl.col("end_time").is_null() | (pl.col("end_time") > start))
    return expr


def submitted_filter(start: datetime | None, end: datetime | None) -> pl.Expr:
    """Jobs submitted during [start, end) (``submit_time`` inside it), started or not."""
    expr = pl.lit(True)
    if start is not None:
        expr = expr & (pl.col("submit_time") >= start)
    if end is not None:
        expr = expr & (pl.col("submit_time") < end)
    return expr


def node_list(column: str = "nodes") -> pl.Expr:
    """Parse node lists such as ``"[12, 13]"``, ``"[]"`` or ranges ``"[1-3, 7]"`` to List[Int32]."""
    item = pl.element()
    first = item.str.extract(r"^(\d+)", 1).cast(pl.Int32)
    last = item.str.extract(r"(\d+)$", 1).cast(pl.Int32)
    return (
        pl.col(column)
        .cast(pl.String)
        .str.extract_all(r"\d+(?:-\d+)?")
        .list.eval(pl.int_ranges(first, last + 1, dtype=pl.Int32).explode())
        .alias("node_list")
    )
