"""The typed query plan: what a planner (rules or a model) asks the retriever for.

A plan names *what* to retrieve — metrics, entities, a time window, aggregations, grouping,
filters, ordering — never *how*: the compiler (``oda_analyst.sparql.compiler``) turns it into
SPARQL along the ontology's traversal paths. ``QueryPlan`` is the static, mypy-friendly model;
``plan_model()`` derives from it, per catalogue, a model whose ``metrics`` items are a union
discriminated on ``plugin`` with each plugin's metric names as an enum, so the JSON Schema a model
receives (``plan_json_schema()``) admits only real metrics. Both validate the same rules.

Semantics the compiler relies on (also in the field descriptions):
- Entity selectors are combined with AND (``rack 45`` + ``node all`` = the nodes of rack 45).
- ``window`` is half-open [start, end). With ``job_window`` each job's readings are taken over its
  own [start_time, end_time) and the window only selects the jobs (those overlapping it).
- Jobs overlap a window when start_time < window end and end_time > window start. Grouping jobs by
  ``day``/``hour`` splits each job over the buckets it overlaps: a job counts on every day it runs,
  and cpu/gpu hours are attributed to each bucket by overlap.
- ``hour``/``day`` of readings are UTC calendar buckets (2022-06-01T08:00:00Z, 2022-06-01).
- ``std``/``cv`` are sample statistics (ddof = 1), ``cv`` = std / mean; percentiles interpolate
  linearly between the two nearest ranks (``median`` = p50).
- ``hours`` of ``value`` is the time the readings passing the plan's value filters stand for:
  their count x the metrics' sampling period / 3600 ("hours node 12's inlet was above 27 °C" =
  ``hours`` with the filter ``value gt 27``). It needs a value filter and metrics of one period.
- Jobs plans group by job attributes too (``partition``, ``state``: the job's last state, ``qos``);
  ``queue_wait`` is each job's start_time − submit_time in minutes (``queue_wait_min``; a job that
  never started has none). ``job_event`` ``submitted`` selects (and buckets) jobs by submit_time.
- ``limit`` with ``order_by`` keys that are job attributes (``job_id``, ``duration_h``) in a
  readings plan selects the top-k *jobs* before their readings are joined (Q9).
"""

from __future__ import annotations

import re
import typing
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import yaml
from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from oda_analyst.config import get_settings
from oda_analyst.errors import OntologyError, UsageError
from oda_analyst.ontology.catalogue import Catalogue, MetricInfo, load_catalogue
from oda_analyst.ontology.model import load_ontology

Plugin = Literal["ipmi", "ganglia", "vertiv", "schneider", "weather", "logics", "nagios", "slurm"]
Target = Literal["readings", "jobs", "entities"]
EntityKind = Literal[
    "node", "rack", "room", "system", "job", "user", "gpu", "cpu", "crac", "plc", "panel", "weather"
]  # fmt: skip
AggFn = Literal[
    "avg", "min", "max", "sum", "count", "std", "cv", "median", "p90", "p95", "p99", "hours"
]  # fmt: skip
AggOf = Literal[
    "value", "job", "node", "user", "duration_h", "cpu_hours", "gpu_hours", "queue_wait_min"
]  # fmt: skip
GroupKey = Literal[
    "node", "gpu", "rack", "job", "user", "metric", "hour", "day", "partition", "state", "qos"
]  # fmt: skip
Derived = Literal["job_duration", "cpu_hours", "gpu_hours", "queue_wait"]
Granularity = Literal["raw", "minute", "hour"]
CompareOp = Literal["eq", "ne", "lt", "le", "gt", "ge", "in"]
JobEvent = Literal["running", "started", "ended", "submitted"]
JobField = Literal["state", "partition", "qos", "num_nodes", "num_cpus", "num_gpus", "user"]

# Ontology class of each entity kind (checked against oda.ttl by plan_model()).
ENTITY_CLASS: dict[str, str] = {
    "node": "ComputeNode", "rack": "Rack", "room": "Room", "system": "HPCSystem", "job": "Job",
    "user": "User", "gpu": "GPU", "cpu": "CPU", "crac": "CRAC", "plc": "LiquidCoolingPLC",
    "panel": "ElectricalPanel", "weather": "Weather",
}  # fmt: skip
NODE_FAMILY = frozenset({"node", "rack", "room", "gpu", "cpu"})
JOB_FAMILY = frozenset({"job", "user"})
FACILITY_KINDS = frozenset({"system", "weather", "crac", "plc", "panel"})
# Catalogue entities reachable from a compute node (node -> part -> sensor).
NODE_PARTS = frozenset({"ComputeNode", "GPU", "CPU", "MemoryModule", "Fan", "PowerSupply"})
STRING_KINDS = frozenset({"room", "system", "crac", "plc", "panel", "weather"})

