"""The answer contract of ``ask``/``clarify`` (DESIGN.md) and its plain-text summary.

One JSON object: ``status`` (completed | clarification | rejected | failed), ``answer`` (text),
``rows``/``columns`` (the first result inline, bounded), ``csv`` (path when larger), ``sparql``
(the executed, validated query), ``plan``, ``artifacts``, ``clarification``, ``request_id``,
``tokens``, ``timings``; ``results`` holds every plan's result when a question needs several.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, Field

from oda_analyst.retriever.understood import unit_suffix

AnswerStatus = Literal["completed", "clarification", "rejected", "failed"]

EXIT_CODES: dict[str, int] = {"completed": 0, "clarification": 3, "rejected": 4, "failed": 1}


class ClarificationPayload(BaseModel):
    """What the user is asked, and the choices."""

    field: str
    question: str
    candidates: list[dict[str, Any]] = Field(default_factory=list)


class AnswerPayload(BaseModel):
    """The answer to one request (also what the MCP ``query``/``clarify`` tools return)."""

    status: AnswerStatus
    request_id: str
    answer: str
    understood_as: str | None = None
    columns: list[str] | None = None
    rows: list[list[Any]] | None = None
    row_count: int | None = None
    csv: str | None = None
    csv_handle: str | None = None
    sparql: str | None = None
    plan: dict[str, Any] | None = None
    results: list[dict[str, Any]] = Field(default_factory=list)
    artifacts: list[str] = Field(default_factory=list)
    clarification: ClarificationPayload | None = None
    error: dict[str, Any] | None = None
    warnings: list[str] = Field(default_factory=list)
    tokens: dict[str, dict[str, float]] = Field(default_factory=dict)
    timings: dict[str, float] = Field(default_factory=dict)
    trace: str | None = None  # the local JSON trace file of this request
    provenance: dict[str, Any] | None = None  # partitions, graph, SPARQL, model calls
    # what the question asks beyond the retrieval (``Reading.asked``): charts, statistics
    asked: dict[str, Any] | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]


def _numbers(result: dict[str, Any], column: str) -> list[float]:
    if column not in result["columns"]:
        return []
    idx = result["columns"].index(column)
    rows = result["rows"] if result["rows"] is not None else result["preview"]
    values = [r[idx] for r in rows]
    return [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)
            and math.isfinite(v)]  # fmt: skip


def _cell(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _shown(value: Any, unit: str) -> str:
    """4 significant digits and the unit (full precision stays in ``rows`` and the CSV)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return str(value)
    return f"{value:.4g}{unit_suffix(unit)}"


def summarise(results: list[dict[str, Any]]) -> str:
    """A factual, template-made summary of the results (no model: nothing invented)."""
    parts = []
    for res in results:
        what = (res.get("understood_as") or res["explanation"]).rstrip(".")
        if res.get("no_data"):
            parts.append(f"{what}: {res['no_data']}.")
            continue
        count = res["row_count"]
        where = "" if res["rows"] is not None else f" (written to {res['csv']})"
        line = f"{what}: {count:,} row{'s' if count != 1 else ''}{where}."
        values = _numbers(res, "value") if res["rows"] is not None else []
        unit = res.get("unit") or ""
        if values:
            mean = sum(values) / len(values)
            line += (f" value min {_shown(min(values), unit)}, mean {_shown(mean, unit)}, "
                     f"max {_shown(max(values), unit)}.")  # fmt: skip
        elif count == 1 and res["rows"]:
            cells = ", ".join(
                # a count of readings is a number of readings, never in the readings' unit
                f"{c} = {_shown(v, unit) if _in_unit(c) else _cell(v)}"
                for c, v in zip(res["columns"], res["rows"][0], strict=False)
            )
            line += f" {cells}."
        if count == 0:
            line += " No data matched: check the entities and the time window."
        parts.append(line)
    return " ".join(parts)


def _in_unit(column: str) -> bool:
    """Whether a one-row result's column is in the readings' unit ('avg_value': yes;
    'count_value', 'count_distinct_value': no)."""
    return column.endswith("_value") and not column.startswith("count")
