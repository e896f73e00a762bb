"""Very long windows, chunk by chunk, so memory stays bounded by one chunk's graph.

A readings plan over months would need one VKG holding every reading. ``plan_chunks`` splits its
window into consecutive chunks (``split_window``); ``execute_chunked`` then, for each chunk in
turn, asks the caller for the chunk's graph (``chunk_graph``: build the VKG of the chunk's plan,
yield its IRI, drop it on exit), compiles and runs the chunk's query (validated like any other),
and folds the rows into the result before the next chunk's graph exists. How rows combine:

- ``rows`` (plans without aggregations: raw or per-minute/hour series). Each chunk's rows are
  spilled, in the query's order, to a run file; the runs are k-way merged into the final order,
  so the output equals the single query's (time is not the leading sort key: one node's whole
  series comes before the next node's). A top-k (order_by + limit) is taken per chunk and again
  after the merge. Per-minute/hour series split on bucket boundaries (no bucket in two chunks).
- ``partials`` (aggregations of reading values, any group_by). Each chunk runs a *partials*
  variant of the plan that projects, per group, count, sum, min, max, the sample variance and
  (for percentiles) the values; the partials merge exactly: sum and count add, min/max combine,
  variances combine by Chan et al.'s parallel formula (M2 = Σ(x − mean)², which does not lose
  precision the way Σx² − (Σx)²/n does), percentiles take the union of the values (8 bytes a
  value, against hundreds per reading in a graph). Groups that span chunks (a day bucket cut by
  a chunk boundary) merge by their key. Ordering and limit apply after the merge.
- ``single``: everything else runs as one query, with a note saying why: plans that select jobs
  (the window picks the jobs, and each job's readings follow its own run time), counts of
  distinct jobs or nodes (not additive across chunks), non-readings plans (job tables are small).
"""

from __future__ import annotations

import heapq
import math
import operator
import pickle
import tempfile
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import total_ordering
from itertools import islice
from pathlib import Path
from typing import IO, Any, Literal

from oda_analyst.errors import UsageError
from oda_analyst.ontology.plan import (
    QUANTILES,
    AggregateFilter,
    Aggregation,
    QueryPlan,
    TimeWindow,
    groups_counted,
    output_columns,
)
from oda_analyst.sparql.compiler import Column, CompiledQuery, PostStep, compile_plan
from oda_analyst.sparql.executor import Validator, run_select, shape_rows
from oda_analyst.sparql.labels import label_row
from oda_analyst.sparql.post import apply_post, quantile
from oda_analyst.sparql.results import DEFAULT_CSV_TTL, ResultSet, ResultWriter
from oda_analyst.vkg.protocol import GraphStore

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_CHUNKS = 5000
MERGE_FAN_IN = 64  # run files open at once while merging
_MS = timedelta(milliseconds=1)
_BUCKET = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1)}

Window = tuple[datetime, datetime]
Mode = Literal["single", "rows", "partials"]
# Build the VKG of a chunk's plan, yield its graph IRI, drop the graph on exit.
ChunkGraph = Callable[[QueryPlan], AbstractContextManager[str]]


# -- windows ------------------------------------------------------------------------------------