# Output column of each group key, derived quantity and job filter field.
GROUP_COLUMN: dict[str, str] = {
    "node": "node_id", "gpu": "gpu_index", "rack": "rack_id", "job": "job_id",
    "user": "user_id", "metric": "metric_name", "hour": "hour", "day": "day",
    "partition": "partition", "state": "job_state", "qos": "qos",
}  # fmt: skip
# Job attributes a jobs plan groups by ('jobs per partition', 'how the jobs ended').
JOB_ATTRIBUTE_GROUPS = frozenset({"partition", "state", "qos"})
DERIVED_COLUMN: dict[str, str] = {
    "job_duration": "duration_h",
    "cpu_hours": "cpu_hours",
    "gpu_hours": "gpu_hours",
    "queue_wait": "queue_wait_min",
}
# A job listing's attribute columns ('what state did job J finish in', 'who ran job J').
JOB_FIELD_COLUMN: dict[str, str] = {
    "user": "user_id", "state": "job_state", "partition": "partition", "qos": "qos",
    "num_cpus": "num_cpus", "num_gpus": "num_gpus",
}  # fmt: skip
JOB_LEVEL_KEYS = frozenset({"job_id", "duration_h"})
QUANTILES: dict[str, float] = {"median": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}
NUMERIC_JOB_FIELDS = frozenset({"num_nodes", "num_cpus", "num_gpus", "user"})
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-/]{0,63}")
MAX_NODE_ID = 983  # the lake holds a few ids above the 980 nodes of the topology
MAX_DAYS, MAX_HOURS = 366, 31 * 24  # bucket enumeration bounds for jobs grouped by time


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MetricRef(_Strict):
    """One catalogue metric. ``plan_model()`` narrows ``metric`` to the plugin's names."""

    plugin: Plugin = Field(description="Collector plugin (lake folder without _pub).")
    metric: str = Field(description="Metric name exactly as the lake spells it.")


class EntitySelector(_Strict):
    """Entities of one kind: by id or all of them; several selectors are combined with AND."""

    kind: EntityKind = Field(description="Entity kind; see the schema's $defs for the class map.")
    ids: list[int | str] = Field(
        default_factory=list,
        description="Ids: node/rack/job/user ids (int); for gpu/cpu the node ids; device or "
        "panel names for crac/plc ('CDZ01', 'Q101'), 'QGBT1/main_ict' for panel, 'M100' for "
        "system, 'bologna' for weather, 'M100-room' for room.",
    )
    all: bool = Field(default=False, description="Every entity of this kind (instead of ids).")
    index: list[int] | None = Field(
        default=None, description="gpu: GPU indexes 0..3 (Ganglia numbering); cpu: sockets 0..1."
    )

    @model_validator(mode="after")
    def _check(self) -> EntitySelector:
        if self.all == bool(self.ids):
            raise ValueError(f"{self.kind} selector: give either ids or all=true (exactly one)")
        if len(set(map(str, self.ids))) != len(self.ids):
            raise ValueError(f"{self.kind} selector: ids repeat")
        want_str = self.kind in STRING_KINDS
        for i in self.ids:
            if isinstance(i, str) != want_str or isinstance(i, bool):
                raise ValueError(
                    f"{self.kind} ids must be {'names (strings)' if want_str else 'integers'}"
                )
            if isinstance(i, str) and not _NAME_RE.fullmatch(i):
                raise ValueError(f"{self.kind} id {i!r}: letters, digits and . _ - / only")
            if isinstance(i, int) and i < 0:
                raise ValueError(f"{self.kind} id {i} is negative")
            if isinstance(i, int) and self.kind in {"node", "gpu", "cpu"} and i > MAX_NODE_ID:
                raise ValueError(f"node {i} does not exist (node ids are 0..{MAX_NODE_ID})")
        if self.index is not None:
            top = {"gpu": 3, "cpu": 1}.get(self.kind)
            if top is None:
                raise ValueError("index applies to gpu and cpu selectors only")
            if not self.index or any(not 0 <= k <= top for k in self.index):
                raise ValueError(f"{self.kind} index must list values in 0..{top}")
        return self


