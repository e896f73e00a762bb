"""The lake reader against a small lake whose every row the test knows (tests/fixtures_lake.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fixtures_lake import (
    JOB_POLLS,
    PANELS,
    SCHNEIDER_METRIC,
    VERTIV_METRIC,
    SmallLake,
    utc,
    write_small_lake,
    write_table,
)
from oda_analyst.config import Settings
from oda_analyst.errors import LakeError, LakeNotFoundError, UsageError
from oda_analyst.lake.describe import format_description
from oda_analyst.lake.reader import Lake


@pytest.fixture(scope="module", params=[True, False], ids=["pub", "no_pub"])
def small(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> SmallLake:
    """Read-only lake, with plugin folders named ``ipmi_pub`` and (second run) ``ipmi``."""
    return write_small_lake(tmp_path_factory.mktemp("lake"), pub=request.param, two_files=True)


@pytest.fixture()
def fresh(tmp_path: Path) -> SmallLake:
    """A lake a test may damage."""
    return write_small_lake(tmp_path / "lake")


def expected_rows(
    lake: SmallLake,
    plugin: str,
    metrics: Sequence[str],
    start: datetime | None,
    end: datetime | None,
    tags: dict[str, list[str]] | None = None,
) -> pl.DataFrame:
    """The reference answer: every file of the metrics read whole with pyarrow, then filtered."""
    frames = []
    for metric in metrics:
        for rel in lake.files:
            if f"/metric={metric}/" not in rel or f"plugin={lake.folder(plugin)}/" not in rel:
                continue
            df = pl.from_arrow(pq.read_table(lake.root / rel))
            assert isinstance(df, pl.DataFrame)
            frames.append(
                df.with_columns(
                    pl.lit(metric).alias("metric"),
                    pl.col("value").cast(pl.Float64),
                    *(
                        pl.col(c).cast(pl.String)
                        for c in df.columns
                        if c not in ("timestamp", "value")
                    ),
                )
            )
    df = pl.concat(frames, how="diagonal")
    if start is not None:
        df = df.filter(pl.col("timestamp") >= start)
    if end is not None:
        df = df.filter(pl.col("timestamp") < end)
    for tag, values in (tags or {}).items():
        df = df.filter(pl.col(tag).is_in(values))
    return df


def same_rows(got: pl.DataFrame, want: pl.DataFrame) -> None:
    cols = [
        "timestamp",
        "metric",
        *[c for c in want.columns if c not in ("timestamp", "metric", "value")],
        "value",
    ]
    got = got.with_columns(pl.col("value").cast(pl.Float64)).select(cols).sort(cols[:-1])
    want = want.select(cols).sort(cols[:-1])
    assert got.height == want.height
    assert got.equals(want)


# -- listing ---------------------------------------------------------------------------------


def test_listing(small: SmallLake) -> None:
    lake = Lake(small.root)
    assert lake.months() == ["22-04", "22-05", "22-06"]
    assert lake.plugins() == ["ipmi", "job_table", "schneider", "vertiv"]
    assert lake.metrics("ipmi") == ["ambient", "pcie", "total_power"]
    assert lake.metrics("ipmi_pub") == ["ambient", "pcie", "total_power"]
    assert lake.metrics("vertiv") == [VERTIV_METRIC]


def test_from_settings(small: SmallLake) -> None:
    lake = Lake.from_settings(Settings(lake=str(small.root)))
    assert lake.location == str(small.root)
    assert lake.months() == ["22-04", "22-05", "22-06"]


# -- scan ------------------------------------------------------------------------------------

WINDOWS = {
    # start exactly on a sample (kept), end exactly on a sample (dropped)
    "edges": (utc(2022, 5, 31, 23, 0), utc(2022, 5, 31, 23, 30)),
    "across_months": (utc(2022, 5, 31, 23, 20), utc(2022, 6, 1, 0, 40)),
    "june_only": (utc(2022, 6, 15, 12, 10), utc(2022, 6, 16)),
    "open_start": (None, utc(2022, 5, 31, 22, 30)),
    "open_end": (utc(2022, 6, 15, 12, 40), None),
    "everything": (None, None),
}


@pytest.mark.parametrize("window", WINDOWS, ids=list(WINDOWS))
@pytest.mark.parametrize("metrics", [["ambient"], ["ambient", "total_power"]], ids=["one", "two"])
def test_scan_equals_direct_read(small: SmallLake, window: str, metrics: list[str]) -> None:
    start, end = WINDOWS[window]
    got = Lake(small.root).scan("ipmi", metrics, start=start, end=end).collect()
    want = expected_rows(small, "ipmi", metrics, start, end)
    assert want.height > 0
    same_rows(got, want)


def test_scan_edges_are_half_open(small: SmallLake) -> None:
    start, end = WINDOWS["edges"]
    got = Lake(small.root).scan("ipmi", "ambient", start=start, end=end).collect()
    assert got["timestamp"].min() == start
    assert got["timestamp"].max() == utc(2022, 5, 31, 23, 20)
    assert got.height == 3 * 4  # 23:00, 23:10, 23:20 for four nodes


def test_scan_nodes(small: SmallLake) -> None:
    start, end = WINDOWS["across_months"]
    lf = Lake(small.root).scan(
        "ipmi", ["ambient", "total_power"], start=start, end=end, nodes=[1, "3"]
    )
    got = lf.collect()
    assert set(got["node"]) == {"1", "3"}
    same_rows(
        got,
        expected_rows(small, "ipmi", ["ambient", "total_power"], start, end, {"node": ["1", "3"]}),
    )


def test_scan_pushes_predicates_into_parquet(small: SmallLake) -> None:
    start, end = WINDOWS["across_months"]
    plan = Lake(small.root).scan("ipmi", "ambient", start=start, end=end, nodes=[2]).explain()
    selection = next(line for line in plan.splitlines() if "SELECTION" in line)
    assert 'col("node").is_in' in selection
    assert 'col("timestamp") >=' in selection and 'col("timestamp") <' in selection


def test_scan_tags_filter(small: SmallLake) -> None:
    lake = Lake(small.root)
    got = lake.scan("schneider", SCHNEIDER_METRIC, tags={"panel": ["Q102"]}).collect()
    assert set(got["panel"]) == {"Q102"}
    same_rows(
        got, expected_rows(small, "schneider", [SCHNEIDER_METRIC], None, None, {"panel": ["Q102"]})
    )
    both = lake.scan("schneider", SCHNEIDER_METRIC, tags={"panel": list(PANELS)}).collect()
    assert both.height == 2 * got.height


def test_scan_contract_dtypes(small: SmallLake) -> None:
    lake = Lake(small.root)
    schema = lake.scan("ipmi", "ambient").collect_schema()
    assert dict(schema) == {
        "timestamp": pl.Datetime("ms", "UTC"),
        "metric": pl.String,
        "node": pl.String,
        "value": pl.Float32,
    }
    assert lake.scan("ipmi", "total_power").collect_schema()["value"] == pl.Int32
    assert list(lake.scan("vertiv", VERTIV_METRIC).collect_schema()) == [
        "timestamp",
        "metric",
        "device",
        "value",
    ]


def test_naive_datetimes_are_utc(small: SmallLake) -> None:
    lake = Lake(small.root)
    start, end = WINDOWS["edges"]
    assert start is not None and end is not None
    aware = lake.scan("ipmi", "ambient", start=start, end=end).collect()
    naive = lake.scan(
        "ipmi", "ambient", start=start.replace(tzinfo=None), end=end.replace(tzinfo=None)
    ).collect()
    assert aware.equals(naive)


def test_partition_with_two_files(small: SmallLake) -> None:
    june = small.partition("22-06", "ipmi", "ambient")
    assert sorted(p.name for p in june.iterdir()) == ["a_0.parquet", "a_1.parquet"]
    got = (
        Lake(small.root)
        .scan("ipmi", "ambient", start=utc(2022, 6, 1), end=utc(2022, 7, 1))
        .collect()
    )
    on_disk = sum(pq.read_metadata(p).num_rows for p in june.iterdir())
    assert got.height == on_disk


def test_missing_months_are_skipped(small: SmallLake) -> None:
    lake = Lake(small.root)
    got = lake.scan("vertiv", VERTIV_METRIC, start=utc(2022, 4, 1), end=utc(2022, 7, 1)).collect()
    assert got.height == 6 * 2
    with pytest.raises(LakeError, match=r"no partitions of vertiv .* 22-04..22-05"):
        lake.scan("vertiv", VERTIV_METRIC, start=utc(2022, 4, 1), end=utc(2022, 6, 1))
    with pytest.raises(LakeError, match=r"no partitions .*the lake holds months 22-04..22-06"):
        lake.scan("ipmi", "ambient", start=utc(2023, 1, 1), end=utc(2023, 2, 1))


def test_metric_outside_catalogue_and_plain_string_tags(fresh: SmallLake) -> None:
    """Real folders may hold metrics we do not list and tag columns stored as plain strings."""
    extra = fresh.partition("22-06", "ipmi", "new_sensor") / "a_0.parquet"
    extra.parent.mkdir(parents=True)
    table = pa.table(
        {
            "timestamp": pa.array([utc(2022, 6, 1)], pa.timestamp("ms", tz="UTC")),
            "node": pa.array(["5"], pa.string()),
            "value": pa.array([1], pa.int64()),
        }
    )
    pq.write_table(table, extra)
    lake = Lake(fresh.root)
    assert "new_sensor" in lake.metrics("ipmi")
    got = lake.scan("ipmi", "new_sensor", nodes=[5]).collect()
    assert got.rows() == [(utc(2022, 6, 1), "new_sensor", "5", 1)]

    # One month of ambient rewritten with node as plain string: both months still read as one.
    may = fresh.partition("22-05", "ipmi", "ambient") / "a_0.parquet"
    original = pq.read_table(may)
    plain = original.set_column(1, "node", original["node"].cast(pa.string()))
    pq.write_table(plain, may)
    assert pq.read_schema(may).field("node").type == pa.string()
    start, end = WINDOWS["across_months"]
    mixed = lake.scan("ipmi", "ambient", start=start, end=end, nodes=["0"]).collect()
    same_rows(mixed, expected_rows(fresh, "ipmi", ["ambient"], start, end, {"node": ["0"]}))


# -- partition pruning -----------------------------------------------------------------------


def _corrupt(path: Path) -> None:
    path.write_bytes(b"this is not parquet at all" * 10)


def test_unrelated_partitions_are_not_opened(fresh: SmallLake) -> None:
    # Damage every partition the June query must not touch: other months, other metrics,
    # other plugins. The query still answers from the June ambient files alone.
    for rel in fresh.files:
        if not ("year_month=22-06" in rel and "metric=ambient/" in rel):
            _corrupt(fresh.root / rel)
    lake = Lake(fresh.root)
    start, end = utc(2022, 6, 15), utc(2022, 6, 16)
    got = lake.scan("ipmi", "ambient", start=start, end=end, nodes=[0]).collect()
    assert got.height == 6


def test_scanning_a_damaged_partition_names_it(fresh: SmallLake) -> None:
    bad = fresh.partition("22-05", "ipmi", "ambient") / "a_0.parquet"
    _corrupt(bad)
    lake = Lake(fresh.root)
    with pytest.raises(LakeError) as info:
        lake.scan("ipmi", "ambient", start=utc(2022, 5, 31, 23), end=utc(2022, 6, 1, 1))
    assert str(bad) in info.value.message
    assert (
        lake.scan("ipmi", "ambient", start=utc(2022, 6, 1), end=utc(2022, 6, 2)).collect().height
        > 0
    )


# -- jobs ------------------------------------------------------------------------------------


def test_jobs_overlap_and_dedupe(small: SmallLake) -> None:
    jobs = Lake(small.root).jobs(start=utc(2022, 5, 31, 22), end=utc(2022, 6, 1, 2)).collect()
    # 3 ended at 21:00 (its stale RUNNING poll must not count), 4 never started, 7 ended in April.
    # 8's RUNNING poll carries a later (expected) end_time; the COMPLETED state still wins.
    assert jobs["job_id"].to_list() == [1, 2, 5, 6, 8]
    states = ["COMPLETED", "RUNNING", "COMPLETED", "RUNNING", "COMPLETED"]
    assert jobs["job_state"].to_list() == states
    assert jobs["end_time"].to_list() == [
        utc(2022, 6, 1, 0, 30),
        None,
        utc(2022, 6, 1, 1, 40),
        None,
        utc(2022, 6, 1, 1, 50),
    ]
    assert jobs["node_list"].to_list() == [[1, 2], [3], [12, 13], [7, 8], [20, 21, 22]]
    assert jobs.schema["node_list"] == pl.List(pl.Int32)
    assert jobs.schema["job_state"] == pl.String
    assert jobs.schema["start_time"] == pl.Datetime("ms", "UTC")


def test_jobs_window_edges(small: SmallLake) -> None:
    lake = Lake(small.root)
    # Job 1 ran [05-31 23:00, 06-01 00:30): a window starting at its end excludes it,
    # one ending at its start excludes it too, one a millisecond wider includes it.

    def ids(start: datetime, end: datetime) -> list[int]:
        return list(lake.jobs(start=start, end=end).collect()["job_id"])

    assert 1 not in ids(utc(2022, 6, 1, 0, 30), utc(2022, 6, 1, 0, 40))
    assert 1 not in ids(utc(2022, 5, 31, 22), utc(2022, 5, 31, 23))
    assert 1 in ids(utc(2022, 5, 31, 22), utc(2022, 5, 31, 23) + timedelta(milliseconds=1))
    assert 1 in ids(utc(2022, 6, 1, 0, 30) - timedelta(milliseconds=1), utc(2022, 6, 1, 0, 40))


def test_jobs_reads_two_months_back(small: SmallLake) -> None:
    lake = Lake(small.root)
    # Job 6's only poll is in 22-04; a window in June still finds it, still running.
    june = lake.jobs(start=utc(2022, 6, 15), end=utc(2022, 6, 16)).collect()
    assert june["job_id"].to_list() == [2, 6]
    # From August the look-back reaches June only: job 6 is no longer seen, job 2 still is.
    august = lake.jobs(start=utc(2022, 8, 15), end=utc(2022, 8, 16)).collect()
    assert august["job_id"].to_list() == [2]


def test_jobs_without_dedupe_keeps_polls(small: SmallLake) -> None:
    lake = Lake(small.root)
    polls = lake.jobs(dedupe=False).collect()
    assert polls.height == len(JOB_POLLS)
    one = lake.jobs(job_ids=[2, 5]).collect()
    assert one["job_id"].to_list() == [2, 5]
    assert one["job_state"].to_list() == ["RUNNING", "COMPLETED"]
    all_jobs = lake.jobs().collect()
    assert all_jobs["job_id"].to_list() == [1, 2, 3, 4, 5, 6, 7, 8]
    assert all_jobs.filter(pl.col("job_id") == 4)["node_list"].to_list() == [[]]


# -- describe --------------------------------------------------------------------------------


def test_describe_matches_file_metadata(small: SmallLake) -> None:
    desc = Lake(small.root).describe()
    assert desc.months == ("22-04", "22-05", "22-06")
    for plugin in ("ipmi", "schneider", "vertiv", "job_table"):
        entry = desc.plugin(plugin)
        assert entry is not None
        paths = [
            small.root / rel for rel in small.files if f"plugin={small.folder(plugin)}/" in rel
        ]
        assert entry.files == len(paths)
        assert entry.rows == sum(pq.read_metadata(p).num_rows for p in paths)
        assert entry.bytes == sum(p.stat().st_size for p in paths)
        assert entry.folder == small.folder(plugin)
    assert desc.plugin("ipmi").metrics == ("ambient", "pcie", "total_power")  # type: ignore[union-attr]
    assert desc.plugin("vertiv").months == ("22-06",)  # type: ignore[union-attr]
    assert desc.rows == sum(pq.read_metadata(small.root / r).num_rows for r in small.files)
    data = json.loads(json.dumps(desc.to_dict()))
    assert data["totals"]["files"] == len(small.files)
    text = format_description(desc)
    assert "ipmi" in text and "job_table" in text and f"{desc.rows:,}" in text
    assert "22-04..22-06 (3)" in text


# -- errors ----------------------------------------------------------------------------------


def test_missing_and_empty_lake(tmp_path: Path) -> None:
    with pytest.raises(LakeNotFoundError, match="does not exist") as info:
        Lake(tmp_path / "nowhere").months()
    assert "lake generate" in (info.value.hint or "")
    (tmp_path / "empty").mkdir()
    with pytest.raises(LakeNotFoundError, match="no year_month"):
        Lake(tmp_path / "empty").plugins()
    with pytest.raises(LakeNotFoundError, match="unsupported"):
        Lake("http://example.org/lake")


@pytest.mark.parametrize(
    ("call", "message", "hint"),
    [
        (lambda lk: lk.scan("ipmu", "ambient"), "unknown plugin 'ipmu'", "ipmi"),
        (lambda lk: lk.metrics("nope"), "unknown plugin 'nope'", "choose among"),
        (lambda lk: lk.scan("ipmi", "ambiant"), "unknown metric of ipmi 'ambiant'", "ambient"),
        (lambda lk: lk.scan("ipmi", []), "no metric", "ipmi"),
        (
            lambda lk: lk.scan("ipmi", "ambient", start=utc(2022, 6, 2), end=utc(2022, 6, 1)),
            "empty time window",
            "[start, end)",
        ),
        (lambda lk: lk.scan("vertiv", VERTIV_METRIC, nodes=[1]), "no node column", "device"),
        (
            lambda lk: lk.scan("schneider", SCHNEIDER_METRIC, tags={"panl": ["Q101"]}),
            "unknown tag",
            "panel",
        ),
        (lambda lk: lk.scan("job_table", "job_info_marconi100"), "job table", "jobs()"),
        (
            lambda lk: lk.jobs(start=utc(2022, 6, 2), end=utc(2022, 6, 2)),
            "empty time window",
            "end",
        ),
    ],
)
def test_bad_inputs_raise_usage_errors(
    small: SmallLake, call: object, message: str, hint: str
) -> None:
    lake = Lake(small.root)
    with pytest.raises(UsageError) as info:
        call(lake)  # type: ignore[operator]
    assert message in info.value.message
    assert hint in (info.value.hint or "")


def test_jobs_without_job_table(fresh: SmallLake) -> None:
    for rel in fresh.files:
        if "plugin=job_table" in rel:
            (fresh.root / rel).unlink()
    with pytest.raises(LakeError, match="job table"):
        Lake(fresh.root).jobs(start=utc(2022, 6, 1), end=utc(2022, 6, 2))


def test_unknown_schema_is_a_lake_error(fresh: SmallLake) -> None:
    path = fresh.partition("22-06", "ipmi", "ambient") / "a_0.parquet"
    write_table(path, "weather", "temp", {"timestamp": [utc(2022, 6, 1)], "value": [1.0]})
    pq.write_table(pq.read_table(path).drop(["value"]), path)
    with pytest.raises(LakeError, match="without a 'value' column"):
        Lake(fresh.root).scan("ipmi", "ambient", start=utc(2022, 6, 1), end=utc(2022, 6, 2))


def test_slurm_metrics_with_different_tags(fresh: SmallLake) -> None:
    """Slurm tag columns vary by metric: the union is returned, null where a metric lacks one."""
    t = [utc(2022, 6, 1, 0, 0), utc(2022, 6, 1, 0, 10)]
    plain = fresh.partition("22-06", "slurm", "cluster_cpu_util") / "a_0.parquet"
    write_table(plain, "slurm", "cluster_cpu_util", {"timestamp": t, "value": [50, 60]})
    tagged = fresh.partition("22-06", "slurm", "s21.totals.cpus_alloc") / "a_0.parquet"
    write_table(
        tagged,
        "slurm",
        "s21.totals.cpus_alloc",
        {"timestamp": t, "partition": ["m100_usr_prod", "m100_all_serial"], "value": [7, 8]},
    )
    lake = Lake(fresh.root)
    got = lake.scan("slurm", ["cluster_cpu_util", "s21.totals.cpus_alloc"]).collect()
    assert got.columns == ["timestamp", "metric", "partition", "value"]
    assert sorted(got.rows(), key=str) == sorted(
        [
            (t[0], "cluster_cpu_util", None, 50),
            (t[1], "cluster_cpu_util", None, 60),
            (t[0], "s21.totals.cpus_alloc", "m100_usr_prod", 7),
            (t[1], "s21.totals.cpus_alloc", "m100_all_serial", 8),
        ],
        key=str,
    )
    only = lake.scan(
        "slurm", "s21.totals.cpus_alloc", tags={"partition": ["m100_all_serial"]}
    ).collect()
    assert only["value"].to_list() == [8]
