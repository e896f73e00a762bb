"""Replay: run a completed request again on the lake as it is now, and say what changed.

Each recorded result's plan runs again through stages 2-3 (lake listing, graph built or reused,
compiled, validated, executed) with the request's user, reference time and instant; the model is
not asked again, so a replay is deterministic. Then, per result: the partitions read (by their
fingerprints: rewritten, added or no longer read) and the figures (cell by cell for inline rows,
by digest for a CSV result). ``unchanged`` is true only when every figure is the same.

A result whose SPARQL the model wrote has no plan: its record keeps the graph's grounded request,
and the replay builds that graph on the lake as it is now and runs the recorded query on it
(validated again), without asking the model again.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from oda_analyst.errors import UsageError
from oda_analyst.observability.provenance import PartitionRead, ResultRecord
from oda_analyst.observability.tracing import request_trace
from oda_analyst.ontology.plan import QueryPlan
from oda_analyst.retriever.provenance import result_record, stored_record
from oda_analyst.retriever.service import Retriever
from oda_analyst.vkg.request import GroundedRequest

MAX_LISTED = 20  # changed cells listed per result; the count says how many more
_REL_TOLERANCE = 1e-9  # a sum in another order moves the last bits of a float, nothing more


@dataclass(frozen=True)
class PartitionChange:
    result: int
    partition: str
    change: Literal["rewritten", "added", "no longer read"]
    before: str | None  # fingerprint
    after: str | None
    files: tuple[str, ...] = ()  # the files added, removed or rewritten in it


@dataclass(frozen=True)
class FigureChange:
    result: int
    row: int | None
    column: str | None
    before: Any
    after: Any


@dataclass
class ResultReplay:
    index: int
    unchanged: bool
    replayed: bool
    row_count_before: int
    row_count_after: int | None
    query_changed: bool = False
    note: str | None = None
    more_changes: int = 0


@dataclass
class ReplayReport:
    request_id: str
    question: str
    replayed_at: str
    unchanged: bool
    results: list[ResultReplay] = field(default_factory=list)
    partitions_changed: list[PartitionChange] = field(default_factory=list)
    figures_changed: list[FigureChange] = field(default_factory=list)
    trace: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"status": "unchanged" if self.unchanged else "changed", **asdict(self)}


def replay(retriever: Retriever, request_id: str, *, user: str | None = None) -> ReplayReport:
    """Re-run ``request_id`` (a completed request) on the data as it is now; ``user``, when
    given, must be the one who asked."""
    state = retriever.checkpoints.load(request_id)
    if user is not None and state.user != user:
        raise UsageError(
            f"request {request_id} belongs to another user",
            hint="replay your own requests (--user names who asks)",
        )
    record = stored_record(state)
    report = ReplayReport(request_id, record.question, datetime.now(UTC).isoformat(), True)
    attrs = {"oda.request_id": request_id, "oda.question": record.question,
             "user.id": record.user, "session.id": request_id}  # fmt: skip
    with request_trace("retriever.replay", settings=retriever.settings, attributes=attrs,
                       observation="retriever") as handle:  # fmt: skip
        for old in record.results:
            _replay_result(retriever, record.user, request_id, old, report)
        handle.span.set_attribute("oda.replay.unchanged", report.unchanged)
    report.trace = str(handle.path)
    return report


def _replay_result(retriever: Retriever, user: str, request_id: str, old: ResultRecord,
                   report: ReplayReport) -> None:  # fmt: skip
    rid = f"{request_id}-replay-{old.index + 1}"
    if old.plan is not None:
        plan = QueryPlan.model_validate(old.plan)
        instant = datetime.fromisoformat(old.instant) if old.instant else None
        run = retriever.stage2.run(plan, user=user, request_id=rid, instant=instant)
    elif old.request is not None:  # the model's SPARQL, as validated then, on a graph of now
        request = GroundedRequest.model_validate(old.request)

        def recorded(graph: str) -> str:
            return _on_graph(old.sparql, graph)

        run = retriever.stage2.run_authored(request, recorded, user=user, request_id=rid)
    else:
        report.unchanged = False
        report.results.append(ResultReplay(
            old.index, unchanged=False, replayed=False, row_count_before=old.row_count,
            row_count_after=None,
            note="this result has neither a plan nor a recorded graph request to run again",
        ))  # fmt: skip
        return
    result = run.to_json()
    new = result_record(old.index, run, result)
    partitions = partition_changes(old.index, old.partitions, new.partitions)
    figures = figure_changes(old, new)
    same = not figures and new.digest == old.digest and new.no_data == old.no_data
    listed = figures[:MAX_LISTED]
    report.partitions_changed.extend(partitions)
    report.figures_changed.extend(listed)
    report.unchanged = report.unchanged and same
    note = None
    if not same and not figures:
        note = (
            f"the figures differ (now {new.row_count:,} rows"
            + (f", no data: {new.no_data}" if new.no_data else "")
            + "); the old rows were not kept (a CSV since expired, or more rows than a record "
            "holds), so no cell is listed"
        )
    report.results.append(ResultReplay(
        old.index, unchanged=same, replayed=True, row_count_before=old.row_count,
        row_count_after=new.row_count, query_changed=_shape(new.sparql) != _shape(old.sparql),
        note=note, more_changes=len(figures) - len(listed),
    ))  # fmt: skip


_GRAPH_IRI = re.compile(r"<[^>]*/graph/vkg/[0-9a-f]+>")


def _shape(sparql: str) -> str:
    """The query without its graph IRI (which follows the lake's fingerprint)."""
    return _GRAPH_IRI.sub("<graph>", sparql)


def _on_graph(sparql: str, graph: str) -> str:
    """``sparql`` reading ``graph`` instead of the graph it was written for."""
    return _GRAPH_IRI.sub(f"<{graph}>", sparql)


def partition_changes(index: int, before: Sequence[PartitionRead], after: Sequence[PartitionRead]
                      ) -> list[PartitionChange]:  # fmt: skip
    """Partitions rewritten (another fingerprint), newly read, or no longer read."""
    old = {p.partition: p for p in before}
    new = {p.partition: p for p in after}
    changes = []
    for name in sorted(old.keys() | new.keys()):
        a, b = old.get(name), new.get(name)
        if a is not None and b is not None and a.fingerprint == b.fingerprint:
            continue
        if a is None:
            assert b is not None
            changes.append(PartitionChange(index, name, "added", None, b.fingerprint,
                                           tuple(f.name for f in b.files)))  # fmt: skip
        elif b is None:
            changes.append(PartitionChange(index, name, "no longer read", a.fingerprint, None,
                                           tuple(f.name for f in a.files)))  # fmt: skip
        else:
            files_a, files_b = set(a.files), set(b.files)
            touched = sorted({f.name for f in files_a ^ files_b})
            changes.append(PartitionChange(index, name, "rewritten", a.fingerprint,
                                           b.fingerprint, tuple(touched)))  # fmt: skip
    return changes


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) and math.isnan(b):
            return True
        return math.isclose(a, b, rel_tol=_REL_TOLERANCE, abs_tol=0.0)
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=_REL_TOLERANCE, abs_tol=0.0)
    return bool(a == b)


