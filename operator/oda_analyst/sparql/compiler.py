"""Deterministic compiler: a validated QueryPlan -> one SPARQL 1.1 SELECT over a per-query VKG.

The query reads exactly one graph (``FROM <graph>``, the request's VKG) and walks the ontology's
traversal paths (``patterns``). The same plan always gives the same text: stable variable names
(the output column names), one triple per line, an ORDER BY on every query.

What SPARQL 1.1 cannot compute is declared, not hidden, as ``CompiledQuery.post`` steps that the
executor applies row by row (``oda_analyst.sparql.post.apply_post``):
- ``std`` / ``cv``: SPARQL has no SQRT, so the query projects the sample variance
  ``var_<x>`` = (Σx² − (Σx)²/n) / (n − 1) and the mean ``mean_<x>``; std = √var, cv = std / mean.
- percentiles / median: the query projects each group's values as one space-separated string
  (``values_<x>``, GROUP_CONCAT); the post step takes the linear-interpolation quantile.
- ordering by such a column, and the LIMIT that goes with it, happen after those steps.
The final columns are ``CompiledQuery.columns`` (helper columns are dropped).

``granularity`` minute/hour: the compiler averages each series per UTC bucket and labels the row
with the bucket start, so the result has the raw shape (timestamp, value) whether or not the
builder pre-aggregated the readings to that bucket (the mean of one pre-averaged value is itself).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from oda_analyst.errors import UsageError
from oda_analyst.ontology import namespaces as ns
from oda_analyst.ontology.catalogue import Catalogue, MetricInfo, load_catalogue
from oda_analyst.ontology.plan import (
    DERIVED_COLUMN,
    GROUP_COLUMN,
    JOB_LEVEL_KEYS,
    NODE_FAMILY,
    QUANTILES,
    Aggregation,
    QueryPlan,
    groups_counted,
    output_columns,
    sampling_period,
)
from oda_analyst.sparql import jobs as job_patterns
from oda_analyst.sparql.patterns import (
    Lines,
    bucket_expr,
    datetime_literal,
    in_filter,
    iri,
    sensor_paths,
    triple,
    values,
)
from oda_analyst.sparql.select import (
    Select,
    aggregate_expr,
    aggregate_items,
    column_meaning,
    explain,
)

PREFIXES = ("oda", "xsd")


@dataclass(frozen=True)
class PostStep:
    """One computation the executor applies to the SPARQL rows, in order (see post.py).

    ``std``: output = √(inputs[0]); ``cv``: output = √(inputs[0]) / inputs[1];
    ``quantile``: output = quantile ``q`` of the numbers in inputs[0] (space-separated);
    ``sort``: stable sort by ``keys`` ((column, descending), None last); ``limit``: first ``n``;
    ``nearest``: per series (the ``inputs`` columns), the row whose ``output`` timestamp is
    nearest the instant ``q`` (POSIX seconds), at most ``n`` seconds away; a tie takes the earlier.
    ``count``: one row, ``output`` = how many rows there are (the groups a HAVING kept).
    """

    op: Literal["std", "cv", "quantile", "sort", "limit", "nearest", "count"]
    output: str = ""
    inputs: tuple[str, ...] = ()
    q: float | None = None
    keys: tuple[tuple[str, bool], ...] = ()
    n: int | None = None


@dataclass(frozen=True)
class Column:
    name: str
    meaning: str


@dataclass(frozen=True)
class CompiledQuery:
    """SPARQL text, the graph it reads, its result columns and the post steps to apply."""

    sparql: str
    graph: str
    columns: tuple[Column, ...]  # final columns, after post
    sparql_columns: tuple[str, ...]  # the SELECT's variables, in order
    post: tuple[PostStep, ...]
    explanation: str

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


def compile_plan(
    plan: QueryPlan, *, graph: str, catalogue: Catalogue | None = None, weighted: bool = False
) -> CompiledQuery:
    """Compile a validated plan into SPARQL over the named graph ``graph`` (its only source).

    ``weighted``: the graph's readings are minute/hour means that carry ``oda:readingCount``
    (the builder coarsened a raw average-only plan): averages become Σ(mean·n)/Σn, the mean of
    the raw readings."""
    cat = catalogue or type(plan).bound_catalogue or load_catalogue()
    infos = [cat.get(m.metric) for m in plan.metrics]
    # count_groups: the query selects the groups HAVING keeps; a post step counts them
    groups = groups_counted(plan)
    if plan.target == "readings":
        sel = _readings(groups, infos, weighted=weighted)
    elif plan.target == "jobs":
        sel = job_patterns.jobs_select(plan)
    else:
        sel = _entities(plan)
    post = _post_steps(groups, sel)
    if plan.count_groups:
        post.append(PostStep("count", output_columns(plan)[0]))
    explanation = explain(plan, infos)
    text = sel.render(graph=iri(graph), prefixes=PREFIXES, comment=explanation)
    cols = output_columns(plan)
    return CompiledQuery(
        sparql=text,
        graph=graph,
        columns=tuple(Column(c, column_meaning(c, plan, infos)) for c in cols),
        sparql_columns=tuple(sel.variables()),
        post=tuple(post),
        explanation=explanation,
    )


# --- readings ---------------------------------------------------------------------------------


def _readings(plan: QueryPlan, infos: list[MetricInfo], *, weighted: bool = False) -> Select:
    sel = Select()
    # Only a raw plan's averages are weighted: a granular plan averages each bucket itself.
    weight = "?reading_n" if weighted and plan.granularity == "raw" and plan.aggregations else None
    granular = plan.granularity != "raw"
    t_var, v_var = ("?reading_time", "?reading_value") if granular else ("?timestamp", "?value")
    group_cols = _reading_group_columns(plan)
    gpu_index = "gpu" in plan.group_by or bool(
        (s := plan.selector("gpu") or plan.selector("cpu")) and s.index is not None
    )
    needs_node_id = not plan.aggregations or bool({"node", "gpu"} & set(plan.group_by))
    if plan.has_jobs():
        top_k = _top_jobs(plan)
        needs_user = "user" in plan.group_by
        sel.where += job_patterns.job_lines(
            plan, window_filter=True, user_id=needs_user, top_k=top_k
        )
        sel.where.append(triple("?job", "oda:runsOn", "?node"))
        node = plan.selector("node")
        if node and not node.all:
            sel.where += values("?node", [iri(ns.node_iri(int(i))) for i in node.ids])
        if needs_node_id:
            sel.where.append(triple("?node", "oda:nodeId", "?node_id"))
        anchor = "?node"
    elif plan.kinds() & NODE_FAMILY:
        sel.where += _node_lines(plan, node_id=needs_node_id, rack_id="rack" in plan.group_by)
        anchor = "?node"
    else:
        anchor = _facility_lines(plan, sel.where)
    if anchor == "?node":
        index_var = "?gpu_index" if gpu_index else None
        sel.where += sensor_paths({i.entity for i in infos}, "?node", index_var)
        part = plan.selector("gpu") or plan.selector("cpu")
        if part is not None and part.index is not None:
            sel.where.append(in_filter("?gpu_index", sorted(part.index)))
    else:
        sel.where.append(triple("?sensor", "oda:observes", anchor))
    sel.where.append(triple("?sensor", "oda:observesMetric", "?metric"))
    sel.where += values("?metric", [iri(ns.metric_iri(i.plugin, i.name)) for i in infos])
    if "metric_name" in group_cols or not plan.aggregations:
        sel.where.append(triple("?metric", "oda:metricName", "?metric_name"))
    value_prop = "oda:textValue" if infos[0].dtype == "string" else "oda:value"
    sel.where += [
        triple("?reading", "oda:fromSensor", "?sensor"),
        triple("?reading", "oda:timestamp", t_var),
        triple("?reading", value_prop, v_var),
    ]
    if weight is not None:
        sel.where.append(triple("?reading", "oda:readingCount", weight))
    if plan.job_window:
        sel.where.append(f"FILTER({t_var} >= ?start_time && {t_var} < ?end_time)")
    elif plan.window is not None:
        lo, hi = datetime_literal(plan.window.start), datetime_literal(plan.window.end)
        sel.where.append(f"FILTER({t_var} >= {lo} && {t_var} < {hi})")
    for f in plan.filters:
        if f.about == "value":
            sel.where.append(f"FILTER({v_var} {job_patterns.OPS[f.op]} {f.value!r})")
    for unit in ("hour", "day"):
        if unit in plan.group_by:
            sel.where.append(f"BIND({bucket_expr(t_var, unit)} AS ?{unit})")
    if granular:
        sel.where.append(f"BIND({bucket_expr(t_var, plan.granularity)} AS ?timestamp)")
    _reading_projection(plan, sel, group_cols, weight)
    return sel


def _reading_group_columns(plan: QueryPlan) -> list[str]:
    if not plan.aggregations:
        cols = [c for c in output_columns(plan) if c not in {"value"}]
        return cols
    cols = []
    for c in output_columns(plan):
        if c in GROUP_COLUMN.values() or c in DERIVED_COLUMN.values():
            cols.append(c)
    return cols


def _reading_projection(
    plan: QueryPlan, sel: Select, group_cols: list[str], weight: str | None = None
) -> None:
    if not plan.aggregations and plan.granularity == "raw":
        sel.items = [f"?{c}" for c in output_columns(plan)]
        sel.order = [f"?{c}" for c in group_cols]
        return
    if not plan.aggregations:  # granular series: mean per bucket
        sel.items = [f"?{c}" for c in group_cols] + ["(AVG(?reading_value) AS ?value)"]
        sel.group = [f"?{c}" for c in group_cols]
        sel.order = list(sel.group)
        return
    sel.items = [f"?{c}" for c in group_cols]
    period = sampling_period(plan) if any(a.fn == "hours" for a in plan.aggregations) else None
    for agg in plan.aggregations:
        sel.add_items(aggregate_items(agg, _agg_var(agg), period_s=period,
                                      weight=weight if agg.of == "value" else None))  # fmt: skip
    sel.group = [f"?{c}" for c in group_cols]
    sel.having = [
        f"{aggregate_expr(f.fn, '?value', weight)} {job_patterns.OPS[f.op]} {f.value!r}"
        for f in plan.filters
        if f.about == "aggregate"
    ]
    # One row when nothing is grouped: order by the first aggregate so the query stays total.
    sel.order = list(sel.group) or re.findall(r"AS (\?\w+)\)", sel.items[0])[:1]


def _agg_var(agg: Aggregation) -> str:
    return {"value": "?value", "job": "?job", "node": "?node"}.get(agg.of, f"?{agg.of}")


def _top_jobs(plan: QueryPlan) -> bool:
    """A readings plan's limit ranks jobs (not rows) when every order key is a job attribute."""
    return (
        plan.limit is not None
        and all(k.key in JOB_LEVEL_KEYS for k in plan.order_by)
        and (not plan.aggregations or "job" in plan.group_by)
    )


