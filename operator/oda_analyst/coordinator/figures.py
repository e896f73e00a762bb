"""The figures an analysis answer states in words: per series min, mean and max; each group's
value of a small table (the highest and lowest of a large one); the winner of a comparison and by
how much. Pure: from a result's rows or a recipe's JSON, never from the question's words.

Numbers are rounded for a person (four significant figures, thousands separated); the CSV and
``rows`` keep full precision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

MAX_LISTED = 12
"""Groups stated one by one; beyond this only the highest and lowest three are."""
_KEYS = ("node_id", "rack_id", "user_id", "job_id", "partition", "gpu", "metric_name", "day",
         "hour")  # fmt: skip
_KEY_WORDS = {"node_id": "node", "rack_id": "rack", "user_id": "user", "job_id": "job",
              "gpu": "GPU", "partition": "partition"}  # fmt: skip


def fmt(value: float) -> str:
    """'1,338', '882.4', '0.8312', '-3.5': four significant figures, separators, no exponent."""
    size = abs(value)
    if size >= 1000:
        return f"{value:,.0f}"
    if size >= 1:
        return f"{value:.{1 if size >= 100 else 2}f}".rstrip("0").rstrip(".")
    return f"{value:.4g}"


def _with_unit(value: float, unit: str | None) -> str:
    if not unit or unit == "1":
        return fmt(value)
    return f"{fmt(value)}{unit}" if unit == "%" else f"{fmt(value)} {unit}"


def _name(key: str, value: Any) -> str:
    word = _KEY_WORDS.get(key, "")
    return f"{word} {value}".strip()


def compared(pairs: Sequence[tuple[str, float]], unit: str | None, what: str) -> str:
    """'node 13 is higher (mean 1,035 W against 882.4 W: +152.6 W, +17.3 %)'."""
    (a, va), (b, vb) = sorted(pairs, key=lambda p: p[1], reverse=True)
    if va == vb:
        return f"{a[:1].upper()}{a[1:]} and {b} are equal ({what} {_with_unit(va, unit)})."
    diff = va - vb
    rel = f", +{fmt(100 * diff / abs(vb))} %" if vb else ""
    high, low = _with_unit(va, unit), _with_unit(vb, unit)
    return (f"{a[:1].upper()}{a[1:]} is higher ({what} {high} against {low}: "
            f"+{_with_unit(diff, unit)}{rel}).")  # fmt: skip


def series_sentence(figures: Mapping[str, Any], *, compare: bool) -> str | None:
    """Per series min/mean/max from the ``series_figures`` recipe's JSON."""
    groups = figures.get("groups")
    if not isinstance(groups, dict) or not groups:
        return None
    unit = figures.get("unit")
    label = str(figures.get("label") or "value")
    key = str(figures.get("series") or "")
    named = [(_name(key, k) if k != "all" else label, g) for k, g in groups.items()]
    if len(named) > MAX_LISTED:
        named = sorted(named, key=lambda p: float(p[1]["avg"]))
        named = [*named[-3:][::-1], *named[:3]]
    parts = [f"{who}: min {_with_unit(g['min'], unit)}, mean {_with_unit(g['avg'], unit)}, "
             f"max {_with_unit(g['max'], unit)}{_extra(g, unit)} ({int(g['count']):,} readings)"
             for who, g in named]  # fmt: skip
    heading = f"{label[:1].upper()}{label[1:]}"
    if list(groups) == ["all"]:  # one series: its name once ('Node power: min …', not twice)
        text = heading + parts[0][len(label) :] + "."
    else:
        text = f"{heading} — " + "; ".join(parts) + "."
    if compare and len(groups) == 2:
        text += " " + compared([(w, float(g["avg"])) for w, g in named], unit, "mean")
    return text


def _extra(group: Mapping[str, Any], unit: str | None) -> str:
    """', p95 41.2 °C, std 1.3 °C': the statistics asked beyond min, mean and max."""
    asked = [k for k in group if k not in ("count", "min", "max", "avg")]
    return "".join(f", {k} {_with_unit(float(group[k]), unit)}" for k in asked)


