"""SPARQL over a VKG of aggregate observations (``vkg.aggregates``), one SELECT per request.

The query reads the request's graph only (``FROM <graph>``) and walks the same ontology paths as
reading queries do: aggregate -> its entity (``oda:aggregateOf`` / ``oda:aggregateOfUser``) ->
the entity's id (and a GPU's node through ``oda:hasGPU``). Without ``combine`` it returns one row
per aggregate; with it, the aggregates of each node (GPUs of a node) or rack are combined with
MAX/MIN/SUM. Every query is ordered (the value first when ``order_desc`` is given, then the keys)
and passes the validator like the compiler's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from oda_analyst.ontology.namespaces import sparql_prefixes
from oda_analyst.vkg.pushdown import AggregateRequest

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
