"""Month-scale plans answered from aggregates pushed down into the lake scan.

A plan over a long window cannot become a graph of readings (all nodes over a month of one 20 s
metric is ~127M readings). When ``aggregate_from_plan`` gives a plan's pushed-down form (one
statistic per rack, node or GPU and day; hours above a level) and the readings its graph would
hold reach ``ODA_PUSHDOWN_MIN_READINGS``, ``route`` sends it here: the lake scan groups the rows
before anything becomes a triple (``build_aggregate_vkg``), the graph holds only
``oda:AggregateObservation``s, and ``compile_pushed_plan`` queries them with the reading-level
query's columns and order. The answer means the same as the reading-level one: the same plan
(so the same ``understood_as``), the same rows up to float rounding of sums; the SPARQL differs
(it reads aggregates) and the result says which partitions fed it.

The graph's cache key is the aggregate request, the lake, and a fingerprint of the very partition
files it reads (as for graphs of readings), so a rewritten partition is never answered from an
old graph; a window reaching into the last hour is keyed by the build minute too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from oda_analyst.config import Settings
from oda_analyst.errors import QueryRejectedError
from oda_analyst.lake import Lake
from oda_analyst.lake.reader import files_fingerprint
from oda_analyst.lake.storage import FileInfo
from oda_analyst.ontology.namespaces import oda
from oda_analyst.ontology.plan import QueryPlan
from oda_analyst.sparql.aggregates import compile_pushed_plan
from oda_analyst.sparql.compiler import CompiledQuery
from oda_analyst.sparql.executor import execute
from oda_analyst.sparql.results import ResultSet
from oda_analyst.sparql.validator import ValidationReport, validate
from oda_analyst.vkg.aggregates import AggregateReport, build_aggregate_vkg
from oda_analyst.vkg.cache import EVERYONE, CacheEntry, VKGCache, cache_key, vkg_graph_iri
from oda_analyst.vkg.engines import DaskEngine, PolarsEngine, ScanEngine, choose_engine
from oda_analyst.vkg.protocol import GraphStore
from oda_analyst.vkg.pushdown import (
    AggregateRequest,
    PlanPushdown,
    Progress,
    aggregate_from_plan,
    estimate_rows,
    partition_label,
)

_ASK_AGGREGATES = f"ASK {{ ?a <{oda('aggregateValue')}> ?v }}"
SETTLE = timedelta(hours=1)  # as Stage2.settle: data of the last hour may still arrive


class Stage(Protocol):
    """What the pushdown needs of stage 2 (``retriever.stage2.Stage2`` has it)."""

    lake: Lake
    store: GraphStore
    cache: VKGCache
    out_dir: Path
    row_limit: int
    share_graphs: bool


@dataclass(frozen=True)
class Pushdown:
    """When plans are pushed down (``min_readings``) and who scans (``engine``: estimated rows
    to scan -> the scan engine of the request)."""

    min_readings: float
    engine: Callable[[float], ScanEngine] | None = None
    close: Callable[[], None] = lambda: None  # closes the Dask client, if one was made

    @classmethod
    def from_settings(cls, settings: Settings) -> Pushdown:
        """ODA_PUSHDOWN_MIN_READINGS, and the engine ODA_SCAN_ENGINE, ODA_DASK_SCHEDULER and
        ODA_DASK_MIN_ROWS choose per request; one Dask client per process, made on first use."""
        address = settings.dask_scheduler
        clients: list[ScanEngine] = []
        lock = threading.Lock()

        def dask() -> ScanEngine:
            assert address is not None
            with lock:
                if not clients:
                    clients.append(DaskEngine.connect(address))
                return clients[0]

        def engine(rows: float) -> ScanEngine:
            return choose_engine(rows, settings.scan_engine, dask=None if address is None else dask,
                                 min_rows=settings.dask_min_rows)  # fmt: skip

        def close() -> None:
            with lock:
                for made in clients:
                    if isinstance(made, DaskEngine):
                        made.client.close()
                clients.clear()

        return cls(settings.pushdown_min_readings, engine, close)

    def route(self, plan: QueryPlan) -> PlanPushdown | None:
        """The pushed-down form of ``plan`` when it has one and its graph of readings would
        hold at least ``min_readings``; None: the plan runs on readings."""
        return route(plan, self.min_readings)


def route(plan: QueryPlan, min_readings: float) -> PlanPushdown | None:
    """``aggregate_from_plan(plan)`` for readings plans estimated at ``min_readings`` or more."""
    pushed = aggregate_from_plan(plan)
    if pushed is None or pushed.request.quantities:
        return None  # job quantities come from the job table: no readings to spare
    if estimate_rows(pushed.request) < min_readings:
        return None
    return pushed


def aggregate_files(lake: Lake, req: AggregateRequest) -> list[FileInfo]:
    """The lake files an aggregate request reads (one listing, no data read)."""
    return lake.partition_files(
        req.metrics, start=req.start, end=req.end, jobs=bool(req.quantities)
    )


def aggregate_key(req: AggregateRequest, location: str, files: Sequence[FileInfo], *,
                  owner: str | None = None, now: datetime | None = None) -> str:  # fmt: skip
    """The cache key of an aggregate graph: the request, the lake, a fingerprint of ``files``
    (path, size, stamp), the owner of a private graph, and the build minute of a window that
    reaches into the last hour."""
    parts: dict[str, Any] = {"aggregate": req.canonical(), "lake": location}
    parts["partitions"] = files_fingerprint(files)
    if owner is not None:
        parts["owner"] = owner
    moment = now or datetime.now(UTC)
    if req.end > moment - SETTLE:
        parts["built_at_minute"] = moment.replace(second=0, microsecond=0).isoformat()
    return cache_key(parts)


@dataclass
class PushedRun:
    """What the pushed-down path gives stage 2 for its ``PlanRun``; ``no_data`` when the
    partitions hold no row for the selection."""

    compiled: CompiledQuery
    validation: ValidationReport
    entry: CacheEntry
    result: ResultSet
    notes: tuple[str, ...]
    scan: dict[str, Any] = field(default_factory=dict)
    no_data: bool = False


def answer(
    stage: Stage, plan: QueryPlan, pushed: PlanPushdown, *, user: str, request_id: str,
    engine: Callable[[float], ScanEngine] | None = None, progress: Progress | None = None,
    held_metrics: Sequence[tuple[str, str]] | None = None,
) -> PushedRun:  # fmt: skip
    """Build (or reuse) the aggregate graph of ``pushed``, then run ``plan``'s aggregate query.

    ``held_metrics`` are the plan's metrics with lake files in the window (the others are left
    out, as a reading-level graph leaves them out); ``progress`` hears each partition done.
    """
    req = pushed.request
    if held_metrics is not None and set(held_metrics) != set(req.metrics):
        req = AggregateRequest.model_validate(
            {**req.model_dump(), "metrics": [m for m in req.metrics if m in set(held_metrics)]}
        )
        pushed = PlanPushdown(req, pushed.combine, pushed.order_desc, pushed.limit)
    files = aggregate_files(stage.lake, req)
    held = {label for f in files if (label := partition_label(f.rel)) is not None}
    owner = None if stage.share_graphs else user
    key = aggregate_key(req, stage.lake.location, files, owner=owner)
    graph = vkg_graph_iri(key)
    compiled = compile_pushed_plan(plan, pushed, graph)
    report = validate(compiled.sparql, allowed_graph=graph)
    if not report.ok:
        listed = "; ".join(f"{d.code}: {d.message}" for d in report.diagnostics)
        raise QueryRejectedError(
            f"the aggregate query failed ontology validation ({listed})",
            hint="this is a bug in the aggregate compiler; report the question and the plan",
        )
    built: list[AggregateReport] = []
    scanner = engine(estimate_rows(req)) if engine is not None else PolarsEngine()

    def build(target: str) -> int:
        done = build_aggregate_vkg(req, stage.lake, stage.store, target, progress=progress,
                                   engine=scanner, held=held)  # fmt: skip
        built.append(done)
        return done.triples

    entry = stage.cache.get_or_build(
        key, build, owner=user, allowed_users=(EVERYONE,) if stage.share_graphs else None,
        user=user,
    )  # fmt: skip
    scan = _scan_summary(req, sorted(held), built[0] if built else None, scanner)
    notes = (
        f"answered from aggregates the lake scan computed over {len(held)} partition(s) "
        f"({scanner.name} engine) instead of a graph of readings: the same figures, grouped "
        "before anything became a triple",
    )
    empty = ResultSet(columns=compiled.column_names, rows=(), row_count=0)
    if not stage.store.query(_ASK_AGGREGATES, default_graph=graph).boolean:
        return PushedRun(compiled, report, entry, empty, notes, scan, no_data=True)
    result = execute(
        stage.store, compiled, graph=graph, row_limit=stage.row_limit, out_dir=stage.out_dir,
        request_id=request_id, user=user,
    )  # fmt: skip
    return PushedRun(compiled, report, entry, result, notes, scan)


def _scan_summary(req: AggregateRequest, partitions: list[str], report: AggregateReport | None,
                  engine: ScanEngine) -> dict[str, Any]:  # fmt: skip
    """Provenance of the aggregates: partitions read, rows scanned, engine, time."""
    out: dict[str, Any] = {
        "request": req.canonical(),
        "partitions": partitions,
        "partitions_total": len(partitions),
        "engine": engine.name,
        "cached": report is None,
    }
    if report is not None:
        out |= {
            "partitions_done": len(report.partitions),
            "rows_scanned": report.rows_scanned,
            "aggregates": report.aggregates,
            "triples": report.triples,
            "seconds": round(report.seconds, 3),
        }
    return out
