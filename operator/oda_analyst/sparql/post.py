"""Apply a compiled query's post steps to its SPARQL rows (pure Python, no store).

The executor converts each solution to Python values (numbers as float/int, missing as None) in
``CompiledQuery.sparql_columns`` order and calls ``apply_post``; the result has exactly
``CompiledQuery.columns``. Steps are row-wise (std, cv, quantile) except sort, limit, nearest
and count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from oda_analyst.errors import QueryRejectedError
from oda_analyst.sparql.compiler import CompiledQuery, PostStep


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(out) else out


def sample_std(variance: Any) -> float | None:
    var = _number(variance)
    if var is None or math.isinf(var):
        return None
    return math.sqrt(max(var, 0.0))  # the one-pass variance can dip a hair below 0


def quantile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default 'linear')."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _apply_row(step: PostStep, row: dict[str, Any]) -> None:
    if step.op == "std":
        row[step.output] = sample_std(row.get(step.inputs[0]))
    elif step.op == "cv":
        std, mean = sample_std(row.get(step.inputs[0])), _number(row.get(step.inputs[1]))
        row[step.output] = None if std is None or not mean else std / mean
    elif step.op == "quantile":
        text = row.get(step.inputs[0]) or ""
        nums = [v for v in (_number(t) for t in str(text).split()) if v is not None]
        row[step.output] = quantile(nums, step.q if step.q is not None else 0.5)


def _sort_records(records: list[dict[str, Any]], key: str, desc: bool) -> None:
    """Stable sort on one column, None last in both directions (sort(reverse=) stays stable)."""

    def present(r: dict[str, Any]) -> tuple[bool, Any]:
        value = r.get(key)
        return (value is not None, 0 if value is None else value)

    if desc:
        records.sort(key=present, reverse=True)
    else:
        records.sort(key=lambda r: (not present(r)[0], present(r)[1]))


def _seconds(value: Any) -> float | None:
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def _nearest(records: list[dict[str, Any]], step: PostStep) -> list[dict[str, Any]]:
    """Per series, the record nearest the instant (ties: the earlier), within ``n`` seconds."""
    moment, limit = float(step.q or 0.0), float(step.n or 0)
    best: dict[tuple[Any, ...], tuple[float, float, dict[str, Any]]] = {}
    for record in records:
        at = _seconds(record.get(step.output))
        if at is None or abs(at - moment) > limit:
            continue
        key = tuple(record.get(c) for c in step.inputs)
        rank = (abs(at - moment), at)
        if key not in best or rank < best[key][:2]:
            best[key] = (*rank, record)
    return [rec for *_, rec in best.values()]


def apply_post(
    query: CompiledQuery, columns: Sequence[str], rows: Sequence[Sequence[Any]]
) -> tuple[list[str], list[list[Any]]]:
    """Rows of ``columns`` (the SPARQL variables) -> rows of ``query.columns``."""
    missing = set(query.sparql_columns) - set(columns)
    if missing:
        raise QueryRejectedError(
            f"result lacks the columns {', '.join(sorted(missing))}",
            hint="execute the compiled SPARQL unchanged",
        )
    records = [dict(zip(columns, row, strict=True)) for row in rows]
    for step in query.post:
        if step.op == "sort":
            for key, desc in reversed(step.keys):  # stable sorts, last key first
                _sort_records(records, key, desc)
        elif step.op == "limit":
            records = records[: step.n]
        elif step.op == "nearest":
            records = _nearest(records, step)
        elif step.op == "count":
            records = [{step.output: len(records)}]
        else:
            for record in records:
                _apply_row(step, record)
    names = list(query.column_names)
    return names, [[r.get(c) for c in names] for r in records]
