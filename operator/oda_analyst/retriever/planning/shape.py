"""The answer in the question's form: a plan shaped to what the question asks for.

"which nodes …" asks for nodes, "what rack is node N in" for a rack, "who …" for users, "how
many users" for a count of users. The planner picks a plan from the metrics, entities and window;
this step takes the form the reader read (``FormCues``) and either shapes the plan to that form (a
count of nodes becomes the list of them; readings over a threshold become the nodes that crossed
it, each with how many readings did) or, when no plan of ours gives that form, refuses with a
message naming the form — it never runs a plan that answers another question.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import ValidationError

from oda_analyst.lake.jobs import STATE_RANK
from oda_analyst.ontology.plan import Aggregation, JobFilter, QueryPlan, ValueFilter
from oda_analyst.reading.types import NO_LEVEL, FormCues, Level

# States a job is in before it ends (the lake's ranks below final): a filter on any other state
# names how the job ended.
_ACTIVE_STATES = frozenset(s for s, rank in STATE_RANK.items() if rank < max(STATE_RANK.values()))


def _nodes_passing(plan: QueryPlan, level: Level, key: str = "node") -> QueryPlan | None:
    """'nodes whose average power was above 1000 W', 'nodes with a pcie reading above 45 °C, and
    the max of each', 'nodes that stayed below 500 W all hour': the nodes whose statistic of their
    readings in the window passes the level (an aggregate filter), each with the statistics the
    question asks of all its readings (else the tested one). None when the plan has no such
    reading: one threshold and statistics of the values, or a statistic the level is stated on."""
    value_filters = [f for f in plan.filters if isinstance(f, ValueFilter)]
    if plan.target != "readings" or len(value_filters) != 1 or plan.job_window:
        return None
    (flt,) = value_filters
    if flt.op not in ("gt", "ge", "lt", "le"):
        return None
    asked = [a for a in plan.aggregations if a.of == "value" and a.fn not in ("count", "hours")]
    if len(asked) != len(plan.aggregations):
        return None
    if key == "node" and not asked and level.fn is None and not level.every:
        return None  # the nodes with readings over the level, counted per node, stay as they are
    above = flt.op in ("gt", "ge")
    fn = level.fn or ("max" if above != level.every else "min")
    if set(plan.group_by) - {key, "gpu", "metric"}:
        return None
    data = plan.model_dump()
    kept = {"about": "aggregate", "fn": fn, "op": flt.op, "value": flt.value}
    data["filters"] = [f.model_dump() for f in plan.filters if not isinstance(f, ValueFilter)]
    data["filters"].append(kept)
    data["aggregations"] = [a.model_dump() for a in asked] or [{"fn": fn, "of": "value"}]
    data["group_by"] = [key, *(g for g in plan.group_by if g in ("gpu", "metric"))]
    if plan.limit is None:
        data["order_by"] = []  # no top-k: an order says nothing the rows do not (and is unsaid)
    try:
        return type(plan).model_validate(data)
    except ValidationError:
        return None


def _count_passing(form: FormCues, plan: QueryPlan) -> QueryPlan | None:
    """'how many racks averaged over 1000 W', 'how many nodes stayed below 500 W the whole
    hour': the nodes (racks) whose statistic of their readings passes the level, counted — not
    the nodes with some reading past it. None when the question counts no such groups."""
    key = form.counts
    if key not in ("node", "rack") or plan.target != "readings" or plan.limit is not None:
        return None
    if key == "node" and form.level.fn is None and not form.level.every:
        return None  # 'how many nodes had a reading above 1000 W': the count plan says that
    base = plan.model_copy(update={
        "aggregations": [a for a in plan.aggregations if a.fn != "count"], "group_by": [],
    })  # fmt: skip
    passing = _nodes_passing(base, form.level, key)
    if passing is None or passing.group_by != [key]:
        return None
    try:
        return type(plan).model_validate({**passing.model_dump(), "count_groups": True})
    except ValidationError:
        return None


def _level_on_the_statistic(form: FormCues, plan: QueryPlan) -> tuple[QueryPlan, str | None]:
    """'nodes 0-39 with avg GPU1 power below 100 W, show the averages': the level is on each
    node's average, so the plan keeps the nodes whose average passes it (a filter on the
    aggregate), never the average of the readings below the level. 'average of the readings
    above 100 W' names the readings: their filter stays."""
    fn = form.level.fn
    value_filters = [f for f in plan.filters if isinstance(f, ValueFilter)]
    if fn is None or form.readings_named or plan.target != "readings" or not value_filters:
        return plan, None
    if not any(a.fn == fn and a.of == "value" for a in plan.aggregations):
        return plan, None
    key = "rack" if "rack" in plan.group_by else "node"
    passing = _nodes_passing(plan, form.level, key) if key in plan.group_by else None
    if passing is None:
        return plan, (f"states a level on the {fn} of the readings, and the plan would compute "
                      f"the {fn} of the readings past the level")  # fmt: skip
    return passing, None


