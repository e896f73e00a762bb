"""The scan stage's job windows on a lake whose every row the test writes.

Readings of a node inside its jobs' windows, once per (metric, node, timestamp) — the first one
in file order — raw or as bucket means cut at the window start, whatever the order of the file
(node-major, time-major, shuffled) and whether windows of a node overlap (the general path) or
not (the binary-search path). The expectation is computed per window straight from the rows.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from oda_analyst.lake.reader import Lake
from oda_analyst.lake.schema import folder_name, metric_schema
from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.vkg.request import GroundedRequest, JobWindow
from oda_analyst.vkg.scan import _WindowIndex, scan_readings

T0 = datetime(2022, 6, 1, tzinfo=UTC)
STEP_S = 20
NODES = 6
POLLS = 4 * 3600 // STEP_S  # 00:00 - 04:00
METRICS = ("ambient", "total_power")
# Disjoint per node; node 1's two windows touch (end == start); node 4 has none; node 5's
# window runs past the data; starts and ends cut minute and hour buckets, and node 1's shared
# bound and its last end fall on a poll.
DISJOINT = (
    JobWindow(job_id=1, nodes=(0, 1), start=T0 + timedelta(minutes=10, seconds=30),
              end=T0 + timedelta(hours=1, minutes=20, seconds=3)),
    JobWindow(job_id=2, nodes=(1,), start=T0 + timedelta(hours=1, minutes=20, seconds=3),
              end=T0 + timedelta(hours=2, minutes=5, seconds=3)),
    JobWindow(job_id=3, nodes=(2, 3), start=T0, end=T0 + timedelta(hours=3)),
    JobWindow(job_id=4, nodes=(5,), start=T0 + timedelta(hours=3, minutes=30),
              end=T0 + timedelta(hours=5)),
)  # fmt: skip


def _rows(metric: str, order: str, duplicates: bool) -> pl.DataFrame:
    """One metric's rows in file order; repeated polls (other values) follow their originals."""
    rng = np.random.default_rng(len(metric))
    times = [T0 + timedelta(seconds=STEP_S * i + 3) for i in range(POLLS)]
    frame = pl.DataFrame(
        {
            "timestamp": [t for _ in range(NODES) for t in times],
            "node": [str(n) for n in range(NODES) for _ in times],
            "value": rng.integers(100, 900, NODES * POLLS),
        }
    )
    if order == "time":
        frame = frame.sort("timestamp", pl.col("node").cast(pl.Int32))
    elif order == "shuffled":
        frame = frame.sample(fraction=1.0, shuffle=True, seed=7)
    if duplicates:
        again = frame.gather_every(17).with_columns(pl.col("value") + 1000)
        frame = pl.concat([frame, again])
        # node/time order: each repeat right after its original, the file stays in that order
        node = pl.col("node").cast(pl.Int32)
        if order == "node":
            frame = frame.sort(node, "timestamp", maintain_order=True)
        elif order == "time":
            frame = frame.sort("timestamp", node, maintain_order=True)
    return frame


def _write(root: Path, order: str, duplicates: bool) -> dict[str, pl.DataFrame]:
    written = {}
    for metric in METRICS:
        rows = _rows(metric, order, duplicates)
        schema = metric_schema("ipmi", metric)
        folder = root / "year_month=22-06" / f"plugin={folder_name('ipmi')}" / f"metric={metric}"
        folder.mkdir(parents=True)
        table = pa.table(
            {
                "timestamp": pa.array(rows["timestamp"].to_list(), pa.timestamp("ms", "UTC")),
                "node": pa.array(rows["node"].to_list()).dictionary_encode(),
                "value": pa.array(rows["value"].to_list()),
            }
        )
        pq.write_table(table.cast(schema), folder / "a_0.parquet", row_group_size=1000)
        written[metric] = rows.with_columns(
            pl.lit(metric).alias("metric"),
            pl.col("value").cast(pl.Float32 if metric == "ambient" else pl.Int32).cast(pl.Float64),
        )
    return written


