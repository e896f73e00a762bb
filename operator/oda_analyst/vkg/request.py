"""What a per-query VKG must materialise: the grounded entities, metrics and time window.

A ``GroundedRequest`` is fully resolved: job-based selections (Q7's job ids, Q9's top-3 longest
single-node jobs, Q14's jobs of a day) are turned into explicit job ids, their nodes and their
own windows *before* the request exists (``from_plan``), so that ``canonical()`` — the cache key —
names exactly the data the graph holds, and two plans that need the same data share one graph.

Granularity: ``raw`` writes every reading. ``minute``/``hour`` write one reading per sensor and
bucket (UTC calendar minute/hour) whose ``oda:value`` is the mean of the raw values in it and
whose ``oda:timestamp`` is the bucket start, or the start of the job window that cuts the bucket
(so a bucket always lies inside the window it summarises). No other property is written: the
ontology has none for a bucket's min/max/count. Only aggregatable numeric metrics can be bucketed.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from oda_analyst.errors import UsageError
from oda_analyst.lake import jobs as jobrules
from oda_analyst.lake.reader import Lake
from oda_analyst.lake.topology import N_NODES
from oda_analyst.ontology.catalogue import Catalogue, MetricInfo, load_catalogue
from oda_analyst.ontology.plan import JOB_LEVEL_KEYS, JobFilter, QueryPlan

Granularity = Literal["raw", "minute", "hour"]
DEVICE_KINDS = ("crac", "plc", "panel")
# Job triples every VKG with jobs has (what the shapes require and every job query walks).
JOB_CORE_PROPERTIES = ("type", "label", "jobId", "submittedBy", "startTime", "endTime", "numNodes")
JOB_OPTIONAL_PROPERTIES = (
    "managedBy", "submitTime", "jobState", "partition", "qos", "numCPUs", "numGPUs", "numTasks",
    "timeLimit", "groupId", "exitCode",
)  # fmt: skip
# Job properties a plan's job filters and derived quantities read.
_FILTER_PROPERTY = {  # (group keys of job attributes read the same properties)
    "state": "jobState", "partition": "partition", "qos": "qos", "num_cpus": "numCPUs",
    "num_gpus": "numGPUs",
}  # fmt: skip
_DERIVED_PROPERTY = {"cpu_hours": "numCPUs", "gpu_hours": "numGPUs"}


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _iso(value: datetime) -> str:
    return _utc(value).isoformat().replace("+00:00", "Z")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class JobWindow(_Frozen):
    """Readings of ``nodes`` in [start, end): one job's own run."""

    job_id: int = Field(ge=0)
    nodes: tuple[int, ...]
    start: datetime
    end: datetime

    @field_validator("start", "end")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return _utc(value)

    @field_validator("nodes")
    @classmethod
    def _sorted(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(sorted(set(value)))

    @model_validator(mode="after")
    def _ordered(self) -> JobWindow:
        if self.end <= self.start:
            raise ValueError(f"job {self.job_id}: window end is not after its start")
        return self


class JobFilters(_Frozen):
    """Which jobs overlapping the window ``include_jobs`` materialises (all when empty)."""

    single_node: bool | None = None
    states: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    users: tuple[int, ...] = ()

    @field_validator("states", "partitions")
    @classmethod
    def _names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(sorted(set(value)))

    @field_validator("users")
    @classmethod
    def _ids(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(sorted(set(value)))


class GroundedRequest(_Frozen):
    """The sub-graph one request needs. Build it directly or with ``from_plan``.

    Entities: ``nodes``/``racks``/``gpus`` select compute nodes (their union) for node-level
    metrics, ``all_nodes`` every node; ``devices`` are facility keys ``crac/CDZ01``, ``plc/Q101``,
    ``panel/QGBT1/main_ict`` (none = every device of a facility metric's plugin). ``jobs`` are
    materialised with their nodes, user and times; ``include_jobs`` adds every job overlapping
    ``[start, end)`` that passes ``job_filters``. ``job_windows`` restrict readings to each job's
    nodes and run (then ``start``/``end`` are not needed for the readings).
    """

    nodes: tuple[int, ...] = ()
    all_nodes: bool = False
    racks: tuple[int, ...] = ()
    gpus: tuple[tuple[int, int], ...] = ()
    devices: tuple[str, ...] = ()
    jobs: tuple[int, ...] = ()
    metrics: tuple[tuple[str, str], ...] = ()
    start: datetime | None = None
    end: datetime | None = None
    job_windows: tuple[JobWindow, ...] = ()
    include_jobs: bool = False
    job_filters: JobFilters = JobFilters()
    granularity: Granularity = "raw"
    # Job properties to write besides the core ones (JOB_CORE_PROPERTIES); None = all of them.
    job_properties: tuple[str, ...] | None = None

    @field_validator("start", "end")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        return None if value is None else _utc(value)

    @field_validator("nodes", "racks", "jobs")
    @classmethod
    def _ints(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if any(v < 0 for v in value):
            raise ValueError("ids are non-negative integers")
        return tuple(sorted(set(value)))

    @field_validator("gpus", "metrics")
    @classmethod
    def _pairs(cls, value: tuple[tuple[Any, Any], ...]) -> tuple[tuple[Any, Any], ...]:
        return tuple(sorted(set(value)))

    @field_validator("metrics")
    @classmethod
    def _plugins(cls, value: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        return tuple(sorted({(p.removesuffix("_pub"), m) for p, m in value}))

    @field_validator("devices")
    @classmethod
    def _devices(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for key in value:
            kind, _, rest = key.partition("/")
            parts = rest.split("/")
            if (
                kind not in DEVICE_KINDS
                or not all(parts)
                or len(parts) != (2 if kind == "panel" else 1)
            ):
                raise ValueError(
                    f"device key {key!r} is not crac/<device>, plc/<panel> "
                    "or panel/<panel>/<device>"
                )
        return tuple(sorted(set(value)))

    @field_validator("job_properties")
    @classmethod
    def _job_properties(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is None:
            return None
        unknown = set(value) - set(JOB_OPTIONAL_PROPERTIES)
        if unknown:
            raise ValueError(
                f"unknown job properties {sorted(unknown)}; choose among {JOB_OPTIONAL_PROPERTIES}"
            )
        return tuple(sorted(set(value)))

    @field_validator("job_windows")
    @classmethod
    def _windows(cls, value: tuple[JobWindow, ...]) -> tuple[JobWindow, ...]:
        return tuple(sorted(set(value), key=lambda w: (w.job_id, w.start, w.nodes)))

    @model_validator(mode="after")
    def _check(self) -> GroundedRequest:
        if (self.start is None) != (self.end is None):
            raise ValueError("give both start and end of the window, or neither")
        if self.start is not None and self.end is not None and self.end <= self.start:
            raise ValueError(f"window end {_iso(self.end)} is not after start {_iso(self.start)}")
        if self.metrics and not self.job_windows and self.start is None:
            raise ValueError("readings need a window (start, end) or job_windows")
        if self.include_jobs and self.start is None:
            raise ValueError("include_jobs selects the jobs overlapping the window: give start/end")
        return self

    # -- derived selections ---------------------------------------------------------------

    def node_selection(self) -> tuple[int, ...] | None:
        """Nodes whose node-level readings to scan; None = every node (``all_nodes``)."""
        if self.all_nodes:
            return None
        chosen = set(self.nodes) | {g[0] for g in self.gpus}
        for rack in self.racks:
            chosen.update(range(rack * 20, min((rack + 1) * 20, N_NODES)))
        return tuple(sorted(chosen))

    def devices_of(self, kind: str) -> tuple[str, ...]:
        """Keys (without the kind) of the selected devices of one kind (crac, plc, panel)."""
        return tuple(d.partition("/")[2] for d in self.devices if d.startswith(kind + "/"))

    def job_ids(self) -> tuple[int, ...]:
        """Jobs named explicitly or through their windows."""
        return tuple(sorted(set(self.jobs) | {w.job_id for w in self.job_windows}))

    # -- cache key ------------------------------------------------------------------------

    def canonical(self) -> dict[str, Any]:
        """Sorted, deduplicated, JSON-ready form: equal requests give equal dicts."""
        data = self.model_dump(mode="python")
        data["start"] = None if self.start is None else _iso(self.start)
        data["end"] = None if self.end is None else _iso(self.end)
        data["gpus"] = [list(g) for g in self.gpus]
        data["metrics"] = [list(m) for m in self.metrics]
        data["job_windows"] = [
            {"job_id": w.job_id, "nodes": list(w.nodes), "start": _iso(w.start), "end": _iso(w.end)}
            for w in self.job_windows
        ]
        for name in ("nodes", "racks", "devices", "jobs"):
            data[name] = list(data[name])
        if self.job_properties is not None:
            data["job_properties"] = list(self.job_properties)
        data["job_filters"] = {
            k: list(v) if isinstance(v, tuple) else v for k, v in data["job_filters"].items()
        }
        return data

    def key(self) -> str:
        """A short stable hash of ``canonical()`` (what the VKG cache keys graphs by)."""
        text = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:32]


# -- from a typed plan -----------------------------------------------------------------------

# Readings a VKG may hold before from_plan coarsens an average-only plan to minute/hour buckets
# (Q4, all 980 nodes x 1 h of 20 s readings, is 176k; Q14 raw would be ~4M).
MAX_RAW_READINGS = 250_000
# Series per metric of the facility plugins (devices, panels, Slurm partitions), for estimates.
_FACILITY_SERIES = {"vertiv": 8, "schneider": 2, "logics": 5, "slurm": 4, "weather": 1}
NODE_PLUGINS = frozenset({"ipmi", "ganglia", "nagios"})
_COARSER: tuple[tuple[Granularity, int], ...] = (("raw", 0), ("minute", 60), ("hour", 3600))


def _node_set(plan: QueryPlan) -> set[int] | None:
    """Nodes the node-family selectors allow (AND of them); None = every node."""
    chosen: set[int] | None = None
    for sel in plan.entities:
        if sel.all or sel.kind not in ("node", "rack", "gpu", "cpu"):
            continue
        ids = {int(i) for i in sel.ids}
        if sel.kind == "rack":
            ids = {n for r in ids for n in range(r * 20, min((r + 1) * 20, N_NODES))}
        chosen = ids if chosen is None else chosen & ids
    return chosen


def _job_filter_expr(flt: JobFilter) -> pl.Expr:
    column = {"state": "job_state", "user": "user_id"}.get(flt.field, flt.field)
    if flt.field == "num_gpus":
        value = (
            pl.col("tres_alloc_str").str.extract(r"gres/gpu(?::[^=,]*)?=(\d+)", 1).cast(pl.Int64)
        )
    else:
        value = pl.col(column)
    items = flt.value if isinstance(flt.value, list) else [flt.value]
    ops = {
        "eq": value == items[0], "ne": value != items[0], "lt": value < items[0],
        "le": value <= items[0], "gt": value > items[0], "ge": value >= items[0],
    }  # fmt: skip
    return value.is_in(items) if flt.op == "in" else ops[flt.op]


def _resolve_jobs(plan: QueryPlan, lake: Lake, nodes: set[int] | None) -> pl.DataFrame:
    """The plan's jobs, one row each, after its job filters and a job-level top-k."""
    window = plan.window
    lo, hi = (window.start, window.end) if window else (None, None)
    submitted = plan.job_event == "submitted"
    if lo is not None and plan.job_event in ("started", "ended"):
        # A job that ended (or started, in no time) exactly at the window's start does not
        # overlap it, yet its event is inside [start, end): select a superset, the query decides.
        lo -= timedelta(milliseconds=1)
    ids = [int(i) for s in plan.entities if s.kind == "job" for i in s.ids]
    if ids:
        lf = lake.jobs(job_ids=ids)
        if lo is not None and hi is not None:
            chosen = jobrules.submitted_filter if submitted else jobrules.overlap_filter
            lf = lf.filter(chosen(lo, hi))
    else:
        lf = lake.jobs(start=lo, end=hi, submitted=submitted)
    users = [int(i) for s in plan.entities if s.kind == "user" for i in s.ids]
    if users:
        lf = lf.filter(pl.col("user_id").is_in(users))
    for flt in plan.filters:
        if isinstance(flt, JobFilter):
            lf = lf.filter(_job_filter_expr(flt))
    if nodes is not None:
        lf = lf.filter(pl.col("node_list").list.eval(pl.element().is_in(list(nodes))).list.any())
    duration = (pl.col("end_time") - pl.col("start_time")).dt.total_milliseconds() / 3_600_000
    # Only what grounding reads: Polars then prunes the other ~80 job-table columns before the
    # de-duplication sorts every poll (Q14's day of jobs: 0.31 -> 0.08 s).
    jobs = (
        lf.with_columns(duration.alias("duration_h"))
        .select(
            "job_id",
            *(["submit_time"] if submitted else []),
            "start_time",
            "end_time",
            "node_list",
            "duration_h",
        )
        .collect()
    )
    keys = [k for k in plan.order_by if k.key in JOB_LEVEL_KEYS]
    if plan.limit is not None and keys and len(keys) == len(plan.order_by):
        if window is not None and plan.job_event != "running":
            # the top k of the jobs whose event is in the window, not of all those overlapping
            # it ('3 longest jobs that started on june 9' lost one that started on the 8th)
            at = pl.col(
                {"started": "start_time", "ended": "end_time"}.get(plan.job_event, "submit_time")
            )
            jobs = jobs.filter((at >= window.start) & (at < window.end))
        jobs = (
            jobs.filter(pl.col("duration_h").is_not_null())
            if any(k.key == "duration_h" for k in keys)
            else jobs
        )
        # job_id breaks ties, so equal durations (many jobs hit the 24 h limit) pick the same
        # top-k every time
        jobs = jobs.sort(
            [*(k.key for k in keys), "job_id"], descending=[*(k.desc for k in keys), False]
        ).head(plan.limit)
    return jobs.sort("job_id")


def _estimate(
    plan: QueryPlan, infos: list[MetricInfo], windows: list[JobWindow], nodes: int
) -> float:
    """Rough count of raw readings: series x window / sampling period."""
    periods = [i.period_s or 60 for i in infos]
    if windows:
        span = sum(len(w.nodes) * (w.end - w.start).total_seconds() for w in windows)
        return sum(span / p for p in periods)
    if plan.window is None:
        return 0.0
    seconds = (plan.window.end - plan.window.start).total_seconds()
    series = [
        nodes if i.plugin in NODE_PLUGINS else _FACILITY_SERIES.get(i.plugin, 1) for i in infos
    ]
    return sum(n * seconds / p for n, p in zip(series, periods, strict=True))


def _granularity(plan: QueryPlan, infos: list[MetricInfo], estimate: float) -> Granularity:
    """The plan's granularity, or a coarser one for a large average-only aggregation.

    Averages over minute/hour bucket means equal the mean of the raw readings when buckets hold
    equal counts (regular sampling, windows on bucket bounds) and approximate it otherwise; min,
    max, std, percentiles and counts of values need every reading, so those plans stay raw.
    """
    if plan.granularity != "raw" or estimate <= MAX_RAW_READINGS:
        return plan.granularity
    value_aggs = [a for a in plan.aggregations if a.of == "value"]
    if not value_aggs or any(a.fn != "avg" for a in value_aggs):
        return "raw"
    if any(not i.aggregatable or i.dtype == "string" for i in infos):
        return "raw"
    for name, bucket_s in _COARSER[1:]:
        periods = [i.period_s or 60 for i in infos]
        if estimate * max(min(p / bucket_s, 1.0) for p in periods) <= MAX_RAW_READINGS:
            return name
    return "hour"


def from_plan(
    plan: QueryPlan, lake: Lake | None = None, *, catalogue: Catalogue | None = None
) -> GroundedRequest:
    """Ground a plan: resolve its job selection on the lake's job table, pick the granularity.

    Job selectors become explicit job ids; with ``job_window`` each job's nodes (AND the node
    selection) and own [start_time, end_time) become a JobWindow (jobs without an end time have no
    readings: the compiler does not match them). A limit whose order keys are all job-level
    (``duration_h``, ``job_id``) keeps only the top-k jobs (Q9).
    """
    cat = catalogue or type(plan).bound_catalogue or load_catalogue()
    infos = [cat.get(m.metric) for m in plan.metrics]
    kinds = plan.kinds()
    node_set = _node_set(plan)
    all_nodes = node_set is None and bool(kinds & {"node", "rack", "room", "gpu", "cpu"})
    devices = tuple(f"{s.kind}/{i}" for s in plan.entities if s.kind in DEVICE_KINDS for i in s.ids)
    gpus = tuple(
        (int(n), k)
        for s in plan.entities
        if s.kind == "gpu" and s.index is not None
        for n in s.ids
        for k in s.index
    )
    window = plan.window
    jobs: tuple[int, ...] = ()
    windows: list[JobWindow] = []
    if plan.has_jobs():
        if lake is None:
            raise UsageError("grounding a plan with jobs needs the lake's job table")
        table = _resolve_jobs(plan, lake, node_set)
        jobs = tuple(int(j) for j in table["job_id"])
        all_nodes = False
        job_nodes_all = {int(n) for ns_ in table["node_list"].to_list() for n in ns_ or []}
        node_set = (
            (job_nodes_all if node_set is None else node_set & job_nodes_all)
            if (infos and not plan.job_window)
            else None
        )
        if plan.job_window:
            for row in table.iter_rows(named=True):
                if row["start_time"] is None or row["end_time"] is None:
                    continue
                job_nodes = [int(n) for n in row["node_list"] or []]
                if job_nodes and row["end_time"] > row["start_time"]:
                    windows.append(
                        JobWindow(
                            job_id=row["job_id"],
                            nodes=tuple(job_nodes),
                            start=row["start_time"],
                            end=row["end_time"],
                        )
                    )
    n_nodes = len(node_set) if node_set is not None else N_NODES
    granularity = _granularity(plan, infos, _estimate(plan, infos, windows, n_nodes))
    readings_window = window if not plan.job_window else None
    return GroundedRequest(
        nodes=tuple(sorted(node_set)) if node_set is not None else (),
        all_nodes=all_nodes,
        racks=tuple(int(i) for s in plan.entities if s.kind == "rack" for i in s.ids),
        gpus=gpus,
        devices=devices,
        jobs=jobs,
        metrics=tuple((m.plugin, m.metric) for m in plan.metrics),
        start=readings_window.start if readings_window else None,
        end=readings_window.end if readings_window else None,
        job_windows=tuple(windows),
        granularity=granularity,
        job_properties=_job_properties(plan),
    )


def _job_properties(plan: QueryPlan) -> tuple[str, ...] | None:
    """The job properties the compiled query can read: the core ones plus filters/derived.

    Q12 (jobs per day over ten days, ~38k jobs) needs 7 triples per job instead of 18.
    """
    if not plan.has_jobs():
        return None
    wanted = {_FILTER_PROPERTY.get(f.field, "") for f in plan.filters if isinstance(f, JobFilter)}
    wanted |= {_DERIVED_PROPERTY[d] for d in plan.derived if d in _DERIVED_PROPERTY}
    wanted |= {_FILTER_PROPERTY.get(f, "") for f in plan.job_fields}
    wanted |= {_FILTER_PROPERTY.get(g, "") for g in plan.group_by}  # 'per partition'
    if plan.job_event == "submitted" or "queue_wait" in plan.derived:
        wanted.add("submitTime")
    wanted.discard("")
    return tuple(sorted(p for p in wanted if p))