def _lists_nodes(plan: QueryPlan, level: Level = NO_LEVEL) -> QueryPlan | None:
    """The plan shaped to give nodes, or None when it cannot."""
    counts_nodes = [a.of for a in plan.aggregations] == ["node"]
    if plan.target == "entities" and counts_nodes and not plan.metrics:
        return plan.model_copy(update={"aggregations": []})  # node_id, rack_id
    passing = _nodes_passing(plan, level)
    if passing is not None:
        return passing
    if "node" in plan.group_by:
        return plan
    value_filters = [f for f in plan.filters if isinstance(f, ValueFilter)]
    if plan.target == "readings" and value_filters and (not plan.aggregations or counts_nodes):
        # the nodes with a reading past the threshold, and how many readings were
        return plan.model_copy(update={
            "aggregations": [Aggregation(fn="count", of="value")], "group_by": ["node"],
        })  # fmt: skip
    return None


def _hours(plan: QueryPlan) -> tuple[QueryPlan, str | None]:
    """'how many hours was node 12's inlet above 27 °C': the readings past the level counted as
    the time they stand for (hours), not as a number of readings."""
    if not any(isinstance(f, ValueFilter) for f in plan.filters):
        return plan, "asks how many hours, and the plan names no level to be above or below"
    data = plan.model_dump(mode="json", exclude_none=True)
    data["aggregations"] = [
        {"fn": "hours", "of": "value"} if (a.fn, a.of) == ("count", "value") else a.model_dump()
        for a in plan.aggregations
    ]
    data["order_by"] = [
        {**k.model_dump(), "key": "hours_value"} if k.key == "count_value" else k.model_dump()
        for k in plan.order_by
    ]
    try:
        return type(plan).model_validate(data), None
    except ValidationError:
        return plan, "asks how many hours, and the metrics have no single sampling period"


def asks_nothing(form: FormCues, plans: Sequence[QueryPlan]) -> bool:
    """'show me node 12', 'what about rack 12': the only plan counts the nodes of what the
    question names, and the question asks no count — an answer to nothing it asked."""
    if len(plans) != 1 or form.how_many or form.count_named or form.lists_nodes:
        return False
    (plan,) = plans
    counts_nodes = [a.of for a in plan.aggregations] == ["node"]
    if plan.target != "entities" or not counts_nodes or plan.group_by:
        return False
    named = [s for s in plan.entities if not s.all]
    if not named or not plan.kinds() <= {"node", "rack"}:
        return False
    if plan.kinds() == {"node"}:
        return not form.asks_rack  # 'what rack is node 12 in' asks the rack
    return not form.names_nodes  # 'nodes in rack 12' asks for them


