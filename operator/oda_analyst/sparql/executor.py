"""Stage 3 of the retriever: run one validated SELECT over the request's VKG and shape the result.

``execute`` does, in order:
1. **validate** the exact text about to run, against the request's graph (``validator.validate``;
   memoised, so re-checking what stage 2 already passed costs nothing). A query that fails is
   never run: ``ValidationFailedError`` (a QueryRejectedError) lists the diagnostics.
2. **run** it with the request's graph as the dataset. What the engine refuses — pyoxigraph is
   stricter than the validator's parser on a few forms, e.g. projecting a variable that is not
   grouped — becomes an ``ExecutionError`` carrying the engine's message, line and column, so
   the generation loop can regenerate ("syntax-based execution failures trigger a bounded retry
   loop"). A store that is down stays a StoreError: regenerating would not help.
3. apply the compiled **post** steps (std, cv, quantiles, sort/limit: ``post.apply_post``);
4. rewrite IRIs to readable **labels** (``labels``);
5. return the rows **inline** up to ``row_limit``, else a CSV file with a download handle and a
   preview (``results``).

Long windows are processed chunk by chunk in ``chunks``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from oda_analyst.errors import OdaError, QueryRejectedError, StoreError
from oda_analyst.sparql.compiler import Column, CompiledQuery
from oda_analyst.sparql.diagnostics import ValidationReport
from oda_analyst.sparql.labels import label_row
from oda_analyst.sparql.post import apply_post
from oda_analyst.sparql.results import DEFAULT_CSV_TTL, ResultSet, ResultWriter
from oda_analyst.sparql.validator import validate
from oda_analyst.vkg.protocol import GraphStore, QueryResult

# (sparql, allowed graph) -> report; any callable with the validator's verdict will do.
Validator = Callable[[str, str], ValidationReport]
ErrorKind = Literal["syntax", "timeout"]

_POSITION = re.compile(r"error at (\d+):(\d+)")
_TIMEOUT = ("ran longer than", "did not answer in time")
_MAX_LISTED = 8


class ExecutionError(OdaError):
    """The engine refused or abandoned a query the validator had passed.

    ``kind`` ``syntax``: the engine's parser or planner rejected the text (``line``/``column``
    point at it): regenerate. ``timeout``: it ran too long: narrow the request.
    """

    code = "execution_error"

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        *,
        kind: ErrorKind,
        engine_message: str,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        super().__init__(message, hint)
        self.kind = kind
        self.engine_message = engine_message
        self.line = line
        self.column = column

    @property
    def retryable(self) -> bool:
        """Whether regenerating the SPARQL can help (the generation loop's cue)."""
        return self.kind == "syntax"

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "kind": self.kind,
            "engine_message": self.engine_message,
            "line": self.line,
            "column": self.column,
        }


class ValidationFailedError(QueryRejectedError):
    """The query broke the ontology or the read-only, one-graph contract; it was not run."""

    def __init__(self, report: ValidationReport) -> None:
        listed = [_describe(d.code, d.message, d.line) for d in report.errors[:_MAX_LISTED]]
        more = len(report.errors) - len(listed)
        text = "; ".join(listed) + (f"; and {more} more" if more > 0 else "")
        super().__init__(
            f"the query was not executed, it failed validation: {text}",
            hint="fix the listed problems (each diagnostic has the pattern and a suggestion)",
        )
        self.report = report

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "diagnostics": [d.to_dict() for d in self.report.errors]}


def _describe(code: str, message: str, line: int | None) -> str:
    return f"{code}: {message}" + (f" (line {line})" if line is not None else "")


@lru_cache(maxsize=512)
def _validate_cached(sparql: str, graph: str) -> ValidationReport:
    return validate(sparql, allowed_graph=graph)


def default_validator(sparql: str, graph: str) -> ValidationReport:
    """The ontology validator, memoised on (text, graph): a verdict depends on nothing else."""
    return _validate_cached(sparql, graph)


def check_query(sparql: str, graph: str, validator: Validator | None = None) -> ValidationReport:
    """The validator's report on ``sparql``; raises unless it is a valid SELECT over ``graph``."""
    report = (validator or default_validator)(sparql, graph)
    if not report.ok:
        raise ValidationFailedError(report)
    if report.query_form != "SELECT":
        raise QueryRejectedError(
            f"only SELECT queries are executed, not {report.query_form}",
            hint="project the wanted values with SELECT",
        )
    return report