def _value_columns(columns: Sequence[str]) -> list[str]:
    return [c for c in columns if c.endswith(("_value", "_hours")) or c.startswith("count_")]


def _column_name(column: str) -> str:
    return column.removesuffix("_value").replace("_", " ")


def _column_unit(column: str, unit: str | None) -> str | None:
    if column.endswith("_hours"):
        return "h"
    return None if column.startswith("count_") else unit


def _key_name(key: str, value: Any) -> str:
    if key == "hour" and isinstance(value, str) and "T" in value:
        return value[:16].replace("T", " ") + " UTC"  # '2022-06-01 09:00 UTC'
    return _name(key, value)


def table_sentence(result: Mapping[str, Any], *, compare: bool) -> str | None:
    """Each group's figures of a keyed table held inline ('user 25000: sum cpu hours 345,500 h,
    count job 800'), in the table's own order, then its highest and lowest; the highest and
    lowest three alone when it has more groups than ``MAX_LISTED``."""
    cols = list(result.get("columns") or [])
    rows = result.get("rows")
    key = next((c for c in _KEYS if c in cols), None)
    values = _value_columns(cols)
    if rows is None or key is None or not values or len(rows) < 2 or "timestamp" in cols:
        return None
    k, first = cols.index(key), values[0]
    f = cols.index(first)
    kept = [r for r in rows if all(isinstance(r[cols.index(c)], int | float) for c in values)]
    if len(kept) < 2:
        return None
    unit = result.get("unit")

    def figures(row: Sequence[Any]) -> str:
        return ", ".join(
            f"{_column_name(c)} {_with_unit(row[cols.index(c)], _column_unit(c, unit))}"
            for c in values
        )

    ranked = sorted(kept, key=lambda r: float(r[f]), reverse=True)
    first_unit = _column_unit(first, unit)
    if len(kept) > MAX_LISTED:
        ends = [*ranked[:3], *ranked[-3:]]
        listed = "; ".join(f"{_key_name(key, r[k])}: {figures(r)}" for r in ends)
        return (f"{len(kept):,} groups; the highest and lowest three by {_column_name(first)} — "
                f"{listed}.")  # fmt: skip
    listed = "; ".join(f"{_key_name(key, r[k])}: {figures(r)}" for r in kept)
    text = f"{listed[:1].upper()}{listed[1:]}."
    additive = [c for c in values if c.startswith(("sum_", "count_")) or c.endswith("_hours")]
    if additive:  # sums and counts add up over the groups; means and maxima do not
        sums = {c: sum(r[cols.index(c)] for r in kept) for c in additive}
        total = ", ".join(
            f"{_column_name(c)} {_with_unit(v, _column_unit(c, unit))}" for c, v in sums.items()
        )
        noun = key.removesuffix("_id").removesuffix("_name")
        text += f" Total over the {len(kept)} {noun}s: {total}."
    if compare and len(kept) == 2:
        pairs = [(_key_name(key, r[k]), float(r[f])) for r in kept]
        return f"{text} {compared(pairs, first_unit, _column_name(first))}"
    if len(kept) > 2:
        top, low = ranked[0], ranked[-1]
        text += (f" Highest {_column_name(first)}: {_key_name(key, top[k])} "
                 f"({_with_unit(top[f], first_unit)}); lowest: {_key_name(key, low[k])} "
                 f"({_with_unit(low[f], first_unit)}).")  # fmt: skip
    return text


def correlation_sentence(figures: Mapping[str, Any]) -> str:
    """A scatter's coefficients and its n."""
    return (f"Correlation of {figures.get('y')} with {figures.get('x')}: Pearson r = "
            f"{float(figures['pearson']):.2f}, Spearman \u03c1 = {float(figures['spearman']):.2f}, "
            f"over {int(figures['n']):,} paired {figures.get('grid', 'readings')}.")  # fmt: skip


def recipe_sentence(figures: Mapping[str, Any], *, compare: bool) -> str | None:
    """The sentence of a recipe's figures JSON (a scatter's, a series summary's), or None."""
    if "pearson" in figures:
        return correlation_sentence(figures)
    return series_sentence(figures, compare=compare)