def _node_lines(plan: QueryPlan, *, node_id: bool, rack_id: bool) -> Lines:
    lines: Lines = []
    node = plan.selector("node") or plan.selector("gpu") or plan.selector("cpu")
    rack, room = plan.selector("rack"), plan.selector("room")
    if node is not None and not node.all:
        lines += values("?node", [iri(ns.node_iri(int(i))) for i in node.ids])
    if rack is not None and not rack.all:
        lines += values("?rack", [iri(ns.rack_iri(int(i))) for i in rack.ids])
    if room is not None and not room.all:
        lines += values("?room", [iri(ns.room_iri(str(i))) for i in room.ids])
    if room is not None:
        lines.append(triple("?room", "oda:hasRack", "?rack"))
    if rack is not None or room is not None or rack_id:
        lines.append(triple("?rack", "oda:hasNode", "?node"))
    if not lines:
        lines.append(triple("?node", "a", "oda:ComputeNode"))
    if rack_id:
        lines.append(triple("?rack", "oda:rackId", "?rack_id"))
    if node_id:
        lines.append(triple("?node", "oda:nodeId", "?node_id"))
    return lines


_FACILITY: dict[str, tuple[str, str]] = {
    "system": ("?system", "oda:HPCSystem"),
    "weather": ("?weather", "oda:Weather"),
    "crac": ("?equipment", "oda:CRAC"),
    "plc": ("?equipment", "oda:LiquidCoolingPLC"),
    "panel": ("?equipment", "oda:ElectricalPanel"),
}