def _floor(moment: datetime, step: timedelta) -> datetime:
    return EPOCH + ((moment - EPOCH) // step) * step


def split_window(
    start: datetime, end: datetime, *, max_span: timedelta, align: timedelta | None = None
) -> list[Window]:
    """Consecutive half-open chunks covering [start, end) exactly, none longer than ``max_span``.

    With ``align`` every boundary inside the window is a multiple of ``align`` since the Unix
    epoch (UTC), so no ``align``-sized bucket is cut; ``max_span`` must then be a multiple of it.
    """
    if start.tzinfo is None or end.tzinfo is None:
        raise UsageError("window bounds need a time zone", hint="give UTC times, e.g. ...Z")
    if end <= start:
        raise UsageError(f"window end {end} is not after its start {start}", hint="swap them")
    if max_span <= timedelta(0) or max_span % _MS:
        raise UsageError(
            f"chunk span must be a positive whole number of milliseconds, got {max_span}",
            hint="e.g. timedelta(days=1)",
        )
    if align is not None and (align <= timedelta(0) or max_span % align):
        raise UsageError(
            f"chunk span {max_span} is not a multiple of the bucket {align}",
            hint="use whole buckets per chunk",
        )
    if (end - start) / max_span > MAX_CHUNKS:
        raise UsageError(
            f"{end - start} in chunks of {max_span} is more than {MAX_CHUNKS} chunks",
            hint="use longer chunks",
        )
    lo, hi = start.astimezone(UTC), end.astimezone(UTC)
    chunks: list[Window] = []
    cur = lo
    while cur < hi:
        nxt = cur + max_span
        if align is not None:
            nxt = _floor(nxt, align)  # > cur: cur + max_span >= floor(cur) + align > cur
        nxt = min(nxt, hi)
        chunks.append((cur, nxt))
        cur = nxt
    return chunks


# -- mergeable statistics -----------------------------------------------------------------------


@dataclass
class Partial:
    """Statistics of one group over part of the data, mergeable with another part's."""

    n: int = 0
    total: float = 0.0
    m2: float = 0.0  # Σ (x − mean)²
    lo: Any = None
    hi: Any = None
    values: array[float] | None = None

    @classmethod
    def of(cls, values: Iterable[float], *, keep_values: bool = False) -> Partial:
        """Statistics of ``values`` computed directly (the unchunked reference)."""
        data = [float(v) for v in values]
        if not data:
            return cls(values=array("d") if keep_values else None)
        mean = math.fsum(data) / len(data)
        return cls(
            n=len(data),
            total=math.fsum(data),
            m2=math.fsum((x - mean) ** 2 for x in data),
            lo=min(data),
            hi=max(data),
            values=array("d", data) if keep_values else None,
        )

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Partial:
        """A partials query's row: count_value, sum_value, min/max_value, var_value (the sample
        variance, NaN or absent below 2 values), values_value (space-separated numbers)."""
        n = int(row.get("count_value") or 0)
        variance = _float(row.get("var_value"))
        text = row.get("values_value")
        return cls(
            n=n,
            total=_float(row.get("sum_value")) or 0.0,
            m2=variance * (n - 1) if n >= 2 and variance is not None else 0.0,
            lo=row.get("min_value"),
            hi=row.get("max_value"),
            values=None if text is None else array("d", (float(t) for t in str(text).split())),
        )

    def merge(self, other: Partial) -> Partial:
        n = self.n + other.n
        values = _concat(self.values, other.values)
        if self.n == 0 or other.n == 0:
            # a side with no count still carries its min/max (a partials query projects count
            # always, but a part merged from min/max alone must never lose the other's extremes)
            base = other if self.n == 0 else self
            return replace(base, lo=_pick(min, self.lo, other.lo),
                           hi=_pick(max, self.hi, other.hi), values=values)  # fmt: skip
        delta = other.total / other.n - self.total / self.n
        return Partial(
            n=n,
            total=self.total + other.total,
            m2=self.m2 + other.m2 + delta * delta * self.n * other.n / n,
            lo=_pick(min, self.lo, other.lo),
            hi=_pick(max, self.hi, other.hi),
            values=values,
        )

    def result(self, fn: str) -> Any:
        """The aggregate ``fn`` (a plan's AggFn) of everything merged so far."""
        mean = self.total / self.n if self.n else None
        std = math.sqrt(max(self.m2, 0.0) / (self.n - 1)) if self.n >= 2 else None
        if fn == "count":
            return self.n
        if fn == "sum":
            return self.total
        if fn == "avg":
            return mean if mean is not None else 0  # SPARQL: AVG of nothing is 0
        if fn in ("min", "max"):
            return self.lo if fn == "min" else self.hi
        if fn == "std":
            return std
        if fn == "cv":
            return None if std is None or not mean else std / mean
        if fn in QUANTILES:
            return quantile(list(self.values or ()), QUANTILES[fn])
        raise UsageError(f"no merge rule for {fn}", hint="run the plan as a single chunk")


def _float(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(out) else out


def _pick(fn: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else fn(a, b)


def _concat(a: array[float] | None, b: array[float] | None) -> array[float] | None:
    if a is None or b is None:
        return a if b is None else b
    out = array("d", a)
    out.extend(b)
    return out


# -- which plans split, and how -----------------------------------------------------------------

# Partial aggregates each final aggregate needs (std projects the sample variance).
# Every partial carries its count: Partial.merge takes a part with no readings (n = 0) as empty,
# so a sum, min or max without it kept only the last chunk's figure.
_NEEDS: dict[str, tuple[str, ...]] = {
    "avg": ("count", "sum"),
    "sum": ("count", "sum"),
    "count": ("count",),
    "min": ("count", "min"),
    "max": ("count", "max"),
    "std": ("count", "sum", "std"),
    "cv": ("count", "sum", "std"),
    **{q: ("count", "median") for q in QUANTILES},  # median projects the group's values
}
_PARTIAL_ORDER = ("count", "sum", "min", "max", "std", "median")


@dataclass(frozen=True)
class ChunkPlan:
    """How one plan is processed: its chunk windows and how their rows combine."""

    plan: QueryPlan
    mode: Mode
    windows: tuple[Window, ...]
    note: str = ""

    def chunk_plan(self, window: Window) -> QueryPlan:
        """The plan a chunk builds its VKG for and runs (partials: the partials variant)."""
        if self.mode == "single":
            return self.plan
        update: dict[str, Any] = {"window": TimeWindow(start=window[0], end=window[1])}
        if self.mode == "partials":
            # count always: it tells an empty group from a group without that statistic
            fns = [a.fn for a in self.plan.aggregations] + [f.fn for f in _kept(self.plan)]
            need = {"count"} | {p for fn in fns for p in _NEEDS[fn]}
            partials = [Aggregation(fn=p, of="value") for p in _PARTIAL_ORDER if p in need]
            # ordering, limit and the groups' own conditions apply to merged groups, never per
            # chunk (a node averaging 900 W in one chunk may average 1100 W over the window)
            filters = [f for f in self.plan.filters if not isinstance(f, AggregateFilter)]
            update |= {"aggregations": partials, "order_by": [], "limit": None, "filters": filters,
                       "count_groups": False}  # fmt: skip
        return self.plan.model_copy(update=update)


def _kept(plan: QueryPlan) -> list[AggregateFilter]:
    return [f for f in plan.filters if isinstance(f, AggregateFilter)]


_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
    "gt": operator.gt, "ge": operator.ge,
}  # fmt: skip


def _passes(value: Any, flt: AggregateFilter) -> bool:
    """HAVING's test on a merged group: a group without that statistic (no readings) fails."""
    number = _float(value)
    return number is not None and _COMPARE[flt.op](number, flt.value)


def _single(plan: QueryPlan, note: str) -> ChunkPlan:
    windows = () if plan.window is None else ((plan.window.start, plan.window.end),)
    return ChunkPlan(plan, "single", windows, note)


def plan_chunks(plan: QueryPlan, *, max_span: timedelta) -> ChunkPlan:
    """Split ``plan``'s window in chunks of at most ``max_span`` when its result can be merged
    exactly; otherwise one chunk, with a note saying why."""
    if plan.target != "readings":
        return _single(plan, "")
    if plan.has_jobs() or plan.job_window:
        return _single(
            plan,
            "not split in time chunks: the plan selects jobs (by id or by the window), and each "
            "job's readings follow its own run time",
        )
    if any(a.of != "value" for a in plan.aggregations):
        return _single(
            plan, "not split in time chunks: distinct counts cannot be added across chunks"
        )
    window = plan.window
    if window is None or window.end - window.start <= max_span:
        return _single(plan, "")
    align = _BUCKET.get(plan.granularity)
    span = max_span if align is None else max(align, _floor(EPOCH + max_span, align) - EPOCH)
    windows = tuple(split_window(window.start, window.end, max_span=span, align=align))
    mode: Mode = "partials" if plan.aggregations else "rows"
    note = f"the window was processed in {len(windows)} time chunks of at most {span}"
    return ChunkPlan(plan, mode, windows, note)


# -- ordering (as the compiled ORDER BY) --------------------------------------------------------


@total_ordering
class _Desc:
    __slots__ = ("key",)

    def __init__(self, key: tuple[bool, Any]) -> None:
        self.key = key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.key == other.key

    def __lt__(self, other: _Desc) -> bool:
        return bool(self.key > other.key)

    def __hash__(self) -> int:
        return hash(self.key)


def order_keys(plan: QueryPlan) -> list[tuple[str, bool]]:
    """(column, descending) as the compiler orders: the plan's order_by, then group columns."""
    aggregated = {a.column for a in plan.aggregations}
    named = {k.key for k in plan.order_by}
    groups = [c for c in output_columns(plan) if c not in aggregated and c != "value"]
    return [(k.key, k.desc) for k in plan.order_by] + [(c, False) for c in groups if c not in named]


def row_key(columns: Sequence[str], keys: Sequence[tuple[str, bool]]) -> Callable[[Any], Any]:
    """A sort key for rows of ``columns`` in SPARQL's order (unbound first when ascending)."""
    index = [(list(columns).index(c), desc) for c, desc in keys]

    def key(row: Sequence[Any]) -> tuple[Any, ...]:
        parts: list[Any] = []
        for i, desc in index:
            value = row[i]
            item = (value is not None, 0 if value is None else value)
            parts.append(_Desc(item) if desc else item)
        return tuple(parts)

    return key


# -- spilled runs -------------------------------------------------------------------------------


class _Runs:
    """Sorted runs of rows in temporary files (pickle: our own rows, in our own folder)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.paths: list[Path] = []

    def spill(self, rows: Iterable[tuple[Any, ...]]) -> None:
        path = self.folder / f"run-{len(self.paths):05d}.pkl"
        with path.open("wb") as out:
            for row in rows:
                pickle.dump(row, out, protocol=pickle.HIGHEST_PROTOCOL)
        self.paths.append(path)

    @staticmethod
    def _read(handle: IO[bytes]) -> Iterator[tuple[Any, ...]]:
        while True:
            try:
                yield pickle.load(handle)  # a file this process wrote, never input
            except EOFError:
                return

    def merged(self, key: Callable[[Any], Any]) -> Iterator[tuple[Any, ...]]:
        """Every row of every run in ``key`` order, at most MERGE_FAN_IN files open at once."""
        paths = list(self.paths)
        while len(paths) > MERGE_FAN_IN:  # merge passes until one final merge fits
            group, paths = paths[:MERGE_FAN_IN], paths[MERGE_FAN_IN:]
            with ExitStack() as stack:
                runs = [self._read(stack.enter_context(p.open("rb"))) for p in group]
                self.spill(heapq.merge(*runs, key=key))
            paths.append(self.paths[-1])
            for p in group:
                p.unlink()
        with ExitStack() as stack:
            runs = [self._read(stack.enter_context(p.open("rb"))) for p in paths]
            yield from heapq.merge(*runs, key=key)


# -- partial tables -----------------------------------------------------------------------------


@dataclass
class PartialTable:
    """Groups of one partials plan, merged chunk after chunk (pure, no store)."""

    plan: QueryPlan
    groups: dict[tuple[Any, ...], Partial] = field(default_factory=dict)

    @property
    def groups_plan(self) -> QueryPlan:
        """The plan whose groups are merged (a count of groups counts them after the merge)."""
        return groups_counted(self.plan)

    @property
    def key_columns(self) -> tuple[str, ...]:
        aggregated = {a.column for a in self.plan.aggregations}
        return tuple(c for c in output_columns(self.groups_plan) if c not in aggregated)

    def add(self, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        keys = self.key_columns
        for row in rows:
            record = dict(zip(columns, row, strict=True))
            group = tuple(record[k] for k in keys)
            part = Partial.from_row(record)
            have = self.groups.get(group)
            self.groups[group] = part if have is None else have.merge(part)

    def rows(self) -> tuple[list[str], list[list[Any]]]:
        """Final columns and rows, ordered and limited as the single query would be."""
        keys = self.key_columns
        groups = self.groups or ({(): Partial()} if not keys else {})  # SPARQL: one empty group
        aggs = self.plan.aggregations
        groups_plan = self.groups_plan
        names = list(output_columns(groups_plan))
        kept = _kept(self.plan)
        records = []
        for group, part in groups.items():
            if not all(_passes(part.result(f.fn), f) for f in kept):
                continue
            record = dict(zip(keys, group, strict=True))
            record.update({a.column: part.result(a.fn) for a in aggs})
            records.append([record[c] for c in names])
        steps = [PostStep("sort", keys=tuple(order_keys(groups_plan)))]
        if self.plan.limit is not None:
            steps.append(PostStep("limit", n=self.plan.limit))
        if self.plan.count_groups:  # the groups kept, counted
            steps.append(PostStep("count", output_columns(self.plan)[0]))
        # apply_post's sort puts missing values last, as the single query's post sort does
        query = CompiledQuery(
            sparql="",
            graph="",
            columns=tuple(Column(c, "") for c in output_columns(self.plan)),
            sparql_columns=tuple(names),
            post=tuple(steps),
            explanation="merged chunk partials",
        )
        return apply_post(query, names, records)


# -- the chunked execution ----------------------------------------------------------------------


def execute_chunked(
    store: GraphStore,
    chunking: ChunkPlan,
    *,
    chunk_graph: ChunkGraph,
    row_limit: int,
    out_dir: Path,
    request_id: str,
    user: str | None = None,
    validator: Validator | None = None,
    timeout_s: float | None = None,
    csv_ttl: timedelta = DEFAULT_CSV_TTL,
) -> ResultSet:
    """Run ``chunking`` chunk by chunk (one chunk graph alive at a time) into one ResultSet."""
    plan = chunking.plan
    columns = output_columns(plan)
    windows: Sequence[Window | None] = chunking.windows or (None,)
    table = PartialTable(plan)
    with (
        ResultWriter(
            columns, row_limit=row_limit, out_dir=out_dir, stem=request_id, user=user, ttl=csv_ttl
        ) as writer,
        tempfile.TemporaryDirectory(prefix=f".{request_id}.", dir=_mkdir(out_dir)) as tmp,
    ):
        runs = _Runs(Path(tmp))
        for window in windows:
            part_plan = chunking.plan if window is None else chunking.chunk_plan(window)
            with chunk_graph(part_plan) as graph:
                compiled = compile_plan(part_plan, graph=graph)
                result = run_select(
                    store, compiled.sparql, graph=graph, validator=validator, timeout_s=timeout_s
                )
                if chunking.mode == "partials":
                    table.add(result.columns, result.rows)
                    continue
                shaped = shape_rows(compiled, result.columns, result.rows)
                if chunking.mode == "single":
                    writer.extend(label_row(r) for r in shaped)
                else:
                    runs.spill(shaped)
        if chunking.mode == "rows":
            key = row_key(columns, order_keys(plan))
            merged: Iterable[tuple[Any, ...]] = runs.merged(key)
            if plan.limit is not None:
                merged = islice(merged, plan.limit)
            writer.extend(label_row(r) for r in merged)
        elif chunking.mode == "partials":
            writer.extend(label_row(r) for r in table.rows()[1])
        return writer.finish(notes=(chunking.note,) if chunking.note else ())


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


__all__ = [
    "ChunkGraph",
    "ChunkPlan",
    "Partial",
    "PartialTable",
    "execute_chunked",
    "order_keys",
    "plan_chunks",
    "row_key",
    "split_window",
]