def _table(rec: ResultRecord) -> tuple[list[str], list[tuple[Any, ...]]] | None:
    """A result's columns and every row: inline, or read back from its CSV file (numbers as
    numbers); None when the rows are in a CSV that is gone (expired)."""
    if rec.rows is not None:
        return list(rec.columns), [tuple(r) for r in rec.rows]
    if rec.csv is None or not Path(rec.csv).is_file():
        return None
    with open(rec.csv, newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader, [])
        return header, [tuple(_number(c) for c in row) for row in reader]


def _number(cell: str) -> Any:
    try:
        return int(cell)
    except ValueError:
        pass
    try:
        return float(cell)
    except ValueError:
        return cell


def figure_changes(old: ResultRecord, new: ResultRecord) -> list[FigureChange]:
    """The cells that differ, row by row in the query's order (a CSV result is read back from
    its file); a row present on one side only is listed as a whole."""
    before, after = _table(old), _table(new)
    if before is None or after is None:
        return []
    changes: list[FigureChange] = []
    columns = after[0]
    if before[0] != columns:
        changes.append(FigureChange(old.index, None, None, before[0], columns))
        return changes
    old_rows, new_rows = before[1], after[1]
    for i in range(max(len(old_rows), len(new_rows))):
        a = old_rows[i] if i < len(old_rows) else None
        b = new_rows[i] if i < len(new_rows) else None
        if a is None or b is None:
            changes.append(FigureChange(old.index, i, None, a, b))
            continue
        for col, x, y in zip(columns, a, b, strict=False):
            if not _same(x, y):
                changes.append(FigureChange(old.index, i, col, x, y))
    return changes


def render_report(report: ReplayReport) -> str:
    """The plain-text replay report."""
    lines = []
    if report.unchanged:
        lines.append(f"unchanged: every figure of request {report.request_id} is the same on "
                     "the lake as it is now")  # fmt: skip
    else:
        lines.append(f"changed: request {report.request_id} gives other figures on the lake "
                     "as it is now")  # fmt: skip
    lines.append(f"question: {report.question}")
    for p in report.partitions_changed:
        files = f" ({', '.join(p.files)})" if p.files else ""
        lines.append(f"partition {p.change}: {p.partition}{files}")
    for f in report.figures_changed:
        where = f"result {f.result + 1}" + (f", row {f.row + 1}" if f.row is not None else "")
        where += f", {f.column}" if f.column else ""
        lines.append(f"figure changed: {where}: {f.before} -> {f.after}")
    for r in report.results:
        if r.more_changes:
            lines.append(f"result {r.index + 1}: and {r.more_changes} more changed cells")
        if r.note:
            lines.append(f"result {r.index + 1}: {r.note}")
        if r.query_changed:
            lines.append(f"result {r.index + 1}: the query run now differs from the recorded one "
                         "(another compiler version, or the model had repaired it)")  # fmt: skip
    if report.trace:
        lines.append(f"trace: {report.trace}")
    return "\n".join(lines)
