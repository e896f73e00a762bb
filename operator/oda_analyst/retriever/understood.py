"""``understood_as``: what the analyst understood, as one plain English sentence per plan.

The sentence names the statistic, the metric in the operator's words with its unit, the
grouping, the entities, the filters and the exact UTC window, e.g. "Average GPU 2 utilisation
(%) over all compute nodes, 3 Jun 2022 10:00 to 11:00 UTC". It is written in words the
understanding itself reads (metric phrases are catalogue synonyms, windows are absolute), so
asking the sentence again gives the same plan: that round trip is tested over the dev sets.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta

from oda_analyst.ontology.catalogue import Catalogue, MetricInfo, load_catalogue
from oda_analyst.ontology.plan import (
    AggregateFilter,
    Aggregation,
    EntitySelector,
    JobFilter,
    QueryPlan,
    ValueFilter,
)
from oda_analyst.render import acronyms

_STAT = {
    "avg": "average", "min": "minimum", "max": "maximum", "sum": "total", "count":
    "number of readings", "std": "standard deviation", "cv": "coefficient of variation",
    "median": "median", "p90": "90th percentile", "p95": "95th percentile",
    "p99": "99th percentile", "hours": "number of hours",
}  # fmt: skip
# Statistics read as adjectives before a single one of them ("average node power").
_ADJECTIVE = frozenset({"avg", "min", "max", "sum", "median"})
_OF = {"job": "jobs", "node": "nodes", "user": "distinct users", "duration_h": "job duration (h)",
       "cpu_hours": "CPU hours", "gpu_hours": "GPU hours",
       "queue_wait_min": "queue wait (minutes)", "queue_wait": "queue wait (minutes)"}  # fmt: skip
_FIELD = {"user": "user", "state": "state", "partition": "partition", "qos": "QoS",
          "num_cpus": "CPUs", "num_gpus": "GPUs"}  # fmt: skip
_GROUP = {"node": "per node", "gpu": "per GPU", "rack": "per rack", "job": "per job",
          "user": "per user", "metric": "for each metric", "hour": "per hour",
          "day": "per day", "partition": "per partition", "state": "per final state",
          "qos": "per QoS"}  # fmt: skip
_OP = {"eq": "at", "ne": "other than", "lt": "below", "le": "at most", "gt": "above",
       "ge": "at least"}  # fmt: skip
_ENTITY = {"node": ("node", "nodes"), "rack": ("rack", "racks"), "job": ("job", "jobs"),
           "user": ("user", "users"), "crac": ("CRAC", "CRACs"), "plc": ("PLC", "PLCs"),
           "panel": ("panel", "panels")}  # fmt: skip


def _ids(values: Sequence[int | str]) -> str:
    """'900', '900 and 920', '10-14', '3, 7 and 12' (runs of consecutive ints as ranges)."""
    if all(isinstance(v, int) for v in values) and len(values) > 2:
        ints = sorted(int(v) for v in values)
        if ints[-1] - ints[0] == len(ints) - 1:
            return f"{ints[0]}-{ints[-1]}"
    text = [str(v) for v in values]
    return text[0] if len(text) == 1 else f"{', '.join(text[:-1])} and {text[-1]}"


def _entity(sel: EntitySelector) -> str | None:
    if sel.kind == "system":
        return "the cluster"
    if sel.kind == "room":
        return None  # the one machine room: implied
    if sel.kind == "weather":
        return "the weather station" if sel.all else f"the {sel.ids[0]} weather station"
    if sel.kind in ("gpu", "cpu"):
        nodes = (
            "all compute nodes" if sel.all else _entity(EntitySelector(kind="node", ids=sel.ids))
        )
        return nodes  # the part itself is in the metric's name
    one, many = _ENTITY.get(sel.kind, (sel.kind, f"{sel.kind}s"))
    if sel.all:
        return "all compute nodes" if sel.kind == "node" else f"all {many}"
    return f"{one if len(sel.ids) == 1 else many} {_ids(sel.ids)}"


def _window(start: datetime, end: datetime) -> str:
    day = "%-d %b %Y"
    if end - start <= timedelta(seconds=1):  # the jobs running at an instant
        return f"running at {start:{day}} {start:%H:%M} UTC"
    if start.date() == end.date() or (end - start <= timedelta(days=1)
                                      and end.time() == datetime.min.time()
                                      and end.date() == start.date() + timedelta(days=1)
                                      and start.time() != datetime.min.time()):  # fmt: skip
        stop = "24:00" if end.date() != start.date() else f"{end:%H:%M}"
        return f"{start:{day}} {start:%H:%M} to {stop} UTC"
    return f"{start:{day}} {start:%H:%M} to {end:{day}} {end:%H:%M} UTC"


_NO_UNIT = frozenset({"", "1", "state", "count"})


def _phrase(info: MetricInfo, cat: Catalogue) -> str:
    """The metric in the operator's words: its first synonym that names it alone (a shared one,
    like 'gpu utilisation' for the four GPUs, would be asked about), else its first synonym;
    acronyms in capitals ('IT power', not 'it power')."""
    chosen = next((phrase for phrase in info.synonyms
                   if [m.name for m in cat.find_synonym(phrase)] == [info.name]),
                  info.synonyms[0] if info.synonyms else info.name)  # fmt: skip
    if chosen not in info.synonyms:
        return chosen  # the catalogue's own name, spelt as the lake spells it
    return acronyms(chosen)


def _metric_words(plan: QueryPlan, cat: Catalogue) -> str:
    """'inlet temperature (°C) and node power (W)'; one unit at the end when they share it."""
    infos = [cat.get(m.metric) if m.metric in cat else None for m in plan.metrics]
    names = [_phrase(i, cat) if i is not None else m.metric
             for i, m in zip(infos, plan.metrics, strict=True)]  # fmt: skip
    units = [i.unit if i is not None and i.unit not in _NO_UNIT else "" for i in infos]
    if len(set(units)) > 1:
        names = [f"{n} ({u})" if u else n for n, u in zip(names, units, strict=True)]
    text = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    return f"{text} ({units[0]})" if len(set(units)) == 1 and units[0] else text


def plan_unit(plan: QueryPlan, catalogue: Catalogue | None = None) -> str | None:
    """The one unit of the plan's readings (None when its metrics differ or have none)."""
    cat = catalogue or load_catalogue()
    units = {cat.get(m.metric).unit for m in plan.metrics if m.metric in cat}
    unit = units.pop() if len(units) == 1 else ""
    return None if unit in _NO_UNIT else unit


