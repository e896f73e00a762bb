"""The naive VKG builder: one Python iteration and a few rdflib terms per row.

This is the straightforward way the VKG-chatbot preprint started from, kept as the baseline of
``bench/vkg_build.py`` and as an oracle in the tests: the same scan, the same static part, the
same IRIs and literals, but readings go row by row through ``DataFrame.iter_rows`` into an
rdflib ``Graph``, which is then serialised to N-Triples and loaded. Never used by requests.
"""

from __future__ import annotations

import time

import numpy as np
from rdflib import XSD, Graph, Literal, URIRef

from oda_analyst.lake.reader import Lake
from oda_analyst.ontology import namespaces as ns
from oda_analyst.ontology.catalogue import Catalogue, load_catalogue
from oda_analyst.vkg import jobgraph
from oda_analyst.vkg.base import StaticGraph, sensor_key
from oda_analyst.vkg.builder import BuildReport, _static_selection
from oda_analyst.vkg.ntriples import lines_to_ntriples
from oda_analyst.vkg.scan import scan_readings
from oda_analyst.vkg.store import GraphStore

FROM_SENSOR = URIRef(ns.oda("fromSensor"))
TIMESTAMP = URIRef(ns.oda("timestamp"))
VALUE = URIRef(ns.oda("value"))
TEXT_VALUE = URIRef(ns.oda("textValue"))


def _lexical(value: float | int, dtype: str) -> str:
    # The same lexical forms as the vectorised path: float32 by its shortest repr.
    if dtype == "float32":
        return str(np.float32(value))
    if dtype == "float64":
        return repr(float(value))
    return str(value)


def build_vkg_naive(
    request: object,
    lake: Lake,
    store: GraphStore,
    graph: str,
    *,
    catalogue: Catalogue | None = None,
    row_limit: int | None = None,
) -> BuildReport:
    """Materialise ``request`` (a GroundedRequest) row by row; same graph as ``build_vkg``.

    ``row_limit`` stops after that many readings (the benchmark extrapolates large requests).
    """
    from oda_analyst.vkg.request import GroundedRequest

    assert isinstance(request, GroundedRequest)
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
            reading = URIRef(ns.reading_iri(sensor, epoch_ms))
            stamp = row["timestamp"].strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"
            rdf.add((reading, FROM_SENSOR, URIRef(sensor)))
            rdf.add((reading, TIMESTAMP, Literal(stamp, datatype=XSD.dateTime)))
            if frame.text:
                rdf.add((reading, TEXT_VALUE, Literal(str(row["value"]))))
            else:
                lexical = _lexical(row["value"], info.dtype)
                rdf.add((reading, VALUE, Literal(lexical, datatype=XSD.double)))
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
