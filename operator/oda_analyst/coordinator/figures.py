"""The figures an analysis answer states in words: per series min, mean and max; each group's
value of a small table (the highest and lowest of a large one); the winner of a comparison and by
how much. Pure: from a result's rows or a recipe's JSON, never from the question's words.

Numbers are rounded for a person (four significant figures, thousands separated); the CSV and
``rows`` keep full precision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from oda_analyst.reading.model import TIME_UNIT_SECONDS, time_factor

MAX_LISTED = 12
"""Groups stated one by one; beyond this only the highest and lowest three are."""
_KEYS = ("node_id", "rack_id", "user_id", "job_id", "partition", "job_state", "qos", "gpu",
         "metric_name", "day", "hour")  # fmt: skip
_KEY_WORDS = {"node_id": "node", "rack_id": "rack", "user_id": "user", "job_id": "job",
              "gpu": "GPU", "gpu_index": "GPU", "partition": "partition",
              "qos": "QoS"}  # fmt: skip
# The plural a total over the groups names them by ('Total over the 6 final states').
_KEY_PLURALS = {"job_state": "final states", "qos": "QoS levels", "metric_name": "metrics",
                "gpu": "GPUs"}  # fmt: skip
# Per-job quantities of a jobs table and their units ('median_queue_wait_min' in minutes)
_JOB_QUANTITIES = {"duration_h": ("run time", "h"), "queue_wait_min": ("queue wait", "min")}
_FNS = {"avg": "mean", "min": "min", "max": "max", "sum": "total", "median": "median",
        "std": "std", "p90": "p90", "p95": "p95", "p99": "p99"}  # fmt: skip


def fmt(value: float) -> str:
    """'1,338.27', '882.43', '41.29', '1.194', '0.8312', '-3.5', '345,501': hundredths up to
    100,000 (a peak of 287.64 W is a reading, not 287.6), a PUE's thousandths, four
    significant figures below 1; separators, no exponent, no trailing zeros."""
    size = abs(value)
    if size >= 100_000:
        return f"{value:,.0f}"
    if size >= 1:
        places = 2 if size >= 10 else 3  # a PUE of 1.194 is not 1.19
        return f"{value:,.{places}f}".rstrip("0").rstrip(".")
    return f"{value:.4g}"


def _with_unit(value: float, unit: str | None) -> str:
    if not unit or unit == "1":
        return fmt(value)
    return f"{fmt(value)}{unit}" if unit == "%" else f"{fmt(value)} {unit}"


def _name(key: str, value: Any) -> str:
    word = _KEY_WORDS.get(key, "")
    return f"{word} {value}".strip()


_COMPARED = (" is higher (", " are equal (")


def states_a_comparison(summary: str) -> bool:
    """Whether an answer's ``summary`` holds a sentence of ``compared``: which is higher, and by
    how much."""
    return any(mark in summary for mark in _COMPARED)


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
    noun = str(figures.get("noun") or "readings")
    parts = [f"{who}: min {_with_unit(g['min'], unit)}, mean {_with_unit(g['avg'], unit)}, "
             f"max {_with_unit(g['max'], unit)}{_extra(g, unit)} ({int(g['count']):,} {noun})"
             for who, g in named]  # fmt: skip
    heading = f"{label[:1].upper()}{label[1:]}"
    if list(groups) == ["all"]:  # one series: its name once ('Node power: min …', not twice)
        text = heading + parts[0][len(label) :] + "."
    else:
        text = f"{heading} — " + "; ".join(parts) + "."
    pooled = figures.get("pooled")
    if isinstance(pooled, dict):
        plural = _KEY_PLURALS.get(key, key.removesuffix("_id").removesuffix("_name") + "s")
        text += (f" All {len(groups)} {plural if key else 'series'} together: min "
                 f"{_with_unit(pooled['min'], unit)}, mean {_with_unit(pooled['avg'], unit)}, "
                 f"max {_with_unit(pooled['max'], unit)}"
                 f"{_extra(pooled, unit)} ({int(pooled['count']):,} {noun}).")  # fmt: skip
    if compare and len(groups) == 2:
        text += " " + compared([(w, float(g["avg"])) for w, g in named], unit, "mean")
    return text


def _extra(group: Mapping[str, Any], unit: str | None) -> str:
    """', p95 41.2 °C, std 1.3 °C, energy 12.4 kWh': the statistics asked beyond min, mean and
    max."""
    asked = [k for k in group if k not in ("count", "min", "max", "avg", "energy_kwh", "cv")]
    text = "".join(f", {k} {_with_unit(float(group[k]), unit)}" for k in asked)
    if "cv" in group:  # a ratio: no unit, and in percent too
        cv = float(group["cv"])
        text += f", CV {fmt(cv)} ({fmt(100 * cv)} %)"
    if "energy_kwh" in group:
        text += f", energy {kwh(float(group['energy_kwh']))}"
    return text


def kwh(value: float) -> str:
    """'12.4 kWh'; '19,310 kWh (19.31 MWh)' from a megawatt-hour up."""
    if abs(value) >= 1000:
        return f"{fmt(value)} kWh ({fmt(value / 1000)} MWh)"
    return f"{fmt(value)} kWh"


def energy_sentence(energy: Mapping[str, Any]) -> str:
    """The energy in all (over every series) and, where a bucket was asked, per bucket: the
    highest and lowest when there are many."""
    n = int(energy.get("series_count") or 0)
    noun = _KEY_WORDS.get(str(energy.get("by") or ""), "series")
    over = f" over the {n:,} {noun if noun == 'series' else noun + 's'}" if n > 1 else ""
    text = f"Energy in total{over}: {kwh(float(energy['total_kwh']))}."
    buckets = energy.get("by_bucket") or {}
    if buckets:
        ranked = sorted(buckets.items(), key=lambda p: float(p[1]), reverse=True)
        what = str(energy.get("bucket") or "bucket")
        if len(ranked) <= MAX_LISTED:
            listed = "; ".join(f"{k} UTC: {kwh(float(v))}" for k, v in buckets.items())
            text += f" Per {what}: {listed}."
        (hk, hv), (lk, lv) = ranked[0], ranked[-1]
        text += (f" Highest {what}: {hk} UTC ({kwh(float(hv))}); lowest: {lk} UTC "
                 f"({kwh(float(lv))}).")  # fmt: skip
    return text


def profile_sentence(profile: Mapping[str, Any], unit: str | None, label: str) -> str:
    """The mean per hour of the day or per weekday: every weekday, or the highest and lowest
    hours, then which is highest and lowest."""
    weekly = profile.get("cycle") == "weekday"
    per = "day of the week" if weekly else "hour of the day (UTC)"
    means = profile.get("means") or {}
    (hk, hv), (lk, lv) = profile["highest"], profile["lowest"]
    text = (f"Mean {label[:1].lower()}{label[1:]} per {per}, over "
            f"{int(profile.get('readings') or 0):,} readings")  # fmt: skip
    if weekly:
        text += ": " + "; ".join(f"{k} {_with_unit(float(v), unit)}" for k, v in means.items())
    at = "on" if weekly else "at"
    return (f"{text}. Highest {at} {hk} ({_with_unit(float(hv), unit)}); lowest {at} {lk} "
            f"({_with_unit(float(lv), unit)}).")  # fmt: skip


def pie_sentence(pie: Mapping[str, Any], unit: str | None) -> str:
    """Each wedge's share of the whole, largest first: 'Shares of the total 3,733: COMPLETED
    78.0 % (2,913); FAILED 7.3 % (273); …'."""
    places = int(pie.get("places") or 0)

    def amount(v: float) -> str:
        said = f"{v:,.{places}f}"
        return f"{said} {unit}" if unit else said

    parts = "; ".join(f"{name} {float(share):.1f} % ({amount(float(value))})"
                      for name, value, share in pie.get("parts") or [])  # fmt: skip
    return f"Shares of the total {amount(float(pie['total']))}: {parts}."