def unit_suffix(unit: str | None) -> str:
    """How a unit follows a number: '50%', '1600 W', nothing for none."""
    return "" if not unit else unit if unit == "%" else f" {unit}"


def _unit(plan: QueryPlan, cat: Catalogue) -> str:
    return unit_suffix(plan_unit(plan, cat))


def _joined(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _stats(aggs: Sequence[Aggregation], subject: str) -> str:
    """'average node power (W)', 'minimum, maximum and average of node power (W)', 'total CPU
    hours and number of jobs'."""
    value = [a.fn for a in aggs if a.of == "value"]
    parts = []
    if len(value) == 1 and value[0] in _ADJECTIVE:
        parts.append(f"{_STAT[value[0]]} {subject}")
    elif value:
        parts.append(f"{_joined([_STAT[fn] for fn in value])} of {subject}")
    for agg in aggs:
        if agg.of == "value":
            continue
        what = _OF.get(agg.of, agg.of)
        parts.append(f"number of {what}" if agg.fn == "count" else f"{_STAT[agg.fn]} {what}")
    return _joined(parts)


def _value_filters(plan: QueryPlan, cat: Catalogue) -> list[str]:
    return [f"{_OP[f.op]} {f.value:g}{_unit(plan, cat)}" for f in plan.filters
            if isinstance(f, ValueFilter)]  # fmt: skip


_GROUP_NOUN = {"node": "nodes", "rack": "racks", "gpu": "GPUs", "metric": "metrics"}


def _kept_groups(plan: QueryPlan, cat: Catalogue) -> str:
    """', only the nodes whose average is above 1000 W' (aggregate filters), or ''."""
    kept = [f for f in plan.filters if isinstance(f, AggregateFilter)]
    if not kept:
        return ""
    unit = _unit(plan, cat)
    parts = []
    for f in kept:
        level = f"{_OP[f.op]} {f.value:g}{unit}"
        if (f.fn, f.op) in {("max", "gt"), ("max", "ge"), ("min", "lt"), ("min", "le")}:
            parts.append(f"with a reading {level}")  # some reading crosses the level
        elif (f.fn, f.op) in {("max", "lt"), ("max", "le"), ("min", "gt"), ("min", "ge")}:
            parts.append(f"whose readings all stay {level}")
        else:
            parts.append(f"whose {_STAT[f.fn]} is {level}")
    noun = next((_GROUP_NOUN[g] for g in plan.group_by if g in _GROUP_NOUN), "groups")
    return f", only the {noun} {' and '.join(parts)}"


def _counted_groups(plan: QueryPlan, cat: Catalogue) -> str:
    """'number of racks whose average node power (W) is above 1000 W' (count_groups); 'number
    of racks of the nodes of jobs …' for a jobs plan (no metric)."""
    if plan.target == "jobs":
        return f"number of {_GROUP_NOUN[plan.group_by[0]]} of the nodes of jobs"
    unit, subject = _unit(plan, cat), _metric_words(plan, cat)
    parts = []
    for f in plan.filters:
        if not isinstance(f, AggregateFilter):
            continue
        level = f"{_OP[f.op]} {f.value:g}{unit}"
        if (f.fn, f.op) in {("max", "gt"), ("max", "ge"), ("min", "lt"), ("min", "le")}:
            parts.append(f"with a reading of {subject} {level}")
        elif (f.fn, f.op) in {("max", "lt"), ("max", "le"), ("min", "gt"), ("min", "ge")}:
            parts.append(f"whose readings of {subject} all stay {level}")
        else:  # the statistic next to the level: a list of GPU metrics has commas before it
            verb = {"avg": "averaged", "sum": "totalled"}.get(f.fn, f"had a {_STAT[f.fn]}")
            parts.append(f"whose {subject} {verb} {level}")
    return f"number of {_GROUP_NOUN[plan.group_by[0]]} {' and '.join(parts)}"


def _jobs_phrase(plan: QueryPlan, sel: EntitySelector | None) -> str:
    """'multi-node jobs in state FAILED', 'jobs 3423336 and 3776044', 'GPU jobs of user 7'."""
    before, after = [], []
    for f in plan.filters:
        if not isinstance(f, JobFilter):
            continue
        values = f.value if isinstance(f.value, list) else [f.value]
        shown = _ids(values).replace(" and ", " or ")
        if f.field == "num_nodes" and (f.op, values) == ("eq", [1]):
            before.append("single-node")
        elif f.field == "num_nodes" and (f.op, values) == ("gt", [1]):
            before.append("multi-node")
        elif f.field == "num_gpus" and (f.op, values) == ("gt", [0]):
            before.append("GPU")
        elif f.field == "state":
            after.append(f"{'not ' if f.op == 'ne' else ''}in state {shown}")
        elif f.field == "user":
            after.append(f"of user {shown}")
        elif f.field in ("num_nodes", "num_cpus", "num_gpus"):
            name = {"num_nodes": "nodes", "num_cpus": "CPUs", "num_gpus": "GPUs"}[f.field]
            how = {"ge": f"{shown} or more", "gt": f"more than {shown}", "le": f"at most {shown}",
                   "lt": f"fewer than {shown}"}.get(f.op, shown)  # fmt: skip
            after.append(f"with {how} {name}")
        else:
            after.append(f"with {f.field} {shown}")
    if sel is None or sel.all:
        core = "jobs"
    else:
        core = f"job{'s' if len(sel.ids) > 1 else ''} {_ids(sel.ids)}"
    if plan.job_event != "running":
        event = "were submitted" if plan.job_event == "submitted" else plan.job_event
        after.append(f"that {event}")  # in the window that follows
    elif plan.window is not None and any(
        isinstance(f, JobFilter) and f.field == "state" for f in plan.filters
    ):
        after.append("running")  # not the jobs that reached the state in the window
    return " ".join([*before, core, *after])


_RANK = {
    "duration_h": ("the {n} longest jobs", "the {n} shortest jobs"),
    "count_job": ("the top {n} by number of jobs", "the bottom {n} by number of jobs"),
}


def _order(plan: QueryPlan) -> str:
    if plan.limit is None:
        return ""
    if not plan.order_by:
        return f", first {plan.limit}"
    key = plan.order_by[0]
    name = key.key.replace("_", " ")
    most, least = _RANK.get(key.key, (f"the {{n}} with the highest {name}",
                                      f"the {{n}} with the lowest {name}"))  # fmt: skip
    return ", " + (most if key.desc else least).format(n=plan.limit)


def sentence(plan: QueryPlan, catalogue: Catalogue | None = None, *,
             instant: datetime | None = None) -> str:  # fmt: skip
    """The plan in one plain sentence with units and the exact UTC window (or instant)."""
    cat = catalogue or load_catalogue()
    if instant is not None:
        named = " and ".join(w for w in (_entity(s) for s in plan.entities) if w)
        where = f" for {named}" if named else ""
        at = f"{instant:%-d %b %Y %H:%M} UTC"
        return f"The reading of {_metric_words(plan, cat)} nearest {at}{where}"
    job_sel = plan.selector("job")
    jobs = _jobs_phrase(plan, job_sel) if job_sel is not None else None
    counts_nodes = [a.of for a in plan.aggregations] == ["node"]
    if plan.target == "readings" and counts_nodes:
        limits = " and ".join(_value_filters(plan, cat))
        head = f"number of compute nodes with {_metric_words(plan, cat)}"
        head += f" {limits}" if limits else ""
    elif plan.target == "readings":
        subject = _metric_words(plan, cat)
        if plan.aggregations:
            head = _stats(plan.aggregations, subject)
        elif plan.granularity != "raw":
            head = f"{plan.granularity}ly mean of {subject}"
        elif all(cat.get(m.metric).unit == "count" for m in plan.metrics if m.metric in cat):
            head = f"number of {subject}"  # 'readings of idle nodes' reads as another metric
        else:
            head = f"readings of {subject}"
        conditions = _value_filters(plan, cat)
        head += f" where the value is {' and '.join(conditions)}" if conditions else ""
    elif (plan.target == "jobs" and plan.group_by == ["node"] and job_sel is not None
          and [(a.fn, a.of) for a in plan.aggregations] == [("count", "job")]
          and job_sel.ids and not job_sel.all):  # fmt: skip
        # 'which nodes did job J run on': the nodes, each with how many of the jobs ran there
        return f"Which nodes {_entity(job_sel)} ran on"
    elif plan.target == "jobs":
        head = _stats(plan.aggregations, "jobs") if plan.aggregations else "jobs"
        head = head.replace("number of nodes", "number of distinct nodes")  # the jobs ran on
        if plan.derived and not plan.aggregations:
            head += " with " + " and ".join(_OF.get(d, d.replace("_", " ")) for d in plan.derived)
        if plan.job_fields:
            fields = [_FIELD.get(f, f.replace("_", " ")) for f in plan.job_fields]
            head += " with their " + (
                fields[0] if len(fields) == 1 else f"{', '.join(fields[:-1])} and {fields[-1]}"
            )
    elif counts_nodes and plan.selector("system") is not None:
        return "How many compute nodes M100 has"
    elif not plan.aggregations:  # node_id, rack_id
        nodes, racks = plan.selector("node"), plan.selector("rack")
        if racks is not None:
            return f"Which nodes are in {_entity(racks)}, with their racks"
        if nodes is not None and not nodes.all:
            if len(nodes.ids) > 1:
                return f"Which racks {_entity(nodes)} are in"
            return f"What rack is {_entity(nodes)} in"
        return "Which nodes there are, with their racks"
    else:
        head = "number of compute nodes" if counts_nodes else _stats(plan.aggregations, "entities")
    if plan.count_groups:
        head = _counted_groups(plan, cat)
    groups = [] if plan.count_groups else [_GROUP[g] for g in plan.group_by]
    text = " ".join([head, *groups])
    who = [w for w in (_entity(s) for s in plan.entities if s.kind != "job") if w]
    if counts_nodes and who == ["all compute nodes"]:
        who = []
    # 'Number of jobs that started, …', not 'Number of jobs for jobs that started' ('Number of
    # distinct users' names no jobs: the phrase stays, 'for jobs … that ended')
    if (
        plan.target == "jobs"
        and jobs is not None
        and (plan.job_event != "running" or jobs.endswith(" running"))
        and jobs.startswith("jobs")
        and re.search(r"\bjobs\b", text)
    ):
        text, jobs = re.sub(r"\bjobs\b", jobs, text, count=1), None
    if jobs is not None and not (plan.target == "jobs" and jobs == "jobs"):
        who.append(jobs)
    if who:
        text += " for " + " and ".join(who)
    if plan.window is not None:
        text += ", " + _window(plan.window.start, plan.window.end)
    if plan.job_window:
        text += ", over their whole duration"
    pooled = plan.target == "readings" and plan.aggregations and not plan.group_by
    many = any(s.all or len(s.ids) > 1 for s in plan.entities if s.kind in ("node", "rack"))
    if pooled and many and not counts_nodes:
        text += " taken together"
    text += "" if plan.count_groups else _kept_groups(plan, cat)
    ranked_jobs = bool(plan.order_by) and plan.order_by[0].key == "duration_h"
    if plan.limit is not None and plan.job_window and jobs is not None and ranked_jobs:
        # 'For the 5 longest single-node jobs, <window>: <statistics> per job over their whole
        # duration' — the ranking names the jobs, the statistics are about them
        ranked = _order(plan).removeprefix(", ").replace(" jobs", f" {jobs}", 1)
        when = f", {_window(plan.window.start, plan.window.end)}" if plan.window else ""
        body = " ".join([head, *groups])
        return f"For {ranked}{when}: {body} over their whole duration"
    text += _order(plan)
    return text[0].upper() + text[1:]


def understood_as(plans: Sequence[QueryPlan], catalogue: Catalogue | None = None) -> str:
    """Every plan's sentence, joined: what the whole answer is about."""
    return "; then ".join(sentence(p, catalogue) for p in plans) + "."
