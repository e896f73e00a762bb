"""A small lake in the M100 ExaData layout, written directly with pyarrow for reader tests.

Independent of the synthetic generator on purpose: the reader is tested against files whose
every row the test knows. Dtypes come from ``oda_analyst.lake.schema`` so the files match the
real lake's Arrow schema exactly (timestamp[ms, UTC], dictionary<int16,string> tags).

Contents of ``write_small_lake`` (months 22-04 .. 22-06):
- ipmi ``ambient`` (float32) and ``total_power`` (int32), nodes 0-3, every 10 minutes from
  2022-05-31 22:00 to 2022-06-01 02:00 UTC (so windows cross the 22-05 / 22-06 boundary), plus
  2022-06-15 12:00-13:00; ``pcie`` (int32) in 22-05 only. With ``two_files`` the 22-06
  ``ambient`` partition is split into ``a_0.parquet`` and ``a_1.parquet``.
- schneider ``PLC_PLC_Q101.Temp_mandata`` (int32), panels Q101/Q102, 22-05 and 22-06.
- vertiv ``Supply_Air_Temperature`` (float32), devices, 22-06 only (other months lack it).
- job_table ``job_info_marconi100``: the polls of JOB_POLLS, one file per month.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from oda_analyst.lake.layout import year_month
from oda_analyst.lake.schema import (
    JOB_TABLE,
    JOB_TABLE_METRIC,
    job_table_schema,
    metric_schema,
    tag_columns,
)
from oda_analyst.lake.synth import build_spec, generate
from oda_analyst.lake.topology import parse_int_list

MONTHS = ("22-04", "22-05", "22-06")
NODES = ("0", "1", "2", "3")
PANELS = ("Q101", "Q102")
DEVICES = ("Cdz1", "Cdz2")
SCHNEIDER_METRIC = "PLC_PLC_Q101.Temp_mandata"
VERTIV_METRIC = "Supply_Air_Temperature"


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


# (month file, job_id, job_state, start_time, end_time, last_sched_eval, nodes), in file order.
# The cases the jobs() tests rely on:
#  1 pending -> running -> completed across 22-05 and 22-06 (completed 06-01 00:30)
#  2 running, the same poll twice (end null)
#  3 running poll then completed 05-31 21:00: the stale running poll must not count
#  4 pending only (never started)
#  5 completed poll written before an older running poll (file order is not poll order)
#  6 only poll in 22-04, still running: found when reading from start - 2 months
#  7 completed long before (22-04): never overlaps June
#  8 running poll carries Slurm's expected end (later than the real one): state must win
JOB_POLLS: tuple[tuple[str, int, str, datetime | None, datetime | None, datetime, str], ...] = (
    ("22-04", 6, "RUNNING", utc(2022, 4, 30, 10), None, utc(2022, 4, 30, 10), "[7, 8]"),
    ("22-04", 7, "COMPLETED", utc(2022, 4, 2), utc(2022, 4, 3), utc(2022, 4, 3), "[9]"),
    ("22-05", 1, "PENDING", None, None, utc(2022, 5, 31, 22), "[]"),
    ("22-05", 1, "RUNNING", utc(2022, 5, 31, 23), None, utc(2022, 5, 31, 23), "[1, 2]"),
    ("22-05", 3, "RUNNING", utc(2022, 5, 31, 20), None, utc(2022, 5, 31, 20), "[0]"),
    (
        "22-05",
        3,
        "COMPLETED",
        utc(2022, 5, 31, 20),
        utc(2022, 5, 31, 21),
        utc(2022, 5, 31, 21),
        "[0]",
    ),
    ("22-05", 4, "PENDING", None, None, utc(2022, 5, 31, 23), "[]"),
    (
        "22-06",
        1,
        "COMPLETED",
        utc(2022, 5, 31, 23),
        utc(2022, 6, 1, 0, 30),
        utc(2022, 6, 1, 0, 30),
        "[1, 2]",
    ),
    ("22-06", 2, "RUNNING", utc(2022, 6, 1, 0, 10), None, utc(2022, 6, 1, 0, 10), "[3]"),
    ("22-06", 2, "RUNNING", utc(2022, 6, 1, 0, 10), None, utc(2022, 6, 1, 0, 10), "[3]"),
    (
        "22-06",
        5,
        "COMPLETED",
        utc(2022, 6, 1, 1),
        utc(2022, 6, 1, 1, 40),
        utc(2022, 6, 1, 1, 40),
        "[12, 13]",
    ),
    ("22-06", 5, "RUNNING", utc(2022, 6, 1, 1), None, utc(2022, 6, 1, 1), "[12, 13]"),
    ("22-06", 8, "RUNNING", utc(2022, 6, 1, 1), utc(2022, 6, 1, 9), utc(2022, 6, 1, 1), "[20-22]"),
    (
        "22-06",
        8,
        "COMPLETED",
        utc(2022, 6, 1, 1),
        utc(2022, 6, 1, 1, 50),
        utc(2022, 6, 1, 1),
        "[20-22]",
    ),
)


@dataclass
class SmallLake:
    """What write_small_lake wrote: the root and every file, relative to it."""

    root: Path
    pub: bool
    files: list[str] = field(default_factory=list)

    def folder(self, plugin: str) -> str:
        return plugin if plugin == JOB_TABLE or not self.pub else f"{plugin}_pub"

    def partition(self, month: str, plugin: str, metric: str) -> Path:
        return self.root / f"year_month={month}/plugin={self.folder(plugin)}/metric={metric}"


def write_table(path: Path, plugin: str, metric: str, columns: Mapping[str, Sequence[Any]]) -> Path:
    """Write one Parquet file with the exact schema of ``plugin``/``metric``."""
    schema = metric_schema(plugin, metric)
    n = len(next(iter(columns.values())))
    arrays = {}
    for fld in schema:
        values = columns.get(fld.name, [None] * n)
        plain = fld.type.value_type if pa.types.is_dictionary(fld.type) else fld.type
        arrays[fld.name] = pa.array(values, type=plain).cast(fld.type)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(arrays, schema=schema), path)
    return path


def _times(start: datetime, end: datetime, step: timedelta) -> list[datetime]:
    out, t = [], start
    while t < end:
        out.append(t)
        t += step
    return out


def _metric_rows(
    plugin: str,
    metric: str,
    times: Sequence[datetime],
    tags: Sequence[str],
    rng: np.random.Generator,
) -> dict[str, list[Any]]:
    tag_names = tag_columns(plugin, metric)
    rows: dict[str, list[Any]] = {"timestamp": [], "value": []}
    for name in tag_names:
        rows[name] = []
    kind = metric_schema(plugin, metric).field("value").type
    for t in times:
        for tag in tags:
            rows["timestamp"].append(t)
            for name in tag_names:
                rows[name].append(tag)
            value = rng.normal(25.0, 3.0)
            rows["value"].append(int(value * 10) if pa.types.is_integer(kind) else float(value))
    return rows


def _split_by_month(rows: Mapping[str, list[Any]]) -> dict[str, dict[str, list[Any]]]:
    months: dict[str, dict[str, list[Any]]] = {}
    for i, t in enumerate(rows["timestamp"]):
        part = months.setdefault(year_month(t), {k: [] for k in rows})
        for k, values in rows.items():
            part[k].append(values[i])
    return months


def write_small_lake(
    root: Path, *, pub: bool = True, two_files: bool = False, seed: int = 7
) -> SmallLake:
    """Write the small lake described in the module docstring under ``root``."""
    rng = np.random.default_rng(seed)
    lake = SmallLake(root=root, pub=pub)
    edge = _times(utc(2022, 5, 31, 22), utc(2022, 6, 1, 2), timedelta(minutes=10))
    mid_june = _times(utc(2022, 6, 15, 12), utc(2022, 6, 15, 13), timedelta(minutes=10))

    def emit(plugin: str, metric: str, times: Sequence[datetime], tags: Sequence[str]) -> None:
        rows = _metric_rows(plugin, metric, times, tags, rng)
        for month, part in _split_by_month(rows).items():
            folder = lake.partition(month, plugin, metric)
            n = len(part["timestamp"])
            if two_files and (month, plugin, metric) == ("22-06", "ipmi", "ambient"):
                halves = [
                    {k: v[: n // 2] for k, v in part.items()},
                    {k: v[n // 2 :] for k, v in part.items()},
                ]
            else:
                halves = [part]
            for i, chunk in enumerate(halves):
                path = write_table(folder / f"a_{i}.parquet", plugin, metric, chunk)
                lake.files.append(path.relative_to(root).as_posix())

    for metric in ("ambient", "total_power"):
        emit("ipmi", metric, [*edge, *mid_june], NODES)
    emit("ipmi", "pcie", edge[:6], NODES)  # 22-05 only
    emit("schneider", SCHNEIDER_METRIC, edge, PANELS)
    emit("vertiv", VERTIV_METRIC, mid_june, DEVICES)
    for month in MONTHS:
        polls = [p for p in JOB_POLLS if p[0] == month]
        path = lake.partition(month, JOB_TABLE, JOB_TABLE_METRIC) / "a_0.parquet"
        write_job_polls(path, polls)
        lake.files.append(path.relative_to(root).as_posix())
    return lake


def write_job_polls(path: Path, polls: Sequence[tuple[Any, ...]]) -> Path:
    """Write job-table polls ``(month, job_id, state, start, end, last_sched_eval, nodes)``."""
    schema = job_table_schema()
    n = len(polls)
    given: dict[str, list[Any]] = {
        "job_id": [p[1] for p in polls],
        "job_state": [p[2] for p in polls],
        "start_time": [p[3] for p in polls],
        "end_time": [p[4] for p in polls],
        "last_sched_eval": [p[5] for p in polls],
        "nodes": [p[6] for p in polls],
        "submit_time": [utc(2022, 4, 1) for _ in polls],
        "num_nodes": [len(parse_int_list(p[6].strip("[]"))) for p in polls],
        "partition": ["m100_usr_prod"] * n,
        "qos": ["1"] * n,
        "user_id": [1000 + p[1] for p in polls],
    }
    arrays = {}
    for fld in schema:
        plain = fld.type.value_type if pa.types.is_dictionary(fld.type) else fld.type
        arrays[fld.name] = pa.array(given.get(fld.name, [None] * n), type=plain).cast(fld.type)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(arrays, schema=schema), path)
    return path


def cli_command() -> list[str]:
    """How tests run the console script: the venv's ``oda-analyst``, else ``python -m``."""

    exe = shutil.which("oda-analyst", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "oda_analyst.cli"]


def tiny_power_lake(root: Path) -> Path:
    """The generator's ``tiny`` profile for node 900, total_power and ambient only."""

    generate(build_spec("tiny", nodes="900", plugins="ipmi", metrics="total_power,ambient"), root)
    return root