def anomalies_sentence(found: Mapping[str, Any], unit: str | None, label: str) -> str:
    """How many readings lie beyond k standard deviations of the mean, the bounds, and where."""
    k = float(found["k"])
    side = {"above": "above", "below": "below"}.get(str(found.get("side")), "off")
    bounds = [f"{_with_unit(float(found[b]), unit)}" for b in ("low", "high")
              if found.get(b) is not None]  # fmt: skip
    text = (
        f"{label[:1].upper()}{label[1:]}: {int(found['count']):,} of "
        f"{int(found['readings']):,} readings lie more than {fmt(k)} standard deviations "
        f"{side} the mean (mean {_with_unit(float(found['mean']), unit)}, standard deviation "
        f"{_with_unit(float(found['std']), unit)}; beyond {' and '.join(bounds)})."
    )
    per = found.get("by_series") or {}
    if per:
        ranked = sorted(per.items(), key=lambda p: int(p[1]), reverse=True)
        shown = ranked[:MAX_LISTED]
        key = str(found.get("by") or "")
        listed = ", ".join(f"{_name(key, k)} ({int(v):,})" for k, v in shown)
        more = f", and {len(ranked) - len(shown):,} more" if len(ranked) > len(shown) else ""
        noun = _KEY_WORDS.get(key, "series")
        plural = noun if len(ranked) == 1 or noun == "series" else f"{noun}s"
        text += f" They are on {len(ranked):,} {plural}: {listed}{more}."
    elif int(found["count"]) == 0:
        text += " None does."
    return text


