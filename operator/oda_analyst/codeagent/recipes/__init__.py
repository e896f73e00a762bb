"""Chart recipes: short scripts that call ``odaplot`` inside the sandbox.

A recipe is not run here: ``script(kind, **params)`` returns the Python text, which then goes
through the same auditor and sandbox as model-written code. ``KINDS`` maps each recipe to the
Appendix-A questions it answers.
"""

from __future__ import annotations

from typing import Any

from oda_analyst.errors import UsageError

KINDS: dict[str, str] = {
    "line": "time-series line plot; with series=… a multi-series comparison (Q2, Q3, Q5, Q9)",
    "histogram": "distribution of one column (Q4)",
    "dual_axis": "two quantities over time on two y axes (Q6, Q11)",
    "bar": "bar chart; several value columns give side-by-side bars (Q7, Q10)",
    "pie": "shares of a whole (Q8)",
    "heatmap": "correlation matrix of several columns (Q13)",
    "box": "box plot of a value per group (Q14)",
    "summary": "min/max/avg of a value, overall or per group (Q9)",
    "coefficient_of_variation": "std/mean of a value per group (Q7)",
    "daily_counts": "rows per UTC day, CSV and plot (Q12)",
}


def script(kind: str, **params: Any) -> str:
    """The Python text that runs recipe ``kind`` with ``params`` (plain JSON-like values)."""
    if kind not in KINDS:
        raise UsageError(f"unknown recipe {kind!r}", hint="one of: " + ", ".join(sorted(KINDS)))
    for key, value in params.items():
        if not isinstance(value, str | int | float | bool | list | tuple | type(None)):
            raise UsageError(
                f"recipe parameter {key!r} must be a plain value",
                hint="strings, numbers, booleans, lists or null",
            )
    args = ", ".join(f"{k}={v!r}" for k, v in sorted(params.items()))
    return f"import odaplot\n\nodaplot.{kind}({args})\n"
