"""Physical coherence of the synthetic lake: telemetry follows the jobs and the power."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from oda_analyst.lake.layout import partition_file
from oda_analyst.lake.synth import build_spec, generate, weather
from oda_analyst.lake.synth.jobs import NAMED_IDS

NODE_METRICS = (
    "total_power,ps0_input_power,ps1_input_power,ambient,gpu0_core_temp,p0_core5_temp,"
    "Gpu0_gpu_utilization,Gpu1_power_usage,Gpu1_total_energy_consumption"
)
SYSTEM_METRICS = "total_nodes_alloc,s21.cluster_gpu_util,Tot_ict,Pue"


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("phys")
    window = {"start": "2022-06-01T06:00", "end": "2022-06-01T10:00"}
    generate(build_spec("tiny", nodes="0-79,900", metrics=NODE_METRICS, **window), out)
    generate(build_spec("tiny", metrics=SYSTEM_METRICS, **window), out)
    generate(build_spec("tiny", metrics="temp", start="2022-06-01", end="2022-06-04"), out)
    generate(
        build_spec(
            "tiny",
            nodes="0-979",
            metrics="ambient",
            start="2022-06-01T08:00",
            end="2022-06-01T08:15",
        ),
        out / "all",
    )
    return out


def _read(root: Path, plugin: str, metric: str, ym: str = "22-06") -> pl.DataFrame:
    df = pl.read_parquet(root / partition_file(ym, plugin, metric))
    if "node" in df.columns:
        df = df.with_columns(pl.col("node").cast(pl.Utf8).cast(pl.Int64))
    return df


def _jobs(root: Path) -> pl.DataFrame:
    """Deduplicated job table (last poll wins) with node lists parsed."""
    frames = [pl.read_parquet(f) for f in root.glob("year_month=*/plugin=job_table/*/*.parquet")]
    jt = pl.concat(
        [
            f.with_columns(pl.col(c).cast(pl.Utf8) for c in ("job_state", "partition", "qos"))
            for f in frames
        ]
    )
    return jt.group_by("job_id", maintain_order=True).last()


def _running_node_intervals(jobs: pl.DataFrame) -> pl.DataFrame:
    started = jobs.filter(pl.col("start_time").is_not_null())
    return (
        started.with_columns(pl.col("nodes").str.json_decode(pl.List(pl.Int64)))
        .explode("nodes")
        .rename({"nodes": "node"})
        .select("job_id", "node", "start_time", "end_time")
    )


def _with_running_job(df: pl.DataFrame, jobs: pl.DataFrame) -> pl.DataFrame:
    iv = _running_node_intervals(jobs)
    joined = df.join(iv, on="node", how="left").filter(
        (pl.col("timestamp") >= pl.col("start_time")) & (pl.col("timestamp") < pl.col("end_time"))
    )
    busy = joined.select("node", "timestamp").with_columns(pl.lit(True).alias("busy"))
    return df.join(busy, on=["node", "timestamp"], how="left").with_columns(
        pl.col("busy").fill_null(False)
    )


def test_gpu_utilisation_is_high_under_jobs_and_zero_when_idle(lake: Path) -> None:
    util = _with_running_job(_read(lake, "ganglia", "Gpu0_gpu_utilization"), _jobs(lake))
    idle = util.filter(~pl.col("busy"))["value"]
    busy = util.filter(pl.col("busy"))["value"]
    assert idle.len() > 100 and busy.len() > 1000
    assert idle.max() == 0
    assert busy.mean() > 25  # type: ignore[operator]


def test_power_range_and_supplies_add_up(lake: Path) -> None:
    total = _read(lake, "ipmi", "total_power")
    assert total["value"].min() >= 250 and total["value"].max() <= 1850  # type: ignore[operator]
    assert 450 < total["value"].mean() < 1100  # type: ignore[operator]
    ps = (
        _read(lake, "ipmi", "ps0_input_power")
        .join(_read(lake, "ipmi", "ps1_input_power"), on=["node", "timestamp"], suffix="_1")
        .join(total, on=["node", "timestamp"], suffix="_t")
    )
    gap = (ps["value"] + ps["value_1"] - ps["value_t"]).abs()
    assert ps.height == total.height and gap.max() <= 6  # type: ignore[operator]


def test_temperatures_follow_power(lake: Path) -> None:
    gpu_t = _read(lake, "ipmi", "gpu0_core_temp")
    gpu_p = _read(lake, "ganglia", "Gpu1_power_usage")  # other grid, other GPU: sanity only
    assert gpu_p["value"].min() > 30  # type: ignore[operator]
    total = _read(lake, "ipmi", "total_power")
    cpu_t = _read(lake, "ipmi", "p0_core5_temp").join(total, on=["node", "timestamp"])
    hot = set(_read(lake / "all", "ipmi", "ambient").filter(pl.col("value") > 35)["node"])
    cool = cpu_t.filter(~pl.col("node").is_in(list(hot)))
    r = np.corrcoef(cool["value"].to_numpy(), cool["value_right"].to_numpy())[0, 1]
    assert r > 0.5
    assert gpu_t["value"].min() >= 25 and gpu_t["value"].max() <= 90  # type: ignore[operator]


def test_energy_counters_never_decrease(lake: Path) -> None:
    e = _read(lake, "ganglia", "Gpu1_total_energy_consumption").sort("node", "timestamp")
    step = e.with_columns(pl.col("value").diff().over("node").alias("d"))["d"].drop_nulls()
    assert step.min() >= 0  # type: ignore[operator]


def test_inlet_histogram_matches_the_paper(lake: Path) -> None:
    amb = _read(lake / "all", "ipmi", "ambient")["value"].to_numpy()
    assert amb.size == 980 * 45
    assert not np.any((amb >= 31) & (amb < 39))
    hot = (amb >= 40) & (amb <= 43)
    assert 0 < hot.sum() <= 0.01 * amb.size
    peak = ((amb >= 22) & (amb < 25)).mean()
    assert peak > 0.5


def test_weather_has_a_day_cycle_and_a_season(lake: Path) -> None:
    w = _read(lake, "weather", "temp").with_columns(pl.col("timestamp").dt.hour().alias("h"))
    assert w.height == 3 * 144
    afternoon = w.filter(pl.col("h").is_between(12, 14))["value"].mean()
    night = w.filter(pl.col("h").is_between(2, 4))["value"].mean()
    assert afternoon > night + 4  # type: ignore[operator]
    first_week = np.arange(0, 7 * 86_400_000, 600_000, dtype=np.int64)
    may = weather.temperature(2022, first_week + 1_651_363_200_000).mean()  # 2022-05-01
    june = weather.temperature(2022, first_week + 1_654_041_600_000).mean()  # 2022-06-01
    assert 14 < may < june < 28


def test_slurm_allocated_nodes_equal_the_job_table(lake: Path) -> None:
    jobs = _jobs(lake)
    iv = _running_node_intervals(jobs)
    alloc = _read(lake, "slurm", "total_nodes_alloc").gather_every(97)
    for ts, value in alloc.select("timestamp", "value").iter_rows():
        running = iv.filter((pl.col("start_time") <= ts) & (pl.col("end_time") > ts))
        assert running["node"].n_unique() == running.height == value
    assert 0.6 * 980 < alloc["value"].mean() < 0.95 * 980  # type: ignore[operator]


def test_facility_power_tracks_the_nodes(lake: Path) -> None:
    tot = _read(lake, "logics", "Tot_ict")
    gpu = _read(lake, "slurm", "s21.cluster_gpu_util")
    both = tot.join_asof(gpu.sort("timestamp"), on="timestamp").drop_nulls()
    r = np.corrcoef(both["value"].to_numpy(), both["value_right"].to_numpy())[0, 1]
    assert r > 0.5
    assert 500 < tot["value"].mean() < 1000  # type: ignore[operator]
    pue = _read(lake, "logics", "Pue")["value"]
    assert pue.min() > 1.05 and pue.max() < 1.35  # type: ignore[operator]


def test_job_table_polls_dedup_and_named_jobs(lake: Path) -> None:
    frames = [pl.read_parquet(f) for f in lake.glob("year_month=*/plugin=job_table/*/*.parquet")]
    raw = pl.concat([f.with_columns(pl.col("job_state").cast(pl.Utf8)) for f in frames])
    assert raw.height > raw["job_id"].n_unique()  # duplicate state polls exist
    jobs = raw.group_by("job_id", maintain_order=True).last()
    assert jobs["job_id"].is_unique().all()
    assert "PENDING" not in set(jobs["job_state"]) and "RUNNING" not in set(jobs["job_state"])
    assert {"COMPLETED", "FAILED", "TIMEOUT"} <= set(jobs["job_state"])
    assert set(raw.filter(pl.col("job_state") == "PENDING")["nodes"]) == {"[]"}
    named = jobs.filter(pl.col("job_id").is_in(sorted(NAMED_IDS)))
    assert named.height == 3
    day = datetime(2022, 6, 1, 12, tzinfo=UTC)
    for row in named.iter_rows(named=True):
        assert row["start_time"] < day < row["end_time"]
        assert len(json.loads(row["nodes"])) == 1
        assert "gres/gpu=" in row["tres_alloc_str"]
    started = jobs.filter(pl.col("start_time").is_not_null())
    counts = started["nodes"].str.json_decode(pl.List(pl.Int64)).list.len()
    assert (counts == started["num_nodes"].cast(pl.Int64)).all()
    assert counts.max() > 1  # type: ignore[operator]
    gpus = started["tres_alloc_str"].str.extract(r"gres/gpu=(\d+)").cast(pl.Int64).fill_null(0)
    assert gpus.max() >= 4 and (gpus == 0).any()  # type: ignore[operator]