def _job_quantity(column: str) -> tuple[str, str, str] | None:
    """('median', 'queue wait', 'min') of 'median_queue_wait_min', or None."""
    fn, _, of = column.partition("_")
    if fn in _FNS and of in _JOB_QUANTITIES:
        return (_FNS[fn], *_JOB_QUANTITIES[of])
    return None


def _in_time_unit(cols: Sequence[str], row: Sequence[Any], unit: str) -> list[Any]:
    """A row with its run times and queue waits converted to ``unit`` (their columns keep
    their names; ``_column_unit`` then names the unit asked)."""
    out = list(row)
    for i, c in enumerate(cols):
        quantity = _job_quantity(c)
        if quantity and isinstance(out[i], int | float):
            out[i] = out[i] * time_factor(quantity[2], unit)
    return out


_TIME_UNIT_NAMES = {"s": "seconds", "min": "minutes", "h": "hours", "d": "days"}


def time_unit_sentence(result: Mapping[str, Any], time_unit: str | None) -> str | None:
    """'In minutes: mean run time 184.5 min.': a one-row result's run times and queue waits in
    the unit asked, which the retrieval's own answer states in its listing's unit."""
    cols = list(result.get("columns") or [])
    rows = result.get("rows")
    asked = [i for i, c in enumerate(cols) if _job_quantity(c)]
    if time_unit not in TIME_UNIT_SECONDS or not rows or len(rows) != 1 or not asked:
        return None
    row = _in_time_unit(cols, rows[0], str(time_unit))
    stated = ", ".join(f"{_column_name(cols[i])} {_with_unit(row[i], time_unit)}" for i in asked
                       if isinstance(row[i], int | float))  # fmt: skip
    return f"In {_TIME_UNIT_NAMES[str(time_unit)]}: {stated}." if stated else None


def _value_columns(columns: Sequence[str]) -> list[str]:
    return [c for c in columns if c.endswith(("_value", "_hours")) or c.startswith("count_")
            or _job_quantity(c)]  # fmt: skip


def _column_name(column: str) -> str:
    quantity = _job_quantity(column)
    if quantity:
        return f"{quantity[0]} {quantity[1]}"
    return column.removesuffix("_value").replace("_", " ")


def _column_unit(column: str, unit: str | None) -> str | None:
    if column.endswith("_hours"):
        return "h"
    quantity = _job_quantity(column)
    if quantity:
        return quantity[2]
    return None if column.startswith("count_") else unit


def _key_name(key: str, value: Any) -> str:
    if key == "hour" and isinstance(value, str) and "T" in value:
        return value[:16].replace("T", " ") + " UTC"  # '2022-06-01 09:00 UTC'
    return _name(key, value)


_NODES_NAMED = 24  # a job's nodes named in the text; all of them are in the rows and the CSV


