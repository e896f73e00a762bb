"""The scan stage of the VKG builder: the rows a grounded request needs, from the lake.

One ``Lake.scan`` per plugin (numeric and text metrics apart) with the node, tag and time
predicates pushed into the Parquet reader; duplicate polls of one series at one instant are dropped
(the graph has one reading per sensor and timestamp, the first one read); minute/hour granularity
averages each series per bucket. Errors name the plugin, the metrics and the window that failed.

Per-job windows: when no two windows of one node overlap (nodes are exclusive in the synthetic
lake and mostly on M100), each reading finds its window by a binary search of packed
(node, milliseconds) keys, so there is no join and no de-duplication of join output, and buckets
are averaged on integer keys (Q14: 4.2M readings of 980 nodes in ~6,700 windows). Overlapping
windows (shared nodes) take the general path, a join on the node then a de-duplication; both
paths give the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl

from oda_analyst.errors import OdaError, VKGBuildError
from oda_analyst.lake.reader import Lake
from oda_analyst.lake.schema import tag_columns
from oda_analyst.ontology.catalogue import Catalogue, MetricInfo
from oda_analyst.vkg.base import NODE_PLUGINS
from oda_analyst.vkg.request import GroundedRequest

_BUCKET = {"minute": "1m", "hour": "1h"}
_BUCKET_MS = {"minute": 60_000, "hour": 3_600_000}
# Packed keys are non-negative Int64: metric code | node | milliseconds since the first window.
_KEY_BITS = 62
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
_FLOAT_DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class ReadingFrame:
    """Collected rows of one plugin: timestamp, metric, the series key columns, value; at
    minute/hour granularity also ``__n``, how many readings each bucket mean averages."""

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


def _epoch_ms(moment: datetime) -> int:
    # Integer arithmetic: float timestamps are not exact at millisecond resolution.
    return (moment - _EPOCH) // _MS


@dataclass(frozen=True)
class _WindowIndex:
    """Job windows of one request as sorted packed keys ``node * 2**ts_bits + (ms - t0)``.

    A reading's key falls between its window's start and end keys only if it has the window's
    node and lies in [start, end): the node occupies the high bits and every time offset is
    below ``2 ** ts_bits``. Built only when no two windows of a node overlap, so a reading has
    at most one window: the last one starting at or before it.
    """

    t0: int
    t_end: int
    ts_bits: int
    node_bits: int
    starts: pl.Series  # packed start keys, ascending
    ends: pl.Series  # packed end keys (exclusive), same order
    start_ms: pl.Series  # window start, epoch ms (a bucket cut by the window starts here)

    @classmethod
    def of(cls, request: GroundedRequest, metrics: list[str]) -> _WindowIndex | None:
        """The index, or None when windows of one node overlap or keys would not fit."""
        windows = request.job_windows
        if not windows:
            return None
        # Plain Python over the windows (a few thousand): building a frame of datetimes and
        # node lists costs five times more.
        nodes: list[int] = []
        starts: list[int] = []
        ends: list[int] = []
        for w in windows:
            start_ms, end_ms = _epoch_ms(w.start), _epoch_ms(w.end)
            for n in w.nodes:
                nodes.append(n)
                starts.append(start_ms)
                ends.append(end_ms)
        spans = (
            pl.DataFrame(
                {"node": nodes, "start": starts, "end": ends},
                schema={"node": pl.Int64, "start": pl.Int64, "end": pl.Int64},
            )
            # Identical (node, start, end) windows of two jobs hold the same readings once.
            .unique()
            .sort("node", "start", "end")
        )
        node, start, end = spans["node"], spans["start"], spans["end"]
        if spans.height == 0 or ((node == node.shift(1)) & (start < end.shift(1))).any():
            return None
        t0, t_end, last_node = spans.select(
            pl.col("start").min(), pl.col("end").max(), pl.col("node").max()
        ).row(0)
        ts_bits = (t_end - t0).bit_length()
        node_bits = max(last_node.bit_length(), 1)
        if (len(metrics) - 1).bit_length() + node_bits + ts_bits > _KEY_BITS:
            return None
        return cls(
            t0=t0,
            t_end=t_end,
            ts_bits=ts_bits,
            node_bits=node_bits,
            starts=node * (1 << ts_bits) + (start - t0),
            ends=node * (1 << ts_bits) + (end - t0),
            start_ms=start,
        )

    def _locate(self, packed: pl.Series) -> tuple[pl.Series, pl.Series]:
        """(window index, inside a window?) of every packed (node, time) key."""
        if packed.null_count() == 0 and packed.is_sorted():
            return self._merge(packed)
        window = self.starts.search_sorted(packed, side="right").cast(pl.Int64) - 1
        inside = (window >= 0) & (packed < self.ends.gather(window.clip(0)))
        return window, inside

    def _merge(self, packed: pl.Series) -> tuple[pl.Series, pl.Series]:
        """(window index, inside) of sorted keys, by locating the windows among the keys.

        Rows [lo, hi) of window i are those with start_i <= key < end_i; the windows are sorted
        and disjoint, so a row is inside a window when more windows opened than closed at or
        before it, and that window is the last one opened.
        """
        rows = packed.len()
        lo = packed.search_sorted(self.starts, side="left").to_numpy()
        hi = packed.search_sorted(self.ends, side="left").to_numpy()
        opened = np.cumsum(np.bincount(lo, minlength=rows + 1)[:rows])
        closed = np.cumsum(np.bincount(hi, minlength=rows + 1)[:rows])
        return pl.Series(opened - 1, dtype=pl.Int64), pl.Series(opened > closed)

    def readings(self, lf: pl.LazyFrame, metrics: list[str], granularity: str) -> pl.DataFrame:
        """Rows of ``lf`` (one scan of node metrics) inside their node's window, shaped.

        The same rows as the general path: raw readings once per (metric, node, timestamp),
        the first one read; or bucket means and counts (``__n``) per (metric, node, window,
        bucket), the bucket start cut at the window start.
        """
        ms = pl.col("timestamp").dt.epoch("ms")
        # Nodes that passed the scan's node filter are spelled str(int), so parsing is exact.
        node = pl.col("node").str.to_integer(dtype=pl.Int32).cast(pl.Int64)
        series_bits = self.node_bits + self.ts_bits
        # One key per (metric, node, timestamp), metric the highest field; computed in the scan
        # (in parallel with decoding) rather than on the collected columns afterwards.
        key = node * (1 << self.ts_bits) + (ms - self.t0)
        if len(metrics) > 1:
            code = pl.col("metric").cast(pl.Enum(metrics)).to_physical().cast(pl.Int64)
            key = code * (1 << series_bits) + key
        # Only what the shape needs travels on: filtering 3M node strings costs more than the
        # rest. Outside [t0, t_end) (the scan's bounds already) the packing would not be exact.
        keep = ["timestamp", "metric", "node", "value"] if granularity == "raw" else ["value"]
        data = (
            lf.filter((ms >= self.t0) & (ms < self.t_end))
            .select(*keep, key.alias("__k"), ms.alias("__ms"))
            .collect()
        )
        packed = data["__k"] if len(metrics) == 1 else data["__k"] % (1 << series_bits)
        window, inside = self._locate(packed)
        keyed = data.with_columns(window.alias("__w")).filter(inside)
        keyed = _first_polls(keyed, series_bits, self.ts_bits)
        if granularity == "raw":
            return keyed.select(keep)
        return self._means(keyed, metrics, _BUCKET_MS[granularity])

    def _means(self, keyed: pl.DataFrame, metrics: list[str], size: int) -> pl.DataFrame:
        """Mean and count per (metric, node, window, bucket), keyed by the bucket start."""
        bucket = pl.max_horizontal(
            pl.col("__ms") // size * size, pl.lit(self.start_ms).gather(pl.col("__w"))
        )
        # The bucket's key is the reading's key moved back to the bucket start: buckets of one
        # series in two windows of a node cannot share a start (the windows do not overlap),
        # and the start never precedes t0 (it is at least the window start).
        group = keyed.select((pl.col("__k") - (pl.col("__ms") - bucket)).alias("__g"), "value")
        if group["__g"].is_sorted():
            # A lake in node order gives runs of one bucket: Polars then groups without hashing.
            group = group.with_columns(pl.col("__g").set_sorted())
        means = (
            group.group_by("__g")
            .agg(pl.col("value").cast(pl.Float64).mean(), pl.len().alias("__n"))
            .sort("__g")
        )
        key = means["__g"]
        offset = key % (1 << self.ts_bits)
        node = (key // (1 << self.ts_bits)) % (1 << self.node_bits)
        code = key // (1 << (self.node_bits + self.ts_bits))
        return pl.DataFrame(
            {
                "timestamp": (offset + self.t0).cast(pl.Datetime("ms")).dt.replace_time_zone("UTC"),
                "metric": pl.Series(metrics, dtype=pl.String).gather(code),
                "node": node.cast(pl.String),
                "value": means["value"],
                "__n": means["__n"],
            }
        )


def _first_polls(keyed: pl.DataFrame, series_bits: int, ts_bits: int) -> pl.DataFrame:
    """Drop repeated polls of one (metric, node, timestamp), keeping the first one read.

    Lakes written in node or time order (the synthetic one, M100 dumps) have none, and a key
    strictly increasing in either order proves it without hashing millions of keys. ``__k`` is
    ``series * 2**ts_bits + offset`` with ``series = metric * 2**node_bits + node``.
    """
    if keyed.height < 2:
        return keyed
    key = keyed["__k"]
    if (key.diff().drop_nulls() > 0).all():
        return keyed
    node_bits = series_bits - ts_bits
    series, offset = key // (1 << ts_bits), key % (1 << ts_bits)
    metric, node = series // (1 << node_bits), series % (1 << node_bits)
    time_major = (metric * (1 << ts_bits) + offset) * (1 << node_bits) + node
    if (time_major.diff().drop_nulls() > 0).all():
        return keyed
    return keyed.filter(key.is_first_distinct())


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
        index = _WindowIndex.of(request, names) if plugin in NODE_PLUGINS else None
        try:
            if index is not None and keys == ("node",):
                data = index.readings(lf, names, request.granularity)
            else:
                data = _shape(lf, request, plugin, keys).collect()
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
                data=data,
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
        # Lake order kept through the join: "the first poll read" must not depend on threads.
        lf = lf.join(_windows_frame(request), on="node", how="inner", maintain_order="left").filter(
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
    windowed = bool(request.job_windows) and plugin in NODE_PLUGINS
    group = [*series] + (["__ws"] if windowed else [])
    deduped = lf.unique(subset=[*group, "timestamp"], keep="first", maintain_order=True)
    means = (
        deduped.with_columns(bucket.alias("__bucket"))
        .group_by([*group, "__bucket"], maintain_order=True)
        .agg(pl.col("value").cast(pl.Float64).mean(), pl.len().alias("__n"))
    )
    if windowed:
        # Two overlapping windows of a node that both run through an hour cut its bucket at the
        # same start, and the graph holds one mean per sensor and instant: the one over more
        # readings, then the earlier window's. Sorted, so the choice never depends on threads.
        means = means.sort(
            [*series, "__bucket", "__n", "__ws"],
            descending=[*(False for _ in series), False, True, False],
        )
    return means.select(pl.col("__bucket").alias("timestamp"), *series, "value", "__n").unique(
        subset=[*series, "timestamp"], keep="first", maintain_order=True
    )
