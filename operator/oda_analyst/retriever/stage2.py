"""Stages 2 and 3 of the Reflect Agent for one plan: VKG, compile, validate, execute.

The VKG is built (or reused) through the cache, keyed by the canonical grounded request; its
construction is deterministic and not retried (the paper: any failure aborts the request). The
compiled query is validated before it runs — by the executor too, so nothing unvalidated ever
reaches the store. A plan whose raw readings would exceed ``max_readings`` runs chunk by chunk, each
chunk with its own short-lived graph, so memory stays bounded.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from oda_analyst.errors import QueryRejectedError
from oda_analyst.lake import Lake
from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.ontology.plan import QueryPlan
from oda_analyst.sparql.chunks import execute_chunked, plan_chunks
from oda_analyst.sparql.compiler import CompiledQuery, compile_plan
from oda_analyst.sparql.executor import execute
from oda_analyst.sparql.results import ResultSet
from oda_analyst.sparql.validator import ValidationReport, validate
from oda_analyst.vkg.builder import build_vkg
from oda_analyst.vkg.cache import EVERYONE, CacheEntry, VKGCache, cache_key, vkg_graph_iri
from oda_analyst.vkg.request import GroundedRequest, from_plan
from oda_analyst.vkg.store import GraphStore


@dataclass(frozen=True)
class PlanRun:
    """Everything one plan produced: the query, its VKG and its result."""

    plan: QueryPlan
    compiled: CompiledQuery
    validation: ValidationReport
    vkg: CacheEntry | None
    result: ResultSet
    notes: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "explanation": self.compiled.explanation,
            "sparql": self.compiled.sparql,
            "plan": self.plan.model_dump(mode="json", exclude_none=True),
            "vkg": None
            if self.vkg is None
            else {
                "graph": self.vkg.graph,
                "key": self.vkg.key,
                "triples": self.vkg.triples,
                "cached": self.vkg.hit,
            },
            "notes": list(self.notes),
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

    def key(self, request: GroundedRequest, user: str, *, now: datetime | None = None) -> str:
        """The cache key: the grounded request, the lake it reads and, for windows that reach
        into the last ``settle`` (data may still arrive), the build minute — so a graph of one lake
        is never served for another, and a graph of incomplete recent data is not reused later."""
        entities: dict[str, Any] = dict(request.canonical())
        entities["lake"] = self.lake.location
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

    def run(self, plan: QueryPlan, *, user: str, request_id: str) -> PlanRun:
        """Build or reuse the VKG, compile, validate and execute one plan."""
        request = from_plan(plan, self.lake)
        span = self.chunk_span(request) if request.granularity == "raw" else None
        if span is not None:
            chunking = plan_chunks(plan, max_span=span)
            if len(chunking.windows) > 1:
                return self._run_chunked(plan, chunking, user=user, request_id=request_id)
        notes: tuple[str, ...] = ()
        if request.granularity != plan.granularity:
            notes = (
                f"averages computed from {request.granularity}ly means per series to bound the "
                "graph size: exact for whole buckets, approximate where a job or the window cuts "
                "a bucket",
            )
        key = self.key(request, user)
        graph = vkg_graph_iri(key)
        compiled, report = self.compile(plan, graph)
        entry = self.cache.get_or_build(
            key, self._build(request), owner=user,
            allowed_users=(EVERYONE,) if self.share_graphs else None, user=user,
        )  # fmt: skip
        result = execute(
            self.store, compiled, graph=graph, row_limit=self.row_limit, out_dir=self.out_dir,
            request_id=request_id, user=user,
        )  # fmt: skip
        return PlanRun(plan, compiled, report, entry, result, notes)

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