def _expected(
    written: dict[str, pl.DataFrame],
    windows: tuple[JobWindow, ...],
    granularity: str,
    metrics: tuple[str, ...] = METRICS,
    *,
    window_column: bool = False,
) -> pl.DataFrame:
    """Per window and node, straight from the rows; the first poll of an instant wins. Buckets
    are per window (with its start as ``ws`` when ``window_column``)."""
    parts = []
    for rows in (written[m] for m in metrics):
        first = rows.unique(subset=["node", "timestamp"], keep="first", maintain_order=True)
        for w in windows:
            for node in w.nodes:
                parts.append(
                    first.filter(
                        (pl.col("node") == str(node))
                        & (pl.col("timestamp") >= w.start)
                        & (pl.col("timestamp") < w.end)
                    ).with_columns(pl.lit(w.start).alias("ws"))
                )
    rows = pl.concat(parts).with_columns(pl.col("timestamp").cast(pl.Datetime("ms", "UTC")))
    if granularity == "raw":
        return rows.unique(subset=["metric", "node", "timestamp"]).select(
            "timestamp", "metric", "node", pl.col("value").cast(pl.Float64)
        )
    size = {"minute": "1m", "hour": "1h"}[granularity]
    start = pl.col("ws").cast(pl.Datetime("ms", "UTC"))
    bucket = pl.max_horizontal(pl.col("timestamp").dt.truncate(size), start)
    means = rows.group_by("metric", "node", "ws", bucket.alias("b")).agg(
        pl.col("value").cast(pl.Float64).mean(), pl.len().alias("n")
    )
    extra = ["ws"] if window_column else []
    return means.select(pl.col("b").alias("timestamp"), "metric", "node", "value", "n", *extra)


def _scan(
    root: Path,
    windows: tuple[JobWindow, ...],
    granularity: str,
    metrics: tuple[str, ...] = METRICS,
) -> tuple[pl.DataFrame, int]:
    req = GroundedRequest(
        job_windows=windows,
        metrics=tuple(("ipmi", m) for m in metrics),
        granularity=granularity,
    )
    (frame,) = scan_readings(req, Lake(root), load_catalogue())
    return frame.data, frame.rows_scanned


def _same(got: pl.DataFrame, want: pl.DataFrame) -> None:
    keys = ["metric", "node", "timestamp"]
    got, want = got.sort(keys), want.sort(keys)
    assert got.select(keys).equals(want.select(keys))
    values = got["value"].cast(pl.Float64).to_list()
    assert values == pytest.approx(want["value"].to_list(), rel=1e-12)


@pytest.mark.parametrize("granularity", ["raw", "minute", "hour"])
@pytest.mark.parametrize("duplicates", [False, True])
@pytest.mark.parametrize("order", ["node", "time", "shuffled"])
# one metric in node order: keys sorted, windows located by a merge; else a binary search each
@pytest.mark.parametrize("metrics", [("total_power",), METRICS])
def test_disjoint_windows_keep_the_first_poll_inside_each_window(
    tmp_path: Path, metrics: tuple[str, ...], order: str, duplicates: bool, granularity: str
) -> None:
    written = _write(tmp_path, order, duplicates)
    assert _WindowIndex.of(GroundedRequest(job_windows=DISJOINT), list(metrics)) is not None
    got, scanned = _scan(tmp_path, DISJOINT, granularity, metrics)
    want = _expected(written, DISJOINT, granularity, metrics)
    assert got.height == want.height > 0
    _same(got, want)
    assert got.schema["timestamp"] == pl.Datetime("ms", "UTC")
    # raw: the readings kept; buckets: the readings averaged into them
    assert scanned == (got.height if granularity == "raw" else want["n"].sum())