class TimeWindow(_Strict):
    """Half-open interval [start, end) in UTC; give offsets (2022-06-01T08:00:00Z)."""

    start: AwareDatetime
    end: AwareDatetime

    @field_validator("start", "end")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return value.astimezone(UTC)

    @model_validator(mode="after")
    def _ordered(self) -> TimeWindow:
        if self.end <= self.start:
            raise ValueError(f"window end {self.end.isoformat()} is not after its start")
        return self


class JobFilter(_Strict):
    """A condition on a job attribute (``user`` is the numeric user id)."""

    about: Literal["job"] = "job"
    field: JobField
    op: CompareOp = "eq"
    value: int | str | list[int | str]

    @model_validator(mode="after")
    def _check(self) -> JobFilter:
        values = self.value if isinstance(self.value, list) else [self.value]
        if (self.op == "in") != isinstance(self.value, list) or not values:
            raise ValueError("op 'in' takes a non-empty list; the other ops one value")
        numeric = self.field in NUMERIC_JOB_FIELDS
        if any(isinstance(v, str) == numeric for v in values):
            raise ValueError(
                f"job field {self.field} compares with {'integers' if numeric else 'strings'}"
            )
        if not numeric and self.op not in {"eq", "ne", "in"}:
            raise ValueError(f"job field {self.field} supports eq, ne and in only")
        return self


class ValueFilter(_Strict):
    """A condition on each reading's value, applied before aggregation."""

    about: Literal["value"] = "value"
    op: Literal["eq", "ne", "lt", "le", "gt", "ge"]
    value: float


class AggregateFilter(_Strict):
    """A condition on each group's aggregate of its reading values, applied after aggregation
    (SPARQL HAVING): 'nodes whose average power was above 1000 W' is ``avg gt 1000`` per node;
    'nodes with a reading above 45 °C' is ``max gt 45``; 'stayed below 500 W all hour' is
    ``max lt 500``. It selects groups; the plan's aggregations (over all of each group's
    readings in the window) are what the answer shows of them."""

    about: Literal["aggregate"] = "aggregate"
    fn: Literal["avg", "min", "max", "sum"]
    op: Literal["eq", "ne", "lt", "le", "gt", "ge"]
    value: float


Filter = Annotated[JobFilter | ValueFilter | AggregateFilter, Field(discriminator="about")]


class Aggregation(_Strict):
    """``fn`` over ``of``; the output column is ``<fn>_<of>`` (avg_value, count_job, ...).
    ``hours`` of ``value``: hours the value-filtered readings cover (count x period / 3600)."""

    fn: AggFn
    of: AggOf = "value"

    @property
    def column(self) -> str:
        return f"{self.fn}_{self.of}"


class OrderKey(_Strict):
    key: str = Field(description="An output column (see output_columns).")
    desc: bool = False


class QueryPlan(_Strict):
    """One retrieval: compiles to one SPARQL SELECT over a per-query VKG."""

    # Catalogue the metric checks use; plan_model() binds its own, the base loads the default.
    bound_catalogue: ClassVar[Catalogue | None] = None

    target: Target = Field(description="readings (sensor values), jobs, or entities (count/list).")
    metrics: list[MetricRef] = Field(default_factory=list, description="readings: which metrics.")
    entities: list[EntitySelector] = Field(default_factory=list)
    window: TimeWindow | None = None
    job_window: bool = Field(
        default=False,
        description="Readings over each job's own [start_time, end_time); window selects jobs.",
    )
    filters: list[Filter] = Field(default_factory=list)
    derived: list[Derived] = Field(default_factory=list)
    job_event: JobEvent = Field(
        default="running",
        description="jobs plans: which jobs the window selects — running in it (overlap), "
        "started in it, ended in it, or submitted in it (a job submitted in the window may "
        "start after it, or never).",
    )
    job_fields: list[JobField] = Field(
        default_factory=list,
        description="jobs listing: attributes shown for each job besides its id, start, end and "
        "node count (user, state, partition, qos, num_cpus, num_gpus).",
    )
    aggregations: list[Aggregation] = Field(default_factory=list)
    group_by: list[GroupKey] = Field(default_factory=list)
    order_by: list[OrderKey] = Field(default_factory=list)
    limit: int | None = Field(default=None, ge=1, le=100_000)
    granularity: Granularity = Field(
        default="raw",
        description="raw readings, or each series' mean per minute/hour bucket (no aggregations).",
    )
    count_groups: bool = Field(
        default=False,
        description="With aggregate filters grouped by node or rack alone: the answer is how "
        "many groups pass (one row, count_node or count_rack), not the groups.",
    )

    @model_validator(mode="after")
    def _check(self) -> QueryPlan:
        _check_plan(self, self.bound_catalogue or load_catalogue())
        return self

    def selector(self, kind: str) -> EntitySelector | None:
        return next((e for e in self.entities if e.kind == kind), None)

    def kinds(self) -> frozenset[str]:
        return frozenset(e.kind for e in self.entities)

    def has_jobs(self) -> bool:
        return bool(self.kinds() & JOB_FAMILY)


