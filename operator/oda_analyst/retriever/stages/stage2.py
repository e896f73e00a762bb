"""Stage 2 of the Reflect Agent for one plan: the graph, then stage 3's query over it.

The VKG is built (or reused) through the cache, keyed by the canonical grounded request and a
fingerprint of the partition files it reads; its construction is deterministic and not retried
(the paper: any failure aborts the request). A request whose partitions hold none of its metrics
is answered "no data" before anything is built. A plan whose raw readings would exceed
``max_readings`` runs chunk by chunk, each chunk with its own short-lived graph, so memory stays
bounded. The query itself — compile, validate, the model's review — is stage 3 (``stage3``).

``run_authored`` is the paper's path for a question the rules cannot plan: the model writes the
SPARQL over a VKG built for the grounded entities, metrics and window.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from oda_analyst.errors import QueryRejectedError
from oda_analyst.lake import Lake
from oda_analyst.lake.reader import files_fingerprint
from oda_analyst.lake.storage import FileInfo
from oda_analyst.observability import instrument
from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.ontology.plan import QueryPlan
from oda_analyst.reading.types import Entities, ParsedWindow
from oda_analyst.retriever import monthscale
from oda_analyst.retriever.model_paths.crosscheck import figures_differ
from oda_analyst.retriever.planning.instant import nearest_query
from oda_analyst.retriever.stages import coverage
from oda_analyst.retriever.stages.stage3 import (
    PlanRun,
    Review,
    Writer,
    compile_checked,
    reviewed_query,
)
from oda_analyst.sparql.chunks import execute_chunked, plan_chunks
from oda_analyst.sparql.compiler import CompiledQuery
from oda_analyst.sparql.executor import authored_query, default_validator, execute
from oda_analyst.sparql.results import ResultSet
from oda_analyst.sparql.validator import ValidationReport
from oda_analyst.vkg.builder import build_vkg
from oda_analyst.vkg.cache import EVERYONE, CacheEntry, VKGCache, cache_key, vkg_graph_iri
from oda_analyst.vkg.protocol import GraphStore
from oda_analyst.vkg.pushdown import PlanPushdown
from oda_analyst.vkg.pushdown import Progress as ScanReport
from oda_analyst.vkg.request import GroundedRequest, JobFilters, from_plan


@dataclass
class Stage2:
    """Runs one plan through stages 2 and 3: the lake, the store and its cache, and the
    output folder."""

    lake: Lake
    store: GraphStore
    cache: VKGCache
    out_dir: Path
    row_limit: int
    share_graphs: bool = True
    max_readings: int = 2_000_000
    settle: timedelta = timedelta(hours=1)
    pushdown: monthscale.Pushdown | None = None  # month-scale plans answered from aggregates

    def key(self, request: GroundedRequest, user: str, *, now: datetime | None = None,
            files: Sequence[FileInfo] | None = None) -> str:  # fmt: skip
        """The cache key: the grounded request, the lake it reads, a fingerprint of the very
        partition files it reads (``files``, default ``coverage.request_files``) and, for
        windows that reach into the last ``settle`` (data may still arrive), the build minute —
        so a graph of one lake, or of files since rewritten, is never served, and a graph of
        incomplete recent data is not reused later."""
        entities: dict[str, Any] = dict(request.canonical())
        entities["lake"] = self.lake.location
        if files is None:
            files = coverage.request_files(self.lake, request)
        entities["partitions"] = files_fingerprint(files)
        if not self.share_graphs:
            entities["owner"] = user  # private graphs: one per user, never shared
        if request.granularity != "raw":
            entities["bucket_counts"] = True  # bucket means carry their counts since 2026-12
        moment = now or datetime.now(UTC)
        end = request.end or max((w.end for w in request.job_windows), default=None)
        if end is not None and end > moment - self.settle:
            entities["built_at_minute"] = moment.replace(second=0, microsecond=0).isoformat()
        return cache_key(entities)

    def _build(self, request: GroundedRequest) -> Any:
        def build(graph: str) -> int:
            return build_vkg(request, self.lake, self.store, graph).triples

        return build

    def compile(
        self, plan: QueryPlan, graph: str, *, weighted: bool = False
    ) -> tuple[CompiledQuery, ValidationReport]:
        return compile_checked(plan, graph, weighted=weighted)

    def chunk_span(self, request: GroundedRequest) -> timedelta | None:
        """How long a time chunk may be so that it holds at most ``max_readings`` raw readings,
        or None when the whole window fits (then the plan runs in one piece)."""
        if request.start is None or request.end is None or request.job_windows:
            return None
        cat = load_catalogue()
        seconds = (request.end - request.start).total_seconds()
        series = 980 if request.all_nodes else len(request.nodes) + 20 * len(request.racks)
        estimate = sum(
            max(series, 1) * seconds / (cat.get(metric).period_s or 60)
            for _plugin, metric in request.metrics
        )
        if estimate <= self.max_readings:
            return None
        whole = math.floor(seconds * self.max_readings / estimate)  # never over the budget
        return max(timedelta(hours=1), timedelta(seconds=whole))

    def run(self, plan: QueryPlan, *, user: str, request_id: str, review: Review | None = None,
            instant: datetime | None = None, scan_progress: ScanReport | None = None,
            write: Writer | None = None) -> PlanRun:  # fmt: skip
        """Build or reuse the VKG, compile, validate (and, with ``review``, check and repair)
        and execute one plan; a month-scale one from aggregates (``monthscale``), when
        ``pushdown`` is set, and ``scan_progress`` hears each partition scanned. With ``write``
        (the model forced on SPARQL) the model's query for the plan's graph runs instead of the
        compiled one, where one graph serves the plan (not for chunked, pushed-down or
        nearest-reading plans: their compiled queries run, and a note says so)."""
        request = from_plan(plan, self.lake)
        files = coverage.request_files(self.lake, request)
        run = self._run(plan, request, files, user=user, request_id=request_id, review=review,
                        instant=instant, scan_progress=scan_progress, write=write)  # fmt: skip
        return replace(run, files=tuple(files))

    def _run(self, plan: QueryPlan, request: GroundedRequest, files: list[FileInfo], *,
             user: str, request_id: str, review: Review | None, instant: datetime | None,
             scan_progress: ScanReport | None = None, write: Writer | None = None
             ) -> PlanRun:  # fmt: skip
        missing = coverage.metrics_without_files(request, files)
        if missing and (len(missing) == len(request.metrics) or _pools_metrics(plan)):
            compiled, report = self.compile(plan, vkg_graph_iri(cache_key({"none": request_id})))
            return self._no_data(plan, compiled, report, request, missing)
        partial: tuple[str, ...] = (coverage.partial_note(missing, request),) if missing else ()
        pushed = self.pushdown.route(plan) if self.pushdown and instant is None else None
        if pushed is not None:
            if review is not None:
                partial += ("the model's completeness review does not apply to aggregate queries",)
            if write is not None:
                partial += (_NOT_WRITTEN + "answered from aggregates of the lake scan",)
            return self._run_pushed(plan, pushed, request, missing, partial, user=user,
                                    request_id=request_id, progress=scan_progress)  # fmt: skip
        span = self.chunk_span(request) if request.granularity == "raw" else None
        if span is not None:
            chunking = plan_chunks(plan, max_span=span)
            if len(chunking.windows) > 1:
                run = self._run_chunked(plan, chunking, user=user, request_id=request_id)
                run = replace(run, notes=(*partial, *run.notes))
                if write is not None:
                    run = replace(run, notes=(*run.notes, _NOT_WRITTEN + "chunked"))
                if review is None:
                    return run
                skipped = "the model's completeness review does not apply to chunked queries"
                return replace(run, notes=(*run.notes, skipped))
        notes: tuple[str, ...] = partial
        # A large average-only plan reads minute/hour means, each weighted by its count.
        coarse = request.granularity != plan.granularity
        key = self.key(request, user, files=files)
        graph = vkg_graph_iri(key)
        compiled, report = self.compile(plan, graph, weighted=coarse)
        planned: CompiledQuery | None = None
        if instant is not None:
            compiled = nearest_query(compiled, plan, instant)
            if write is not None:
                notes += (_NOT_WRITTEN + "kept the reading nearest an instant",)
        elif write is not None:
            planned, compiled = compiled, authored_query(write(graph), graph=graph)
            report = default_validator(compiled.sparql, graph)
            notes += (_WRITTEN,)
            if coarse:
                notes += (
                    f"the graph holds {request.granularity}ly means (oda:readingCount says how "
                    "many readings each averages): a model-written AVG that does not weigh "
                    "them is close to, not exactly, the mean of the readings",
                )
        run = self._finish(plan, request, key, compiled, report, notes, review=review,
                           user=user, request_id=request_id)  # fmt: skip
        if planned is not None and run.no_data is None:
            self._cross_check(planned, run, graph=graph, user=user, request_id=request_id)
        return replace(run, instant=instant)

    def _run_pushed(
        self, plan: QueryPlan, pushed: PlanPushdown, request: GroundedRequest,
        missing: Sequence[tuple[str, str]], notes: tuple[str, ...], *, user: str,
        request_id: str, progress: ScanReport | None,
    ) -> PlanRun:  # fmt: skip
        assert self.pushdown is not None
        held = [m for m in request.metrics if m not in missing]
        done = monthscale.answer(
            self, plan, pushed, user=user, request_id=request_id, engine=self.pushdown.engine,
            progress=progress, held_metrics=held,
        )  # fmt: skip
        notes = (*notes, *done.notes)
        if done.no_data:
            run = self._no_data(plan, done.compiled, done.validation, request, held, done.entry,
                                notes)  # fmt: skip
            return replace(run, scan=done.scan)
        return PlanRun(plan, done.compiled, done.validation, done.entry, done.result, notes,
                       scan=done.scan)  # fmt: skip

    def _cross_check(self, planned: CompiledQuery, run: PlanRun, *, graph: str, user: str,
                     request_id: str) -> None:  # fmt: skip
        """The model wrote a planned question's query: its figures must be the plan's."""
        reference = execute(
            self.store, planned, graph=graph, row_limit=self.row_limit, out_dir=self.out_dir,
            request_id=f"{request_id}-plan", user=user,
        )  # fmt: skip
        problem = figures_differ(reference, run.result)
        if problem is not None:
            raise QueryRejectedError(
                f"the model's SPARQL passed the validator but gives other figures than the "
                f"compiled plan ({problem}); its answer is not given",
                hint="ask again without ODA_LLM_FORCE=sparql: the compiled plan answers it",
            )

    def run_authored(self, request: GroundedRequest, write: Writer, *, user: str,
                     request_id: str, review: Review | None = None) -> PlanRun:  # fmt: skip
        """The model-written path: SPARQL from ``write(graph)`` over the VKG of ``request``,
        validated again on wrapping (``authored_query``) and by the executor, then run. The
        query is written before the graph is built, so a failed generation builds nothing."""
        if self.chunk_span(request) is not None:
            raise QueryRejectedError(
                "the request needs more raw readings than one graph may hold, and model-written "
                "SPARQL is not split into time chunks",
                hint="narrow the time window or the entities",
            )
        files = coverage.request_files(self.lake, request)
        key = self.key(request, user, files=files)
        graph = vkg_graph_iri(key)
        compiled = authored_query(write(graph), graph=graph)
        report = default_validator(compiled.sparql, graph)  # memoised: the verdict just given
        notes: tuple[str, ...] = (
            "the rules could not plan this question: the model wrote the SPARQL, and it passed "
            "the ontology validator",
        )
        run = self._finish(None, request, key, compiled, report, notes, review=review,
                           user=user, request_id=request_id)  # fmt: skip
        return replace(run, files=tuple(files), request=request)

    def _finish(
        self, plan: QueryPlan | None, request: GroundedRequest, key: str,
        compiled: CompiledQuery, report: ValidationReport, notes: tuple[str, ...], *,
        review: Review | None, user: str, request_id: str,
    ) -> PlanRun:  # fmt: skip
        """Shared by planned and model-written queries: optional review, the VKG through the
        cache, then execution over the request's own graph."""
        if review is not None:
            compiled, report, reviewed = reviewed_query(compiled, report, review)
            notes = (*notes, *reviewed)
        with instrument.stage("retriever", "vkg", {"oda.vkg.key": key}) as span:
            entry = self.cache.get_or_build(
                key, self._build(request), owner=user,
                allowed_users=(EVERYONE,) if self.share_graphs else None, user=user,
            )  # fmt: skip
            instrument.annotate(span, {"oda.vkg.graph": entry.graph, "oda.vkg.cached": entry.hit,
                                       "oda.vkg.triples": entry.triples,
                                       "oda.vkg.bytes": entry.bytes})  # fmt: skip
        if request.metrics and not coverage.graph_has_readings(self.store, vkg_graph_iri(key)):
            return self._no_data(plan, compiled, report, request, request.metrics, entry, notes)
        with instrument.stage("retriever", "execution", {"oda.sparql": compiled.sparql}) as span:
            result = execute(
                self.store, compiled, graph=vkg_graph_iri(key), row_limit=self.row_limit,
                out_dir=self.out_dir, request_id=request_id, user=user,
            )  # fmt: skip
            instrument.annotate(span, {"oda.result.rows": result.row_count})
        return PlanRun(plan, compiled, report, entry, result, notes)

    def _no_data(
        self, plan: QueryPlan | None, compiled: CompiledQuery, report: ValidationReport,
        request: GroundedRequest, missing: Sequence[tuple[str, str]],
        entry: CacheEntry | None = None, notes: tuple[str, ...] = (),
    ) -> PlanRun:  # fmt: skip
        """A result with no rows and the reason: an aggregate over no readings is no number."""
        why = coverage.no_data_message(request, missing)
        months = self.lake.months()
        if months:
            why += (
                f" (the lake holds months {months[0]}..{months[-1]}: `oda-analyst lake describe`)"
            )
        empty = ResultSet(columns=compiled.column_names, rows=(), row_count=0)
        return PlanRun(plan, compiled, report, entry, empty, notes, no_data=why)

    def _run_chunked(self, plan: QueryPlan, chunking: Any, *, user: str, request_id: str
                     ) -> PlanRun:  # fmt: skip
        @contextmanager
        def chunk_graph(chunk_plan: QueryPlan) -> Iterator[str]:
            request = from_plan(chunk_plan, self.lake)
            graph = vkg_graph_iri(cache_key({**request.canonical(), "chunk_of": request_id}))
            try:
                build_vkg(request, self.lake, self.store, graph)
                yield graph
            finally:
                self.store.drop_graph(graph)

        # The answer shows the whole plan's query (what was asked); each chunk ran its variant
        # restricted to the chunk's window, and the partial results were merged exactly.
        whole_graph = vkg_graph_iri(cache_key({"chunked": request_id}))
        compiled, report = self.compile(plan, whole_graph)
        self.compile(chunking.chunk_plan(chunking.windows[0]), whole_graph)  # validated too
        result = execute_chunked(
            self.store, chunking, chunk_graph=chunk_graph, row_limit=self.row_limit,
            out_dir=self.out_dir, request_id=request_id, user=user,
        )  # fmt: skip
        hours = max(b - a for a, b in chunking.windows).total_seconds() / 3600
        note = (
            f"processed in {len(chunking.windows)} time chunks of at most {hours:g} h to bound "
            f"memory: each chunk ran this query on its own window ({chunking.mode} merged exactly)"
        )
        return PlanRun(plan, compiled, report, None, result, (note,))


