"""Job patterns of the compiler: selection, filters, durations, CPU/GPU hours, time buckets.

Empty buckets report count 0 and no value (None) for the other aggregates.
Jobs are ``oda:Job`` with ``oda:jobId``, ``oda:startTime`` and ``oda:endTime`` (jobs that never
started or still run have no end time and are not matched). A job overlaps [a, b) when
start_time < b and end_time > a; a plan's ``job_event`` selects the jobs that started (ended)
inside it instead (``submitted``: its ``oda:submitTime``; such a job may never have started, so
its start and end are optional). Grouping by a job attribute (partition, state, QoS) groups on
that triple; ``queue_wait`` is start − submit in minutes. Grouping jobs by day/hour enumerates
the buckets as VALUES rows (clipped to the window) and matches jobs inside an OPTIONAL, so empty
buckets report 0: a job counts in each bucket it overlaps, or in the one bucket of its event.
"""

from __future__ import annotations

from datetime import timedelta

from oda_analyst.ontology import namespaces as ns
from oda_analyst.ontology.plan import (
    DERIVED_COLUMN,
    GROUP_COLUMN,
    JOB_ATTRIBUTE_GROUPS,
    JOB_FIELD_COLUMN,
    JOB_LEVEL_KEYS,
    JobFilter,
    QueryPlan,
    bucket_starts,
)
from oda_analyst.sparql.patterns import (
    Lines,
    block,
    date_literal,
    datetime_literal,
    earlier_of,
    hours_between,
    iri,
    later_of,
    string_literal,
    triple,
    values,
)
from oda_analyst.sparql.select import Select, aggregate_items

