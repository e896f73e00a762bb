"""Stages 2 and 3 of the Reflect Agent for one plan: VKG, compile, validate, execute.

The VKG is built (or reused) through the cache, keyed by the canonical grounded request; its
construction is deterministic and not retried (the paper: any failure aborts the request). The
compiled query is validated before it runs — by the executor too, so nothing unvalidated ever
reaches the store. A plan whose raw readings would exceed ``max_readings`` runs chunk by chunk, each
chunk with its own short-lived graph, so memory stays bounded.

With a model, two more things happen here (the model calls themselves are the caller's, passed
in as functions): the review — the semantic completeness check and the bounded SELECT/GROUP BY
repair of every validated query, where a repair runs only after it passes the validator again —
and ``run_authored``, the paper's path for a question the rules cannot plan: the model writes the
SPARQL over a VKG built for the grounded entities, metrics and window.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from oda_analyst.errors import OdaError, QueryRejectedError
from oda_analyst.lake import Lake
from oda_analyst.lake.reader import files_fingerprint
from oda_analyst.lake.storage import FileInfo
from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.ontology.plan import QueryPlan
from oda_analyst.retriever import coverage
from oda_analyst.retriever.entities import Entities
from oda_analyst.retriever.instant import nearest_query
from oda_analyst.retriever.model_paths.crosscheck import figures_differ
from oda_analyst.retriever.model_paths.repair import ReviewOutcome
from oda_analyst.retriever.model_paths.sparql_model import SparqlGenerationError, feedback_lines
from oda_analyst.retriever.timeparse import TimeWindow
from oda_analyst.sparql.chunks import execute_chunked, plan_chunks
from oda_analyst.sparql.compiler import CompiledQuery, compile_plan
from oda_analyst.sparql.executor import authored_query, default_validator, execute
from oda_analyst.sparql.grammar import parse_tree
from oda_analyst.sparql.results import ResultSet
from oda_analyst.sparql.validator import ValidationReport, validate
from oda_analyst.vkg.builder import build_vkg
from oda_analyst.vkg.cache import EVERYONE, CacheEntry, VKGCache, cache_key, vkg_graph_iri
from oda_analyst.vkg.request import GroundedRequest, JobFilters, from_plan
from oda_analyst.vkg.store import GraphStore

Review = Callable[[str, str, tuple[str, ...]], ReviewOutcome]
"""(validated SPARQL, its graph, the result's columns) -> the model's review (check + repair)."""
Writer = Callable[[str], str]
"""The request's graph IRI -> SPARQL the model wrote for it, already validated (or raises)."""


@dataclass(frozen=True)
class PlanRun:
    """Everything one plan produced: the query, its VKG and its result (``plan`` is None for
    SPARQL the model wrote)."""

    plan: QueryPlan | None
    compiled: CompiledQuery
    validation: ValidationReport
    vkg: CacheEntry | None
    result: ResultSet
    notes: tuple[str, ...]
    no_data: str | None = None  # why there is no number: "no data for … in …"
    instant: datetime | None = None  # the moment whose nearest readings were kept

    def to_json(self) -> dict[str, Any]:
        plan = None if self.plan is None else self.plan.model_dump(mode="json", exclude_none=True)
        return {
            "explanation": self.compiled.explanation,
            "sparql": self.compiled.sparql,
            "plan": plan,
            "vkg": None
            if self.vkg is None
            else {
                "graph": self.vkg.graph,
                "key": self.vkg.key,
                "triples": self.vkg.triples,
                "cached": self.vkg.hit,
            },
            "notes": list(self.notes),
            "no_data": self.no_data,
            "instant": None if self.instant is None else self.instant.isoformat(),
            **self.result.to_json(),
        }


@dataclass
class Stage2:
    """What stages 2 and 3 need: the lake, the store and its cache, and the output folder."""

    lake: Lake
    store: GraphStore
    cache: VKGCache
    out_dir: Path
    row_limit: int
    share_graphs: bool = True
    max_readings: int = 2_000_000
    settle: timedelta = timedelta(hours=1)

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
        moment = now or datetime.now(UTC)
        end = request.end or max((w.end for w in request.job_windows), default=None)
        if end is not None and end > moment - self.settle:
            entities["built_at_minute"] = moment.replace(second=0, microsecond=0).isoformat()
        return cache_key(entities)

    def _build(self, request: GroundedRequest) -> Any:
        def build(graph: str) -> int:
            return build_vkg(request, self.lake, self.store, graph).triples

        return build

    def compile(self, plan: QueryPlan, graph: str) -> tuple[CompiledQuery, ValidationReport]:
        compiled = compile_plan(plan, graph=graph)
        report = validate(compiled.sparql, allowed_graph=graph)
        if not report.ok:
            listed = "; ".join(f"{d.code}: {d.message}" for d in report.diagnostics)
            raise QueryRejectedError(
                f"the compiled query failed ontology validation ({listed})",
                hint="this is a bug in the compiler; report the question and the plan",
            )
        return compiled, report

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
            instant: datetime | None = None, write: Writer | None = None) -> PlanRun:  # fmt: skip
        """Build or reuse the VKG, compile, validate (and, with ``review``, check and repair)
        and execute one plan. With ``write`` (the model forced on SPARQL) the model's query for
        the plan's graph runs instead of the compiled one, where one graph serves the plan (not
        for chunked or nearest-reading plans: their compiled queries run, and a note says so)."""
        request = from_plan(plan, self.lake)
        files = coverage.request_files(self.lake, request)
        missing = coverage.metrics_without_files(request, files)
        if missing and (len(missing) == len(request.metrics) or _pools_metrics(plan)):
            compiled, report = self.compile(plan, vkg_graph_iri(cache_key({"none": request_id})))
            return self._no_data(plan, compiled, report, request, missing)
        partial = (coverage.partial_note(missing, request),) if missing else ()
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
        if request.granularity != plan.granularity:
            notes += (
                f"averages computed from {request.granularity}ly means per series to bound the "
                "graph size: exact for whole buckets, approximate where a job or the window cuts "
                "a bucket",
            )
        key = self.key(request, user, files=files)
        graph = vkg_graph_iri(key)
        compiled, report = self.compile(plan, graph)
        planned: CompiledQuery | None = None
        if instant is not None:
            compiled = nearest_query(compiled, plan, instant)
            if write is not None:
                notes += (_NOT_WRITTEN + "kept the reading nearest an instant",)
        elif write is not None:
            planned, compiled = compiled, authored_query(write(graph), graph=graph)
            report = default_validator(compiled.sparql, graph)
            notes += (_WRITTEN,)
        run = self._finish(plan, request, key, compiled, report, notes, review=review,
                           user=user, request_id=request_id)  # fmt: skip
        if planned is not None and run.no_data is None:
            self._cross_check(planned, run, graph=graph, user=user, request_id=request_id)
        return replace(run, instant=instant)

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
        key = self.key(request, user)
        graph = vkg_graph_iri(key)
        compiled = authored_query(write(graph), graph=graph)
        report = default_validator(compiled.sparql, graph)  # memoised: the verdict just given
        notes: tuple[str, ...] = (
            "the rules could not plan this question: the model wrote the SPARQL, and it passed "
            "the ontology validator",
        )
        return self._finish(None, request, key, compiled, report, notes, review=review,
                            user=user, request_id=request_id)  # fmt: skip

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
        entry = self.cache.get_or_build(
            key, self._build(request), owner=user,
            allowed_users=(EVERYONE,) if self.share_graphs else None, user=user,
        )  # fmt: skip
        if request.metrics and not coverage.graph_has_readings(self.store, vkg_graph_iri(key)):
            return self._no_data(plan, compiled, report, request, request.metrics, entry, notes)
        result = execute(
            self.store, compiled, graph=vkg_graph_iri(key), row_limit=self.row_limit,
            out_dir=self.out_dir, request_id=request_id, user=user,
        )  # fmt: skip
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


