"""Plan builders of the rule-based planner: shared parts, and the jobs and entities targets.

Rules are in ``planner``'s docstring; readings builders are in ``readings``. Each builder
turns the cues (``Cues``), the entities and the grounded metrics into a ``Draft``:
a plan body without its window, whether a window is required, and companion bodies. Anything a
rule cannot honour is dropped with a note in ``Ctx.notes``; what must be asked goes to
``Ctx.missing``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from oda_analyst.lake import topology
from oda_analyst.ontology.catalogue import MetricInfo
from oda_analyst.ontology.plan import (
    GROUP_COLUMN,
    JOB_ATTRIBUTE_GROUPS,
    NODE_PARTS,
    GroupKey,
    JobFilter,
)
from oda_analyst.reading.rules.cues import Cues
from oda_analyst.reading.types import Entities

FACILITY_FAMILY = {
    "HPCSystem": "system", "Weather": "weather", "CRAC": "crac", "LiquidCoolingPLC": "plc",
    "ElectricalPanel": "panel",
}  # fmt: skip
GROUP_ORDER: tuple[GroupKey, ...] = (
    "user", "partition", "state", "qos", "job", "rack", "node", "gpu", "metric", "day", "hour"
)  # fmt: skip
WindowNeed = Literal["required", "optional", "none"]
Body = dict[str, Any]


@dataclass
class Draft:
    """A plan body without its window, whether it needs one, and its companion bodies."""

    body: Body
    window: WindowNeed
    companions: list[Body] = field(default_factory=list)


@dataclass
class Ctx:
    """What every builder reads (entities, cues) and writes (notes, missing)."""

    entities: Entities
    intent: Cues
    has_windows: bool
    notes: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def family(info: MetricInfo) -> str:
    """node (reached from a compute node) or the facility entity kind the metric observes."""
    return "node" if info.entity in NODE_PARTS else FACILITY_FAMILY[info.entity]


def agg(fn: str, of: str = "value") -> Body:
    return {"fn": fn, "of": of}


def add_agg(aggs: list[Body], fn: str, of: str = "value", *, after: int | None = None) -> None:
    if agg(fn, of) not in aggs:
        aggs.insert(len(aggs) if after is None else after + 1, agg(fn, of))


def ordered_groups(groups: list[GroupKey]) -> list[GroupKey]:
    return [g for g in GROUP_ORDER if g in groups]


def quantity(info: MetricInfo) -> str:
    """Metrics that differ only in a GPU/CPU/sensor index measure one quantity."""
    return re.sub(r"\d+", "#", info.name)


def split_by_metric(ctx: Ctx, infos: Sequence[MetricInfo]) -> bool:
    """Aggregates go per metric for metrics of different quantities, for the parts a question
    compares ("compare socket 0 and socket 1") and for "each socket"; otherwise one quantity is
    pooled (the four GPUs' utilisation of "compare jobs 1 and 2" is one figure per job)."""
    if len({quantity(i) for i in infos}) > 1:
        return True
    it, e = ctx.intent, ctx.entities
    parts_compared = it.compare and (len(e.gpus) > 1 or len(e.cpus) > 1)
    return (parts_compared or it.per_socket) and not it.no_split and len(infos) > 1


def user_filters(users: tuple[int, ...]) -> list[JobFilter]:
    if not users:
        return []
    if len(users) == 1:
        return [JobFilter(field="user", op="eq", value=users[0])]
    return [JobFilter(field="user", op="in", value=list(users))]


def job_selector(e: Entities) -> Body:
    return {"kind": "job", "ids": list(e.jobs)} if e.jobs else {"kind": "job", "all": True}


def metric_refs(infos: list[MetricInfo]) -> list[Body]:
    return [{"plugin": i.plugin, "metric": i.name} for i in infos]


def dump_filters(filters: list[Any]) -> list[Body]:
    return [f.model_dump() for f in filters]


# --- jobs and entities --------------------------------------------------------------------------


def jobs_draft(ctx: Ctx) -> Draft:
    """A jobs plan: listing, counts, durations, queue waits, CPU/GPU hours; per user, node,
    partition, state, QoS, day or hour. A box plot or histogram of a per-job quantity (run
    times, queue waits) is drawn from the jobs' listing (with the grouping attributes as its
    columns), so the listing is the plan and the figures per group its companion."""
    e, it = ctx.entities, ctx.intent
    selectors: list[Body] = [job_selector(e)]
    # a rack's jobs are its nodes' jobs ('who had jobs on rack 10'): the rack was dropped
    nodes = [*e.nodes, *(n for r in e.racks for n in topology.nodes_of_rack(r))]
    if nodes:
        selectors.append({"kind": "node", "ids": sorted(set(nodes))})
    kept = ("user", "node", "day", "hour", *JOB_ATTRIBUTE_GROUPS)
    groups: list[GroupKey] = [g for g in it.groups if g in kept]
    if it.rank and it.rank.noun in ("user", "node") and it.rank.noun not in groups:
        groups.append(it.rank.noun)  # type: ignore[arg-type]  # checked just above
    if "node" in groups and it.hours:
        groups.remove("node")
        ctx.notes.append("CPU/GPU hours of multi-node jobs cannot be split per node")
    derived: list[str] = list(it.hours)
    aggs: list[Body] = []
    # 'queue wait per partition, with the medians': a statistic with no subject of its own is
    # of the per-job quantity the question names
    per_job = "queue_wait_min" if it.wait else "duration_h" if it.duration else None
    for cue in it.aggs:
        if cue.of in ("job", "cpu_hours", "gpu_hours", "duration_h", "queue_wait_min"):
            add_agg(aggs, cue.fn, cue.of)
        elif cue.of == "value" and cue.fn == "count":
            # 'GPU jobs with state TIMEOUT - how many?': with no metric, what is counted is jobs
            add_agg(aggs, "count", "job")
        elif cue.of == "value" and per_job is not None:
            add_agg(aggs, cue.fn, per_job)
        elif cue.of == "value" and cue.fn in ("sum", "max", "min") and groups:
            # 'jobs submitted per hour, the busiest hour and the day's total': the answer
            # states each group's figure, the highest and lowest and the total over them
            continue
        elif cue.of == "value":
            ctx.notes.append(f"{cue.fn} of readings needs a grounded metric; not computed")
    time_groups = bool({"day", "hour"} & set(groups))
    if it.duration and not time_groups:
        derived.append("job_duration")
    elif any(a["of"] == "duration_h" for a in aggs):
        aggs = [a for a in aggs if a["of"] != "duration_h"]
        ctx.notes.append("job durations are per job; per day/hour use CPU/GPU hours")
    if it.wait and not time_groups:
        derived.append("queue_wait")
    elif any(a["of"] == "queue_wait_min" for a in aggs):
        aggs = [a for a in aggs if a["of"] != "queue_wait_min"]
        ctx.notes.append("queue waits are per job; per day/hour, ask for the jobs per day")
    for hours in it.hours:
        if not any(a["of"] == hours for a in aggs) and (groups or not e.jobs):
            aggs.append(agg("sum", hours))
    order, limit = _jobs_rank(ctx, aggs, groups, derived)
    if groups and not aggs:
        aggs.append(agg("count", "job"))
    if aggs:
        add_agg(aggs, "count", "job")  # how many jobs a sum or an average stands for
    body: Body = {
        "target": "jobs",
        "entities": selectors,
        "filters": dump_filters(list(it.job_filters) + user_filters(e.users)),
        "derived": derived,
        "aggregations": aggs,
        "group_by": ordered_groups(groups),
        "order_by": order,
        "limit": limit,
    }
    need: WindowNeed = "optional" if e.jobs else "required"
    listing = _per_job_listing(ctx, body, groups)
    if listing is not None:
        return Draft(listing, need, [body] if aggs else [])
    return Draft(body, need)


# a box plot or histogram draws each job's own value, never one figure per group
_PER_JOB_PLOTS = frozenset({"box", "histogram"})
_PER_JOB_DERIVED = ("job_duration", "queue_wait", "cpu_hours", "gpu_hours")


def _per_job_listing(ctx: Ctx, body: Body, groups: list[GroupKey]) -> Body | None:
    """'box plot of queue waits per partition', 'histogram of run times of debug jobs': the
    jobs listed with the per-job quantity and the attributes they are grouped by, or None when
    the question draws no per-job values (or groups by what no listing shows)."""
    it = ctx.intent
    derived = [d for d in _PER_JOB_DERIVED if d in body["derived"]]
    if not (_PER_JOB_PLOTS & it.plots) or not derived or body["limit"] is not None:
        return None
    if set(groups) - {*JOB_ATTRIBUTE_GROUPS, "user"}:
        return None  # per day/hour or per node: no per-job listing holds those
    fields = [g for g in ("user", "partition", "state", "qos") if g in groups]
    return {**body, "derived": derived, "aggregations": [], "group_by": [], "order_by": [],
            "job_fields": fields}  # fmt: skip


def _jobs_rank(
    ctx: Ctx, aggs: list[Body], groups: list[GroupKey], derived: list[str]
) -> tuple[list[Body], int | None]:
    rank = ctx.intent.rank
    if rank is None:
        return [], None
    key = rank.key
    if key is None or key == "value":
        first = next((a for a in aggs if a["of"] in ("cpu_hours", "gpu_hours")), None)
        if first is not None and first["fn"] == "sum":
            key = first["of"]
        else:
            key = "count_job" if groups else "duration"
        what = {"count_job": "number of jobs", "duration": "duration"}.get(key, f"total {key}")
        ctx.notes.append(f"no ranking key a jobs plan can use: ranked by {what}, highest first")
    if key == "duration":
        if aggs or groups:
            ctx.notes.append("ranking by duration applies to a list of jobs; ignored")
            return [], None
        if "job_duration" not in derived:
            derived.append("job_duration")
        return [{"key": "duration_h", "desc": rank.desc if rank.key else True}], rank.k
    if key == "count_job":
        column = "count_job"
        add_agg(aggs, "count", "job")
    else:
        column = f"sum_{key}"
        if key not in derived:
            derived.append(key)
        add_agg(aggs, "sum", key)
    order = [{"key": column, "desc": rank.desc}]
    if column == "count_job":  # counts tie often: break ties by the group columns
        order += [{"key": GROUP_COLUMN[g], "desc": False} for g in ordered_groups(groups)]
    return order, rank.k


def entities_draft(ctx: Ctx) -> Draft:
    """Count compute nodes (of the system, racks or room), per rack when asked."""
    e, it = ctx.entities, ctx.intent
    selectors: list[Body] = [{"kind": "system", "ids": [topology.SYSTEM]}] if e.system else []
    if e.nodes:
        selectors.append({"kind": "node", "ids": list(e.nodes)})
    else:
        selectors.append({"kind": "node", "all": True})
    if e.racks and len(e.racks) < topology.N_RACKS:
        selectors.append({"kind": "rack", "ids": list(e.racks)})
    if e.rooms:
        selectors.append({"kind": "room", "ids": list(e.rooms)})
    per_rack = "rack" in it.groups or it.count_entities == "rack"
    if it.count_entities == "rack":
        ctx.notes.append("racks are counted as the rows of the per-rack node count")
    if it.count_entities == "gpu":
        ctx.notes.append(f"each M100 node has {topology.GPUS_PER_NODE} GPUs: GPUs = 4 × nodes")
    body: Body = {
        "target": "entities",
        "entities": selectors,
        "aggregations": [agg("count", "node")],
        "group_by": ["rack"] if per_rack else [],
    }
    return Draft(body, "none")
