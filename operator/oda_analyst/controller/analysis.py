"""The analysis step's inputs, built from the retrieval's result table (pure).

The script runs in the user's sandbox with the code agent's chart recipes (``odaplot``): a
summary of the value column always, a line plot when the question asks for a line plot or a
chart of no named kind, a histogram when it asks for one. The charts asked come from the
question's reading (the answer's ``asked``, see ``asked_charts``), never from its words here; what
the script computes is the recipes' business.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

RESULT = "result.csv"
SCRIPT = "analysis.py"
# A ConfigMap holds at most 1 MiB; a bigger table stays in the bucket, unanalysed.
MAX_TABLE_BYTES = 900_000
_TIME = ("timestamp", "time", "ts", "bucket", "day", "hour")
_SERIES = ("metric_name", "node_id", "node", "job_id", "rack", "user", "gpu")
_LINE = frozenset({"line", "chart"})  # a chart of no named kind is the readings over time


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


def asked_charts(answer: Mapping[str, Any]) -> tuple[str, ...]:
    """The chart kinds an answer says its question asked (``asked.charts``)."""
    asked = answer.get("asked") or {}
    return tuple(str(k) for k in asked.get("charts") or ()) if isinstance(asked, Mapping) else ()


def _number(cell: str) -> bool:
    try:
        float(cell)
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


def build_analysis(table: str, *, title: str, charts: Sequence[str] = (), unit: str | None = None
                   ) -> AnalysisInput | None:  # fmt: skip
    """The script and its inputs for the result ``table`` (CSV with a header), or None when it
    has no numeric column to analyse or is too big to hand over. ``charts``: the kinds asked
    (none: the summary alone, e.g. when the coordinator's code agent drew them); ``title``: the
    charts' heading (the question)."""
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
    heading = title.strip().rstrip("?.")[:80]
    label = value
    if "metric_name" in columns:  # one metric: name the axis after it
        metrics = {r[columns.index("metric_name")] for r in rows}
        label = metrics.pop() if len(metrics) == 1 else value
    lines = ["import odaplot", "", f"odaplot.summary({RESULT!r}, {value!r}, by={series!r})"]
    outputs = ["summary.json"]
    if _LINE & set(charts) and when is not None:
        lines.append(
            f"odaplot.line({RESULT!r}, {when!r}, {value!r}, {heading!r}, {label!r}, "
            f"unit={unit!r}, series={series!r})"
        )
        outputs.append("line.png")
    if "histogram" in charts:
        lines.append(f"odaplot.histogram({RESULT!r}, {value!r}, {heading!r}, {label!r}, "
                     f"unit={unit!r})")  # fmt: skip
        outputs.append("histogram.png")
    return AnalysisInput(files={RESULT: table, SCRIPT: "\n".join(lines) + "\n"},
                         outputs=tuple(outputs))  # fmt: skip