# --- the model's review, and the graph of model-written SPARQL ---------------------------------


def _projection(sparql: str) -> str:
    """The SELECT clause's syntax tree as comparable text (prefixed names are not resolved, so a
    renamed prefix counts as a change: the safe side, it only drops post steps)."""
    return repr(parse_tree(sparql)[1].get("projection"))


def reviewed_query(
    compiled: CompiledQuery, report: ValidationReport, review: Review
) -> tuple[CompiledQuery, ValidationReport, tuple[str, ...]]:
    """The query to execute after the model's completeness check and bounded repair.

    A repair is used only when it passes the validator again (the executor validates it once
    more). The compiled post steps read the SELECT's columns, so they are kept only when the
    repair left the projection as it was; a repair that changes the projection of a query with
    post steps is not used (without them a standard deviation, a quantile, a top-k or the
    nearest reading would be other figures); otherwise the repaired query runs as model-written
    SPARQL (its projected variables are the columns) and a note says so.
    """
    outcome = review(compiled.sparql, compiled.graph, compiled.column_names)
    notes = list(outcome.notes)
    if outcome.repair is None or not outcome.repair.repaired or outcome.sparql == compiled.sparql:
        return compiled, report, tuple(notes)
    again = validate(outcome.sparql, allowed_graph=compiled.graph)
    if not again.ok or again.query_form != "SELECT":
        notes.append("the repaired query failed validation; the validated original ran instead")
        return compiled, report, tuple(notes)
    explanation = f"{compiled.explanation.rstrip('.')} (SELECT/GROUP BY repaired by the model)"
    if _projection(outcome.sparql) == _projection(compiled.sparql):
        kept = replace(compiled, sparql=outcome.sparql, explanation=explanation)
        return kept, again, tuple(notes)
    if compiled.post:  # std, quantiles, top-k, nearest: without them the figures are others
        steps = ", ".join(step.op for step in compiled.post)
        notes.append(
            f"the repair changed the projection of a query whose result the post-processing "
            f"steps ({steps}) compute; the validated original ran instead"
        )
        return compiled, report, tuple(notes)
    repaired = authored_query(outcome.sparql, graph=compiled.graph, explanation=explanation)
    notes.append("the repair changed the projection: the columns are the repaired query's")
    return repaired, again, tuple(notes)


def authored_request(
    entities: Entities, metrics: Sequence[tuple[str, str]], windows: Sequence[TimeWindow]
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


class ModelSparqlError(OdaError):
    """The model wrote no valid SPARQL within its budget; every attempt's diagnostics."""

    code = "sparql_generation_failed"

    def __init__(self, err: SparqlGenerationError) -> None:
        lines = [
            f"attempt {a.number}: " + ("; ".join(feedback_lines(a.diagnostics)) or "valid")
            for a in err.attempts
        ]
        super().__init__(
            f"{err.message.split(';')[0]}: " + " | ".join(lines),
            hint="no rule-based plan covers this question either: rephrase it with the metric "
            "and entity names the catalogue knows, or ask for it in simpler parts",
        )
        self.attempts = err.attempts

    def to_dict(self) -> dict[str, Any]:
        attempts = [
            {"number": a.number, "sparql": a.sparql,
             "diagnostics": [d.to_dict() for d in a.diagnostics]}
            for a in self.attempts
        ]  # fmt: skip
        return {**super().to_dict(), "attempts": attempts}