def shape(form: FormCues, plans: Sequence[QueryPlan]) -> tuple[tuple[QueryPlan, ...], str | None]:
    """The plans in the question's form, or why no plan of ours answers in that form."""
    out = []
    for plan in plans:
        shaped, conflict = _shape_one(form, plan)
        if conflict is not None:
            return tuple(plans), conflict
        out.append(shaped)
    return tuple(out), None


def _job_listing(form: FormCues, plan: QueryPlan) -> QueryPlan | None:
    """A listing of named jobs with the attributes the question asks (its user, its state),
    or None when the plan is no such listing. The listing's own columns answer 'when did it
    start/end' and 'how many nodes does it use'."""
    job = plan.selector("job")
    if plan.target != "jobs" or job is None or job.all:
        return None
    if plan.aggregations:
        counted = [(a.fn, a.of) for a in plan.aggregations] == [("count", "job")]
        if not (counted and (form.counts == "node" or form.hours) and not plan.group_by):
            return None
        # 'how many nodes does job J use': its node count, not a count of the one job;
        # 'how many hours did job J run': its duration
        plan = plan.model_copy(update={"aggregations": [], "order_by": [], "limit": None})
    fields = [f for f in form.job_fields if f not in plan.job_fields]
    update: dict[str, object] = {"job_fields": [*plan.job_fields, *fields]} if fields else {}
    if (form.asks_duration or form.hours) and "job_duration" not in plan.derived:
        update["derived"] = [*plan.derived, "job_duration"]  # its duration_h column
    return plan.model_copy(update=update) if update else plan


def _lists_jobs_for_their_nodes(form: FormCues, plan: QueryPlan) -> bool:
    """'nodes of the failed jobs yesterday': a listing of the jobs a window selects, where the
    question asks for nodes and selects none ('jobs on node 900' lists jobs; 'jobs with 8 or
    more nodes' is a node count of each job; 'how many nodes did they touch' is no list)."""
    return (form.names_nodes and not form.how_many and not form.count_named
            and plan.target == "jobs" and not plan.aggregations
            and not plan.derived and not form.job_fields and not form.asks_duration
            and plan.kinds() <= {"job", "user"}
            and not any(isinstance(f, JobFilter) and f.field == "num_nodes"
                        for f in plan.filters))  # fmt: skip


def _nodes_of_jobs(plan: QueryPlan) -> QueryPlan | None:
    """The nodes the named jobs ran on: one row per node (with how many of the jobs did)."""
    data = plan.model_dump()
    data.update(job_fields=[], derived=[], aggregations=[{"fn": "count", "of": "job"}],
                group_by=["node"], order_by=[], limit=None)  # fmt: skip
    try:
        return type(plan).model_validate(data)
    except ValidationError:
        return None


def _ends_in_state(plan: QueryPlan) -> bool:
    """The plan keeps jobs by the state they ended in ('failed', 'timed out', 'cancelled')."""
    for f in plan.filters:
        if isinstance(f, JobFilter) and f.field == "state" and f.op in ("eq", "in"):
            values = f.value if isinstance(f.value, list) else [f.value]
            if all(str(v).upper() not in _ACTIVE_STATES for v in values):
                return True
    return False


def _event(form: FormCues, plan: QueryPlan) -> str | None:
    """Which event of a job the window selects. 'Jobs that failed (timed out, ended FAILED) on
    4 June' failed on 4 June: the end is the event the state names, so the window selects the
    end, unless the question says the jobs were running then. CPU/GPU hours stay the hours
    inside the window of the jobs running in it."""
    if form.job_event == "ended" and form.running_named and _ends_in_state(plan):
        return None  # 'of the jobs running on 4 June, how many ended up failing'
    if form.job_event is not None:
        return form.job_event
    if form.running_named or plan.target != "jobs":
        return None
    if {"cpu_hours", "gpu_hours"} & set(plan.derived) or not _ends_in_state(plan):
        return None
    return "ended"