def table_sentence(result: Mapping[str, Any], *, compare: bool,
                   time_unit: str | None = None) -> str | None:  # fmt: skip
    """Each group's figures of a keyed table held inline ('user 25000: sum cpu hours 345,500 h,
    count job 800'), in the table's own order, then its highest and lowest; the highest and
    lowest three alone when it has more groups than ``MAX_LISTED``. Run times and queue waits
    are stated in ``time_unit`` when one was asked ('median of each in minutes')."""
    cols = list(result.get("columns") or [])
    rows = result.get("rows")
    if rows is not None and time_unit in TIME_UNIT_SECONDS:
        rows = [_in_time_unit(cols, r, str(time_unit)) for r in rows]
    key = next((c for c in _KEYS if c in cols), None)
    values = _value_columns(cols)
    if rows is None or key is None or not values or len(rows) < 2 or "timestamp" in cols:
        return None
    k, first = cols.index(key), values[0]
    f = cols.index(first)
    kept = [r for r in rows if all(isinstance(r[cols.index(c)], int | float) for c in values)]
    if len(kept) < 2:
        return None
    if cols == ["node_id", "count_job"] and all(r[f] == 1 for r in kept):
        # the nodes one job (or jobs that never shared a node) ran on: a node list and its
        # length, not 'node 966: count job 1' eight times (blind14 Z47 'node count, and which')
        ids = ", ".join(str(r[k]) for r in kept[:_NODES_NAMED])
        more = f" and {len(kept) - _NODES_NAMED:,} more" if len(kept) > _NODES_NAMED else ""
        return f"{len(kept):,} nodes: {ids}{more} (one of the jobs asked on each)."
    unit = result.get("unit")

    def unit_of(column: str) -> str | None:
        asked = time_unit in TIME_UNIT_SECONDS and _job_quantity(column)
        return str(time_unit) if asked else _column_unit(column, unit)

    gpu = cols.index("gpu_index") if key == "node_id" and "gpu_index" in cols else None
    # a second key ('per rack per hour'): each row named by both, 'rack 3 at 2022-06-01 09:00'
    also = [cols.index(c) for c in _KEYS if c in cols and c != key and gpu is None]

    def name_of(key: str, value: Any, row: Sequence[Any] | None = None) -> str:
        # rows per GPU of a node: 'GPU 0 of node 140', not 'node 140' four times
        named = _key_name(key, value)
        if row is not None and also:
            named += "".join(f" at {_key_name(cols[j], row[j])}" for j in also)
        return named if gpu is None or row is None else f"GPU {row[gpu]} of {named}"

    def figures(row: Sequence[Any]) -> str:
        return ", ".join(
            f"{_column_name(c)} {_with_unit(row[cols.index(c)], unit_of(c))}" for c in values
        )

    ranked = sorted(kept, key=lambda r: float(r[f]), reverse=True)
    first_unit = unit_of(first)
    additive = [c for c in values if c.startswith(("sum_", "count_")) or c.endswith("_hours")]
    total = ""
    if additive:  # sums and counts add up over the groups; means and maxima do not
        sums = {c: sum(r[cols.index(c)] for r in kept) for c in additive}
        listed_sums = ", ".join(
            f"{_column_name(c)} {_with_unit(v, unit_of(c))}" for c, v in sums.items()
        )
        noun = _KEY_PLURALS.get(key, key.removesuffix("_id").removesuffix("_name") + "s")
        total = f" Total over the {len(kept)} {noun}: {listed_sums}."
    if len(kept) > MAX_LISTED:
        ends = [*ranked[:3], *ranked[-3:]]
        listed = "; ".join(f"{name_of(key, r[k], r)}: {figures(r)}" for r in ends)
        return (f"{len(kept):,} groups; the highest and lowest three by {_column_name(first)} — "
                f"{listed}.{total}")  # fmt: skip
    listed = "; ".join(f"{name_of(key, r[k], r)}: {figures(r)}" for r in kept)
    text = f"{listed[:1].upper()}{listed[1:]}.{total}"
    if compare and len(kept) == 2:
        pairs = [(name_of(key, r[k], r), float(r[f])) for r in kept]
        return f"{text} {compared(pairs, first_unit, _column_name(first))}"
    if len(kept) > 2:
        top, low = ranked[0], ranked[-1]
        text += (f" Highest {_column_name(first)}: {name_of(key, top[k], top)} "
                 f"({_with_unit(top[f], first_unit)}); lowest: {name_of(key, low[k], low)} "
                 f"({_with_unit(low[f], first_unit)}).")  # fmt: skip
    return text