def _check_plan(plan: QueryPlan, cat: Catalogue) -> None:
    """Reject combinations the compiler cannot honour, with a message saying which and why."""
    kinds = plan.kinds()
    if len(kinds) != len(plan.entities):
        raise ValueError("one selector per entity kind (merge the ids)")
    if not plan.entities:
        raise ValueError("name at least one entity selector (e.g. {kind: node, ids: [900]})")
    if {"gpu", "cpu"} <= kinds:
        raise ValueError("select gpu or cpu, not both")
    facility = kinds & FACILITY_KINDS
    if facility and (len(kinds) > 1 and not (plan.target == "entities" and facility == {"system"})):
        raise ValueError(f"{sorted(facility)[0]} cannot be combined with other entity kinds")
    if kinds & JOB_FAMILY and kinds & (NODE_FAMILY - {"node"}):
        raise ValueError("jobs combine with a node selector only (not rack, room, gpu or cpu)")
    if len({m.metric for m in plan.metrics}) != len(plan.metrics):
        raise ValueError("metrics repeat")
    if plan.job_event != "running" and plan.target != "jobs":
        raise ValueError("job_event applies to jobs plans (readings select jobs running)")
    infos = [_metric_info(cat, m) for m in plan.metrics]
    if plan.target == "readings":
        _check_readings(plan, infos)
    else:
        _check_non_readings(plan)
    _check_aggregations(plan, infos)
    _check_order(plan)


def _metric_info(cat: Catalogue, ref: MetricRef) -> MetricInfo:
    try:
        info = cat.get(ref.metric)
    except UsageError as exc:
        raise ValueError(f"{exc.message} ({exc.hint})") from None
    if info.plugin != ref.plugin:
        raise ValueError(f"metric {ref.metric!r} belongs to plugin {info.plugin}, not {ref.plugin}")
    return info