def _with_event(form: FormCues, plan: QueryPlan) -> tuple[QueryPlan, str | None]:
    """Jobs that started (ended) in the window, when the question says so."""
    event = _event(form, plan)
    if event is None or plan.window is None or not plan.has_jobs():
        return plan, None
    job = plan.selector("job")
    if job is not None and not job.all:
        return plan, None  # named jobs: the window does not select them
    if plan.target != "jobs":
        return plan, (
            f"asks for jobs that {event} in the window, and the plan reads the jobs running in it"
        )
    return plan.model_copy(update={"job_event": event}), None


def _distinct_count(form: FormCues, plan: QueryPlan) -> QueryPlan:
    """'how many (distinct) users ran jobs on D', 'how many nodes did user U's jobs touch': the
    distinct users (nodes) of the selected jobs, not the number of jobs; 'how many distinct
    racks hosted jobs of 4 or more nodes': the racks of their nodes, counted as groups."""
    if form.counts == "rack" and plan.target == "jobs" and not plan.group_by:
        data = plan.model_dump()
        data.update(job_fields=[], derived=[], aggregations=[{"fn": "count", "of": "node"}],
                    group_by=["rack"], order_by=[], limit=None, count_groups=True)  # fmt: skip
        try:
            return type(plan).model_validate(data)
        except ValidationError:
            return plan
    if form.counts not in ("user", "node") or plan.target != "jobs" or plan.group_by:
        return plan
    counted_jobs = [(a.fn, a.of) for a in plan.aggregations] == [("count", "job")]
    # 'how many nodes did user U's jobs touch': the rules' jobs plan lists the jobs (a count of
    # nodes is no count of jobs); the count asked is of their distinct nodes
    listed = not plan.aggregations and form.how_many and not plan.limit and not plan.job_fields
    if not (counted_jobs or listed):
        return plan
    counted = Aggregation(fn="count", of=form.counts)
    return plan.model_copy(update={"aggregations": [counted], "order_by": [], "limit": None})


def _per_user(form: FormCues, plan: QueryPlan) -> QueryPlan | None:
    """'which users ran jobs on 9 June', 'who burned the most cpu hours on the 6th? top 5': the
    users of the selected jobs, each with their jobs' count (or the figures asked, ranked as
    asked), not the jobs. None for named jobs ('who ran job J' is its listing) or other plans."""
    if not form.asks_users or form.counts or plan.target != "jobs" or plan.group_by:
        return None
    job = plan.selector("job")
    if job is None or not job.all or any(a.of in ("user", "node") for a in plan.aggregations):
        return None
    if not plan.aggregations and (plan.limit is not None or plan.order_by):
        return None  # 'who ran the 3 longest jobs': the users of those jobs, not every user
    aggs = plan.aggregations or [Aggregation(fn="count", of="job")]
    data = plan.model_dump()
    data |= {"aggregations": [a.model_dump() for a in aggs], "group_by": ["user"],
             "job_fields": []}  # fmt: skip
    if not plan.aggregations:
        data["derived"] = []
    try:
        return type(plan).model_validate(data)
    except ValidationError:
        return None


# The scheduler's own counts of nodes ('total_nodes_idle', 's21.totals.total_nodes_alloc')
_NODE_COUNT_METRIC = re.compile(r"(?:^|\.)total_nodes_[a-z]+$")


def _counts_nodes_itself(plan: QueryPlan) -> bool:
    """'How many nodes were idle at 9 pm': a reading of the scheduler's idle-node count is the
    number asked for, when the plan reads it as it is (no count of readings over it)."""
    return (
        bool(plan.metrics)
        and all(_NODE_COUNT_METRIC.search(m.metric) for m in plan.metrics)
        and not any(a.fn == "count" for a in plan.aggregations)
    )