def _facility_iri(kind: str, key: str) -> str:
    if kind == "system":
        return ns.system_iri(key)
    if kind == "weather":
        return ns.weather_iri(key)
    if kind == "crac":
        return ns.crac_iri(key)
    if kind == "plc":
        return ns.plc_iri(key)
    panel, _, device = key.partition("/")
    if not device:
        raise UsageError(f"panel id {key!r} needs panel/device", hint="e.g. QGBT1/main_ict")
    return ns.panel_iri(panel, device)


def _facility_lines(plan: QueryPlan, where: Lines) -> str:
    sel = plan.entities[0]
    var, cls = _FACILITY[sel.kind]
    if sel.all:
        where.append(triple(var, "a", cls))
    else:
        where += values(var, [iri(_facility_iri(sel.kind, str(i))) for i in sel.ids])
    if not plan.aggregations:
        if sel.kind in {"plc", "panel"}:
            where.append(triple(var, "oda:panelId", "?panel"))
        if sel.kind in {"crac", "panel"}:
            where.append(triple(var, "oda:deviceId", "?device"))
    return var


# --- entities ---------------------------------------------------------------------------------


def _entities(plan: QueryPlan) -> Select:
    sel = Select()
    system = plan.selector("system")
    if system is not None:
        if system.all:
            sel.where.append(triple("?system", "a", "oda:HPCSystem"))
        else:
            sel.where += values("?system", [iri(ns.system_iri(str(i))) for i in system.ids])
        sel.where.append(triple("?system", "oda:hasComputeNode", "?node"))
    listing = not plan.aggregations
    lines = _node_lines(plan, node_id=listing, rack_id=listing or "rack" in plan.group_by)
    if system is not None and lines == [triple("?node", "a", "oda:ComputeNode")]:
        lines = []  # the system's membership already binds ?node
    sel.where += lines
    if system is not None:
        sel.where.append(triple("?node", "a", "oda:ComputeNode"))
    if listing:
        sel.items = ["?node_id", "?rack_id"]
        sel.order = ["?node_id"]
        return sel
    groups = [f"?{GROUP_COLUMN[g]}" for g in plan.group_by]
    sel.items = list(groups)
    for agg in plan.aggregations:
        sel.add_items(aggregate_items(agg, "?node"))
    sel.group = groups
    sel.order = list(groups) or [f"?{plan.aggregations[0].column}"]
    return sel