def _check_readings(plan: QueryPlan, infos: list[MetricInfo]) -> None:
    if not infos:
        raise ValueError("a readings plan names at least one metric")
    kinds = plan.kinds()
    for info in infos:
        allowed = _reachable_entities(kinds)
        if info.entity not in allowed:
            raise ValueError(
                f"metric {info.name} observes {info.entity}, which the selected "
                f"{', '.join(sorted(kinds))} do not reach (needs {_kind_for(info.entity)})"
            )
        gpu = plan.selector("gpu") or plan.selector("cpu")
        if gpu and gpu.index is not None and info.entity_index not in gpu.index:
            raise ValueError(
                f"metric {info.name} is of {gpu.kind} {info.entity_index}, not selected"
            )
    if len({i.dtype == "string" for i in infos}) > 1:
        raise ValueError("text and numeric metrics go in separate plans")
    if plan.job_window and not plan.has_jobs():
        raise ValueError("job_window needs a job (or user) selector")
    if not plan.job_window and plan.window is None:
        raise ValueError("a readings plan needs a window, or job_window with jobs")
    if set(plan.derived) - {"job_duration"}:
        raise ValueError("cpu_hours, gpu_hours and queue_wait are derived in jobs plans only")
    if plan.derived and not plan.has_jobs():
        raise ValueError("job_duration needs a job (or user) selector")
    if plan.granularity != "raw" and (plan.aggregations or plan.group_by):
        raise ValueError(
            "granularity minute/hour is for raw series; with aggregations use group_by"
        )
    if "gpu" in plan.group_by and any(i.entity != "GPU" for i in infos):
        raise ValueError("group by gpu needs GPU metrics only")
    if set(plan.group_by) & JOB_ATTRIBUTE_GROUPS:
        raise ValueError("group by partition, state or qos groups jobs (a jobs plan), not readings")
    if "rack" in plan.group_by and not kinds & NODE_FAMILY:
        raise ValueError("group by rack needs node, rack or room selectors")
    if {"node", "gpu"} & set(plan.group_by) and not kinds & (NODE_FAMILY | JOB_FAMILY):
        raise ValueError("group by node/gpu needs node-level entities")
    if any(isinstance(f, JobFilter) for f in plan.filters) and not plan.has_jobs():
        raise ValueError("job filters need a job (or user) selector")
    if any(isinstance(f, ValueFilter) for f in plan.filters) and infos[0].dtype == "string":
        raise ValueError("value filters apply to numeric metrics only")
    if any(isinstance(f, AggregateFilter) for f in plan.filters):
        _check_aggregate_filters(plan, infos)
    if plan.count_groups and not any(isinstance(f, AggregateFilter) for f in plan.filters):
        raise ValueError("count_groups counts the groups an aggregate filter keeps: add one")
    if plan.count_groups and (plan.group_by not in (["node"], ["rack"]) or plan.order_by
                              or plan.limit is not None):  # fmt: skip
        raise ValueError(
            "count_groups counts nodes or racks: group_by [node] or [rack] alone, no order or limit"
        )


def _check_aggregate_filters(plan: QueryPlan, infos: list[MetricInfo]) -> None:
    """Aggregate filters select groups of readings: they need the groups and numeric values."""
    if infos[0].dtype == "string":
        raise ValueError("aggregate filters apply to numeric metrics only")
    if not plan.group_by or not set(plan.group_by) <= {"node", "rack", "gpu", "metric"}:
        raise ValueError(
            "aggregate filters select groups: group_by node, rack or gpu (e.g. the nodes whose "
            "average is above a level)"
        )
    if any(isinstance(f, ValueFilter) for f in plan.filters):
        raise ValueError(
            "a value filter and an aggregate filter together are ambiguous (are the filtered "
            "readings aggregated?): use aggregate filters alone"
        )
    if not plan.aggregations or any(a.of != "value" or a.fn == "hours" for a in plan.aggregations):
        raise ValueError("aggregate filters go with aggregations of the reading values")
    for info in infos:
        bad = [f.fn for f in plan.filters if isinstance(f, AggregateFilter)
               and not info.aggregatable and f.fn not in {"min", "max"}]  # fmt: skip
        if bad:
            raise ValueError(f"{info.name} is a {info.kind}: {bad[0]} is meaningless")


def _reachable_entities(kinds: frozenset[str]) -> frozenset[str]:
    if "gpu" in kinds:
        return frozenset({"GPU"})
    if "cpu" in kinds:
        return frozenset({"CPU"})
    if kinds & (NODE_FAMILY | JOB_FAMILY):
        return NODE_PARTS
    return frozenset(ENTITY_CLASS[k] for k in kinds)


def _kind_for(entity: str) -> str:
    if entity in NODE_PARTS:
        return "a node, rack, room, gpu/cpu or job selector"
    kind = next((k for k, c in ENTITY_CLASS.items() if c == entity and k not in JOB_FAMILY), None)
    return f"a {kind} selector" if kind else "no selector: retrieve jobs with target jobs"


