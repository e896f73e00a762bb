"""The SELECT being assembled, its rendering, aggregate expressions and column descriptions."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from oda_analyst.ontology import namespaces as ns
from oda_analyst.ontology.catalogue import MetricInfo
from oda_analyst.ontology.plan import Aggregation, QueryPlan
from oda_analyst.sparql.patterns import Lines, block

_ALIAS = re.compile(r"AS (\?[A-Za-z_][A-Za-z0-9_]*)\)$")
# The SPARQL aggregate of each statistic SPARQL computes itself (projections and HAVING).
SIMPLE_AGGREGATES = {"avg": "AVG", "min": "MIN", "max": "MAX", "sum": "SUM"}


@dataclass
class Select:
    """Parts of one SELECT query; ``render`` lays them out the same way every time."""

    items: list[str] = field(default_factory=list)  # "?x" or "(EXPR AS ?x)"
    where: Lines = field(default_factory=list)
    group: list[str] = field(default_factory=list)
    having: list[str] = field(default_factory=list)  # conditions, ANDed
    order: list[str] = field(default_factory=list)
    limit: int | None = None

    def add_items(self, items: list[str]) -> None:
        """Append projection items whose variable is not projected yet (shared helpers)."""
        have = set(self.variables())
        for item in items:
            if _variable(item) not in have:
                self.items.append(item)
                have.add(_variable(item))

    def variables(self) -> list[str]:
        return [_variable(i) for i in self.items]

    def render(self, *, graph: str, prefixes: tuple[str, ...], comment: str) -> str:
        lines = [f"# {comment}"]
        lines += [f"PREFIX {p}: <{ns.PREFIXES[p]}>" for p in prefixes]
        plain = all(i.startswith("?") for i in self.items)
        if plain and len(" ".join(self.items)) <= 80:
            lines.append("SELECT " + " ".join(self.items))
        else:
            lines += ["SELECT", *block(self.items)]
        lines += [f"FROM {graph}", "WHERE {", *block(self.where), "}"]
        if self.group:
            lines.append("GROUP BY " + " ".join(self.group))
        if self.having:
            lines.append("HAVING (" + " && ".join(self.having) + ")")
        if not self.order:
            raise AssertionError("every compiled query has an ORDER BY")  # compiler invariant
        lines.append("ORDER BY " + " ".join(self.order))
        if self.limit is not None:
            lines.append(f"LIMIT {self.limit}")
        return "\n".join(lines) + "\n"


def _variable(item: str) -> str:
    if item.startswith("?"):
        return item[1:]
    found = _ALIAS.search(item)
    if found is None:
        raise AssertionError(f"projection item without alias: {item}")
    return found.group(1)[1:]


def aggregate_expr(fn: str, var: str, weight: str | None = None) -> str:
    """The SPARQL aggregate of a simple statistic; with ``weight`` (the count of readings each
    bucket mean stands for) the mean is Σ(mean·n)/Σn, the mean of the raw readings."""
    if fn == "avg" and weight is not None:
        return f"(SUM({var} * {weight}) / SUM({weight}))"
    return f"{SIMPLE_AGGREGATES[fn]}({var})"


def aggregate_items(
    agg: Aggregation, var: str, *, period_s: int | None = None, weight: str | None = None
) -> list[str]:
    """Projection items of one aggregation; std/cv/quantiles project helpers (see post.py).
    ``hours`` needs the metrics' sampling period ``period_s``; ``weight`` see aggregate_expr
    (only averages are ever computed over bucket means)."""
    col, of = agg.column, agg.of
    if agg.fn == "hours":
        if period_s is None:
            raise AssertionError("hours need the sampling period")  # plan validation's invariant
        # In doubles, count x period first (exact), then / 3600: the pushed-down scan computes
        # the same two operations, so both paths give the same bits.
        return [f"((xsd:double(COUNT({var}) * {int(period_s)})) / 3600.0e0 AS ?{col})"]
    if agg.fn in SIMPLE_AGGREGATES:
        return [f"({aggregate_expr(agg.fn, var, weight)} AS ?{col})"]
    if agg.fn == "count":
        distinct = "DISTINCT " if of in {"job", "node", "user"} else ""
        return [f"(COUNT({distinct}{var}) AS ?{col})"]
    if agg.fn in {"std", "cv"}:
        # sample variance; SPARQL has no SQRT, so the post step takes the root
        variance = (
            f"((SUM({var} * {var}) - SUM({var}) * SUM({var}) / COUNT({var}))"
            f" / (COUNT({var}) - 1) AS ?var_{of})"
        )
        items = [variance]
        if agg.fn == "cv":
            items.append(f"(AVG({var}) AS ?mean_{of})")
        return items
    return [f'(GROUP_CONCAT(STR({var}); SEPARATOR=" ") AS ?values_{of})']


_COLUMN_MEANING = {
    "node_id": "compute node id (oda:nodeId)",
    "gpu_index": "GPU index in its node, 0..3 (oda:gpuIndex)",
    "rack_id": "rack id (oda:rackId)",
    "job_id": "job id (oda:jobId)",
    "user_id": "anonymised user id (oda:userId)",
    "metric_name": "metric name as the lake spells it (oda:metricName)",
    "timestamp": "reading time, UTC (oda:timestamp)",
    "hour": "UTC hour bucket start",
    "day": "UTC calendar day",
    "start_time": "job start, UTC (oda:startTime)",
    "end_time": "job end, UTC (oda:endTime)",
    "submit_time": "job submission, UTC (oda:submitTime)",
    "queue_wait_min": "job queue wait start_time - submit_time, minutes",
    "num_nodes": "nodes allocated to the job (oda:numNodes)",
    "duration_h": "job duration end_time - start_time, hours",
    "cpu_hours": "allocated CPUs x hours of the job inside the window/bucket",
    "gpu_hours": "allocated GPUs x hours of the job inside the window/bucket",
    "device": "device id of the equipment (oda:deviceId)",
    "panel": "panel id of the equipment (oda:panelId)",
    "job_state": "the job's final Slurm state (oda:jobState)",
    "partition": "Slurm partition of the job (oda:partition)",
    "qos": "Slurm quality of service of the job (oda:qos)",
    "num_cpus": "CPUs allocated to the job (oda:numCPUs)",
    "num_gpus": "GPUs allocated to the job (oda:numGPUs)",
}
_FN = {
    "avg": "mean", "min": "minimum", "max": "maximum", "sum": "sum", "count": "count",
    "std": "sample standard deviation", "cv": "coefficient of variation (std / mean)",
    "median": "median", "p90": "90th percentile", "p95": "95th percentile",
    "p99": "99th percentile", "hours": "hours covered by",
}  # fmt: skip


def _units(infos: list[MetricInfo]) -> str:
    units = sorted({i.unit for i in infos if i.unit})
    return f" ({', '.join(units)})" if units else ""


def column_meaning(col: str, plan: QueryPlan, infos: list[MetricInfo]) -> str:
    if col == "value":
        what = "mean per bucket of " if plan.granularity != "raw" else ""
        return f"{what}reading value{_units(infos)}"
    if col in _COLUMN_MEANING:
        return _COLUMN_MEANING[col]
    if plan.count_groups:
        noun = "racks" if col == "count_rack" else "nodes"
        return f"number of {noun} whose readings pass the aggregate filter"
    agg = next(a for a in plan.aggregations if a.column == col)
    of = {"value": f"reading values{_units(infos)}", "job": "distinct jobs",
          "node": "distinct nodes", "user": "distinct users"}.get(agg.of, agg.of)  # fmt: skip
    if agg.fn == "count":
        return f"number of {of}"
    return f"{_FN[agg.fn]} of {of}"


def explain(plan: QueryPlan, infos: list[MetricInfo]) -> str:
    """One line in words: what the query retrieves, for whom, when, and how it is shaped."""
    who = []
    for sel in plan.entities:
        ids = "all" if sel.all else ", ".join(str(i) for i in sel.ids[:6])
        more = " …" if len(sel.ids) > 6 else ""
        idx = f" index {', '.join(map(str, sel.index))}" if sel.index else ""
        who.append(f"{sel.kind} {ids}{more}{idx}")
    if plan.target == "readings":
        names = ", ".join(f"{i.plugin}/{i.name}" for i in infos[:8])
        what = f"readings of {names}{' …' if len(infos) > 8 else ''}"
    else:
        what = "jobs" if plan.target == "jobs" else "compute nodes"
    when = ""
    if plan.window is not None:
        fmt = "%Y-%m-%d %H:%M"
        when = f", {plan.window.start:{fmt}} to {plan.window.end:{fmt}} UTC"
    if plan.job_window:
        when += ", over each job's own run time"
    shape = {"readings": "one row per reading", "jobs": "one row per job"}.get(
        plan.target, "one row per node"
    )
    if plan.granularity != "raw":
        shape = f"mean per {plan.granularity}"
    if plan.job_fields:
        shape += f" with its {', '.join(plan.job_fields)}"
    if plan.aggregations:
        aggs = ", ".join(a.column for a in plan.aggregations)
        by = f" by {', '.join(plan.group_by)}" if plan.group_by else ""
        shape = f"{aggs}{by}"
        kept = [f"{f.fn} {f.op} {f.value:g}" for f in plan.filters if f.about == "aggregate"]
        if kept:
            shape += f", only groups with {' and '.join(kept)}"
        if plan.count_groups:
            shape += f"; those {plan.group_by[0]}s counted (post step)"
    if plan.limit is not None:
        shape += f", top {plan.limit}"
    return f"{what[0].upper()}{what[1:]} for {'; '.join(who)}{when}: {shape}."
