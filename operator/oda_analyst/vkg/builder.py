"""Build one per-query VKG: lake scan with push-down -> N-Triples -> a named graph.

Stages (each failure aborts the request with a VKGBuildError naming the stage and what it was
reading, and the half-built graph is dropped — the paper's deterministic, non-recoverable build):

1. **static**: the entities the request names, with their containers, and the metrics; then the
   jobs (read from the job table, serialised by Polars) with their nodes and users.
2. **scan**: one ``Lake.scan`` per plugin (node, tag and time predicates pushed into Parquet);
   per-job windows are located per node (a binary search of packed keys; a join when windows of
   a node overlap); minute/hour buckets are means per sensor. Then the sensors found in the rows
   (a small distinct table, IRIs built in Python once per sensor, never per row).
3. **serialise + load**: readings become three triple columns per row with Polars string
   expressions, chunk by chunk.

All of it is one lazy stream of chunks. Past the first store segment (2 MiB) a background thread
produces it while the store loads the previous chunks (Polars and pyoxigraph both release the
GIL): the store ingests the entities and jobs while the lake is scanned, and chunk k of readings
while chunk k+1 is serialised. A graph of one segment (most questions') is produced and loaded
in the caller's thread: on a busy machine starting threads costs more than its whole load.

Static lines (IRIs, each node's and sensor's block) and each sensor's reading-IRI prefix are
formatted once per process; a chunk's dateTime literals once per distinct instant.

Reading IRIs are ``namespaces.reading_iri(sensor, epoch_ms)``: the per-sensor prefix is computed
once and the epoch milliseconds appended per row.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache

import polars as pl

from oda_analyst.errors import OdaError, VKGBuildError
from oda_analyst.lake.reader import Lake
from oda_analyst.lake.topology import N_NODES
from oda_analyst.ontology import namespaces as ns
from oda_analyst.ontology.catalogue import Catalogue, MetricInfo, load_catalogue
from oda_analyst.vkg import jobgraph
from oda_analyst.vkg.base import NODE_PLUGINS, StaticGraph, sensor_key
from oda_analyst.vkg.ntload import SEGMENT_BYTES, TrustedNTriples
from oda_analyst.vkg.ntriples import (
    count_triples,
    datetime_lits_ms,
    e_datetime_lit_ms,
    e_fast_double_lit,
    e_int_lit,
    e_string_lit,
    e_triple,
    frame_to_ntriples,
    has_special_floats,
    lines_to_ntriples,
    oda,
)
from oda_analyst.vkg.protocol import GraphStore
from oda_analyst.vkg.request import GroundedRequest
from oda_analyst.vkg.scan import ReadingFrame, scan_readings

# Rows per serialised chunk: small enough that the store's chunk reader stays cheap and the
# store loads one chunk while the next is serialised; each chunk is ~2.7 MiB of readings.
DEFAULT_CHUNK_ROWS = 5_000
# From this many rows a chunk's dateTime literals are formatted once per distinct instant; below
# it the extra Polars calls of the lookup cost more than formatting every row.
_LOOKUP_ROWS = 2_000


@dataclass
class BuildReport:
    """Figures of one build (what the benchmark prints and the cache records)."""

    graph: str
    rows_scanned: int = 0
    readings: int = 0
    sensors: int = 0
    jobs: int = 0
    triples: int = 0
    bytes: int = 0
    seconds: float = 0.0
    stages: dict[str, float] = field(default_factory=dict)

    def add_stage(self, name: str, seconds: float) -> None:
        self.stages[name] = self.stages.get(name, 0.0) + seconds


@dataclass
class Serialisation:
    """A VKG as N-Triples chunks, produced lazily (``chunks``) with running figures."""

    report: BuildReport
    chunks: Iterator[bytes]


def serialise_vkg(
    request: GroundedRequest,
    lake: Lake,
    *,
    catalogue: Catalogue | None = None,
    graph: str = "",
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> Serialisation:
    """Everything lazily, scan included; the figures in ``report`` are complete once ``chunks``
    ends. The entities and jobs come first and the scan after them, so a store loading the
    chunks as they come ingests those triples while the lake is read."""
    cat = catalogue or load_catalogue()
    report = BuildReport(graph=graph)
    return Serialisation(report, _chunks(request, lake, cat, report, chunk_rows))


def _chunks(
    request: GroundedRequest,
    lake: Lake,
    cat: Catalogue,
    report: BuildReport,
    chunk_rows: int,
) -> Iterator[bytes]:
    t0 = time.perf_counter()
    static = StaticGraph()
    _static_selection(request, cat, static)
    report.add_stage("static", time.perf_counter() - t0)
    written = len(static.lines)
    yield from _static_lines(static, 0, report)

    # The readings scan runs while the job table is read: both are mostly Polars work that
    # releases the GIL, and on small graphs each is a fixed cost the other can hide.
    reads_jobs = bool(request.job_ids() or request.include_jobs)
    scan = _Scan(request, lake, cat) if reads_jobs and request.metrics else None
    t0 = time.perf_counter()
    jobs = jobgraph.job_triples(request, lake, static)
    report.jobs = jobs.jobs.height
    report.rows_scanned += jobs.jobs.height
    report.add_stage("jobs", time.perf_counter() - t0)
    # A job writes 9-18 triples and a reading 3: job chunks of a third of the rows (2-4 MiB, about
    # one store segment) let the store start on the first jobs while the rest are serialised
    # (Q8's 1,800 jobs were one chunk, serialised whole before the first load).
    for job_data, job_triples in jobs.chunks(max(1, chunk_rows // 3)):
        report.triples += job_triples
        report.bytes += len(job_data)
        yield job_data
    # The jobs' nodes and their containers, the workload manager.
    yield from _static_lines(static, written, report)
    written = len(static.lines)

    t0 = time.perf_counter()
    frames = scan.result() if scan is not None else scan_readings(request, lake, cat)
    report.add_stage("scan", time.perf_counter() - t0)
    report.rows_scanned += sum(f.rows_scanned for f in frames)

    t0 = time.perf_counter()
    tables = [_sensor_table(f, static) for f in frames]
    report.sensors = sum(t.height for t in tables)
    report.add_stage("static", time.perf_counter() - t0)
    # The sensors found in the rows, with the entities they observe.
    yield from _static_lines(static, written, report)

    for frame, table in zip(frames, tables, strict=True):
        # One look at the whole column spares every chunk the NaN/infinity spelling rules.
        special = not frame.text and frame.floating and has_special_floats(frame.data["value"])
        for offset in range(0, frame.data.height, chunk_rows):
            t0 = time.perf_counter()
            part = frame.data.slice(offset, chunk_rows)
            triples = _reading_triples(part, table, frame, special=special)
            data = frame_to_ntriples(triples)
            report.readings += part.height
            report.triples += count_triples(triples)
            report.bytes += len(data)
            report.add_stage("serialise", time.perf_counter() - t0)
            yield data


class _Scan:
    """``scan_readings`` in a thread; ``result()`` joins it and re-raises its error."""

    def __init__(self, request: GroundedRequest, lake: Lake, cat: Catalogue) -> None:
        self._frames: list[ReadingFrame] = []
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(request, lake, cat), name="vkg-scan", daemon=True
        )
        self._thread.start()

    def _run(self, request: GroundedRequest, lake: Lake, cat: Catalogue) -> None:
        try:
            self._frames = scan_readings(request, lake, cat)
        except BaseException as exc:  # handed to the builder's thread, which reports it
            self._error = exc

    def result(self) -> list[ReadingFrame]:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._frames


def _static_lines(static: StaticGraph, start: int, report: BuildReport) -> Iterator[bytes]:
    """The static lines from ``start`` on as one N-Triples chunk (none if there are none),
    counted in the report."""
    lines = static.lines[start:]
    if lines:
        data = lines_to_ntriples(lines)
        report.triples += len(lines)
        report.bytes += len(data)
        yield data


def _static_selection(request: GroundedRequest, cat: Catalogue, static: StaticGraph) -> None:
    """Entities the request names, even those without readings in the window."""
    nodes = request.node_selection()
    for node in range(N_NODES) if nodes is None else nodes:
        static.node(node)
    for rack in request.racks:
        static.rack(rack)
    for node, index in request.gpus:
        static.part("GPU", node, index)
    for device in request.devices_of("crac"):
        static.crac(device)
    for panel in request.devices_of("plc"):
        static.plc(panel)
    for key in request.devices_of("panel"):
        panel, _, device = key.partition("/")
        static.panel(panel, device)
    for plugin, metric in request.metrics:
        info = cat.get(metric)
        static.metric(info)
        # Sensors of the selected nodes exist even when a window holds no reading of them.
        if info.plugin in ("ipmi", "ganglia") and not request.job_windows:
            for node in range(N_NODES) if nodes is None else nodes:
                static.sensor(info, (str(node),))
        elif plugin == "weather":
            static.sensor(info, (ns.DEFAULT_WEATHER,))


def _sensor_table(frame: ReadingFrame, static: StaticGraph) -> pl.DataFrame:
    """One row per distinct series: its key columns, sensor term and reading-IRI prefix."""
    keys = frame.data.select(["metric", *frame.key_columns]).unique(maintain_order=True)
    sensors: list[str] = []
    prefixes: list[str] = []
    for row in keys.iter_rows(named=True):
        info: MetricInfo = frame.infos[row["metric"]]
        tags = {c: row[c] for c in frame.key_columns}
        if info.plugin in NODE_PLUGINS and tags.get("node") is None:
            raise VKGBuildError(
                f"a {info.plugin} row of {info.name} has no node tag",
                hint="the partition is not in the M100 layout; check the lake",
            )
        sensor = static.sensor(info, sensor_key(info, tags))
        sensors.append(sensor)
        prefixes.append(_reading_prefix(sensor))
    return keys.with_columns(
        pl.Series("__sensor", sensors, dtype=pl.String),
        pl.Series("__prefix", prefixes, dtype=pl.String),
    )


@lru_cache(maxsize=1 << 16)
def _reading_prefix(sensor: str) -> str:
    """``<m100:r/<sensor hash>/`` of a sensor term (a hash per sensor, once per process)."""
    return "<" + ns.reading_iri(sensor[1:-1], 0).removesuffix("0")


def _value_literal(frame: ReadingFrame, *, special: bool) -> pl.Expr:
    """xsd:double of each reading, spelled by its metric's own dtype; ``special``: the values
    may hold NaN or infinities.

    Metrics of several dtypes scanned together share one Float64 column; a float32 reading is
    then written by its shortest float32 form (``25.1``, not ``25.100000381469727``) and an
    integer one without a fraction, as when its metric is scanned alone.
    """
    value = pl.col("value")
    dtypes = {i.dtype for i in frame.infos.values()}
    if len(dtypes) == 1 or frame.data.schema["value"] != pl.Float64:
        return e_fast_double_lit(value, floating=special)
    float32 = [n for n, i in frame.infos.items() if i.dtype == "float32"]
    ints = [n for n, i in frame.infos.items() if i.dtype in ("int32", "int64")]
    literal = e_fast_double_lit(value, floating=special)
    if ints:
        as_int = e_fast_double_lit(value.cast(pl.Int64), floating=False)
        literal = pl.when(pl.col("metric").is_in(ints)).then(as_int).otherwise(literal)
    if float32:
        as_f32 = e_fast_double_lit(value.cast(pl.Float32), floating=special)
        literal = pl.when(pl.col("metric").is_in(float32)).then(as_f32).otherwise(literal)
    return literal


def _reading_triples(
    part: pl.DataFrame, table: pl.DataFrame, frame: ReadingFrame, *, special: bool
) -> pl.DataFrame:
    joined = part.join(table, on=["metric", *frame.key_columns], how="left", nulls_equal=True)
    ms = pl.col("timestamp").dt.epoch("ms")
    stamp = e_datetime_lit_ms(ms)
    if joined.height >= _LOOKUP_ROWS:
        stamps = datetime_lits_ms(joined["timestamp"].dt.epoch("ms"))
        joined = joined.with_columns(stamps.alias("__stamp"))
        stamp = pl.col("__stamp")
    subject = pl.concat_str([pl.col("__prefix"), ms.cast(pl.String), pl.lit(">")])
    if frame.text:
        value = e_triple(subject, oda("textValue"), e_string_lit(pl.col("value")))
    else:
        value = e_triple(subject, oda("value"), _value_literal(frame, special=special))
    columns = [
        e_triple(subject, oda("fromSensor"), pl.col("__sensor")).alias("s"),
        e_triple(subject, oda("timestamp"), stamp).alias("t"),
        value.alias("v"),
    ]
    if "__n" in joined.columns:
        # A bucket mean's weight: averages over buckets are Σ(mean·n)/Σn, the readings' mean.
        columns.append(e_triple(subject, oda("readingCount"), e_int_lit(pl.col("__n"))))
    return joined.select(columns)


# -- loading ---------------------------------------------------------------------------------


class _Prefetch:
    """The producer run one chunk ahead in a thread, started at once; its error is re-raised in
    the consumer. ``close`` stops it (also when it was never iterated)."""

    def __init__(self, chunks: Iterator[bytes], depth: int = 1) -> None:
        self._box: queue.Queue[tuple[str, bytes | BaseException | None]] = queue.Queue(depth)
        self._stop = threading.Event()
        self._chunks = chunks
        self._worker = threading.Thread(target=self._produce, name="vkg-serialise", daemon=True)
        self._worker.start()

    def _produce(self) -> None:
        try:
            for chunk in self._chunks:
                if self._stop.is_set():
                    return
                self._box.put(("chunk", chunk))
            self._box.put(("end", None))
        except BaseException as exc:  # handed over to the consumer, which re-raises it
            self._box.put(("error", exc))

    def __iter__(self) -> Iterator[bytes]:
        while True:
            kind, item = self._box.get()
            if kind == "end":
                return
            if kind == "error":
                assert isinstance(item, BaseException)
                raise item
            assert isinstance(item, bytes)
            yield item

    def close(self) -> None:
        self._stop.set()
        while self._worker.is_alive():
            try:
                self._box.get_nowait()
            except queue.Empty:
                self._worker.join(timeout=0.05)


def _pipelined(chunks: Iterator[bytes], small: int = SEGMENT_BYTES) -> Iterator[bytes]:
    """The chunks; once they pass ``small`` bytes the rest is produced one ahead in a thread
    while the store loads. A graph that fits in one store segment (most questions' graphs) is
    serialised in the caller's thread: a thread's start and hand-overs cost more than such a
    graph's whole load on a busy machine."""
    head: list[bytes] = []
    size = 0
    for chunk in chunks:
        head.append(chunk)
        size += len(chunk)
        if size >= small:
            rest = _Prefetch(chunks)  # producing the next chunk while the head loads
            try:
                yield from head
                yield from rest
            finally:
                rest.close()
            return
    yield from head


def build_vkg(
    request: GroundedRequest,
    lake: Lake,
    store: GraphStore,
    graph: str,
    *,
    catalogue: Catalogue | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> BuildReport:
    """Materialise ``request`` as the named graph ``graph``; VKGBuildError on any failure."""
    started = time.perf_counter()
    try:
        ser = serialise_vkg(request, lake, catalogue=catalogue, graph=graph, chunk_rows=chunk_rows)
        _drop_quietly(store, graph)
        t0 = time.perf_counter()
        # Our own serialiser's output: embedded stores may parse it leniently.
        store.load_ntriples(graph, TrustedNTriples(_pipelined(ser.chunks)))
        ser.report.add_stage("load+serialise", time.perf_counter() - t0)
    except BaseException as exc:
        _drop_quietly(store, graph)
        if isinstance(exc, VKGBuildError):
            raise
        if isinstance(exc, OdaError):
            raise VKGBuildError(
                f"building graph {graph} failed: {exc.message}", hint=exc.hint
            ) from exc
        if isinstance(exc, Exception):
            raise VKGBuildError(
                f"building graph {graph} failed while loading the store: {exc}",
                hint="the request is aborted; check the store and retry the question",
            ) from exc
        raise
    ser.report.seconds = time.perf_counter() - started
    return ser.report


def _drop_quietly(store: GraphStore, graph: str) -> None:
    # Dropping a graph that is not there, or from a store that is already failing.
    with contextlib.suppress(Exception):
        store.drop_graph(graph)
