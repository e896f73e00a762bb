"""The scan stage of the VKG builder: the rows a grounded request needs, from the lake.

One ``Lake.scan`` per plugin (numeric and text metrics apart) with the node, tag and time
predicates pushed into the Parquet reader; per-job windows are applied with a join on the node;
duplicate polls of one series at one instant are dropped (the graph has one reading per sensor and
timestamp); minute/hour granularity averages each series per bucket. Errors name the plugin, the
metrics and the window that failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import polars as pl

from oda_analyst.errors import OdaError, VKGBuildError
from oda_analyst.lake.reader import Lake
from oda_analyst.lake.schema import tag_columns
from oda_analyst.ontology.catalogue import Catalogue, MetricInfo
from oda_analyst.vkg.base import NODE_PLUGINS
from oda_analyst.vkg.request import GroundedRequest

_BUCKET = {"minute": "1m", "hour": "1h"}
_FLOAT_DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class ReadingFrame:
    """Collected rows of one plugin: timestamp, metric, the series key columns, value."""

    plugin: str
    infos: dict[str, MetricInfo]
    key_columns: tuple[str, ...]
    data: pl.DataFrame
    rows_scanned: int
    text: bool
    floating: bool


def _key_columns(plugin: str, metrics: list[str]) -> tuple[str, ...]:
    if plugin in ("ipmi", "ganglia"):
        return ("node",)
    if plugin == "nagios":
        return ("node", "description")
    return tuple(dict.fromkeys(t for m in metrics for t in tag_columns(plugin, m)))


def _window_text(start: datetime | None, end: datetime | None) -> str:
    if start is None or end is None:
        return "the whole lake"
    return f"[{start.isoformat()}, {end.isoformat()})"


def _groups(request: GroundedRequest, cat: Catalogue) -> list[tuple[str, bool, list[MetricInfo]]]:
    """(plugin, text?, metrics) in a stable order; unknown metrics fail here."""
    groups: dict[tuple[str, bool], list[MetricInfo]] = {}
    for plugin, metric in request.metrics:
        try:
            info = cat.get(metric)
        except OdaError as exc:
            raise VKGBuildError(f"unknown metric {plugin}/{metric}", hint=exc.hint) from None
        if info.plugin != plugin:
            raise VKGBuildError(
                f"metric {metric} belongs to plugin {info.plugin}, not {plugin}",
                hint="ground metrics with the catalogue (plugin, metric) pairs",
            )
        if info.dtype == "none":
            raise VKGBuildError(
                f"{plugin}/{metric} has no readings (it is the job table)",
                hint="jobs are materialised with include_jobs or jobs=[...]",
            )
        if request.granularity != "raw" and (info.dtype == "string" or not info.aggregatable):
            raise VKGBuildError(
                f"{plugin}/{metric} ({info.kind}) cannot be averaged per {request.granularity}",
                hint="request granularity raw for states, counters, ids and text metrics",
            )
        groups.setdefault((plugin, info.dtype == "string"), []).append(info)
    return [(p, text, infos) for (p, text), infos in groups.items()]


def _node_filter(request: GroundedRequest, plugin: str, names: str) -> list[int] | None:
    if request.job_windows:
        return sorted({n for w in request.job_windows for n in w.nodes})
    nodes = request.node_selection()
    if nodes is not None and not nodes:
        raise VKGBuildError(
            f"{plugin} metrics {names} are per node but the request selects no node",
            hint="name nodes, racks, GPUs or jobs, or set all_nodes",
        )
    return None if nodes is None else list(nodes)


def _tag_filter(request: GroundedRequest, plugin: str) -> dict[str, list[str]] | None:
    if plugin == "vertiv" and request.devices_of("crac"):
        return {"device": list(request.devices_of("crac"))}
    if plugin == "schneider" and request.devices_of("plc"):
        return {"panel": list(request.devices_of("plc"))}
    if plugin == "logics" and request.devices_of("panel"):
        pairs = [k.split("/", 1) for k in request.devices_of("panel")]
        return {"panel": sorted({p for p, _ in pairs}), "device": sorted({d for _, d in pairs})}
    return None


def _window(request: GroundedRequest) -> tuple[datetime | None, datetime | None]:
    if request.job_windows:
        return min(w.start for w in request.job_windows), max(w.end for w in request.job_windows)
    return request.start, request.end


def _windows_frame(request: GroundedRequest) -> pl.LazyFrame:
    rows = [(str(n), w.start, w.end) for w in request.job_windows for n in w.nodes]
    return pl.LazyFrame(
        rows,
        schema={
            "node": pl.String,
            "__ws": pl.Datetime("ms", "UTC"),
            "__we": pl.Datetime("ms", "UTC"),
        },
        orient="row",
    )


def scan_readings(request: GroundedRequest, lake: Lake, cat: Catalogue) -> list[ReadingFrame]:
    """Collected reading rows of every metric group of the request."""
    frames = []
    for plugin, text, infos in _groups(request, cat):
        names = [i.name for i in infos]
        label = f"{plugin} metric(s) {', '.join(names)}"
        nodes = _node_filter(request, plugin, ", ".join(names)) if plugin in NODE_PLUGINS else None
        start, end = _window(request)
        where = f"{label} in {_window_text(start, end)}"
        try:
            lf = lake.scan(
                plugin, names, start=start, end=end, nodes=nodes, tags=_tag_filter(request, plugin)
            )
        except OdaError as exc:
            raise VKGBuildError(f"scan of {where} failed: {exc.message}", hint=exc.hint) from None
        keys = _key_columns(plugin, names)
        lf = _shape(lf, request, plugin, keys)
        try:
            data = lf.collect()
        except OdaError as exc:
            raise VKGBuildError(f"scan of {where} failed: {exc.message}", hint=exc.hint) from None
        except Exception as exc:  # Polars/Arrow errors of a damaged or foreign partition
            raise VKGBuildError(
                f"reading the partitions of {where} failed: {type(exc).__name__}: {exc}",
                hint="a Parquet file of these partitions is unreadable; rewrite or remove it",
            ) from None
        scanned = int(data["__n"].sum()) if "__n" in data.columns else data.height
        frames.append(
            ReadingFrame(
                plugin=plugin,
                infos={i.name: i for i in infos},
                key_columns=keys,
                data=data.drop("__n", strict=False),
                rows_scanned=scanned,
                text=text,
                floating=not text and any(i.dtype in _FLOAT_DTYPES for i in infos),
            )
        )
    return frames


def _shape(
    lf: pl.LazyFrame, request: GroundedRequest, plugin: str, keys: tuple[str, ...]
) -> pl.LazyFrame:
    series = ["metric", *keys]
    start_col: pl.Expr | None = None
    if request.job_windows and plugin in NODE_PLUGINS:
        lf = lf.join(_windows_frame(request), on="node", how="inner").filter(
            (pl.col("timestamp") >= pl.col("__ws")) & (pl.col("timestamp") < pl.col("__we"))
        )
        start_col = pl.col("__ws")
    elif request.start is not None:
        start_col = pl.lit(request.start).cast(pl.Datetime("ms", "UTC"))
    if request.granularity == "raw":
        # One reading per series and instant: duplicate polls (and a node in two overlapping
        # job windows) would give a reading two values.
        return lf.select(["timestamp", *series, "value"]).unique(
            subset=[*series, "timestamp"], keep="first", maintain_order=True
        )
    bucket = pl.col("timestamp").dt.truncate(_BUCKET[request.granularity])
    if start_col is not None:
        bucket = pl.max_horizontal(bucket, start_col)
    group = [*series] + (["__ws"] if request.job_windows and plugin in NODE_PLUGINS else [])
    deduped = lf.unique(subset=[*group, "timestamp"], keep="first", maintain_order=True)
    return (
        deduped.with_columns(bucket.alias("__bucket"))
        .group_by([*group, "__bucket"], maintain_order=True)
        .agg(pl.col("value").cast(pl.Float64).mean(), pl.len().alias("__n"))
        .select(pl.col("__bucket").alias("timestamp"), *series, "value", "__n")
        .unique(subset=[*series, "timestamp"], keep="first", maintain_order=True)
    )