def _engine_error(exc: StoreError) -> OdaError:
    text = exc.message
    if " syntax error: " in text:
        found = _POSITION.search(text)
        line, column = (int(found.group(1)), int(found.group(2))) if found else (None, None)
        where = f" at line {line}, column {column}" if line is not None else ""
        return ExecutionError(
            f"the engine rejected the query{where}: {text}",
            hint="correct the SPARQL at that position and submit it again",
            kind="syntax",
            engine_message=text,
            line=line,
            column=column,
        )
    if any(marker in text for marker in _TIMEOUT):
        return ExecutionError(
            f"the query did not finish: {text}",
            hint=exc.hint or "narrow the time window or the entities",
            kind="timeout",
            engine_message=text,
        )
    return exc  # the store itself failed: not the query's fault


def run_select(
    store: GraphStore,
    sparql: str,
    *,
    graph: str,
    validator: Validator | None = None,
    timeout_s: float | None = None,
) -> QueryResult:
    """Validate, then run ``sparql`` with ``graph`` as its dataset; typed values as the store
    converts them. Raises ValidationFailedError (not run), ExecutionError or StoreError."""
    check_query(sparql, graph, validator)
    try:
        return store.query(sparql, default_graph=graph, timeout_s=timeout_s)
    except StoreError as exc:
        raise _engine_error(exc) from None


def shape_rows(
    compiled: CompiledQuery, columns: Sequence[str], rows: list[tuple[Any, ...]]
) -> Iterable[tuple[Any, ...]]:
    """SPARQL rows -> rows of ``compiled.columns``: post steps when there are any, else a plain
    projection (a model-authored ``SELECT *`` may order its variables differently)."""
    wanted = compiled.column_names
    if compiled.post or not set(wanted) <= set(columns):
        _, shaped = apply_post(compiled, columns, rows)
        return (tuple(r) for r in shaped)
    if tuple(columns) == wanted:
        return rows
    index = [list(columns).index(c) for c in wanted]
    return (tuple(row[i] for i in index) for row in rows)


def execute(
    store: GraphStore,
    compiled: CompiledQuery,
    *,
    graph: str | None = None,
    row_limit: int,
    out_dir: Path,
    request_id: str,
    user: str | None = None,
    validator: Validator | None = None,
    timeout_s: float | None = None,
    csv_ttl: timedelta = DEFAULT_CSV_TTL,
) -> ResultSet:
    """Run one compiled (or model-authored, see ``authored_query``) query over ``graph``
    (default: the graph it was compiled for) and return its labelled result.

    ``request_id`` names the CSV file (``<out_dir>/<request_id>.csv``) when the result exceeds
    ``row_limit``; a request that runs several queries passes one id per query (``<id>-2``).
    """
    target = graph or compiled.graph
    with ResultWriter(
        compiled.column_names,
        row_limit=row_limit,
        out_dir=out_dir,
        stem=request_id,
        user=user,
        ttl=csv_ttl,
    ) as writer:
        result = run_select(
            store, compiled.sparql, graph=target, validator=validator, timeout_s=timeout_s
        )
        for row in shape_rows(compiled, result.columns, result.rows):
            writer.add(label_row(row))
        return writer.finish()


def authored_query(
    sparql: str,
    *,
    graph: str,
    validator: Validator | None = None,
    explanation: str = "SPARQL written by the generation model",
) -> CompiledQuery:
    """Wrap SPARQL that a model wrote (no plan) so ``execute`` can run it: validated here, its
    columns are the projected variables, no post steps."""
    report = check_query(sparql, graph, validator)
    names = report.variables
    return CompiledQuery(
        sparql=sparql,
        graph=graph,
        columns=tuple(Column(v, "") for v in names),
        sparql_columns=names,
        post=(),
        explanation=explanation,
    )


__all__ = [
    "ExecutionError",
    "ValidationFailedError",
    "Validator",
    "authored_query",
    "check_query",
    "default_validator",
    "execute",
    "run_select",
    "shape_rows",
]
