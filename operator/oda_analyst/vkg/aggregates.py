"""A VKG of aggregate observations: what a month-scale request materialises.

``build_aggregate_vkg`` scans the lake with the aggregation pushed down (``vkg.pushdown``) and
writes each aggregate as an ``oda:AggregateObservation`` (docs/vkg.md) about its entity — rack,
node, GPU or user, with the static triples a query walks from it (rack -> node -> GPU, the metric)
— then loads the graph like ``build_vkg``. Provenance: the report names the partitions read.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Collection
from dataclasses import dataclass, field

import polars as pl

from oda_analyst.errors import OdaError, VKGBuildError
from oda_analyst.lake.reader import Lake
from oda_analyst.ontology import namespaces as ns
from oda_analyst.ontology.catalogue import Catalogue, load_catalogue
from oda_analyst.vkg.base import StaticGraph
from oda_analyst.vkg.engines import ScanEngine
from oda_analyst.vkg.ntload import TrustedNTriples
from oda_analyst.vkg.ntriples import (
    RDF_TYPE,
    RDFS_LABEL,
    XSD_DOUBLE,
    XSD_INTEGER,
    e_datetime_lit,
    e_double_lit,
    e_triple,
    frame_to_ntriples,
    int_lit,
    iri,
    lines_to_ntriples,
    oda,
    string_lit,
)
from oda_analyst.vkg.protocol import GraphStore
from oda_analyst.vkg.pushdown import AggregateFrame, AggregateRequest, Progress, scan_aggregates

__all__ = ["AggregateReport", "aggregate_ntriples", "build_aggregate_vkg"]


@dataclass
class AggregateReport:
    """Figures of one aggregate build (what the benchmark prints)."""

    graph: str
    rows_scanned: int = 0
    aggregates: int = 0
    triples: int = 0
    bytes: int = 0
    seconds: float = 0.0
    partitions: list[str] = field(default_factory=list)
    stages: dict[str, float] = field(default_factory=dict)
    frame: AggregateFrame | None = None  # the aggregates as rows (what the triples say)


def _entity_terms(frame: AggregateFrame, static: StaticGraph) -> pl.DataFrame:
    """One row per distinct entity of the frame: its key columns and its IRI term."""
    level = frame.request.level
    keys = {"rack": ["rack"], "node": ["node"], "gpu": ["node", "gpu"], "user": ["user"]}[level]
    distinct = frame.data.select(keys).unique().sort(keys)
    terms: list[str] = []
    for row in distinct.iter_rows():
        if level == "rack":
            terms.append(static.rack(int(row[0])))
        elif level == "node":
            terms.append(static.node(int(row[0])))
        elif level == "gpu":
            static.node(int(row[0]))
            terms.append(static.part("GPU", int(row[0]), int(row[1])))
        else:
            user = iri(ns.user_iri(int(row[0])))
            static.lines.append(f"{user} {RDF_TYPE} {oda('User')} .")
            static.lines.append(f"{user} {RDFS_LABEL} {string_lit(f'user {row[0]}')} .")
            static.lines.append(f"{user} {oda('userId')} {int_lit(int(row[0]))} .")
            terms.append(user)
    return distinct.with_columns(pl.Series("__entity", terms, dtype=pl.String))


def aggregate_ntriples(
    frame: AggregateFrame, *, catalogue: Catalogue | None = None
) -> tuple[bytes, int]:
    """(N-Triples document, triple count) of the aggregates and the static part they need."""
    req = frame.request
    cat = catalogue or load_catalogue()
    static = StaticGraph()
    entities = _entity_terms(frame, static)
    keys = [c for c in entities.columns if c != "__entity"]
    sources: dict[str, str] = {}
    for _, metric in req.metrics:
        sources[metric] = static.metric(cat.get(metric))
    prefix = ns.instance_iri("agg", req.key()) + "/"
    data = frame.data.with_row_index("__i").join(entities, on=keys, how="left")
    subject = pl.concat_str([pl.lit("<" + prefix), pl.col("__i").cast(pl.String), pl.lit(">")])
    entity_property = oda("aggregateOfUser") if req.level == "user" else oda("aggregateOf")
    columns = [
        e_triple(subject, RDF_TYPE, pl.lit(oda("AggregateObservation"))).alias("a"),
        e_triple(subject, entity_property, pl.col("__entity")).alias("b"),
        e_triple(subject, oda("statistic"), pl.lit(string_lit(req.statistic))).alias("c"),
        e_triple(subject, oda("windowStart"), e_datetime_lit(pl.col("window_start"))).alias("d"),
        e_triple(subject, oda("windowEnd"), e_datetime_lit(pl.col("window_end"))).alias("e"),
        e_triple(subject, oda("aggregateValue"), e_double_lit(pl.col("value"))).alias("f"),
        e_triple(
            subject,
            oda("sampleCount"),
            pl.concat_str([pl.lit('"'), pl.col("n").cast(pl.String), pl.lit(f'"^^{XSD_INTEGER}')]),
        ).alias("g"),
    ]
    if req.threshold is not None:
        threshold = f'"{float(req.threshold)!r}"^^{XSD_DOUBLE}'
        columns.append(e_triple(subject, oda("threshold"), pl.lit(threshold)).alias("h"))
    if req.quantities:
        source = data.select(
            e_triple(subject, oda("sourceQuantity"), pl.format('"{}"', pl.col("source")))
        )
    else:
        # A GPU's aggregate has its own metric; a pooled one (a node's several metrics) names
        # each of them.
        term = pl.col("source").replace_strict(sources, return_dtype=pl.String)
        source = (
            data.select("__i", pl.col("source").str.split(","))
            .explode("source")
            .select(e_triple(subject, oda("sourceMetric"), term))
        )
    body = data.select(columns)
    lines = pl.concat(
        [body.select(pl.col(c).alias("t")) for c in body.columns]
        + [source.select(pl.all().alias("t"))],
        how="vertical",
    ).drop_nulls()
    document = lines_to_ntriples(static.lines) + frame_to_ntriples(lines)
    return document, len(static.lines) + lines.height


def build_aggregate_vkg(
    req: AggregateRequest,
    lake: Lake,
    store: GraphStore,
    graph: str,
    *,
    catalogue: Catalogue | None = None,
    progress: Progress | None = None,
    engine: ScanEngine | None = None,
    held: Collection[str] | None = None,
) -> AggregateReport:
    """Scan with the aggregation pushed down, write the aggregates as the named graph ``graph``
    (``held``: the partitions the lake holds, see ``scan_aggregates``)."""
    started = time.perf_counter()
    report = AggregateReport(graph=graph)
    try:
        frame = scan_aggregates(
            req, lake, catalogue=catalogue, progress=progress, engine=engine, held=held
        )
        report.stages["scan"] = time.perf_counter() - started
        t0 = time.perf_counter()
        document, count = aggregate_ntriples(frame, catalogue=catalogue)
        report.stages["serialise"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        with contextlib.suppress(Exception):
            store.drop_graph(graph)
        store.load_ntriples(graph, TrustedNTriples([document]))
        report.stages["load"] = time.perf_counter() - t0
    except BaseException as exc:
        with contextlib.suppress(Exception):
            store.drop_graph(graph)
        if isinstance(exc, VKGBuildError):
            raise
        if isinstance(exc, OdaError):
            raise VKGBuildError(
                f"building graph {graph} failed: {exc.message}", hint=exc.hint
            ) from exc
        raise
    report.rows_scanned = frame.rows_scanned
    report.aggregates = frame.data.height
    report.triples = count
    report.bytes = len(document)
    report.partitions = frame.partitions
    report.frame = frame
    report.seconds = time.perf_counter() - started
    return report