@pytest.mark.parametrize("granularity", ["raw", "hour"])
@pytest.mark.parametrize("duplicates", [False, True])
@pytest.mark.parametrize("order", ["node", "shuffled"])
def test_overlapping_windows_take_the_join_and_count_a_reading_once(
    tmp_path: Path, granularity: str, duplicates: bool, order: str
) -> None:
    written = _write(tmp_path, order, duplicates)
    # Inside job 1's run on node 0 and within one hour, so no bucket start is shared by two
    # windows (the next test shares them).
    shared = JobWindow(
        job_id=9, nodes=(0, 4), start=T0 + timedelta(minutes=50), end=T0 + timedelta(minutes=59)
    )
    windows = (*DISJOINT, shared)
    assert _WindowIndex.of(GroundedRequest(job_windows=windows), list(METRICS)) is None
    got, _ = _scan(tmp_path, windows, granularity)
    want = _expected(written, windows, granularity)
    assert got.height == want.height > 0
    _same(got, want)


@pytest.mark.parametrize("duplicates", [False, True])
def test_a_bucket_cut_by_two_windows_keeps_the_mean_over_more_readings(
    tmp_path: Path, duplicates: bool
) -> None:
    written = _write(tmp_path, "shuffled", duplicates)
    # Node 2 runs job 3 over 00:00-03:00; job 11 runs there too, from 00:30 to 02:40. Both cut
    # the 01:00 and 02:00 buckets at the same start: 01:00 has 180 readings in job 3 and in job
    # 11, 02:00 has 180 against 120. The earlier window (job 3) wins the tie, more readings win
    # otherwise: job 3's mean both times. Job 11's own 00:30 bucket stays.
    late = JobWindow(
        job_id=11,
        nodes=(2,),
        start=T0 + timedelta(minutes=30),
        end=T0 + timedelta(hours=2, minutes=40),
    )
    windows = (*DISJOINT, late)
    got, _ = _scan(tmp_path, windows, "hour")
    keys = ["metric", "node", "timestamp"]
    want = (
        _expected(written, windows, "hour", window_column=True)
        .sort([*keys, "n", "ws"], descending=[False, False, False, True, False])
        .unique(subset=keys, keep="first", maintain_order=True)
    )
    assert got.height == want.height > 0
    _same(got, want)
    node2 = got.filter((pl.col("node") == "2") & (pl.col("metric") == "total_power"))
    assert node2["timestamp"].to_list() == [T0 + timedelta(minutes=m) for m in (0, 30, 60, 120)]


def test_identical_windows_of_two_jobs_are_one(tmp_path: Path) -> None:
    written = _write(tmp_path, "node", duplicates=False)
    twin = DISJOINT[2].model_copy(update={"job_id": 10})
    windows = (*DISJOINT, twin)
    assert _WindowIndex.of(GroundedRequest(job_windows=windows), list(METRICS)) is not None
    got, scanned = _scan(tmp_path, windows, "raw")
    want = _expected(written, DISJOINT, "raw")
    assert scanned == got.height == want.height
    _same(got, want)


def test_window_keys_are_sorted_and_reject_other_nodes() -> None:
    index = _WindowIndex.of(GroundedRequest(job_windows=DISJOINT), list(METRICS))
    assert index is not None
    assert index.starts.is_sorted() and (index.ends > index.starts).all()
    # node 4 has no window: its readings fall between node 3's end and node 5's start keys
    node4 = 4 * (1 << index.ts_bits)
    slot = int(index.starts.search_sorted(node4, side="right")) - 1
    assert node4 >= index.ends[slot]


@pytest.mark.parametrize("granularity", ["raw", "hour"])
def test_windows_without_readings_give_an_empty_frame_of_the_same_shape(
    tmp_path: Path, granularity: str
) -> None:
    _write(tmp_path, "node", duplicates=False)
    late = JobWindow(
        job_id=5, nodes=(0, 1), start=T0 + timedelta(hours=6), end=T0 + timedelta(hours=7)
    )
    nodeless = JobWindow(job_id=6, nodes=(), start=T0, end=T0 + timedelta(hours=1))
    got, scanned = _scan(tmp_path, (late, nodeless), granularity)
    # the same request with an overlapping twin takes the join: the shapes must agree
    twin = late.model_copy(update={"job_id": 7, "end": T0 + timedelta(hours=8)})
    joined, _ = _scan(tmp_path, (late, nodeless, twin), granularity)
    assert got.height == scanned == joined.height == 0
    assert got.schema == joined.schema
