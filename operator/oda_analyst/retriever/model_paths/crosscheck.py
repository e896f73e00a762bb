"""Model-written SPARQL cross-checked against the compiled plan's result (forced SPARQL).

When the model writes the query of a question the rules planned (``ODA_LLM_FORCE=sparql``), the
compiled plan's query over the same graph is the symbolic reference: the model's answer is given
only when it holds the same figures. The validator and the grounding check cannot see a valid
query that copies an example's statistic (MAX for AVG), drops a GROUP BY or reads every reading
of a "which nodes" question; this comparison does.

The comparison is by values, not by names (the model names its columns as it likes): the same
number of rows, and for every column of the reference one column of the model's result holding
the same multiset of values (numbers equal to nine significant digits, other values as text).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from typing import Any

from oda_analyst.sparql.results import ResultSet


def _norm(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int | float):
        number = float(value)
        return "nan" if math.isnan(number) else f"{number:.9g}"
    text = str(value)
    try:
        return f"{float(text):.9g}"
    except ValueError:
        return text


def _rows(result: ResultSet) -> Sequence[Sequence[Any]]:
    if result.rows is not None:
        return result.rows
    if result.csv_path is None:
        return result.preview
    with result.csv_path.open(newline="") as handle:
        reader = csv.reader(handle)
        next(reader, None)  # the header
        return [tuple(row) for row in reader]


def _columns(result: ResultSet) -> list[list[str]]:
    rows = _rows(result)
    return [sorted(_norm(row[i]) for row in rows) for i in range(len(result.columns))]


def figures_differ(reference: ResultSet, model: ResultSet) -> str | None:
    """Why the model's result does not hold the reference's figures, or None when it does."""
    if reference.row_count != model.row_count:
        return f"{model.row_count} row(s) where the plan gives {reference.row_count}"
    offered = _columns(model)
    for name, values in zip(reference.columns, _columns(reference), strict=True):
        if values not in offered:
            return f"no column holds the plan's {name}"
        offered.remove(values)
    return None
