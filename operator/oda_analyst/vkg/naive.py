"""The naive VKG builders: the baselines of ``bench/vkg_build.py`` and oracles in the tests.

``build_vkg_naive`` is the row-by-row builder the VKG literature compares against: the request's
rows are read from the lake (the same predicates pushed into the Parquet reader), then one Python
loop visits every row, keeps it only inside its node's job window (when the request has job
windows), drops repeated polls, and either adds the reading's three triples to an rdflib
``Graph`` or, at minute/hour granularity, adds the value to its bucket's running sum, whose means
become triples after the loop. The graph is serialised to N-Triples and loaded. Same static part,
IRIs, literals and bucket rules as ``build_vkg`` (docs/vkg.md); never used by requests.

``build_vkg_shared_scan`` is the earlier, gentler baseline: our own vectorised scan (job-window
location and bucket means included), then the same rdflib loop over the rows it returns.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import polars as pl
from rdflib import XSD, Graph, Literal, URIRef

from oda_analyst.lake.reader import Lake
from oda_analyst.ontology import namespaces as ns
from oda_analyst.ontology.catalogue import Catalogue, MetricInfo, load_catalogue
from oda_analyst.vkg import jobgraph
from oda_analyst.vkg.base import NODE_PLUGINS, StaticGraph, sensor_key
from oda_analyst.vkg.builder import BuildReport, _static_selection
from oda_analyst.vkg.ntriples import lines_to_ntriples
from oda_analyst.vkg.protocol import GraphStore
from oda_analyst.vkg.request import GroundedRequest
from oda_analyst.vkg.scan import (
    _groups,
    _key_columns,
    _node_filter,
    _tag_filter,
    _window,
    scan_readings,
)

FROM_SENSOR = URIRef(ns.oda("fromSensor"))
TIMESTAMP = URIRef(ns.oda("timestamp"))
VALUE = URIRef(ns.oda("value"))
TEXT_VALUE = URIRef(ns.oda("textValue"))
READING_COUNT = URIRef(ns.oda("readingCount"))
_BUCKET_MS = {"minute": 60_000, "hour": 3_600_000}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def _lexical(value: float | int, dtype: str) -> str:
    # The same lexical forms as the vectorised path: float32 by its shortest repr.
    if dtype == "float32":
        return str(np.float32(value))
    if dtype == "float64":
        return repr(float(value))
    return str(int(value))


def _stamp(epoch_ms: int) -> str:
    moment = datetime.fromtimestamp(epoch_ms // 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


def _add_reading(
    rdf: Graph,
    sensor: str,
    epoch_ms: int,
    value: Any,
    info: MetricInfo,
    text: bool,
    count: int | None = None,
) -> None:
    reading = URIRef(ns.reading_iri(sensor, epoch_ms))
    if count is not None:
        rdf.add((reading, READING_COUNT, Literal(str(count), datatype=XSD.integer)))
    rdf.add((reading, FROM_SENSOR, URIRef(sensor)))
    rdf.add((reading, TIMESTAMP, Literal(_stamp(epoch_ms), datatype=XSD.dateTime)))
    if text:
        rdf.add((reading, TEXT_VALUE, Literal(str(value))))
    else:
        rdf.add((reading, VALUE, Literal(_lexical(value, info.dtype), datatype=XSD.double)))


@dataclass
class NaiveReport:
    """Figures of one row-by-row build: stages and how far the loop went (``row_limit``)."""

    graph: str
    rows_read: int = 0  # rows the lake read returned (the whole request)
    rows_looped: int = 0  # rows the Python loop visited (all of them without a limit)
    readings: int = 0  # readings written (raw rows kept, or bucket means)
    triples: int = 0
    seconds: float = 0.0
    stages: dict[str, float] = field(default_factory=dict)


def _windows_by_node(request: GroundedRequest) -> dict[str, list[tuple[int, int]]]:
    """node -> (start ms, end ms) of its job windows, in window order (earliest first)."""
    out: dict[str, list[tuple[int, int]]] = {}
    for w in request.job_windows:
        span = ((w.start - _EPOCH) // _MS, (w.end - _EPOCH) // _MS)
        for n in w.nodes:
            out.setdefault(str(n), []).append(span)
    for spans in out.values():
        spans.sort()
    return out


def build_vkg_naive(
    request: GroundedRequest,
    lake: Lake,
    store: GraphStore,
    graph: str,
    *,
    catalogue: Catalogue | None = None,
    row_limit: int | None = None,
) -> NaiveReport:
    """Materialise ``request`` row by row; the same graph as ``build_vkg``.

    ``row_limit`` stops the loop after that many lake rows (the benchmark extrapolates large
    requests); the lake read always covers the whole request.
    """
    started = time.perf_counter()
    cat = catalogue or load_catalogue()
    report = NaiveReport(graph=graph)
    reads: list[tuple[str, bool, list[MetricInfo], tuple[str, ...], pl.DataFrame]] = []
    for plugin, text, infos in _groups(request, cat):
        names = [i.name for i in infos]
        nodes = _node_filter(request, plugin, ", ".join(names)) if plugin in NODE_PLUGINS else None
        start, end = _window(request)
        rows = lake.scan(
            plugin, names, start=start, end=end, nodes=nodes, tags=_tag_filter(request, plugin)
        ).collect()
        reads.append((plugin, text, infos, _key_columns(plugin, names), rows))
        report.rows_read += rows.height
    report.stages["read"] = time.perf_counter() - started

    t0 = time.perf_counter()
    static = StaticGraph()
    _static_selection(request, cat, static)
    rdf = Graph()
    windows = _windows_by_node(request) if request.job_windows else None
    size = _BUCKET_MS.get(request.granularity)
    request_start = None if request.start is None else (request.start - _EPOCH) // _MS
    budget = row_limit if row_limit is not None else report.rows_read
    # bucket means: (sensor, bucket start ms, window start ms) -> [sum, count, metric info]
    buckets: dict[tuple[str, int, int], list[Any]] = {}
    for plugin, text, infos, keys, rows in reads:
        by_name = {i.name: i for i in infos}
        seen: set[tuple[str, int, int]] = set()
        for row in rows.iter_rows(named=True):
            if report.rows_looped >= budget:
                break
            report.rows_looped += 1
            info = by_name[row["metric"]]
            epoch_ms = (row["timestamp"] - _EPOCH) // _MS
            window_start = request_start
            if windows is not None and plugin in NODE_PLUGINS:
                window_start = None
                for ws, we in windows.get(row["node"], ()):
                    if ws <= epoch_ms < we:
                        window_start = ws
                        break
                if window_start is None:
                    continue
            tags = {c: row[c] for c in keys}
            sensor = static.sensor(info, sensor_key(info, tags))[1:-1]
            # A repeated poll (of one window, when buckets are cut by windows): the first one read.
            poll = (sensor, epoch_ms, (window_start or 0) if size is not None else 0)
            if poll in seen:
                continue
            seen.add(poll)
            if size is None:
                _add_reading(rdf, sensor, epoch_ms, row["value"], info, text)
                report.readings += 1
                continue
            bucket = epoch_ms // size * size
            if window_start is not None:
                bucket = max(bucket, window_start)
            slot = (sensor, bucket, window_start or 0)
            acc = buckets.get(slot)
            if acc is None:
                buckets[slot] = [float(row["value"]), 1, info]
            else:
                acc[0] += float(row["value"])
                acc[1] += 1
    # One mean per sensor and bucket start: the one over more readings, then the earlier window.
    best: dict[tuple[str, int], tuple[int, int, float, MetricInfo]] = {}
    for (sensor, bucket, window_start), (total, count, info) in buckets.items():
        known = best.get((sensor, bucket))
        if known is None or (count, -window_start) > (known[0], -known[1]):
            best[(sensor, bucket)] = (count, window_start, total / count, info)
    for (sensor, bucket), (count, _, mean, info) in best.items():
        _add_reading(rdf, sensor, bucket, mean, info, False, count)
        report.readings += 1
    report.stages["loop"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    jobs = jobgraph.job_triples(request, lake, static)
    job_data = b"".join(data for data, _ in jobs.chunks(jobs.jobs.height or 1))
    rdf.parse(data=lines_to_ntriples(static.lines) + job_data, format="nt")
    data = rdf.serialize(format="nt", encoding="utf-8")
    store.drop_graph(graph)
    report.triples = store.load_ntriples(graph, data)
    report.stages["emit"] = time.perf_counter() - t0
    report.seconds = time.perf_counter() - started
    return report


def build_vkg_shared_scan(
    request: GroundedRequest,
    lake: Lake,
    store: GraphStore,
    graph: str,
    *,
    catalogue: Catalogue | None = None,
    row_limit: int | None = None,
) -> BuildReport:
    """Our vectorised scan, then readings row by row through ``DataFrame.iter_rows`` into an
    rdflib ``Graph``; same graph as ``build_vkg``. ``row_limit`` stops after that many readings.
    """
    started = time.perf_counter()
    cat = catalogue or load_catalogue()
    report = BuildReport(graph=graph)
    frames = scan_readings(request, lake, cat)
    report.add_stage("scan", time.perf_counter() - started)
    report.rows_scanned = sum(f.rows_scanned for f in frames)

    t0 = time.perf_counter()
    static = StaticGraph()
    _static_selection(request, cat, static)
    rdf = Graph()
    budget = row_limit if row_limit is not None else sum(f.data.height for f in frames)
    for frame in frames:
        rows = frame.data.head(max(budget - report.readings, 0))
        for row in rows.iter_rows(named=True):
            info = frame.infos[row["metric"]]
            tags = {c: row[c] for c in frame.key_columns}
            sensor = static.sensor(info, sensor_key(info, tags))[1:-1]
            epoch_ms = int(row["timestamp"].timestamp() * 1000)
            _add_reading(rdf, sensor, epoch_ms, row["value"], info, frame.text, row.get("__n"))
            report.readings += 1
    jobs = jobgraph.job_triples(request, lake, static)
    report.jobs = jobs.jobs.height
    job_data = b"".join(data for data, _ in jobs.chunks(jobs.jobs.height or 1))
    rdf.parse(data=lines_to_ntriples(static.lines) + job_data, format="nt")
    data = rdf.serialize(format="nt", encoding="utf-8")
    report.add_stage("serialise", time.perf_counter() - t0)

    t0 = time.perf_counter()
    store.drop_graph(graph)
    report.triples = store.load_ntriples(graph, data)
    report.bytes = len(data)
    report.add_stage("load", time.perf_counter() - t0)
    report.seconds = time.perf_counter() - started
    return report