# --- ordering, limit and post steps -----------------------------------------------------------


def _post_steps(plan: QueryPlan, sel: Select) -> list[PostStep]:
    steps: list[PostStep] = []
    computed: set[str] = set()
    for agg in plan.aggregations:
        if agg.fn == "std":
            steps.append(PostStep("std", agg.column, (f"var_{agg.of}",)))
        elif agg.fn == "cv":
            steps.append(PostStep("cv", agg.column, (f"var_{agg.of}", f"mean_{agg.of}")))
        elif agg.fn in QUANTILES:
            steps.append(PostStep("quantile", agg.column, (f"values_{agg.of}",), QUANTILES[agg.fn]))
        else:
            continue
        computed.add(agg.column)
    keys = [(k.key, k.desc) for k in plan.order_by]
    in_post = any(k in computed for k, _ in keys)
    if in_post:
        steps.append(PostStep("sort", keys=tuple(keys)))
        if plan.limit is not None:
            steps.append(PostStep("limit", n=plan.limit))
        return steps
    ranked = [f"DESC(?{k})" if desc else f"?{k}" for k, desc in keys]
    named = {k for k, _ in keys}
    sel.order = ranked + [o for o in sel.order if o.removeprefix("?") not in named]
    if plan.limit is not None and not (plan.target == "readings" and _top_jobs(plan)):
        sel.limit = plan.limit
    return steps


__all__ = ["Column", "CompiledQuery", "PostStep", "compile_plan"]