def _check_non_readings(plan: QueryPlan) -> None:
    if plan.metrics:
        raise ValueError(f"a {plan.target} plan names no metrics")
    if plan.job_window or plan.granularity != "raw":
        raise ValueError("job_window and granularity apply to readings plans only")
    if any(isinstance(f, ValueFilter | AggregateFilter) for f in plan.filters):
        raise ValueError("value and aggregate filters apply to readings plans only")
    if plan.target == "entities":
        if plan.kinds() - {"node", "rack", "room", "system"} or "node" not in plan.kinds():
            raise ValueError("an entities plan lists or counts compute nodes (node selector)")
        if plan.derived or plan.filters or plan.window or set(plan.group_by) - {"rack"}:
            raise ValueError("an entities plan takes no window, filters, derived; groups by rack")
        if any(a.fn != "count" or a.of != "node" for a in plan.aggregations):
            raise ValueError("an entities plan aggregates with count of node only")
        return
    if not plan.has_jobs():
        raise ValueError("a jobs plan needs a job (or user) selector")
    if plan.job_event != "running" and plan.window is None:
        raise ValueError("job_event selects jobs by the window: give one")
    if plan.job_fields:
        if plan.aggregations:
            raise ValueError("job_fields are columns of a job listing (no aggregations)")
        if len(set(plan.job_fields)) != len(plan.job_fields):
            raise ValueError("job_fields repeat")
        if "num_nodes" in plan.job_fields:
            raise ValueError("num_nodes is always listed; job_fields name the other attributes")
    if set(plan.group_by) - {"user", "day", "hour", "node", "rack"} - JOB_ATTRIBUTE_GROUPS:
        raise ValueError(
            "a jobs plan groups by user, node, rack, partition, state, qos, day or hour"
        )
    if {"day", "hour"} & set(plan.group_by):
        if plan.window is None:
            raise ValueError("grouping jobs by day/hour needs a window (the buckets)")
        unit: Literal["day", "hour"] = "hour" if "hour" in plan.group_by else "day"
        if bucket_count(plan.window, unit) > (MAX_HOURS if unit == "hour" else MAX_DAYS):
            raise ValueError(f"at most {MAX_DAYS} day or {MAX_HOURS} hour buckets")
        if {"job_duration", "queue_wait"} & set(plan.derived):
            raise ValueError(
                "job_duration and queue_wait are per job; per-bucket time is cpu_hours/gpu_hours"
            )
    if "node" in plan.group_by and {"cpu_hours", "gpu_hours"} & set(plan.derived):
        raise ValueError("cpu/gpu hours of multi-node jobs cannot be split per node")


def _check_aggregations(plan: QueryPlan, infos: list[MetricInfo]) -> None:
    if len({a.column for a in plan.aggregations}) != len(plan.aggregations):
        raise ValueError("aggregations repeat")
    if len(set(plan.group_by)) != len(plan.group_by):
        raise ValueError("group_by keys repeat")
    if plan.group_by and not plan.aggregations:
        raise ValueError("group_by needs aggregations (or drop group_by for raw rows)")
    if {"job", "user"} & set(plan.group_by) and not plan.has_jobs():
        raise ValueError("group by job/user needs a job (or user) selector")
    derived_cols = {DERIVED_COLUMN[d] for d in plan.derived}
    for agg in plan.aggregations:
        if (agg.of in {"duration_h", "cpu_hours", "gpu_hours", "queue_wait_min"}
                and agg.of not in derived_cols):  # fmt: skip
            raise ValueError(f"{agg.column}: add the derived quantity producing {agg.of}")
        if agg.of == "value" and plan.target != "readings":
            raise ValueError(f"{agg.column}: value exists in readings plans only")
        if agg.of == "job" and (agg.fn != "count" or not plan.has_jobs()):
            raise ValueError(f"{agg.column}: jobs are counted (count of job) in plans with jobs")
        counts_nodes = plan.target == "entities" or (
            plan.target in ("readings", "jobs") and bool(plan.kinds() & (NODE_FAMILY | JOB_FAMILY))
        )  # "how many nodes ran above 40 °C", "how many nodes did user U's jobs touch": distinct
        if agg.of == "user" and (agg.fn != "count" or plan.target != "jobs"):
            raise ValueError(f"{agg.column}: users are counted (distinct) in jobs plans")
        if agg.of == "node" and (agg.fn != "count" or not counts_nodes):
            raise ValueError(
                f"{agg.column}: nodes are counted in entities plans or over node readings"
            )
        if agg.fn == "hours":
            _check_hours(plan, agg, infos)
        if agg.of == "value":
            for info in infos:
                if info.dtype == "string" and agg.fn != "count":
                    raise ValueError(f"{info.name} is text: only count applies")
                if not info.aggregatable and agg.fn not in {"count", "min", "max", "hours"}:
                    raise ValueError(f"{info.name} is a {info.kind}: {agg.fn} is meaningless")