def _shape_one(form: FormCues, plan: QueryPlan) -> tuple[QueryPlan, str | None]:
    plan, conflict = _with_event(form, plan)
    if conflict is not None:
        return plan, conflict
    listing = _job_listing(form, plan)
    if listing is not None:
        if form.lists_nodes or (form.names_nodes and form.counts != "node"):
            nodes = _nodes_of_jobs(listing)
            if nodes is not None and not form.job_fields and not form.asks_duration:
                return nodes, None  # 'list the nodes of job J', 'nodes of job J?'
            # 'state, user and node list of job J': the listing counts nodes, it names none
            return plan, "asks which nodes a job ran on, and the job listing gives no node list"
        if form.counts not in (None, "node", "job") or form.asks_rack:
            return plan, "asks about named jobs in a form their job listing does not give"
        return listing, None
    if _lists_jobs_for_their_nodes(form, plan):
        nodes = _nodes_of_jobs(plan)
        if nodes is not None:
            return nodes, None  # 'nodes of the NODE_FAIL jobs yesterday'
        return plan, "asks which nodes the jobs ran on, and the plan lists the jobs"
    plan = _distinct_count(form, plan)
    plan = _per_user(form, plan) or plan
    counts_nodes = [a.of for a in plan.aggregations] == ["node"]

    if form.asks_rack and not form.counts:
        if plan.target == "entities" and counts_nodes and not plan.metrics:
            plan = plan.model_copy(update={"aggregations": []})  # node_id with rack_id
        elif (passing := _nodes_passing(plan, form.level, "rack")) is not None:
            plan = passing  # 'which racks had a node above 1600 W', 'racks averaging > 24 °C'
        elif "rack" not in plan.group_by:
            return plan, "asks which rack, and the plan gives no rack"
    elif form.lists_nodes and not form.counts:
        shaped = _lists_nodes(plan, form.level)
        if shaped is None:
            return plan, "asks which nodes, and the plan gives no list of nodes"
        plan = shaped
    counted_groups = _count_passing(form, plan)
    if counted_groups is not None:
        return counted_groups, None
    plan, conflict = _level_on_the_statistic(form, plan)
    if conflict is not None:
        return plan, conflict
    counted = [a.of for a in plan.aggregations]
    if form.asks_users and "user" not in plan.group_by and counted != ["user"]:
        return plan, "asks who (which users), and the plan gives no users"
    if form.asks_state and plan.selector("job") is not None:
        return plan, "asks the state of a job, and the plan gives no job states"
    if (form.counts == "rack" and not plan.count_groups) or (
        form.counts == "user" and counted != ["user"]
    ):
        return plan, f"asks how many distinct {form.counts}s, which I cannot count yet"
    level_on_stat = form.level.fn is not None or form.level.every
    if counts_nodes and level_on_stat and any(isinstance(f, ValueFilter) for f in plan.filters):
        # 'how many nodes stayed below 500 W the whole hour', 'how many nodes averaged above
        # 1000 W': the count would be of nodes with *some* reading past the level
        return plan, "asks how many nodes pass a level on a statistic of their readings"
    if (
        form.counts == "node"
        and not counts_nodes
        and "node" not in plan.group_by
        and not _counts_nodes_itself(plan)
    ):
        return plan, "asks how many nodes, and the plan counts something else"
    counts_readings = any(a.fn == "count" and a.of == "value" for a in plan.aggregations)
    if form.hours and counts_readings:
        return _hours(plan)
    averaged = any(a.fn == "avg" and a.of == "value" for a in plan.aggregations)
    if form.how_many and counts_readings and averaged and not form.readings_named:
        # 'how many cpus did slurm have allocated on average': the mean of a count series,
        # not a count of its readings
        kept = [a for a in plan.aggregations if not (a.fn == "count" and a.of == "value")]
        return plan.model_copy(update={"aggregations": kept}), None
    if form.how_many and counts_readings and not form.readings_named and form.counts != "node":
        # 'how many had GPU 0 pegged at 100%': of what? not of readings, which nobody named
        return plan, "asks how many, and the plan would count readings, which it does not name"
    return plan, None