# The instant of a job each job_event selects it by
_EVENT_TIME = {"started": "?start_time", "ended": "?end_time", "submitted": "?submit_time"}
OPS = {"eq": "=", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
# Job filter field -> (property, variable)
JOB_FIELDS: dict[str, tuple[str, str]] = {
    "state": ("oda:jobState", "?job_state"),
    "partition": ("oda:partition", "?partition"),
    "qos": ("oda:qos", "?qos"),
    "num_nodes": ("oda:numNodes", "?num_nodes"),
    "num_cpus": ("oda:numCPUs", "?num_cpus"),
    "num_gpus": ("oda:numGPUs", "?num_gpus"),
}


def _filter(f: JobFilter, var: str) -> str:
    items = f.value if isinstance(f.value, list) else [f.value]
    terms = [str(v) if isinstance(v, int) else string_literal(v) for v in items]
    if f.op == "in":
        return f"FILTER({var} IN ({', '.join(terms)}))"
    return f"FILTER({var} {OPS[f.op]} {terms[0]})"


def job_lines(
    plan: QueryPlan,
    *,
    window_filter: bool,
    user_id: bool,
    top_k: bool = False,
    bucket: bool = False,
) -> Lines:
    """Bind ?job, ?job_id, ?start_time, ?end_time (+ ?duration_h, ?user_id) for the plan's jobs.

    ``window_filter`` keeps jobs overlapping the plan's window; ``bucket`` keeps jobs overlapping
    ?bucket_start/?bucket_end instead. With ``top_k`` the lines become a sub-select ranked by the
    plan's (job-level) order keys and cut at its limit.
    """
    submitted = plan.job_event == "submitted"
    times = [triple("?job", "oda:startTime", "?start_time"),
             triple("?job", "oda:endTime", "?end_time")]  # fmt: skip
    lines = [
        triple("?job", "a", "oda:Job"),
        triple("?job", "oda:jobId", "?job_id"),
        # 'jobs submitted on 8 June': some never started (cancelled while pending) or still run
        *([f"OPTIONAL {{ {t} }}" for t in times] if submitted else times),
    ]
    if submitted or "queue_wait" in plan.derived:
        lines.append(triple("?job", "oda:submitTime", "?submit_time"))
    job, user = plan.selector("job"), plan.selector("user")
    if job is not None and not job.all:
        lines[:0] = values("?job", [iri(ns.job_iri(int(i))) for i in job.ids])
    user_filtered = any(isinstance(f, JobFilter) and f.field == "user" for f in plan.filters)
    if user is not None or user_id or user_filtered:
        lines.append(triple("?job", "oda:submittedBy", "?user"))
        if user is not None and not user.all:
            lines += values("?user", [iri(ns.user_iri(int(i))) for i in user.ids])
        if user_id or user_filtered:
            lines.append(triple("?user", "oda:userId", "?user_id"))
    bound: set[str] = set()
    for f in plan.filters:
        if not isinstance(f, JobFilter):
            continue
        if f.field == "user":
            lines.append(_filter(f, "?user_id"))
            continue
        prop, var = JOB_FIELDS[f.field]
        if var not in bound:
            lines.append(triple("?job", prop, var))
            bound.add(var)
        lines.append(_filter(f, var))
    if bucket and plan.job_event == "running":
        lines.append("FILTER(?start_time < ?bucket_end && ?end_time > ?bucket_start)")
    elif bucket:  # 'failed jobs per day': each job in the bucket of its end (start)
        at = _EVENT_TIME[plan.job_event]
        lines.append(f"FILTER({at} >= ?bucket_start && {at} < ?bucket_end)")
    elif window_filter and plan.window is not None:
        lo, hi = datetime_literal(plan.window.start), datetime_literal(plan.window.end)
        if plan.job_event == "running":
            lines.append(f"FILTER(?start_time < {hi} && ?end_time > {lo})")
        else:  # 'jobs that started / ended on 4 June': the event inside the window
            at = _EVENT_TIME[plan.job_event]
            lines.append(f"FILTER({at} >= {lo} && {at} < {hi})")
    for key in plan.group_by:
        if key in JOB_ATTRIBUTE_GROUPS and JOB_FIELDS[key][1] not in bound:
            prop, var = JOB_FIELDS[key]
            lines.append(triple("?job", prop, var))
            bound.add(var)
    if "job_duration" in plan.derived:
        lines += hours_between("?end_time", "?start_time", "?duration_h")
    if "queue_wait" in plan.derived:
        # minutes from submission to start (Slurm never starts a job before its submission)
        lines += hours_between("?start_time", "?submit_time", "?queue_wait_h")
        lines.append("BIND(?queue_wait_h * 60 AS ?queue_wait_min)")
    if not top_k:
        return lines
    out = ["?job", "?job_id", "?start_time", "?end_time"]
    out += ["?duration_h"] if "job_duration" in plan.derived else []
    out += ["?user_id"] if user_id else []
    keys = [f"DESC(?{k.key})" if k.desc else f"?{k.key}" for k in plan.order_by]
    if "job_id" not in {k.key for k in plan.order_by}:
        keys.append("?job_id")
    assert all(k.key in JOB_LEVEL_KEYS for k in plan.order_by)  # checked by the caller
    sub = [
        "SELECT " + " ".join(out),
        "WHERE {",
        *block(lines),
        "}",
        "ORDER BY " + " ".join(keys),
        f"LIMIT {plan.limit}",
    ]
    return ["{", *block(sub), "}"]


def _overlap_hours(plan: QueryPlan, lo: str | None, hi: str | None) -> Lines:
    """?overlap_h: hours of the job inside [lo, hi) (the whole job when there are no bounds)."""
    if lo is None or hi is None:
        return hours_between("?end_time", "?start_time", "?overlap_h")
    return [
        f"BIND({later_of('?start_time', lo)} AS ?overlap_start)",
        f"BIND({earlier_of('?end_time', hi)} AS ?overlap_end)",
        *hours_between("?overlap_end", "?overlap_start", "?overlap_h"),
    ]


def _resource_hours(plan: QueryPlan, lo: str | None, hi: str | None) -> tuple[Lines, Lines]:
    """(triples, binds) giving ?cpu_hours / ?gpu_hours: allocated count x hours inside [lo, hi)."""
    wanted = [d for d in ("cpu_hours", "gpu_hours") if d in plan.derived]
    if not wanted:
        return [], []
    triples: Lines = []
    binds = _overlap_hours(plan, lo, hi)
    filtered = {
        JOB_FIELDS[f.field][1]
        for f in plan.filters
        if isinstance(f, JobFilter) and f.field in JOB_FIELDS
    }
    for d in wanted:
        prop, var = (
            ("oda:numCPUs", "?num_cpus") if d == "cpu_hours" else ("oda:numGPUs", "?num_gpus")
        )
        if var not in filtered:
            triples.append(triple("?job", prop, var))
        binds.append(f"BIND(?overlap_h * {var} AS ?{DERIVED_COLUMN[d]})")
    return triples, binds


def _bucket_rows(plan: QueryPlan, unit: str) -> Lines:
    assert plan.window is not None  # validated: time grouping needs a window
    step = timedelta(days=1) if unit == "day" else timedelta(hours=1)
    rows = []
    for start in bucket_starts(plan.window, "day" if unit == "day" else "hour"):
        lo, hi = max(start, plan.window.start), min(start + step, plan.window.end)
        key = date_literal(start.date()) if unit == "day" else datetime_literal(start)
        rows.append(f"({key} {datetime_literal(lo)} {datetime_literal(hi)})")
    return [f"VALUES (?{unit} ?bucket_start ?bucket_end) {{", *block(rows), "}"]


def jobs_select(plan: QueryPlan) -> Select:
    """A jobs plan: list jobs with derived quantities, or aggregate them by user/node/bucket."""
    sel = Select()
    unit = next((u for u in ("day", "hour") if u in plan.group_by), None)
    needs_user = "user" in plan.group_by or "user" in plan.job_fields
    counted = {a.of for a in plan.aggregations}
    body = job_lines(plan, window_filter=True, user_id=needs_user, bucket=unit is not None)
    if "user" in counted and not needs_user and plan.selector("user") is None:
        body.append(triple("?job", "oda:submittedBy", "?user"))  # distinct users counted
    node = plan.selector("node")
    racks = "rack" in plan.group_by
    if node is not None or "node" in plan.group_by or "node" in counted or racks:
        body.append(triple("?job", "oda:runsOn", "?node"))
        if node is not None and not node.all:
            body += values("?node", [iri(ns.node_iri(int(i))) for i in node.ids])
        if "node" in plan.group_by:
            body.append(triple("?node", "oda:nodeId", "?node_id"))
        if racks:  # 'how many racks hosted jobs …': the racks of the jobs' nodes
            body += [triple("?rack", "oda:hasNode", "?node"), triple("?rack", "oda:rackId",
                                                                      "?rack_id")]  # fmt: skip
    if unit is not None:
        # Outer variables are not visible to a BIND inside OPTIONAL (only to its FILTER), so
        # the overlap with each bucket is computed after it; empty buckets leave it unbound.
        triples, binds = _resource_hours(plan, "?bucket_start", "?bucket_end")
        body += triples
        sel.where = [*_bucket_rows(plan, unit), "OPTIONAL {", *block(body), "}", *binds]
    else:
        w = plan.window
        lo, hi = (datetime_literal(w.start), datetime_literal(w.end)) if w else (None, None)
        triples, binds = _resource_hours(plan, lo, hi)
        sel.where = body + triples + binds
    if not plan.aggregations:
        if not any(isinstance(f, JobFilter) and f.field == "num_nodes" for f in plan.filters):
            sel.where.append(triple("?job", "oda:numNodes", "?num_nodes"))
        derived = [f"?{DERIVED_COLUMN[d]}" for d in plan.derived]
        filtered = {f.field for f in plan.filters if isinstance(f, JobFilter)}
        for name in plan.job_fields:
            if name != "user" and name not in filtered:  # a filter binds its variable already
                prop, var = JOB_FIELDS[name]
                # OPTIONAL: the job table leaves some attributes empty (a pending job's QoS)
                sel.where.append(f"OPTIONAL {{ {triple('?job', prop, var)} }}")
        fields = [f"?{JOB_FIELD_COLUMN[f]}" for f in plan.job_fields]
        submit = ["?submit_time"] if plan.job_event == "submitted" else []
        sel.items = ["?job_id", *submit, "?start_time", "?end_time", "?num_nodes", *derived,
                     *fields]  # fmt: skip
        sel.order = ["?job_id"]
        return sel
    groups = [f"?{GROUP_COLUMN[g]}" for g in plan.group_by]
    sel.items = list(groups)
    for agg in plan.aggregations:
        var = "?job" if agg.of == "job" else f"?{agg.of}"
        sel.add_items(aggregate_items(agg, var))
    sel.group = groups
    sel.order = list(groups) or [f"?{plan.aggregations[0].column}"]
    return sel