def _check_hours(plan: QueryPlan, agg: Aggregation, infos: list[MetricInfo]) -> None:
    """Hours above (or below) a level: a count of filtered readings times one sampling period."""
    if agg.of != "value" or plan.target != "readings":
        raise ValueError(f"{agg.column}: hours are counted of reading values in readings plans")
    if not any(isinstance(f, ValueFilter) for f in plan.filters):
        raise ValueError(f"{agg.column}: hours need a value filter (the level, e.g. value gt 27)")
    periods = {i.period_s for i in infos}
    if None in periods or len(periods) != 1:
        raise ValueError(
            f"{agg.column}: hours need metrics sampled at one known period "
            f"({', '.join(i.name for i in infos)} are not)"
        )


def sampling_period(plan: QueryPlan) -> int:
    """The one sampling period (s) of a plan's metrics (``hours`` plans are checked to have one)."""
    cat = type(plan).bound_catalogue or load_catalogue()
    periods = {cat.get(m.metric).period_s for m in plan.metrics}
    if len(periods) != 1 or None in periods:
        raise UsageError(
            "the plan's metrics have no single sampling period",
            hint="ask for hours of one metric, or of metrics polled at the same period",
        )
    (period,) = periods
    assert period is not None
    return period


def _check_order(plan: QueryPlan) -> None:
    if plan.limit is not None and not plan.order_by:
        raise ValueError("limit needs order_by (a top-k without an order is arbitrary)")
    cols = output_columns(plan)
    for key in plan.order_by:
        if key.key not in cols:
            raise ValueError(f"order_by {key.key!r} is not an output column: {', '.join(cols)}")


def groups_counted(plan: QueryPlan) -> QueryPlan:
    """The plan whose groups a ``count_groups`` plan counts (the plan itself otherwise)."""
    return plan.model_copy(update={"count_groups": False}) if plan.count_groups else plan


def output_columns(plan: QueryPlan) -> tuple[str, ...]:
    """Columns of the plan's result, after the compiler's post steps, in order."""
    derived = [DERIVED_COLUMN[d] for d in plan.derived]
    aggs = [a.column for a in plan.aggregations]
    if plan.target == "entities":
        groups = [GROUP_COLUMN[g] for g in plan.group_by]
        return tuple(groups + aggs) if aggs else ("node_id", "rack_id")
    if plan.target == "jobs":
        if not plan.aggregations:
            fields = [JOB_FIELD_COLUMN[f] for f in plan.job_fields]
            submit = ("submit_time",) if plan.job_event == "submitted" else ()
            return ("job_id", *submit, "start_time", "end_time", "num_nodes", *derived, *fields)
        if plan.count_groups:
            return (f"count_{plan.group_by[0]}",)
        return (*[GROUP_COLUMN[g] for g in plan.group_by], *aggs)
    if not plan.aggregations:
        return (*entity_columns(plan), "metric_name", "timestamp", "value")
    if plan.count_groups:
        return (f"count_{plan.group_by[0]}",)
    cols: list[str] = []
    for g in plan.group_by:
        if g == "gpu" and "node" not in plan.group_by:
            cols.append("node_id")
        cols.append(GROUP_COLUMN[g])
        if g == "job":
            cols += derived
    return (*cols, *aggs)


def entity_columns(plan: QueryPlan) -> tuple[str, ...]:
    """Entity columns of raw readings rows (who the reading is about)."""
    derived = tuple(DERIVED_COLUMN[d] for d in plan.derived)
    kinds = plan.kinds()
    if plan.has_jobs():
        return ("job_id", *derived, "node_id")
    if kinds & NODE_FAMILY:
        return ("node_id",)
    if kinds & {"crac", "plc"}:
        return ("device",) if "crac" in kinds else ("panel",)
    if "panel" in kinds:
        return ("panel", "device")
    return ()


def _first_bucket(window: TimeWindow, unit: Literal["day", "hour"]) -> tuple[datetime, timedelta]:
    first = window.start.replace(minute=0, second=0, microsecond=0)
    if unit == "day":
        return first.replace(hour=0), timedelta(days=1)
    return first, timedelta(hours=1)