def periods_sentence(results: Sequence[Mapping[str, Any]]) -> str | None:
    """'8-12 vs 14-18: which was busier, and the gap': results of one figure each, the same
    statistic over different windows, compared in words; None when the results are not that."""
    if len(results) < 2:
        return None
    figures: list[tuple[str, float]] = []
    column = unit = None
    for result in results:
        cols, rows = list(result.get("columns") or []), result.get("rows")
        values = _value_columns(cols)
        if rows is None or len(rows) != 1 or len(values) != 1 or len(cols) != 1:
            return None
        if column not in (None, values[0]):
            return None
        column, unit = values[0], result.get("unit")
        window = (result.get("plan") or {}).get("window") or {}
        start, end = str(window.get("start", "")), str(window.get("end", ""))
        if not (start and end) or not isinstance(rows[0][0], int | float):
            return None
        figures.append((_window_name(start, end), float(rows[0][0])))
    if column is None or len({name for name, _ in figures}) != len(figures):
        return None
    what, shown = _column_name(column), _column_unit(column, unit)
    if len(figures) == 2:
        return compared(figures, shown, what)
    top = max(figures, key=lambda f: f[1])
    low = min(figures, key=lambda f: f[1])
    return (f"Highest {what}: {top[0]} ({_with_unit(top[1], shown)}); lowest: {low[0]} "
            f"({_with_unit(low[1], shown)}).")  # fmt: skip


def _window_name(start: str, end: str) -> str:
    """'2022-06-01 08:00–12:00 UTC' within a day; whole dates otherwise ('may vs june' were both
    named '… 00:00–00:00 UTC')."""
    if start[:10] == end[:10]:
        return f"{start[:16].replace('T', ' ')}–{end[11:16]} UTC"
    return f"{start[:16].replace('T', ' ')} to {end[:16].replace('T', ' ')} UTC"


def correlation_sentence(figures: Mapping[str, Any]) -> str:
    """A scatter's coefficients and its n."""
    return (f"Correlation of {figures.get('y')} with {figures.get('x')}: Pearson r = "
            f"{float(figures['pearson']):.2f}, Spearman \u03c1 = {float(figures['spearman']):.2f}, "
            f"over {int(figures['n']):,} paired {figures.get('grid', 'readings')}.")  # fmt: skip


def _unit_suffix(unit: str | None) -> str:
    if not unit or unit == "1":
        return ""
    return unit if unit == "%" else f" {unit}"


def grid_sentence(grid: Mapping[str, Any], unit: str | None, label: str) -> str:
    """A heatmap's highest and lowest cells ('rack 6 at 12:00 UTC')."""

    def cell(key: str) -> str:
        row, col, value = grid[key]
        when = f" at {col} UTC" if str(grid.get("col", "")).startswith("Hour") else f", {col}"
        # the one figure asked of a cell: a decimal more than a table's thousands
        shown = f"{float(value):,.1f}" if abs(float(value)) >= 1000 else fmt(float(value))
        return f"{row}{when} ({shown}{_unit_suffix(unit)})"

    return (f"Highest {label[:1].lower()}{label[1:]}: {cell('highest')}; lowest: "
            f"{cell('lowest')}, over {int(grid['cells']):,} cells.")  # fmt: skip


def recipe_sentence(figures: Mapping[str, Any], *, compare: bool) -> str | None:
    """The sentence of a recipe's figures JSON (a scatter's, a series summary's), or None."""
    if "pearson" in figures:
        return correlation_sentence(figures)
    if isinstance(figures.get("grid"), dict):
        return grid_sentence(figures["grid"], figures.get("unit"),
                             str(figures.get("label") or "value"))  # fmt: skip
    if isinstance(figures.get("pie"), dict):
        return pie_sentence(figures["pie"], figures.get("unit"))
    if isinstance(figures.get("profile"), dict):
        return profile_sentence(figures["profile"], figures.get("unit"),
                                str(figures.get("label") or "value"))  # fmt: skip
    parts = [series_sentence(figures, compare=compare)]
    if isinstance(figures.get("energy"), dict):
        parts.append(energy_sentence(figures["energy"]))
    if isinstance(figures.get("anomalies"), dict):
        parts.append(anomalies_sentence(figures["anomalies"], figures.get("unit"),
                                        str(figures.get("label") or "value")))  # fmt: skip
    found = [p for p in parts if p]
    return " ".join(found) if found else None
