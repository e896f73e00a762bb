"""SPARQL over a VKG of aggregate observations (``vkg.aggregates``), one SELECT per request.

The query reads the request's graph only (``FROM <graph>``) and walks the same ontology paths as
reading queries do: aggregate -> its entity (``oda:aggregateOf`` / ``oda:aggregateOfUser``) ->
the entity's id (and a GPU's node through ``oda:hasGPU``). Without ``combine`` it returns one row
per aggregate; with it, the aggregates of each node (GPUs of a node) or rack are combined with
MAX/MIN/SUM. Every query is ordered (the value first when ``order_desc`` is given, then the keys)
and passes the validator like the compiler's.

``compile_pushed_plan`` answers a typed plan that ``aggregate_from_plan`` pushed down: the same
columns as the plan's reading-level query (``output_columns``), in the same order, sorted the
same way, so the two paths give the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from oda_analyst.ontology.catalogue import Catalogue, load_catalogue
from oda_analyst.ontology.namespaces import sparql_prefixes
from oda_analyst.ontology.plan import QueryPlan, output_columns
from oda_analyst.sparql.compiler import Column, CompiledQuery
from oda_analyst.sparql.jobs import OPS
from oda_analyst.sparql.select import column_meaning, explain
from oda_analyst.vkg.pushdown import AggregateRequest, PlanPushdown

Combine = Literal["max", "min", "sum"]


@dataclass(frozen=True)
class AggregateQuery:
    sparql: str
    columns: tuple[str, ...]


def _entity_lines(req: AggregateRequest, per_node: bool) -> tuple[list[str], list[str]]:
    """(patterns, key variables) from ``?agg`` to the ids the rows are keyed by."""
    if req.level == "user":
        return ["?agg oda:aggregateOfUser ?user .", "?user oda:userId ?user_id ."], ["?user_id"]
    if req.level == "rack":
        return ["?agg oda:aggregateOf ?rack .", "?rack oda:rackId ?rack_id ."], ["?rack_id"]
    if req.level == "node":
        return ["?agg oda:aggregateOf ?node .", "?node oda:nodeId ?node_id ."], ["?node_id"]
    lines = [
        "?agg oda:aggregateOf ?gpu .",
        "?node oda:hasGPU ?gpu .",
        "?node oda:nodeId ?node_id .",
    ]
    if per_node:
        return lines, ["?node_id"]
    return [*lines, "?gpu oda:gpuIndex ?gpu_index ."], ["?node_id", "?gpu_index"]


def compile_aggregates(
    req: AggregateRequest,
    graph: str,
    *,
    combine: Combine | None = None,
    order_desc: bool = False,
    limit: int | None = None,
) -> AggregateQuery:
    """The SELECT answering ``req`` over its aggregate graph ``graph``.

    Columns: the entity ids, ``window_start`` (day buckets only), ``source`` (job quantities
    only) and ``value``. ``combine`` pools a GPU-level request per node (the node's hottest GPU).
    """
    if combine is not None and req.level != "gpu":
        raise ValueError("combine pools the GPUs of a node: it needs a GPU-level request")
    patterns, keys = _entity_lines(req, per_node=combine is not None)
    patterns = [
        "?agg a oda:AggregateObservation .",
        f'?agg oda:statistic "{req.statistic}" .',
        "?agg oda:aggregateValue ?v .",
        *patterns,
    ]
    if req.bucket == "day":
        patterns.append("?agg oda:windowStart ?window_start .")
        keys.append("?window_start")
    if req.quantities:
        patterns.append("?agg oda:sourceQuantity ?source .")
        keys.append("?source")
    value = f"({combine.upper()}(?v) AS ?value)" if combine else "(?v AS ?value)"
    order = (["DESC(?value)"] if order_desc else []) + keys
    lines = [
        sparql_prefixes(),
        f"SELECT {' '.join(keys)} {value}",
        f"FROM <{graph}>",
        "WHERE {",
        *(f"  {p}" for p in patterns),
        "}",
    ]
    if combine:
        lines.append(f"GROUP BY {' '.join(keys)}")
    lines.append(f"ORDER BY {' '.join(order)}")
    if limit is not None:
        lines.append(f"LIMIT {int(limit)}")
    columns = (*(k.lstrip("?") for k in keys), "value")
    return AggregateQuery("\n".join(lines) + "\n", columns)


_DAY = "BIND(STRDT(SUBSTR(STR(?window_start), 1, 10), xsd:date) AS ?day)"  # as bucket_expr


def compile_pushed_plan(
    plan: QueryPlan, pushed: PlanPushdown, graph: str, *, catalogue: Catalogue | None = None
) -> CompiledQuery:
    """The SELECT of ``plan`` over the aggregate graph ``graph`` of ``pushed.request``.

    Rows equal those of the plan's reading-level query (``compile_plan``): its columns (a day
    is the xsd:date of the bucket), ordered by its order keys then its group columns, and, for
    hours above a level grouped by entity or day, only the groups with hours above it (the
    reading query's value filter leaves no readings, hence no row, for the others).
    """
    req = pushed.request
    if req.quantities or len(plan.aggregations) != 1:
        raise ValueError("compile_pushed_plan answers one readings aggregate")
    agg = plan.aggregations[0]
    combine = pushed.combine
    patterns, group = _entity_lines(req, per_node=combine is not None)
    patterns = [
        "?agg a oda:AggregateObservation .",
        f'?agg oda:statistic "{req.statistic}" .',
        "?agg oda:aggregateValue ?v .",
        *patterns,
    ]
    if req.bucket == "day":
        patterns += ["?agg oda:windowStart ?window_start .", _DAY]
        group.append("?day")
    columns = output_columns(plan)
    keys = [f"?{c}" for c in columns if c != agg.column]
    value = f"({combine.upper()}(?v) AS ?{agg.column})" if combine else f"(?v AS ?{agg.column})"
    zero_rows = req.statistic != "hours_above" or not plan.group_by
    if not zero_rows and combine is None:
        patterns.append("FILTER(?v > 0)")
    # aggregate filters on the pushed statistic: on each aggregate, or on the combined one
    kept = [(OPS[f.op], f.value) for f in plan.filters if f.about == "aggregate"]
    if combine is None:
        patterns += [f"FILTER(?v {op} {value!r})" for op, value in kept]
    named = {k.key for k in plan.order_by}
    order = [f"DESC(?{k.key})" if k.desc else f"?{k.key}" for k in plan.order_by]
    order += [k for k in keys if k[1:] not in named] or ([] if order else [f"?{agg.column}"])
    cat = catalogue or type(plan).bound_catalogue or load_catalogue()
    infos = [cat.get(m.metric) for m in plan.metrics]
    explanation = f"{explain(plan, infos).rstrip('.')}, from aggregates pushed down into the scan."
    lines = [
        f"# {explanation}",
        sparql_prefixes(),
        f"SELECT {' '.join([*keys, value])}",
        f"FROM <{graph}>",
        "WHERE {",
        *(f"  {p}" for p in patterns),
        "}",
    ]
    if combine:
        lines.append(f"GROUP BY {' '.join(group)}")
        having = [f"{combine.upper()}(?v) {op} {value!r}" for op, value in kept]
        if not zero_rows:
            having.append("SUM(?v) > 0")
        if having:
            lines.append(f"HAVING ({' && '.join(having)})")
    lines.append(f"ORDER BY {' '.join(order)}")
    if pushed.limit is not None:
        lines.append(f"LIMIT {int(pushed.limit)}")
    return CompiledQuery(
        sparql="\n".join(lines) + "\n",
        graph=graph,
        columns=tuple(Column(c, column_meaning(c, plan, infos)) for c in columns),
        sparql_columns=tuple(columns),
        post=(),
        explanation=explanation,
    )