def bucket_count(window: TimeWindow, unit: Literal["day", "hour"]) -> int:
    """Number of UTC day or hour buckets the window overlaps."""
    first, step = _first_bucket(window, unit)
    return -(-(window.end - first) // step)  # ceiling division


def bucket_starts(window: TimeWindow, unit: Literal["day", "hour"]) -> list[datetime]:
    """UTC day or hour bucket starts that overlap the window (the first may start before it)."""
    first, step = _first_bucket(window, unit)
    return [first + step * i for i in range(bucket_count(window, unit))]


# --- catalogue-specific models and their JSON Schema ---------------------------------------


def plan_model(catalogue: Catalogue | None = None) -> type[QueryPlan]:
    """QueryPlan whose metrics are enums per plugin of ``catalogue`` (default: metrics.yaml)."""
    return _plan_model(catalogue or load_catalogue())


@lru_cache(maxsize=4)
def _plan_model(cat: Catalogue) -> type[QueryPlan]:
    refs: list[Any] = []
    for plugin in typing.get_args(Plugin):
        names = sorted(m.name for m in cat.by_plugin(plugin) if m.entity != "Job")
        if not names:
            continue
        # Literal/Union built at run time: typed Any, since mypy checks only static forms
        plugin_type: Any = Literal[plugin]
        names_type: Any = Literal[tuple(names)]
        refs.append(
            create_model(
                f"{plugin.capitalize()}MetricRef",
                __base__=MetricRef,
                __doc__=f"One metric of the {plugin} plugin.",
                plugin=(plugin_type, Field(description=f"The {plugin} plugin.")),
                metric=(names_type, Field(description=f"One {plugin} metric name.")),
            )
        )
    union: Any = Annotated[typing.Union[tuple(refs)], Field(discriminator="plugin")]  # noqa: UP007
    list_of: Any = list
    model = create_model(
        "QueryPlan",
        __base__=QueryPlan,
        __doc__=f"{QueryPlan.__doc__} {_kinds_doc()}",
        metrics=(
            list_of[union],
            Field(default_factory=list, description="readings: which metrics."),
        ),
    )
    model.bound_catalogue = cat
    return model


def _kinds_doc() -> str:
    onto = load_ontology()
    parts = []
    for kind, cls in ENTITY_CLASS.items():
        found = onto.find_class(cls)
        if found is None:
            raise OntologyError(f"entity kind {kind}: class oda:{cls} is not in the ontology")
        parts.append(f"{kind} = oda:{cls} ({found.label})")
    return "Entity kinds: " + "; ".join(parts) + "."


def plan_json_schema(catalogue: Catalogue | None = None) -> dict[str, Any]:
    """The JSON Schema a model receives for constrained decoding (vLLM structured outputs)."""
    return plan_model(catalogue).model_json_schema()


def parse_plan(data: str | bytes | dict[str, Any], catalogue: Catalogue | None = None) -> QueryPlan:
    """Validate a plan (JSON text or a mapping); raises pydantic's ValidationError."""
    model = plan_model(catalogue)
    if isinstance(data, dict):
        return model.model_validate(data)
    return model.model_validate_json(data)


def describe_errors(exc: ValidationError) -> str:
    """One line per problem, ``where: message`` — what a caller shows or feeds back to a model."""
    lines = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "plan"
        lines.append(f"{where}: {err['msg'].removeprefix('Value error, ')}")
    return "\n".join(lines)


# --- the paper's questions as data -----------------------------------------------------------


class PaperQuestion(BaseModel):
    """One of the paper's 14 end-to-end questions with the plans of its retrieval part."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    question: str
    notes: str = ""
    plans: list[QueryPlan] = Field(min_length=1)


def paper_plans_path() -> Path:
    return get_settings().ontology_dir / "examples" / "paper_plans.yaml"


def load_paper_plans(
    path: Path | None = None, catalogue: Catalogue | None = None
) -> list[PaperQuestion]:
    """The paper's questions (Appendix A) and their plans, validated against the catalogue."""
    where = path or paper_plans_path()
    try:
        data = yaml.safe_load(where.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise OntologyError(f"cannot read {where}: {exc}", hint="check ODA_ONTOLOGY_DIR") from None
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list):
        raise OntologyError(f"{where} has no 'questions' list")
    model = plan_model(catalogue)
    out = []
    for raw in data["questions"]:
        qid = raw.get("id", "?") if isinstance(raw, dict) else "?"
        try:
            plans = [model.model_validate(p) for p in raw.get("plans", [])]
            out.append(PaperQuestion.model_validate({**raw, "plans": plans}))
        except (ValidationError, AttributeError) as exc:
            detail = describe_errors(exc) if isinstance(exc, ValidationError) else str(exc)
            raise OntologyError(f"{where}: question {qid}: {detail}") from None
    return out
