"""Aggregation pushed down into the lake scan: month-scale requests as a few aggregates.

A month of all 980 nodes of one 20 s metric is ~127M readings: never triples. An
``AggregateRequest`` names one statistic of some source metrics (or job quantities) per entity
(node, rack, GPU or user) and bucket (UTC day, or the whole window). The scan reads one
partition (month x metric) at a time with Polars' streaming engine, grouping by node and bucket
before anything is collected, so memory holds partial aggregates (sum, count, min, max, hits per
node and day), never rows. Partials of all partitions are then combined and rolled up to the
entity: exact for every statistic (a rack's mean is its readings' sum over their count, not a mean
of node means). Only these rows become triples (``vkg.aggregates``).

Job quantities (``cpu_hours``, ``gpu_hours`` per user) come from the job table, one row per job
(last state), each job's allocated CPUs/GPUs times the hours of its run [start_time, end_time)
inside the window (jobs without an end time have no run, as in the compiler's job queries).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from oda_analyst.errors import OdaError, VKGBuildError
from oda_analyst.lake.layout import month_bounds, months_between
from oda_analyst.lake.reader import Lake
from oda_analyst.lake.schema import plugin_from_folder
from oda_analyst.lake.topology import N_NODES
from oda_analyst.ontology.catalogue import Catalogue, MetricInfo, load_catalogue
from oda_analyst.ontology.plan import AggregateFilter, QueryPlan, ValueFilter
from oda_analyst.vkg.engines import PartitionTask, PolarsEngine, ScanEngine

Statistic = Literal["mean", "min", "max", "sum", "count", "hours_above"]
Level = Literal["node", "rack", "gpu", "user"]
Bucket = Literal["day", "window"]
JobQuantity = Literal["cpu_hours", "gpu_hours"]
NODES_PER_RACK = 20
_GPUS = r"gres/gpu(?::[^=,]*)?=(\d+)"
_DAY = timedelta(days=1)


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class AggregateRequest(BaseModel):
    """One statistic per entity and bucket over [start, end); see the module docstring.

    ``metrics`` are (plugin, metric) pairs of one node plugin (the four GPU temperatures of a
    GPU-level request, for example); ``nodes`` narrows the nodes (none = all). ``threshold`` is
    the level ``hours_above`` counts readings strictly above. ``quantities`` are job quantities
    summed per user (level ``user``, statistic ``sum``), instead of metrics.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    metrics: tuple[tuple[str, str], ...] = ()
    quantities: tuple[JobQuantity, ...] = ()
    statistic: Statistic
    threshold: float | None = None
    level: Level
    bucket: Bucket = "window"
    start: datetime
    end: datetime
    nodes: tuple[int, ...] = ()

    @field_validator("start", "end")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return _utc(value)

    @field_validator("metrics")
    @classmethod
    def _metrics(cls, value: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        return tuple(sorted({(p.removesuffix("_pub"), m) for p, m in value}))

    @field_validator("nodes", "quantities")
    @classmethod
    def _sorted(cls, value: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(sorted(set(value)))

    @model_validator(mode="after")
    def _check(self) -> AggregateRequest:
        if self.end <= self.start:
            raise ValueError("window end is not after its start")
        if bool(self.metrics) == bool(self.quantities):
            raise ValueError("give source metrics or job quantities (exactly one of them)")
        if self.quantities and (self.level != "user" or self.statistic != "sum"):
            raise ValueError("job quantities are summed per user (level user, statistic sum)")
        if self.metrics and self.level == "user":
            raise ValueError("metric aggregates are per node, rack or GPU, not per user")
        if len({p for p, _ in self.metrics}) > 1:
            raise ValueError("the metrics of one aggregate come from one plugin")
        if (self.statistic == "hours_above") != (self.threshold is not None):
            raise ValueError("hours_above needs a threshold, and only it takes one")
        return self

    def canonical(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        data["kind"] = "aggregate"  # never equal to a GroundedRequest's canonical form
        return data

    def key(self) -> str:
        """A short stable hash of ``canonical()`` (the graph's cache key)."""
        text = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def buckets(self) -> list[tuple[datetime, datetime]]:
        """The [start, end) of every bucket, clipped to the window."""
        if self.bucket == "window":
            return [(self.start, self.end)]
        day = self.start.replace(hour=0, minute=0, second=0, microsecond=0)
        out = []
        while day < self.end:
            out.append((max(day, self.start), min(day + _DAY, self.end)))
            day += _DAY
        return out


@dataclass(frozen=True)
class ScanProgress:
    """One partition scanned: ``done`` of ``total``, ``label`` names it; ``rows`` read so far."""

    done: int
    total: int
    label: str
    rows: int = 0


@dataclass
class AggregateFrame:
    """The aggregates of one request: entity keys, bucket, source, value and sample count.

    Columns: ``node`` / ``rack`` / ``gpu`` (with ``node``) / ``user`` by level, ``window_start``,
    ``window_end`` (Datetime ms UTC), ``source`` (metric name or job quantity), ``value``
    (Float64), ``n`` (Int64, readings or jobs that fed it). ``partitions`` are the lake files read.
    """

    request: AggregateRequest
    data: pl.DataFrame
    rows_scanned: int
    partitions: list[str] = field(default_factory=list)
    seconds: float = 0.0


Progress = Callable[[ScanProgress], None]


def partials(lf: pl.LazyFrame, req: AggregateRequest) -> pl.LazyFrame:
    """Per node (and day) partial aggregates of one partition's rows."""
    keys: list[pl.Expr] = [pl.col("node")]
    if req.bucket == "day":
        keys.append(pl.col("timestamp").dt.truncate("1d").alias("__day"))
    value = pl.col("value")
    aggs = [pl.len().alias("n")]
    if req.statistic in ("mean", "sum"):
        aggs.append(value.cast(pl.Float64).sum().alias("sum"))
    elif req.statistic in ("min", "max"):
        # Through the shortest decimal, as a reading's triple writes it: a Float32 26.9 is the
        # double 26.9 on both paths, not 26.899999618530273.
        extreme = value.min() if req.statistic == "min" else value.max()
        aggs.append(extreme.cast(pl.String).cast(pl.Float64).alias(req.statistic))
    elif req.statistic == "hours_above":
        assert req.threshold is not None
        level = req.threshold
        if lf.collect_schema()["value"] == pl.Float32:
            level = float32_level(level)
        aggs.append((value > level).sum().cast(pl.Int64).alias("hits"))
    return lf.group_by(keys).agg(aggs)


def float32_level(level: float) -> float:
    """The largest Float32 whose shortest decimal is at most ``level``.

    A reading's triple carries a Float32 value as its shortest decimal (26.9, not the float's
    exact 26.899999618530273), and the reading-level query compares that decimal with the level.
    Comparing the Float32 values with this bound instead gives the same verdict on every row,
    without turning each row into text.
    """
    bound = np.float32(level)
    if float(str(bound)) > level:
        bound = np.nextafter(bound, np.float32(-np.inf))
    return float(bound)


def _combine(partials: pl.DataFrame, keys: list[str], statistic: str) -> pl.DataFrame:
    """Partials of several partitions (or nodes) merged per ``keys``: exact for every statistic."""
    aggs = [pl.col("n").sum()]
    for name, how in (("sum", "sum"), ("min", "min"), ("max", "max"), ("hits", "sum")):
        if name in partials.columns:
            aggs.append(getattr(pl.col(name), how)())
    return partials.group_by(keys, maintain_order=False).agg(aggs).sort(keys)


def _final(frame: pl.DataFrame, req: AggregateRequest, period_s: int) -> pl.Expr:
    if req.statistic == "mean":
        return pl.col("sum") / pl.col("n")
    if req.statistic in ("sum", "min", "max"):
        return pl.col(req.statistic)
    if req.statistic == "count":
        return pl.col("n").cast(pl.Float64)
    # count x period, then / 3600, in doubles: the same two operations as the reading-level
    # query's hours (sparql.select), so both give the same figure to the bit.
    return (pl.col("hits") * period_s).cast(pl.Float64) / 3600.0


def _month_windows(req: AggregateRequest) -> list[tuple[str, datetime, datetime]]:
    out = []
    for ym in months_between(req.start, req.end):
        lo, hi = month_bounds(ym)
        s, e = max(lo, req.start), min(hi, req.end)
        if s < e:
            out.append((ym, s, e))
    return out


def _info(cat: Catalogue, metric: str, level: str) -> MetricInfo:
    try:
        info = cat.get(metric)
    except OdaError as exc:
        raise VKGBuildError(f"aggregate of {metric}: {exc.message}", hint=exc.hint) from None
    if info.plugin not in ("ipmi", "ganglia"):
        raise VKGBuildError(
            f"{info.plugin} metric {metric} is not a per-node metric",
            hint="aggregates are pushed down for ipmi and ganglia metrics",
        )
    if info.dtype == "string" or not info.aggregatable:
        raise VKGBuildError(
            f"{metric} is not a numeric metric that can be aggregated",
            hint="aggregate numeric metrics only",
        )
    if level == "gpu" and (info.entity != "GPU" or info.entity_index is None):
        raise VKGBuildError(
            f"{metric} does not observe a GPU", hint="GPU-level aggregates need GPU metrics"
        )
    return info


def estimate_rows(req: AggregateRequest, catalogue: Catalogue | None = None) -> float:
    """Rough count of the rows a request scans: series x window / sampling period."""
    if req.quantities:
        return 0.0
    cat = catalogue or load_catalogue()
    nodes = len(req.nodes) or N_NODES
    seconds = (req.end - req.start).total_seconds()
    return sum(nodes * seconds / (cat.get(m).period_s or 60) for _, m in req.metrics)


def scan_aggregates(
    req: AggregateRequest,
    lake: Lake,
    *,
    catalogue: Catalogue | None = None,
    progress: Progress | None = None,
    engine: ScanEngine | None = None,
    held: Collection[str] | None = None,
) -> AggregateFrame:
    """Scan and aggregate ``req`` partition by partition; VKGBuildError on any failure.

    ``engine`` runs the partition tasks (default: this process, ``PolarsEngine``). ``held``
    names the partitions the lake holds (``partition_label``): a month of the window without
    its partition is then skipped instead of failing the scan.
    """
    started = time.perf_counter()
    if req.quantities:
        frame = _job_quantities(req, lake)
        frame.seconds = time.perf_counter() - started
        return frame
    cat = catalogue or load_catalogue()
    infos = [_info(cat, m, req.level) for _, m in req.metrics]
    options = tuple(sorted(lake.storage_options.items()))
    tasks = [
        PartitionTask(
            location=lake.location,
            storage_options=options,
            plugin=info.plugin,
            metric=info.name,
            start=lo,
            end=hi,
            nodes=req.nodes or None,
            request=req,
            label=f"{ym}/{info.plugin}/{info.name}",
        )
        for info in infos
        for ym, lo, hi in _month_windows(req)
        if held is None or f"{ym}/{info.plugin}/{info.name}" in held
    ]
    if not tasks:
        frame = AggregateFrame(req, _empty(req), 0, [], time.perf_counter() - started)
        return frame
    finished: list[str] = []
    rows = 0

    def done(task: PartitionTask, part: pl.DataFrame) -> None:
        nonlocal rows
        finished.append(task.label)
        rows += int(part["n"].sum()) if part.height else 0
        if progress is not None:
            progress(ScanProgress(len(finished), len(tasks), task.label, rows))

    runner = engine or PolarsEngine()
    try:
        parts = runner.run(tasks, done)
    except OdaError as exc:
        raise VKGBuildError(
            f"aggregating {req.statistic} of {', '.join(i.name for i in infos)} failed: "
            f"{exc.message}",
            hint=exc.hint,
        ) from None
    except Exception as exc:  # Polars/Arrow errors of a damaged partition, or a lost worker
        raise VKGBuildError(
            f"scanning the partitions of {', '.join(i.name for i in infos)} failed "
            f"({runner.name} engine): {type(exc).__name__}: {exc}",
            hint="a Parquet file of these partitions is unreadable; rewrite or remove it",
        ) from None
    data, scanned = _roll_up(req, infos, parts)
    return AggregateFrame(
        req, data, scanned, [t.label for t in tasks], time.perf_counter() - started
    )


def partition_label(rel: str) -> str | None:
    """'YY-MM/plugin/metric' of a lake file's path (``year_month=…/plugin=…/metric=…/…``)."""
    parts = rel.split("/")
    if len(parts) < 3 or not parts[0].startswith("year_month="):
        return None
    plugin = plugin_from_folder(parts[1].removeprefix("plugin="))
    return f"{parts[0].removeprefix('year_month=')}/{plugin}/{parts[2].removeprefix('metric=')}"


def _empty(req: AggregateRequest) -> pl.DataFrame:
    keys = {"rack": ["rack"], "node": ["node"], "gpu": ["node", "gpu"]}[req.level]
    utc = pl.Datetime("ms", "UTC")
    schema = {k: pl.Int64 for k in keys} | {"window_start": utc, "window_end": utc}
    return pl.DataFrame(schema=schema | {"source": pl.String, "value": pl.Float64, "n": pl.Int64})


def _roll_up(
    req: AggregateRequest, infos: list[MetricInfo], parts: list[pl.DataFrame]
) -> tuple[pl.DataFrame, int]:
    merged = pl.concat(parts, how="diagonal_relaxed")
    scanned = int(merged["n"].sum()) if merged.height else 0
    if req.bucket == "day":
        start = pl.lit(req.start).cast(pl.Datetime("ms", "UTC"))
        end = pl.lit(req.end).cast(pl.Datetime("ms", "UTC"))
        day = pl.col("__day").cast(pl.Datetime("ms", "UTC"))
        merged = merged.with_columns(
            pl.max_horizontal(day, start).alias("window_start"),
            pl.min_horizontal(day.dt.offset_by("1d"), end).alias("window_end"),
        ).drop("__day")
    else:
        merged = merged.with_columns(
            pl.lit(req.start).cast(pl.Datetime("ms", "UTC")).alias("window_start"),
            pl.lit(req.end).cast(pl.Datetime("ms", "UTC")).alias("window_end"),
        )
    index = {i.name: i.entity_index for i in infos}
    if req.level == "rack":
        merged = merged.with_columns((pl.col("node") // NODES_PER_RACK).alias("rack"))
        keys = ["rack"]
    elif req.level == "gpu":
        gpu = pl.col("source").replace_strict(index, return_dtype=pl.Int64)
        merged = merged.with_columns(gpu.alias("gpu"))
        keys = ["node", "gpu"]
    else:
        keys = ["node"]
    # A node-level request over several metrics (no GPU split) pools them; the source is then
    # every metric, written once each.
    pooled = req.level != "gpu" and len(infos) > 1
    group = [*keys, "window_start", "window_end"] + ([] if pooled else ["source"])
    combined = _combine(merged, group, req.statistic)
    if pooled:
        combined = combined.with_columns(pl.lit(",".join(i.name for i in infos)).alias("source"))
    periods = {i.period_s or 60 for i in infos}
    if req.statistic == "hours_above" and len(periods) > 1:
        raise VKGBuildError(
            "hours_above over metrics of different sampling periods",
            hint="ask for one metric, or metrics polled at the same period",
        )
    value = _final(combined, req, periods.pop())
    data = combined.select(
        *keys, "window_start", "window_end", "source", value.alias("value"), pl.col("n")
    )
    if req.level == "rack":
        data = data.filter(pl.col("rack") < (N_NODES + NODES_PER_RACK - 1) // NODES_PER_RACK)
    return data, scanned


def _job_quantities(req: AggregateRequest, lake: Lake) -> AggregateFrame:
    """cpu_hours / gpu_hours per user: allocated count x hours of the run inside the window."""
    start = pl.lit(req.start).cast(pl.Datetime("ms", "UTC"))
    end = pl.lit(req.end).cast(pl.Datetime("ms", "UTC"))
    overlap = (
        pl.min_horizontal(pl.col("end_time").cast(pl.Datetime("ms", "UTC")), end)
        - pl.max_horizontal(pl.col("start_time").cast(pl.Datetime("ms", "UTC")), start)
    ).dt.total_milliseconds() / 3_600_000
    tres = pl.col("tres_alloc_str")
    gpus = (
        pl.when(tres.is_not_null() & (tres != ""))
        .then(tres.str.extract(_GPUS, 1).cast(pl.Int64).fill_null(0))
        .otherwise(None)
    )
    amount = {"cpu_hours": pl.col("num_cpus").cast(pl.Float64), "gpu_hours": gpus}
    try:
        jobs = (
            lake.jobs(start=req.start, end=req.end)
            # A run is [start_time, end_time) of the job's last poll (as the compiler reads
            # jobs: one without an end time has no run to count).
            .filter(
                pl.col("start_time").is_not_null()
                & pl.col("end_time").is_not_null()
                & pl.col("user_id").is_not_null()
            )
            .select(
                pl.col("user_id").cast(pl.Int64).alias("user"),
                *((amount[q] * overlap.clip(lower_bound=0.0)).alias(q) for q in req.quantities),
            )
            .collect()
        )
    except OdaError as exc:
        raise VKGBuildError(f"reading the job table failed: {exc.message}", hint=exc.hint) from None
    frames = []
    for q in req.quantities:
        per_user = (
            jobs.filter(pl.col(q).is_not_null())
            .group_by("user")
            .agg(pl.col(q).sum().alias("value"), pl.len().cast(pl.Int64).alias("n"))
            .sort("user")
        )
        frames.append(per_user.with_columns(pl.lit(q).alias("source")))
    data = pl.concat(frames).select(
        "user",
        pl.lit(req.start).cast(pl.Datetime("ms", "UTC")).alias("window_start"),
        pl.lit(req.end).cast(pl.Datetime("ms", "UTC")).alias("window_end"),
        "source",
        pl.col("value").cast(pl.Float64),
        "n",
    )
    return AggregateFrame(req, data, jobs.height, ["job_table"])


# -- from a typed plan -------------------------------------------------------------------------

_PLAN_STATISTIC: dict[str, Statistic] = {"avg": "mean", "min": "min", "max": "max", "sum": "sum"}


@dataclass(frozen=True)
class PlanPushdown:
    """A plan answered from aggregates: the request, and how its query combines them."""

    request: AggregateRequest
    combine: Literal["max", "min", "sum"] | None = None
    order_desc: bool = False
    limit: int | None = None


def aggregate_from_plan(plan: QueryPlan) -> PlanPushdown | None:
    """The pushed-down form of a plan whose answer is one decomposable statistic per rack,
    node or GPU (and day) of node metrics, or CPU/GPU hours per user; None for any other plan.

    Readings: one aggregation (avg/min/max/sum of value, or ``hours`` above a level: the plan's
    one value filter ``gt``), group_by among rack/node/gpu and day, no other filter but
    aggregate filters on that same statistic (kept by the pushed query), entities
    that select nodes (every node, node ids, racks by id: combined with AND). With no group_by
    the selection must be one node (its figure is the node's). Grouping GPU metrics by node
    pools the node's GPUs (max/min/sum, and hours summed: a node's mean over its GPUs would
    weigh them by their reading counts, which the plan does not say). Ordering by the value and a
    limit carry over. Jobs: sums of ``cpu_hours``/``gpu_hours`` grouped by user, no job filter.
    """
    window = plan.window
    if window is None:
        return None
    if plan.target == "jobs":
        return _jobs_pushdown(plan) if all(e.all for e in plan.entities) else None
    if plan.target != "readings" or plan.job_window or len(plan.aggregations) != 1:
        return None
    if plan.count_groups:  # the pushed query gives the groups, not their number
        return None
    nodes = _selected_nodes(plan)
    agg = plan.aggregations[0]
    threshold = _level_above(plan) if agg.fn == "hours" else None
    statistic: Statistic | None = "hours_above" if threshold is not None else None
    kept = [f for f in plan.filters if isinstance(f, AggregateFilter)]
    on_itself = len(kept) == len(plan.filters) and all(f.fn == agg.fn for f in kept)
    if agg.fn != "hours" and on_itself:
        # no filter, or conditions on the very statistic pushed ('racks whose max is above
        # 1600 W'): the pushed query keeps the groups passing them
        statistic = _PLAN_STATISTIC.get(agg.fn)
    keys = set(plan.group_by)
    if nodes is None or agg.of != "value" or statistic is None:
        return None
    if not keys <= {"rack", "node", "gpu", "day"}:
        return None
    entity = keys - {"day"}
    if not entity and len(nodes) == 1:
        entity = {"node"}  # one node's figure: its node-level aggregate
    if len(entity) != 1:
        return None
    plugins = {m.plugin for m in plan.metrics}
    if len(plugins) != 1 or not plugins <= {"ipmi", "ganglia"}:
        return None
    cat = type(plan).bound_catalogue or load_catalogue()
    gpu_metrics = all(cat.get(m.metric).entity == "GPU" for m in plan.metrics)
    (level,) = entity
    combine: Literal["max", "min", "sum"] | None = None
    if level == "node" and gpu_metrics and len(plan.metrics) > 1:
        if statistic == "mean":
            return None
        level, combine = "gpu", _COMBINE[statistic]
    elif len(plan.metrics) > 1 and statistic == "mean":
        return None  # a pooled mean of several metrics: not what a per-metric plan means
    order_desc = any(k.key == agg.column and k.desc for k in plan.order_by)
    if plan.order_by and not all(k.key == agg.column for k in plan.order_by):
        return None
    request = AggregateRequest(
        metrics=tuple((m.plugin, m.metric) for m in plan.metrics),
        statistic=statistic,
        threshold=threshold,
        level=level,  # one of rack/node/gpu, checked above
        bucket="day" if "day" in keys else "window",
        start=window.start,
        end=window.end,
        nodes=nodes,
    )
    return PlanPushdown(request, combine, order_desc, plan.limit)


_COMBINE: dict[str, Literal["max", "min", "sum"]] = {
    "max": "max", "min": "min", "sum": "sum", "hours_above": "sum",
}  # fmt: skip


def _selected_nodes(plan: QueryPlan) -> tuple[int, ...] | None:
    """The nodes a readings plan selects (``()`` = every node), None when the selection is not
    one of nodes (a room, a GPU index, a job)."""
    if plan.kinds() - {"node", "rack", "gpu"}:
        return None
    chosen: set[int] | None = None
    for sel in plan.entities:
        if sel.kind == "gpu" and sel.index is not None:
            return None  # the metrics carry their GPU; an index on top is the compiler's filter
        if sel.all:
            continue
        ids = {int(i) for i in sel.ids}
        if sel.kind == "rack":
            ids = {n for r in ids for n in range(r * NODES_PER_RACK, (r + 1) * NODES_PER_RACK)}
        chosen = ids if chosen is None else chosen & ids
    if chosen is None:
        return ()
    return tuple(sorted(chosen)) or None  # an empty intersection selects nothing: not pushed


def _level_above(plan: QueryPlan) -> float | None:
    """The level of an ``hours`` plan whose only filter is ``value gt <level>``."""
    if len(plan.filters) != 1:
        return None
    (flt,) = plan.filters
    if not isinstance(flt, ValueFilter) or flt.op != "gt":
        return None
    return float(flt.value)


def _jobs_pushdown(plan: QueryPlan) -> PlanPushdown | None:
    quantities = {a.of for a in plan.aggregations if a.fn == "sum"}
    if (
        plan.group_by != ["user"]
        or plan.filters
        or plan.kinds() != {"user"}
        or not quantities
        or not quantities <= {"cpu_hours", "gpu_hours"}
        or len(quantities) != len(plan.aggregations)
        or plan.order_by
    ):
        return None
    assert plan.window is not None
    request = AggregateRequest(
        quantities=tuple(sorted(quantities)),
        statistic="sum",
        level="user",
        start=plan.window.start,
        end=plan.window.end,
    )
    return PlanPushdown(request)
