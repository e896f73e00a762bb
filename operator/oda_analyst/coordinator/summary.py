"""The short summary an answer ends with: made from the results and artefacts, never invented.

What the retriever said (its own template summary), the statistics a request asked to report
(each row of the statistics result, with units), and each chart with its file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oda_analyst.coordinator.figures import (
    fmt,
    periods_sentence,
    recipe_sentence,
    states_a_comparison,
    table_sentence,
    time_unit_sentence,
)
from oda_analyst.coordinator.state import CoordinatorState

_NAMES = {
    "min": "min",
    "max": "max",
    "avg": "avg",
    "median": "median",
    "std": "std",
    "cv": "cv",
    "sum": "sum",
}
_KEYS = ("job_id", "node_id", "user_id", "rack_id", "metric_name", "day", "hour")
MAX_REPORTED_ROWS = 20


def _unit(unit: str | None) -> str:
    return "" if not unit else unit if unit == "%" else f" {unit}"


def _number(value: Any) -> str:
    # as every other figure in words ('.4g' wrote a peak of 287.64 W as 287.6, 1.6e6 as '1.628e+06')
    return fmt(value) if isinstance(value, float) else str(value)


def report_lines(result: Mapping[str, Any]) -> list[str]:
    """'job 1006295: min 499 W, max 569 W, avg 535.6 W' for each row of a statistics result."""
    cols = list(result.get("columns") or [])
    rows = result.get("rows")
    if rows is None or len(rows) > MAX_REPORTED_ROWS:
        return []
    stats = [c for c in cols if c.endswith("_value") and c.removesuffix("_value") in _NAMES]
    if not stats:
        return []
    key = next((c for c in _KEYS if c in cols), None)
    unit = _unit(result.get("unit"))
    lines = []
    for row in rows:
        cells = dict(zip(cols, row, strict=False))
        figures = ", ".join(
            f"{c.removesuffix('_value')} {_number(cells[c])}" + ("" if c == "cv_value" else unit)
            for c in stats
        )
        who = f"{key.removesuffix('_id').replace('_name', '')} {cells[key]}: " if key else ""
        lines.append(f"{who}{figures}")
    return lines


def summary_text(state: CoordinatorState, status: str) -> str:
    retrieval = state.get("retrieval") or {}
    error = state.get("error")
    if status == "clarification" or (retrieval.get("status") == "clarification" and not error):
        clar = retrieval.get("clarification") or {}
        return str(clar.get("question") or retrieval.get("answer") or "")
    parts: list[str] = []
    if retrieval.get("answer"):
        parts.append(str(retrieval["answer"]))
    if error:
        parts.append(f"{error['message']}" + (f" ({error['hint']})" if error.get("hint") else ""))
    plan = state.get("plan") or {}
    if plan.get("reports") and status == "completed":
        for result in retrieval.get("results") or []:
            lines = report_lines(result)
            if lines:
                parts.append("Reported: " + "; ".join(lines) + ".")
                break
    compare = bool(plan.get("compare"))
    time_unit = (state.get("reading") or {}).get("time_unit")
    if status == "completed":
        for result in retrieval.get("results") or []:
            stated = table_sentence(result, compare=compare, time_unit=time_unit) or \
                time_unit_sentence(result, time_unit)  # fmt: skip
            if stated:
                parts.append(stated)
        periods = periods_sentence(retrieval.get("results") or []) if compare else None
        if periods:
            parts.append(periods)
    for art in state.get("artifacts") or []:
        if isinstance(art.get("figures"), dict):
            stated = recipe_sentence(art["figures"], compare=compare)
            if stated:
                parts.append(stated)
            continue
        parts.append(f"Chart: {art['title'].replace(chr(10), ' ')} ({art['path']}).")
    comparison_made = status == "completed" and states_a_comparison(" ".join(parts))
    on_mean = ((state.get("reading") or {}).get("analysis") or {}).get("compared_on_mean")
    if on_mean and comparison_made:
        parts.append("No statistic was named, so each is compared by its mean over the window "
                     "(ask 'at peak' or 'the median' for another figure).")  # fmt: skip
    if compare and status == "completed" and not comparison_made:
        # 'which of nodes 12 and 13 drew more power': readings name no winner; say so rather
        # than leave the question's comparison silently unanswered
        parts.append("The comparison asked for is not made: the results hold no one figure per "
                     "entity or window to set side by side (ask for a statistic, e.g. 'on "
                     "average' or 'at peak').")  # fmt: skip
    return " ".join(parts)