_WRITTEN = "the model wrote this plan's SPARQL (forced); it passed the ontology validator"
_NOT_WRITTEN = "the compiled query ran: model-written SPARQL is not used where the plan is "


def _pools_metrics(plan: QueryPlan) -> bool:
    """Whether the plan folds several metrics into one figure (an aggregate not per metric):
    leaving a metric without data out of it would answer another question."""
    return len(plan.metrics) > 1 and bool(plan.aggregations) and "metric" not in plan.group_by


def authored_request(
    entities: Entities, metrics: Sequence[tuple[str, str]], windows: Sequence[ParsedWindow]
) -> GroundedRequest:
    """The VKG of a question with no plan: the named entities, the grounded ``(plugin, metric)``
    pairs and one window spanning the parsed windows (the model's SPARQL filters each).

    Rooms select every node (the query names the room, as compiled plans do); users add the jobs
    they ran in the window; GPU indices qualify the named nodes.
    """
    if not windows:
        raise QueryRejectedError(
            "model-written SPARQL needs a time window",
            hint="say when, e.g. 'on 1 June 2022 from 08:00 to 09:00'",
        )
    return GroundedRequest(
        nodes=entities.nodes,
        all_nodes=entities.all_nodes or bool(entities.rooms),
        racks=entities.racks,
        gpus=tuple((n, g) for n in entities.nodes for g in entities.gpus),
        devices=tuple(f"{kind}/{key}" for kind, key in entities.devices),
        jobs=entities.jobs,
        metrics=tuple(metrics),
        start=min(w.start for w in windows),
        end=max(w.end for w in windows),
        include_jobs=bool(entities.users),
        job_filters=JobFilters(users=entities.users),
    )
