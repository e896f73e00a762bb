"""The analysis step's inputs, built from the retrieval's result table (pure).

The script runs in the user's sandbox with the code agent's chart recipes (``odaplot``): a
summary of the value column always, a line plot when the question asks for a plot or a time
series, a histogram when it asks for one. The recipe is chosen from the question's words and the
table's columns only; what the script computes is the recipes' business.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

RESULT = "result.csv"
SCRIPT = "analysis.py"
# A ConfigMap holds at most 1 MiB; a bigger table stays in the bucket, unanalysed.
MAX_TABLE_BYTES = 900_000
_TIME = ("timestamp", "time", "ts", "bucket", "day", "hour")
_SERIES = ("metric_name", "node_id", "node", "job_id", "rack", "user", "gpu")
_HISTOGRAM = re.compile(r"\b(histogram|distribution)\b", re.IGNORECASE)
_PLOT = re.compile(r"\b(plot|chart|graph|time[ -]series|visuali[sz]e)\b", re.IGNORECASE)


@dataclass(frozen=True)
class AnalysisInput:
    files: dict[str, str]  # the ConfigMap's data: file name → text
    outputs: tuple[str, ...]  # what the script writes to /out


def result_csv(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return buf.getvalue()


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _value_column(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str | None:
    """The last column whose values are all numbers (the reading or the statistic)."""
    for i in reversed(range(len(columns))):
        if columns[i] in _SERIES:
            continue
        values = [r[i] for r in rows if i < len(r) and r[i] != ""]
        if values and all(_number(v) for v in values):
            return columns[i]
    return None


def _series(columns: Sequence[str], rows: Sequence[Sequence[str]], value: str) -> str | None:
    """The column that tells the lines apart: the first that varies (metric, then node …)."""
    present = [c for c in _SERIES if c in columns and c != value]
    for name in present:
        i = columns.index(name)
        if len({r[i] for r in rows if i < len(r)}) > 1:
            return name
    return present[-1] if present else None


def build_analysis(question: str, table: str, *, unit: str | None = None, charts: bool = True
                   ) -> AnalysisInput | None:  # fmt: skip
    """The script and its inputs for the result ``table`` (CSV with a header), or None when it
    has no numeric column to analyse or is too big to hand over. ``charts=False``: the summary
    alone (the coordinator's code agent drew the charts the question asks for)."""
    if len(table.encode()) > MAX_TABLE_BYTES:
        return None
    parsed = list(csv.reader(io.StringIO(table)))
    if len(parsed) < 2:
        return None
    columns, rows = parsed[0], parsed[1:]
    value = _value_column(columns, rows)
    if value is None:
        return None
    series = _series(columns, rows, value)
    when = next((c for c in columns if c in _TIME), None)
    heading = question.strip().rstrip("?.")[:80]
    label = value
    if "metric_name" in columns:  # one metric: name the axis after it
        metrics = {r[columns.index("metric_name")] for r in rows}
        label = metrics.pop() if len(metrics) == 1 else value
    lines = ["import odaplot", "", f"odaplot.summary({RESULT!r}, {value!r}, by={series!r})"]
    outputs = ["summary.json"]
    if charts and _PLOT.search(question) and when is not None:
        lines.append(
            f"odaplot.line({RESULT!r}, {when!r}, {value!r}, {heading!r}, {label!r}, "
            f"unit={unit!r}, series={series!r})"
        )
        outputs.append("line.png")
    if charts and _HISTOGRAM.search(question):
        lines.append(f"odaplot.histogram({RESULT!r}, {value!r}, {heading!r}, {label!r}, "
                     f"unit={unit!r})")  # fmt: skip
        outputs.append("histogram.png")
    return AnalysisInput(files={RESULT: table, SCRIPT: "\n".join(lines) + "\n"},
                         outputs=tuple(outputs))  # fmt: skip
