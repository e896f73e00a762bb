"""Orchestration: resolve partitions, stream chunks into per-partition writers, report."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from oda_analyst.errors import UsageError
from oda_analyst.lake.layout import month_bounds, months_between, partition_file, year_month
from oda_analyst.lake.schema import JOB_TABLE, JOB_TABLE_METRIC, metric_schema
from oda_analyst.lake.synth import jobs, jobtable, sources
from oda_analyst.lake.synth.spec import GenerationSpec, PluginRequest
from oda_analyst.lake.synth.writer import PartitionWriter


@dataclass(frozen=True)
class ProgressEvent:
    """One partition finished: ``done`` of ``total``, with the running row count."""

    done: int
    total: int
    label: str
    rows_total: int


@dataclass(frozen=True)
class GenerationReport:
    partitions: int
    rows: int
    bytes: int
    seconds: float
    path: Path
    rows_per_plugin: dict[str, int] = field(default_factory=dict)


def _dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _month_windows(req: PluginRequest) -> list[tuple[str, int, int]]:
    out = []
    for ym in months_between(_dt(req.start_ms), _dt(req.end_ms)):
        lo, hi = (int(b.timestamp() * 1000) for b in month_bounds(ym))
        s, e = max(lo, req.start_ms), min(hi, req.end_ms)
        if s < e:
            out.append((ym, s, e))
    return out


def _job_months(spec: GenerationSpec, req: PluginRequest) -> dict[str, np.ndarray]:
    """Month -> indices of the jobs overlapping the window, by the month of their start."""
    js = jobs.jobs_in(spec.seed, req.start_ms, req.end_ms)
    selected = np.flatnonzero(js.overlapping(req.start_ms, req.end_ms))
    begin = np.where(js.start >= 0, js.start, js.submit)[selected]
    months = np.array([year_month(_dt(int(b))) for b in begin]) if len(selected) else np.array([])
    return {str(ym): selected[months == ym] for ym in sorted(set(months.tolist()))}


def _chunks(spec: GenerationSpec, req: PluginRequest, t0: int, t1: int) -> Iterator[sources.Chunk]:
    p, seed = req.plugin, spec.seed
    if p in ("ipmi", "ganglia"):
        return sources.node_chunks(seed, p, req.metrics, spec.nodes, t0, t1)
    if p == "nagios":
        return sources.nagios_chunks(seed, spec.nodes, t0, t1)
    if p == "weather":
        return sources.weather_chunks(seed, req.metrics, t0, t1)
    if p in ("vertiv", "schneider", "logics"):
        return sources.facility_chunks(seed, p, req.metrics, t0, t1)
    if p == "slurm":
        return sources.slurm_chunks(seed, req.metrics, t0, t1)
    raise UsageError(f"no generator for plugin {p!r}")


def generate(
    spec: GenerationSpec,
    out: Path | str,
    progress: Callable[[ProgressEvent], None] | None = None,
) -> GenerationReport:
    """Write the lake the spec describes under ``out`` and report what was written."""
    if str(out).startswith("s3://"):
        raise UsageError(
            "the generator writes to a local folder", hint="generate locally, then upload to S3"
        )
    root = Path(out)
    began = time.perf_counter()
    plan: list[tuple[PluginRequest, list[tuple[str, int, int]]]] = []
    job_months: dict[str, np.ndarray] = {}
    for req in spec.requests:
        if req.plugin == JOB_TABLE:
            job_months = _job_months(spec, req)
            plan.append((req, [(ym, req.start_ms, req.end_ms) for ym in job_months]))
        else:
            plan.append((req, _month_windows(req)))
    total = sum(len(req.metrics) * len(months) for req, months in plan)
    done = rows = size = 0
    per_plugin: dict[str, int] = {}

    def finish(writer: PartitionWriter, label: str, plugin: str) -> None:
        nonlocal done, rows, size
        size += writer.close()
        done += 1
        rows += writer.rows
        per_plugin[plugin] = per_plugin.get(plugin, 0) + writer.rows
        if progress is not None:
            progress(ProgressEvent(done, total, label, rows))

    for req, months in plan:
        for ym, t0, t1 in months:
            if req.plugin == JOB_TABLE:
                js = jobs.jobs_in(spec.seed, req.start_ms, req.end_ms)
                rel = partition_file(ym, JOB_TABLE, JOB_TABLE_METRIC)
                writer = PartitionWriter(root, rel, metric_schema(JOB_TABLE, JOB_TABLE_METRIC))
                writer.write_table(jobtable.table(js, job_months[ym]))
                finish(writer, rel, JOB_TABLE)
                continue
            writers = {
                m: PartitionWriter(
                    root, partition_file(ym, req.plugin, m), metric_schema(req.plugin, m)
                )
                for m in req.metrics
            }
            for metric, cols, n in _chunks(spec, req, t0, t1):
                writers[metric].write_columns(cols, n)
            for metric, writer in writers.items():
                finish(writer, partition_file(ym, req.plugin, metric), req.plugin)
    return GenerationReport(
        partitions=done,
        rows=rows,
        bytes=size,
        seconds=time.perf_counter() - began,
        path=root,
        rows_per_plugin=per_plugin,
    )
