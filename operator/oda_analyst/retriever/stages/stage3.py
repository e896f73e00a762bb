"""Stage 3 of the Reflect Agent for one plan: the query — compile, validate, review, and what ran.

The compiled query is validated before it runs (and once more by the executor, so nothing
unvalidated ever reaches the store). With a model, the review happens here too: the semantic
completeness check and the bounded SELECT/GROUP BY repair of every validated query, where a
repair is used only after it passes the validator again. ``PlanRun`` is what one plan produced:
the query, its graph (from stage 2) and its result. Stage 2 (``stage2``) builds the graph and
calls into this module; the model calls themselves are the caller's, passed in as functions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from oda_analyst.errors import OdaError, QueryRejectedError
from oda_analyst.lake.storage import FileInfo
from oda_analyst.observability import instrument
from oda_analyst.ontology.plan import QueryPlan
from oda_analyst.retriever.model_paths.repair import ReviewOutcome
from oda_analyst.retriever.model_paths.sparql_model import SparqlGenerationError, feedback_lines
from oda_analyst.sparql.compiler import CompiledQuery, compile_plan
from oda_analyst.sparql.executor import authored_query
from oda_analyst.sparql.grammar import parse_tree
from oda_analyst.sparql.results import ResultSet
from oda_analyst.sparql.validator import ValidationReport, validate
from oda_analyst.vkg.cache import CacheEntry
from oda_analyst.vkg.request import GroundedRequest

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
    scan: dict[str, Any] | None = None  # a pushed-down plan's partitions, rows and engine
    files: tuple[FileInfo, ...] = ()  # the lake files the run read (its provenance)
    request: GroundedRequest | None = None  # the graph's request, for model-written SPARQL

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
            "scan": self.scan,
            **self.result.to_json(),
        }


def compile_checked(
    plan: QueryPlan, graph: str, *, weighted: bool = False
) -> tuple[CompiledQuery, ValidationReport]:
    """The plan's SPARQL over ``graph``, validated against the ontology before anything runs
    (``weighted``: the graph holds counted bucket means, see ``compile_plan``)."""
    with instrument.stage("retriever", "sparql", {"oda.sparql.source": "compiled"}) as span:
        compiled = compile_plan(plan, graph=graph, weighted=weighted)
        report = validate(compiled.sparql, allowed_graph=graph)
        instrument.annotate(span, {"oda.sparql": compiled.sparql, "oda.valid": report.ok})
        instrument.validated("compiled", compiled.sparql, _errors(report))
    if not report.ok:
        listed = "; ".join(f"{d.code}: {d.message}" for d in report.diagnostics)
        raise QueryRejectedError(
            f"the compiled query failed ontology validation ({listed})",
            hint="this is a bug in the compiler; report the question and the plan",
        )
    return compiled, report


def _errors(report: ValidationReport) -> list[tuple[str, str]]:
    return [(d.code, d.message) for d in report.errors]


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
    instrument.validated("repair", outcome.sparql, _errors(again))
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
