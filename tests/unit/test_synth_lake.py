"""The written lake: layout, exact Arrow schemas, determinism, window and node independence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

from oda_analyst.lake.layout import partition_file
from oda_analyst.lake.schema import all_metrics, metric_schema
from oda_analyst.lake.synth import ProgressEvent, build_spec, generate


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiny")
    events: list[ProgressEvent] = []
    report = generate(build_spec("tiny"), out, progress=events.append)
    assert report.partitions == len(events) == events[-1].total
    assert report.rows == events[-1].rows_total > 0
    assert report.bytes == sum(f.stat().st_size for f in out.rglob("*.parquet"))
    return out


def _read(root: Path, plugin: str, metric: str, ym: str = "22-06") -> pl.DataFrame:
    return pl.read_parquet(root / partition_file(ym, plugin, metric))


def test_every_metric_is_written_with_its_exact_schema(tiny: Path) -> None:
    for plugin, metric in all_metrics():
        path = tiny / partition_file("22-06", plugin, metric)
        assert path.exists(), path
        assert pq.read_schema(path).remove_metadata() == metric_schema(plugin, metric), path
    files = list(tiny.rglob("*.parquet"))
    assert all(f.name == "a_0.parquet" for f in files)
    assert {f.parts[-4].split("=")[0] for f in files} == {"year_month"}


def test_rows_are_sorted_by_node_then_time(tiny: Path) -> None:
    df = _read(tiny, "ipmi", "total_power")
    nodes = df["node"].cast(pl.Utf8).cast(pl.Int64).to_numpy()
    ts = df["timestamp"].to_numpy().astype(np.int64)
    assert set(nodes) == {0, 1, 2, 3, 900}
    assert np.all(np.diff(nodes) >= 0)
    same = nodes[1:] == nodes[:-1]
    assert np.all(np.diff(ts)[same] > 0)
    per_node = df.group_by("node").len()["len"].to_list()
    assert set(per_node) == {180}  # 1 h at 20 s


def test_sampling_periods(tiny: Path) -> None:
    def median_gap(plugin: str, metric: str, by: str | None) -> float:
        df = _read(tiny, plugin, metric)
        col = df.filter(pl.col(by) == df[by][0]) if by else df
        return float(np.median(np.diff(col["timestamp"].to_numpy().astype(np.int64)))) / 1000

    assert median_gap("ipmi", "ambient", "node") == 20
    assert 19 <= median_gap("ganglia", "Gpu1_gpu_utilization", "node") <= 21
    assert 40 <= median_gap("ganglia", "cpu_user", "node") <= 80
    assert median_gap("vertiv", "Fan_Speed", "device") == 10
    assert median_gap("slurm", "total_nodes_alloc", None) == 5
    assert median_gap("slurm", "s21.cluster_gpu_util", None) == 10
    assert median_gap("weather", "temp", None) == 600


def _lake(tmp: Path, name: str, **kw: str) -> Path:
    out = tmp / name
    generate(build_spec("tiny", **kw), out)
    return out


def test_same_seed_same_bytes_other_seed_differs(tmp_path: Path) -> None:
    kw = {"metrics": "total_power,Gpu0_gpu_utilization,temp", "nodes": "0,900"}
    a, b = _lake(tmp_path, "a", **kw), _lake(tmp_path, "b", **kw)
    c = _lake(tmp_path, "c", seed="7", **kw)  # type: ignore[arg-type]
    for plugin, metric in [
        ("ipmi", "total_power"),
        ("ganglia", "Gpu0_gpu_utilization"),
        ("weather", "temp"),
    ]:
        assert _read(a, plugin, metric).equals(_read(b, plugin, metric))
        assert not _read(a, plugin, metric).equals(_read(c, plugin, metric))
    assert _read(a, "job_table", "job_info_marconi100").equals(
        _read(b, "job_table", "job_info_marconi100")
    )


WINDOW_METRICS = (
    "total_power,ambient,p0_core3_temp,Gpu2_gpu_utilization,Gpu0_total_energy_consumption,"
    "cpu_user,mem_free,Return_Air_Temperature,PLC_PLC_Q101.Temp_ritorno,Tot_ict,Energia,"
    "total_nodes_alloc,s21.cluster_gpu_util,s21.jobs.tot_jobs,job_id,temp,uvi,state"
)


def test_a_window_alone_equals_the_slice_of_a_larger_run(tmp_path: Path) -> None:
    kw = {"metrics": WINDOW_METRICS, "nodes": "5,900"}
    big = _lake(tmp_path, "big", start="2022-06-01T08:00", end="2022-06-01T09:00", **kw)
    small = _lake(tmp_path, "small", start="2022-06-01T08:30", end="2022-06-01T08:40", **kw)
    lo, hi = (
        pl.datetime(2022, 6, 1, 8, 30, time_zone="UTC"),
        pl.datetime(2022, 6, 1, 8, 40, time_zone="UTC"),
    )
    checked = 0
    for f in small.rglob("*.parquet"):
        rel = f.relative_to(small)
        if "job_table" in str(rel):
            continue
        part = pl.read_parquet(f)
        whole = pl.read_parquet(big / rel).filter(pl.col("timestamp").is_between(lo, hi, "left"))
        assert part.height > 0 or "job_id" in str(rel), rel
        assert part.equals(whole), rel
        checked += 1
    assert checked == len(WINDOW_METRICS.split(","))
    jt_small = pl.read_parquet(small / partition_file("22-06", "job_table", "job_info_marconi100"))
    jt_big = pl.concat(
        [pl.read_parquet(f) for f in sorted(big.rglob("metric=job_info_marconi100/*.parquet"))]
    )
    ids = jt_small["job_id"].unique()
    assert jt_small.sort("job_id", maintain_order=True).equals(
        jt_big.filter(pl.col("job_id").is_in(ids.to_list())).sort("job_id", maintain_order=True)
    )


def test_node_alone_equals_node_within_a_larger_selection(tmp_path: Path) -> None:
    kw = {"metrics": "total_power,Gpu3_gpu_utilization,cpu_idle,state"}
    alone = _lake(tmp_path, "alone", nodes="900", **kw)
    many = _lake(tmp_path, "many", nodes="0-3,900", **kw)
    for plugin, metric in [
        ("ipmi", "total_power"),
        ("ganglia", "Gpu3_gpu_utilization"),
        ("ganglia", "cpu_idle"),
        ("nagios", "state"),
    ]:
        a = _read(alone, plugin, metric).with_columns(pl.col("node").cast(pl.Utf8))
        b = _read(many, plugin, metric).with_columns(pl.col("node").cast(pl.Utf8))
        assert a.height > 0
        assert a.equals(b.filter(pl.col("node") == "900"))
