"""Chart binding: a chart kind and the retrieved results become one analysis script.

Pure: no I/O. The script calls the ``odaplot`` recipes inside the code agent's sandbox, on the
results uploaded as ``r1.csv``, ``r2.csv``… (one per retrieval result), and any reshaping
(long readings to one column per metric, 1-minute means for a correlation) is in the script, so
the figures are computed where the code agent runs, from exactly the rows the retriever returned.

Which result a chart uses, and how, follows from the result's columns (the retriever's answer
contract), never from the request's words: a chart that does not fit the data (a pie chart of
readings over time) is refused with what would fit, not drawn anyway.
"""

from __future__ import annotations

import os
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

from oda_analyst.errors import QueryRejectedError
from oda_analyst.reading.model import CHART_NAMES, ChartKind, time_factor
from oda_analyst.render import acronyms

Glossary = Mapping[str, tuple[str, str | None]]
"""metric name -> (label in the operator's words, unit or None): the MetricsExpert skill's data."""

_BUCKETS = ("day", "hour")
_CATEGORIES = {
    "job_id": "job",
    "node_id": "node",
    "rack_id": "rack",
    "user_id": "user",
    "metric_name": "metric",
    "day": "day",
    "hour": "hour",
    "partition": "partition",
    "job_state": "final state",
    "qos": "QoS",
}
# Categories whose values name themselves ('m100_usr_prod', 'COMPLETED'): no word before them
_SELF_NAMED = frozenset({"partition", "job_state"})
# Per-job quantities of a job listing: (label, unit) — what a histogram or box plot draws
_PER_JOB = {
    "duration_h": ("Run time", "h"),
    "queue_wait_min": ("Queue wait", "min"),
    "cpu_hours": ("CPU hours", "h"),
    "gpu_hours": ("GPU hours", "h"),
}
_JOB_STAT = re.compile(r"^(?:avg|min|max|median|p\d+|std|cv)_(?:duration_h|queue_wait_min)$")
_UNIT_IN_TEXT = re.compile(r" \((?:[^()]{1,8})\)")


class ChartError(QueryRejectedError):
    """The retrieved data cannot make the chart asked for (says what would)."""

    code = "chart_mismatch"


@dataclass(frozen=True)
class Output:
    """A file the script writes to /out."""

    name: str
    media_type: str
    title: str


@dataclass(frozen=True)
class ChartJob:
    """One script for the code agent, the results it reads and the files it writes."""

    kind: ChartKind
    inputs: tuple[int, ...]
    """Indices (0-based) of the retrieval results to upload, as r<index+1>.csv."""
    script: str
    outputs: tuple[Output, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)


def input_name(index: int) -> str:
    return f"r{index + 1}.csv"


class _Name(str):
    """A variable of the script, written as its name rather than as a string literal."""

    def __repr__(self) -> str:
        return str(self)


def _call(fn: str, **params: Any) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in params.items())
    return f"odaplot.{fn}({args})"


def _cap(title: str) -> str:
    """Sentence case with hardware acronyms in capitals ('gpu 0 utilisation' -> 'GPU 0 …')."""
    title = acronyms(title)
    return title[:1].upper() + title[1:]


_DATE = re.compile(r"\b(\d{1,2}) ([A-Z][a-z]{2}) (\d{4})\b")


def _wrap(title: str) -> str:
    """At most three lines of 78 characters, never breaking inside a date ('1 Jun 2022')."""
    glued = _DATE.sub("\\1\u00a0\\2\u00a0\\3", _cap(title))
    return "\n".join(line.replace("\u00a0", " ") for line in textwrap.wrap(glued, 78)[:3])


def _when(result: Mapping[str, Any]) -> str:
    """The result's window in few words: '1 Jun 2022', '1–7 Jun 2022', '1 Jun 2022 00:00–12:00
    UTC' (windows are half-open, so a whole day ends at the next midnight)."""
    window = (result.get("plan") or {}).get("window") or {}
    try:
        start = datetime.fromisoformat(str(window["start"]).replace("Z", "+00:00"))
        end = datetime.fromisoformat(str(window["end"]).replace("Z", "+00:00"))
    except (KeyError, ValueError):
        return ""
    whole_days = start.hour == start.minute == end.hour == end.minute == 0
    if whole_days:
        last = end - timedelta(days=1)
        if last.date() == start.date():
            return f"{start.day} {start:%b %Y}"
        if (start.year, start.month) == (last.year, last.month):
            return f"{start.day}–{last.day} {last:%b %Y}"
        return f"{start.day} {start:%b} – {last.day} {last:%b %Y}"
    if start.date() == end.date():
        return f"{start.day} {start:%b %Y} {start:%H:%M}–{end:%H:%M} UTC"
    return f"{start.day} {start:%b %Y} {start:%H:%M} – {end.day} {end:%b %Y} {end:%H:%M} UTC"


def _title(result: Mapping[str, Any], lead: str | None = None) -> str:
    """The result's own sentence (what the retriever understood) as a chart title, units left
    to the axes, wrapped to two lines at most."""
    text = str(result.get("understood_as") or result.get("explanation") or "").strip().rstrip(".")
    text = _UNIT_IN_TEXT.sub("", text)
    text = re.sub(r"^Readings of ", f"{lead} " if lead else "", text)
    # A bar per metric says it already; 'for each metric' only lengthens the title.
    text = text.replace(" for each metric", "")
    return _wrap(text)


def _metrics(result: Mapping[str, Any]) -> list[str]:
    plan = result.get("plan") or {}
    named = [str(m["metric"]) for m in plan.get("metrics") or []]
    columns = list(result.get("columns") or [])
    if named or "metric_name" not in columns or result.get("rows") is None:
        return named
    # A result with no typed plan (a baseline's raw-lake query) names its metrics in its rows.
    at = columns.index("metric_name")
    return list(dict.fromkeys(str(row[at]) for row in result["rows"]))


def _label(metric: str, glossary: Glossary) -> tuple[str, str | None]:
    label, unit = glossary.get(metric, (metric, None))
    return _cap(label), unit


def _node_count(result: Mapping[str, Any]) -> int | None:
    """How many nodes the plan names (None: all, or jobs' nodes)."""
    for sel in (result.get("plan") or {}).get("entities") or []:
        if sel.get("kind") == "node":
            return None if sel.get("all") else len(sel.get("ids") or [])
    return None


def _holds_readings(result: Mapping[str, Any]) -> bool:
    """Whether a result is raw readings (timestamp and value per row)."""
    return {"timestamp", "value"} <= set(result["columns"])


def _readings(results: Sequence[Mapping[str, Any]]) -> int | None:
    """The last result of raw readings."""
    for i in range(len(results) - 1, -1, -1):
        if _holds_readings(results[i]):
            return i
    return None


def _stat_columns(result: Mapping[str, Any]) -> list[str]:
    plain = re.compile(r"^(?:[a-z0-9]+_value|count_\w+|sum_\w+)$")
    return [c for c in result["columns"] if plain.match(c) or _JOB_STAT.match(c)]


def _drawn_columns(values: Sequence[str]) -> list[str]:
    """The figures a chart draws of a jobs table's per-group figures: the count of jobs that
    accompanies a total or a statistic is stated in words, not drawn beside it in another unit."""
    shown = [c for c in values if c != "count_job"]
    return shown or list(values)


def _value_label(column: str, metric_label: str, unit: str | None) -> tuple[str, str | None]:
    """'avg_value' -> ('Average node power', 'W'); 'count_job' -> ('Jobs', 'count')."""
    names = {
        "avg": "Average",
        "min": "Minimum",
        "max": "Maximum",
        "sum": "Total",
        "median": "Median",
        "std": "Standard deviation",
        "cv": "Coefficient of variation",
    }
    if column.startswith("count_"):
        return f"Number of {column.removeprefix('count_')}s", None
    if _JOB_STAT.match(column):
        fn, _, of = column.partition("_")
        what, job_unit = _PER_JOB[of]
        return f"{names.get(fn, fn.upper())} {what.lower()}", job_unit
    if column.startswith("sum_"):
        what = column.removeprefix("sum_").replace("_", " ")
        what = re.sub(r"\b(cpu|gpu)\b", lambda m: m[1].upper(), what)
        return _cap(what), "h" if what.endswith("hours") else unit
    fn = column.removesuffix("_value")
    head = names.get(fn, _cap(fn))
    return f"{head} {metric_label.lower()}", unit


def _common_words(labels: Sequence[str]) -> str:
    """What several labels share at their end ('cluster cpu utilisation', 'cluster gpu
    utilisation' -> 'utilisation'), else 'value'."""
    split = [label.lower().split() for label in labels]
    head: list[str] = []
    for words in zip(*split, strict=False):
        if len(set(words)) != 1:
            break
        head.append(words[0])
    tail: list[str] = []
    for words in zip(*(list(reversed(w)) for w in split), strict=False):
        if len(set(words)) != 1 or len(head) + len(tail) >= min(len(w) for w in split):
            break
        tail.insert(0, words[0])
    return " ".join(head + tail) or "value"


def _mismatch(kind: ChartKind, why: str) -> ChartError:
    return ChartError(
        f"cannot draw {CHART_NAMES[kind]} of this data: {why}",
        hint="ask for a chart that fits it (a line plot for readings over time, a bar chart "
        "for one figure per job, node or metric, a histogram for a distribution)",
    )


# --- one binder per chart kind ------------------------------------------------------------------


_FIGURES = Output("figures.json", "application/json", "Figures of the plotted readings")


def _figures_call(data: str, series: str | None, label: str, unit: str | None,
                  figures: Sequence[str], by: str | None = None) -> str:  # fmt: skip
    """The recipe that computes what the answer states of the drawn readings: min, mean, max
    and count per series, and the statistics asked of them ('p95', 'median', 'std', an energy,
    anomalies counted per ``by``)."""
    grouped: dict[str, Any] = {"series": series} if series else {}
    if by and _anomalies(figures):
        grouped["by"] = by
    return _call("series_figures", data=data, value="value", **grouped, label=label, unit=unit,
                 extra=[f for f in figures if not f.startswith(("rolling:", "time_unit:"))],
                 out="figures.json")  # fmt: skip


def _asked(figures: Sequence[str], name: str) -> list[str] | None:
    """The parameters of a figure asked ('anomalies:3:above' -> ['3', 'above'], 'energy' -> []),
    or None when the plan's figures do not ask for it."""
    for fig in figures:
        head, *params = fig.split(":")
        if head == name:
            return params
    return None


def _anomalies(figures: Sequence[str]) -> dict[str, Any]:
    """The k and side of anomalies asked ('anomalies:3:above' in the plan's figures), as the
    chart recipes take them; empty when none are."""
    params = _asked(figures, "anomalies")
    return {"sigmas": float(params[0]), "side": params[1]} if params else {}


def _energy(figures: Sequence[str]) -> tuple[bool, str | None]:
    """Whether an energy is asked ('energy', 'energy:hour'), and its bucket."""
    params = _asked(figures, "energy")
    return params is not None, params[0] if params else None


_POWER_UNITS = ("W", "kW", "MW")
# The charts whose script computes each kind of figure beside them (energy bars; a line or a
# histogram with the anomalies marked): asked beside another chart only, a figure would be lost.
_CARRIERS: dict[str, tuple[ChartKind, ...]] = {
    "energy": ("line", "bar", "histogram", "box"),
    "anomalies": ("line", "histogram", "box"),
    "profile": ("line", "bar", "heatmap"),
}


def _profile(figures: Sequence[str]) -> str | None:
    """The cycle of a profile asked ('profile:hour_of_day', 'profile:weekday'), or None."""
    params = _asked(figures, "profile")
    return params[0] if params else None


def _mean_title(res: Mapping[str, Any], label: str, per: str) -> str:
    """'Mean node power per hour of the day (UTC) for node 5, …': the metric named once."""
    rest = " ".join(_title(res).split())
    if rest.lower().startswith(label.lower()):  # 'Node power for node 5, …'
        rest = rest[len(label) :].lstrip(" ,")
    return _wrap(f"Mean {label[:1].lower()}{label[1:]} per {per} {rest}")


def _profile_job(kind: ChartKind, results: Sequence[Mapping[str, Any]], glossary: Glossary,
                 cycle: str) -> ChartJob:  # fmt: skip
    """The mean per hour of the day or per weekday of the readings, drawn as ``kind``."""
    idx = _readings(results)
    if idx is None:
        raise _mismatch(kind, "a profile is computed from individual readings, and no result "
                        "holds them")  # fmt: skip
    res = results[idx]
    metrics = _metrics(res)
    if len(metrics) != 1:
        raise _mismatch(kind, "a profile is of one metric; ask for one at a time")
    label, unit = _label(metrics[0], glossary)
    per = "hour of the day (UTC)" if cycle == "hour_of_day" else "day of the week"
    title = _mean_title(res, label, per)
    script = "import odaplot\n" + _call(
        "profile", data=input_name(idx), value="value", cycle=cycle, title=title,
        ylabel=f"Mean {label[:1].lower()}{label[1:]}", unit=unit, label=label, kind=kind,
        out=f"{kind}.png",
    ) + "\n"  # fmt: skip
    return ChartJob(kind, (idx,), script, (
        Output(f"{kind}.png", "image/png", title),
        Output("profile.csv", "text/csv", f"Mean {label.lower()} per {per}"),
        _FIGURES,
    ))  # fmt: skip


def _day_hour_grid(results: Sequence[Mapping[str, Any]], glossary: Glossary) -> ChartJob:
    """An hour-of-day profile drawn as a heatmap: one cell per day and hour of the day, each
    the mean of its readings ('outdoor temp 1-7 June as a heatmap, day x hour of day')."""
    idx = _readings(results)
    if idx is None:
        raise _mismatch("heatmap", "a day-by-hour heatmap is computed from individual readings, "
                        "and no result holds them")  # fmt: skip
    res = results[idx]
    metrics = _metrics(res)
    if len(metrics) != 1:
        raise _mismatch("heatmap", "a day-by-hour heatmap is of one metric; ask for one at a time")
    label, unit = _label(metrics[0], glossary)
    title = _mean_title(res, label, "day and hour of the day")
    script = "import odaplot\n" + _call(
        "day_hour_grid", data=input_name(idx), value="value", title=title, label=label,
        unit=unit, out="heatmap.png",
    ) + "\n"  # fmt: skip
    return ChartJob("heatmap", (idx,), script, (
        Output("heatmap.png", "image/png", title),
        Output("cells.csv", "text/csv", f"Mean {label.lower()} per day and hour of the day"),
        _FIGURES,
    ))  # fmt: skip


def _check_carries(kind: ChartKind, figures: Sequence[str]) -> None:
    for name, kinds in _CARRIERS.items():
        if kind not in kinds and _asked(figures, name) is not None:
            raise _mismatch(kind, f"the {name} asked is computed beside "
                            + " or ".join(CHART_NAMES[k] for k in kinds)
                            + "; ask for one of those with it")  # fmt: skip


def _check_energy(kind: ChartKind, results: Sequence[Mapping[str, Any]], glossary: Glossary,
                  figures: Sequence[str]) -> None:  # fmt: skip
    """An energy is power integrated over time: it needs readings of power, never anything else
    summed (refused with why, so no energy is ever stated of a temperature)."""
    if not _energy(figures)[0]:
        return
    idx = _readings(results)
    if idx is None:
        raise _mismatch(kind, "an energy needs the power readings over time, and no result "
                        "holds individual readings")  # fmt: skip
    units = {_label(m, glossary)[1] for m in _metrics(results[idx])}
    if not units or not units <= set(_POWER_UNITS):
        raise _mismatch(kind, "an energy is power integrated over time, and these readings are "
                        f"in {', '.join(sorted(str(u) for u in units)) or 'no unit'}, not "
                        "W or kW")  # fmt: skip


def _rolling_minutes(figures: Sequence[str]) -> float | None:
    """The window of a rolling mean asked ('rolling:10' in the plan's figures), in minutes."""
    params = _asked(figures, "rolling")
    return float(params[0]) if params else None


def _with_figures(job: ChartJob, results: Sequence[Mapping[str, Any]], glossary: Glossary,
                  figures: Sequence[str]) -> ChartJob:  # fmt: skip
    """A histogram or box plot with the figures asked of its readings ('p95 … + histogram'),
    anomalies counted per node where the readings are of nodes."""
    (idx,) = job.inputs
    label, unit = _label(_metrics(results[idx])[0], glossary)
    by = "node_id" if "node_id" in results[idx]["columns"] else None
    call = _figures_call(input_name(idx), None, label, unit, figures, by=by)
    return replace(job, script=job.script + call + "\n", outputs=(*job.outputs, _FIGURES))


def _line(results: Sequence[Mapping[str, Any]], glossary: Glossary, stats: bool,
          figures: Sequence[str] = ()) -> ChartJob:  # fmt: skip
    idx = _readings(results)
    if idx is not None:
        res = results[idx]
        cols = set(res["columns"])
        metrics = _metrics(res)
        units = {_label(m, glossary)[1] for m in metrics}
        if len(units) > 1:
            raise _mismatch(
                "line",
                "its metrics have different units "
                f"({', '.join(sorted(str(u) for u in units))}); ask for a dual-axis "
                "plot, or one metric at a time",
            )
        if not metrics:
            raise _mismatch("line", "the result names no metric to label its axis with")
        label, unit = _label(metrics[0], glossary) if len(metrics) == 1 else ("Value", units.pop())
        lines = ["import odaplot"]
        data, series, series_label = input_name(idx), None, None
        if "job_id" in cols:
            series, series_label = "job_id", "job"
        elif len(metrics) > 1:
            names = {m: _label(m, glossary)[0] for m in metrics}
            lines += [
                f"df = odaplot.load({data!r})",
                f"df['metric'] = df['metric_name'].map({names!r})",
                "df.to_csv('/tmp/series.csv', index=False)",
            ]
            data, series, series_label = "/tmp/series.csv", "metric", ""
        elif _node_count(res) != 1 and "node_id" in cols:
            series, series_label = "node_id", "node"
        title = _title(res)
        rolling = _rolling_minutes(figures)
        if rolling is not None:
            # the smoothing asked ('10-min rolling mean') is what is drawn and what is stated
            lines.append(_call("rolled", data=data, value="value", minutes=rolling,
                               **({"series": series} if series else {})))  # fmt: skip
            data = "/tmp/rolled.csv"
            label = f"{label} ({rolling:g}-minute rolling mean)"
            title = _wrap(f"{rolling:g}-minute rolling mean of {title[:1].lower()}{title[1:]}")
        params: dict[str, Any] = {
            "data": data,
            "x": "timestamp",
            "y": "value",
            "title": title,
            "ylabel": label,
            "unit": unit,
        }
        if series:
            params.update(series=series, series_label=series_label)
        if stats:
            params["stats"] = True
        params.update(_anomalies(figures))
        params["out"] = "line.png"
        lines.append(_call("line", **params))
        # the figures of each plotted series, for the answer to state in words
        lines.append(_figures_call(data, series, label, unit, figures))
        return ChartJob(
            "line",
            (idx,),
            "\n".join(lines) + "\n",
            (
                Output("line.png", "image/png", params["title"]),
                Output("figures.json", "application/json", "Figures of the plotted series"),
            ),
        )
    for i in range(len(results) - 1, -1, -1):
        res = results[i]
        bucket = next((b for b in _BUCKETS if b in res["columns"]), None)
        values = _drawn_columns(_stat_columns(res))  # 'daily GPU hours': not their job count
        if bucket and len(values) == 1:
            metrics = _metrics(res)
            metric_label, unit = _label(metrics[0], glossary) if metrics else ("", None)
            ylabel, unit = _value_label(values[0], metric_label, unit)
            title = _title(res)
            script = (
                "import odaplot\n"
                + _call(
                    "line",
                    data=input_name(i),
                    x=bucket,
                    y=values[0],
                    title=title,
                    ylabel=ylabel,
                    unit=unit,
                    marker="o",
                    annotate=True,
                    out="line.png",
                )
                + "\n"
            )
            return ChartJob("line", (i,), script, (Output("line.png", "image/png", title),))
    raise _mismatch("line", "no result holds readings over time or one figure per day or hour")


def _job_listing(results: Sequence[Mapping[str, Any]]) -> tuple[int, str] | None:
    """The last result listing jobs one per row with a per-job quantity (run time, queue wait,
    CPU/GPU hours), and that quantity's column."""
    for i in range(len(results) - 1, -1, -1):
        cols = results[i]["columns"]
        if "job_id" in cols and "timestamp" not in cols and not _stat_columns(results[i]):
            column = next((c for c in _PER_JOB if c in cols), None)
            if column is not None:
                return i, column
    return None


def _per_job(column: str, figures: Sequence[str]) -> tuple[str, str, float]:
    """The label and unit a per-job quantity is drawn and stated in, and the factor from the
    listing's own unit: a run time asked 'in minutes' is its hours x 60 (CPU and GPU hours are
    amounts of work, not durations, and keep their unit)."""
    label, unit = _PER_JOB[column]
    asked = next(iter(_asked(figures, "time_unit") or []), None)
    if asked is None or column not in ("duration_h", "queue_wait_min") or asked == unit:
        return label, unit, 1.0
    return label, asked, time_factor(unit, asked)


def _scaled(column: str, factor: float) -> list[str]:
    """The script lines that put ``df``'s per-job quantity in the unit asked."""
    return [] if factor == 1.0 else [f"df[{column!r}] = df[{column!r}] * {factor!r}"]


def _job_figures(data: str, column: str, group: str | None, figures: Sequence[str]) -> str:
    """The figures of per-job values the answer states: min, mean, max and the median (a box
    plot's line, a histogram's marker) per group, and any other statistic asked (the data
    already in the unit asked)."""
    label, unit, _ = _per_job(column, figures)
    extra = ["median", *(f for f in figures if f not in ("median",) and re.fullmatch(
        r"p\d+|std", f))]  # fmt: skip
    grouped: dict[str, Any] = {"series": group} if group else {}
    return _call("series_figures", data=data, value=column, **grouped, label=label, unit=unit,
                 extra=extra, noun="jobs", out="figures.json")  # fmt: skip


def _job_histogram(idx: int, column: str, res: Mapping[str, Any],
                   figures: Sequence[str]) -> ChartJob:  # fmt: skip
    """The distribution of a per-job quantity ('run times of the debug jobs that started on 5
    June'), with its median and the figures asked."""
    label, unit, factor = _per_job(column, figures)
    rest = str(res.get("understood_as") or "").strip().rstrip(".")
    title = _wrap(f"Distribution of {label.lower()}: {rest[:1].lower()}{rest[1:]}")
    data = input_name(idx)
    lines = ["import odaplot"]
    if factor != 1.0:
        lines += [f"df = odaplot.load({data!r})", *_scaled(column, factor),
                  "df.to_csv('/tmp/jobs.csv', index=False)"]  # fmt: skip
        data = "/tmp/jobs.csv"
    lines += [
        _call("histogram", data=data, column=column, title=title, xlabel=label, unit=unit,
              bins=40, noun="jobs", out="histogram.png"),
        _job_figures(data, column, None, figures),
    ]  # fmt: skip
    script = "\n".join(lines) + "\n"
    return ChartJob("histogram", (idx,), script,
                    (Output("histogram.png", "image/png", title), _FIGURES))  # fmt: skip


def _histogram(results: Sequence[Mapping[str, Any]], glossary: Glossary,
               figures: Sequence[str] = ()) -> ChartJob:  # fmt: skip
    idx = _readings(results)
    listing = _job_listing(results)
    if idx is None and listing is not None:
        return _job_histogram(listing[0], listing[1], results[listing[0]], figures)
    if idx is None:
        raise _mismatch("histogram", "no result holds individual readings or per-job values")
    res = results[idx]
    metrics = _metrics(res)
    if len(metrics) != 1:
        raise _mismatch("histogram", "it mixes several metrics; ask for one at a time")
    label, unit = _label(metrics[0], glossary)
    title = _title(res, lead="Distribution of")
    script = (
        "import odaplot\n"
        + _call(
            "histogram",
            data=input_name(idx),
            column="value",
            title=title,
            xlabel=label,
            unit=unit,
            bins=40,
            **_anomalies(figures),
            out="histogram.png",
        )
        + "\n"
    )
    return ChartJob("histogram", (idx,), script, (Output("histogram.png", "image/png", title),))


def _window_label(result: Mapping[str, Any]) -> str:
    window = (result.get("plan") or {}).get("window") or {}
    try:
        start = datetime.fromisoformat(str(window["start"]).replace("Z", "+00:00"))
        last = datetime.fromisoformat(str(window["end"]).replace("Z", "+00:00")) - timedelta(
            seconds=1
        )
    except (KeyError, ValueError):
        return "period"
    if (start.year, start.month) == (last.year, last.month):
        return f"{start.day}–{last.day} {last:%b %Y}"
    return f"{start.day} {start:%b} – {last.day} {last:%b %Y}"


def _dual_axis(results: Sequence[Mapping[str, Any]], glossary: Glossary) -> ChartJob:
    idx = _readings(results)
    if idx is not None and len(_metrics(results[idx])) == 2:
        res = results[idx]
        left, right = _metrics(res)
        (ll, lu), (rl, ru) = _label(left, glossary), _label(right, glossary)
        title = _title(res)
        lines = [
            "import odaplot",
            f"df = odaplot.load({input_name(idx)!r}, time='timestamp')",
            "wide = df.pivot_table(index='timestamp', columns='metric_name', values='value')",
            "wide.reset_index().to_csv('/tmp/wide.csv', index=False)",
            _call(
                "dual_axis",
                data="/tmp/wide.csv",
                x="timestamp",
                left=left,
                right=right,
                title=title,
                left_label=ll,
                right_label=rl,
                left_unit=lu,
                right_unit=ru,
                same_scale=lu == ru,
                out="dual_axis.png",
            ),
        ]
        # each series' min, mean and max in its own unit, for the answer to state in words
        figures = []
        for side, metric, label, unit in (("left", left, ll, lu), ("right", right, rl, ru)):
            lines.append(f"df[df['metric_name'] == {metric!r}].to_csv('/tmp/{side}.csv', "
                         "index=False)")  # fmt: skip
            lines.append(_call("series_figures", data=f"/tmp/{side}.csv", value="value",
                               label=label, unit=unit, out=f"figures-{side}.json"))  # fmt: skip
            figures.append(
                Output(f"figures-{side}.json", "application/json", f"Figures of {label}")
            )
        return ChartJob(
            "dual_axis",
            (idx,),
            "\n".join(lines) + "\n",
            (Output("dual_axis.png", "image/png", title), *figures),
        )
    pairs = [
        i
        for i, r in enumerate(results)
        if any(b in r["columns"] for b in _BUCKETS) and len(_stat_columns(r)) == 1
    ]
    if len(pairs) == 2:
        a, b = (results[i] for i in pairs)
        if a["columns"] != b["columns"]:
            raise _mismatch("dual_axis", "the two results have different columns")
        bucket = next(c for c in _BUCKETS if c in a["columns"])
        value = _stat_columns(a)[0]
        metrics = _metrics(a)
        metric_label, unit = _label(metrics[0], glossary) if metrics else ("", None)
        ylabel, unit = _value_label(value, metric_label, unit)
        la, lb = _window_label(a), _window_label(b)
        title = "\n".join(textwrap.wrap(f"{ylabel} per {bucket}: {la} compared with {lb}", 78))
        lines = [
            "import odaplot",
            "import pandas as pd",
            f"a = odaplot.load({input_name(pairs[0])!r})",
            f"b = odaplot.load({input_name(pairs[1])!r})",
            # Aligned by position in the period: day 1 with day 1, the dates kept in the ticks.
            "wide = pd.DataFrame({'position': range(1, max(len(a), len(b)) + 1)})",
            f"wide['left'] = a[{value!r}].reindex(range(len(wide))).values",
            f"wide['right'] = b[{value!r}].reindex(range(len(wide))).values",
            f"wide['tick'] = [f'{bucket} {{i}}\\n' + ' | '.join(str(s[{bucket!r}].iloc[i - 1])[5:] "
            "for s in (a, b) if i <= len(s)) for i in wide['position']]",
            "wide.to_csv('/tmp/periods.csv', index=False)",
            _call(
                "dual_axis",
                data="/tmp/periods.csv",
                x="tick",
                left="left",
                right="right",
                title=title,
                left_label=f"{ylabel}, {la}",
                right_label=f"{ylabel}, {lb}",
                left_unit=unit,
                right_unit=unit,
                categorical_x=True,
                same_scale=True,
                xlabel=f"{_cap(bucket)} of the period (month-day: {la} | {lb})",
                out="dual_axis.png",
            ),
        ]
        return ChartJob(
            "dual_axis",
            tuple(pairs),
            "\n".join(lines) + "\n",
            (Output("dual_axis.png", "image/png", title),),
        )
    raise _mismatch("dual_axis", "it needs readings of two metrics, or two periods of one figure")


def _category(result: Mapping[str, Any]) -> str | None:
    return next((c for c in result["columns"] if c in _CATEGORIES), None)


def _energy_bars(results: Sequence[Mapping[str, Any]], glossary: Glossary,
                 figures: Sequence[str]) -> ChartJob:  # fmt: skip
    """Bars of the energy per bucket asked ('hourly'), summed over the series, or per series."""
    idx = _readings(results)
    assert idx is not None  # _check_energy
    res = results[idx]
    metrics = _metrics(res)
    label, unit = _label(metrics[0], glossary)
    cols = set(res["columns"])
    series = "node_id" if "node_id" in cols else "job_id" if "job_id" in cols else None
    if len(metrics) > 1:
        series = "metric_name"
    bucket = _energy(figures)[1]
    per = f"per {bucket}" if bucket else f"per {_CATEGORIES.get(series or '', 'series')}"
    title = _wrap(f"Energy {per} (kWh) of {_title(res)[:1].lower()}{_title(res)[1:]}")
    script = "import odaplot\n" + _call(
        "energy_bars", data=input_name(idx), value="value", unit=unit, title=title,
        **({"series": series, "series_label": _CATEGORIES.get(series, "")} if series else {}),
        **({"bucket": bucket} if bucket else {}), out="bar.png",
    ) + "\n" + _figures_call(input_name(idx), series, label, unit, figures) + "\n"  # fmt: skip
    return ChartJob("bar", (idx,), script, (
        Output("bar.png", "image/png", title),
        Output("energy.csv", "text/csv", f"Energy {per}, kWh"),
        _FIGURES,
    ))  # fmt: skip


def _bar(results: Sequence[Mapping[str, Any]], glossary: Glossary,
         figures: Sequence[str] = ()) -> ChartJob:  # fmt: skip
    if _energy(figures)[0]:
        return _energy_bars(results, glossary, figures)
    for i in range(len(results) - 1, -1, -1):
        res = results[i]
        cat, values = _category(res), _stat_columns(res)
        if cat is None or not values or "timestamp" in res["columns"]:
            continue
        metrics = _metrics(res)
        metric_label, unit = _label(metrics[0], glossary) if len(metrics) == 1 else ("", None)
        if len(metrics) > 1:
            units = {_label(m, glossary)[1] for m in metrics}
            unit = units.pop() if len(units) == 1 else None
            metric_label = _common_words([_label(m, glossary)[0] for m in metrics])
        lines = ["import odaplot", f"df = odaplot.load({input_name(i)!r})"]
        if cat == "metric_name":
            names = {m: _label(m, glossary)[0] for m in metrics}
            lines.append(f"df['category'] = df['metric_name'].map({names!r})")
        elif cat in _SELF_NAMED:
            lines.append(f"df['category'] = df[{cat!r}].astype(str)")
        else:
            lines.append(f"df['category'] = {_CATEGORIES[cat] + ' '!r} + df[{cat!r}].astype(str)")
        chosen = ["cv_value"] if "cv_value" in values else _drawn_columns(values)
        ylabel, yunit = _value_label(chosen[0], metric_label, unit)
        title = _title(res)
        if chosen == ["cv_value"]:
            # A coefficient of variation is a ratio; operators read it in percent.
            lines.append("df['cv_percent'] = 100 * df['cv_value']")
            what = f"Coefficient of variation of {metric_label.lower()}"
            rest = str(res.get("understood_as") or "").split(" per ", 1)
            title = _wrap(f"{what} per {rest[1].rstrip('.')}" if len(rest) == 2 else what)
            chosen, ylabel, yunit = ["cv_percent"], "Coefficient of variation, std/mean", "%"
        labels = [_value_label(c, metric_label, unit)[0] for c in chosen]
        lines.append("df.to_csv('/tmp/bars.csv', index=False)")
        lines.append(
            _call(
                "bar",
                data="/tmp/bars.csv",
                category="category",
                values=chosen if len(chosen) > 1 else chosen[0],
                title=title,
                ylabel=ylabel if len(chosen) == 1 else "Value",
                unit=yunit,
                category_label=_cap(_CATEGORIES[cat]),
                value_labels=labels,
                out="bar.png",
            )
        )
        return ChartJob(
            "bar", (i,), "\n".join(lines) + "\n", (Output("bar.png", "image/png", title),)
        )
    periods = _period_bars(results, glossary)
    if periods is not None:
        return periods
    raise _mismatch("bar", "no result holds one figure per job, node, user, metric or day")


def _period_label(result: Mapping[str, Any], same_day: bool) -> str:
    """A window as a bar's name: its hours where every window is on one day ('08:00–12:00')."""
    window = (result.get("plan") or {}).get("window") or {}
    if not same_day:
        return _window_label(result)
    start, end = (str(window.get(k, ""))[11:16] for k in ("start", "end"))
    return f"{start}–{end if end != '00:00' else '24:00'}"


def _period_bars(results: Sequence[Mapping[str, Any]], glossary: Glossary) -> ChartJob | None:
    """'8-12 vs 14-18: which window was busier, bar chart': one bar per window, each result one
    figure of the same statistic of the same metrics; None when the results are not that."""
    ones = [i for i, r in enumerate(results)
            if r.get("row_count") == 1 and len(_stat_columns(r)) == 1
            and _category(r) is None and "timestamp" not in r["columns"]]  # fmt: skip
    if len(ones) < 2 or len(ones) != len(results):
        return None
    first = results[ones[0]]
    value, metrics = _stat_columns(first)[0], _metrics(first)
    if any(_stat_columns(results[i]) != [value] or _metrics(results[i]) != metrics for i in ones):
        return None
    windows = [(results[i].get("plan") or {}).get("window") or {} for i in ones]
    days = {str(w.get("start", ""))[:10] for w in windows}
    same_day = len(days) == 1 and all(
        str(w.get("end", ""))[:10] in days or str(w.get("end", ""))[11:16] == "00:00"
        for w in windows
    )
    labels = [_period_label(results[i], same_day) for i in ones]
    if len(set(labels)) != len(labels):
        return None  # not periods of one figure (two nodes, two metrics: the table's to say)
    metric_label, unit = _label(metrics[0], glossary) if len(metrics) == 1 else ("", None)
    ylabel, yunit = _value_label(value, metric_label, unit)
    when = f", {_window_label(first).split('–')[-1].strip()}" if same_day else ""
    title = _wrap(f"{ylabel} per period{when}")
    lines = [
        "import odaplot",
        "import pandas as pd",
        "df = pd.DataFrame({'category': " + repr(labels) + ", 'value': ["
        + ", ".join(f"odaplot.load({input_name(i)!r})[{value!r}].iloc[0]" for i in ones) + "]})",
        "df.to_csv('/tmp/bars.csv', index=False)",
        _call("bar", data="/tmp/bars.csv", category="category", values="value", title=title,
              ylabel=ylabel, unit=yunit, category_label="Period (UTC)" if same_day else "Period",
              out="bar.png"),
    ]  # fmt: skip
    return ChartJob("bar", tuple(ones), "\n".join(lines) + "\n",
                    (Output("bar.png", "image/png", title),))  # fmt: skip


def _parts_pie(index: int, res: Mapping[str, Any]) -> ChartJob | None:
    """'jobs per final state', 'CPU hours per partition' as a pie: one wedge per group of a
    count or a total, which add up to the whole; None when the result has no groups. A mean,
    a median or a maximum per group is no part of a whole: refused, saying so."""
    cat = _category(res)
    cols = res["columns"]
    if cat is None or cat in _BUCKETS or "timestamp" in cols or "job_id" in cols:
        return None
    values = _stat_columns(res)
    parts = [c for c in values if c.startswith(("sum_", "count_"))]
    # the job count beside a median per partition is that median's sample, not what was asked
    others = [c for c in values if c not in parts]
    if others or not parts:
        if values:
            what = _value_label((others or values)[0], "", None)[0].strip().lower()
            article = "an" if what[:1] in "aeiou" else "a"
            raise _mismatch("pie", f"a pie chart shows the parts of a whole (a count or a total "
                            f"per {_CATEGORIES[cat]}), and {article} {what} per "
                            f"{_CATEGORIES[cat]} is not one; a bar chart fits it")  # fmt: skip
        return None
    value = _drawn_columns(parts)[0]
    label, unit = _value_label(value, "", None)
    title = _wrap(f"{label} per {_CATEGORIES[cat]}, {_when(res)}")
    name = (f"df[{cat!r}].astype(str)" if cat in _SELF_NAMED
            else f"{_CATEGORIES[cat] + ' '!r} + df[{cat!r}].astype(str)")  # fmt: skip
    lines = [
        "import odaplot",
        f"df = odaplot.load({input_name(index)!r})",
        f"df['part'] = {name}",
        f"df = df[df[{value!r}] > 0]",  # an empty group is no wedge
        "df.to_csv('/tmp/parts.csv', index=False)",
        _call("pie", data="/tmp/parts.csv", label="part", value=value, title=title, unit=unit,
              out="pie.png", out_json="figures.json"),
    ]  # fmt: skip
    return ChartJob("pie", (index,), "\n".join(lines) + "\n",
                    (Output("pie.png", "image/png", title), _FIGURES))  # fmt: skip


def _pie(results: Sequence[Mapping[str, Any]], glossary: Glossary) -> ChartJob:
    for i in range(len(results) - 1, -1, -1):
        grouped = _parts_pie(i, results[i])
        if grouped is not None:
            return grouped
    for i in range(len(results) - 1, -1, -1):
        res = results[i]
        sums = [c for c in res["columns"] if c.startswith("sum_")]
        if len(sums) >= 2 and res.get("row_count") == 1:
            labels = {c: _value_label(c, "", None)[0] for c in sums}
            units = {_value_label(c, "", None)[1] for c in sums}
            unit = units.pop() if len(units) == 1 else None
            title = " and ".join(labels.values()) + f", {_when(res)}"
            if "count_job" in res["columns"] and res.get("rows"):
                count = res["rows"][0][res["columns"].index("count_job")]
                title += f" ({count:,} jobs)"
            title = _wrap(title)
            lines = [
                "import odaplot",
                "import pandas as pd",
                f"row = odaplot.load({input_name(i)!r}).iloc[0]",
                f"parts = pd.DataFrame({{'part': list({labels!r}.values()), "
                f"'value': [float(row[c]) for c in {sums!r}]}})",
                "parts.to_csv('/tmp/parts.csv', index=False)",
                _call(
                    "pie",
                    data="/tmp/parts.csv",
                    label="part",
                    value="value",
                    title=title,
                    unit=unit,
                    out="pie.png",
                    out_json="figures.json",
                ),
            ]
            return ChartJob("pie", (i,), "\n".join(lines) + "\n",
                            (Output("pie.png", "image/png", title), _FIGURES))  # fmt: skip
    raise _mismatch(
        "pie",
        "a pie chart needs one total per part (e.g. CPU and GPU hours, or "
        "the number of jobs per partition)",
    )


_BUCKET_MEAN = {"hour": "Hourly mean", "day": "Daily mean"}
_GRID_ROWS = {"rack_id": "rack", "node_id": "node", "user_id": "user", "gpu_index": "GPU"}


def _grid(results: Sequence[Mapping[str, Any]], glossary: Glossary) -> ChartJob | None:
    """'mean node power per rack per hour, heatmap': one cell per (entity, hour or day) of a
    table of one statistic; None when no result is such a table."""
    for i in range(len(results) - 1, -1, -1):
        res = results[i]
        cols, values = list(res["columns"]), _stat_columns(res)
        rows = [c for c in cols if c in _GRID_ROWS]
        buckets = [c for c in cols if c in _BUCKETS]
        metrics = _metrics(res)
        metric_label, unit = _label(metrics[0], glossary) if len(metrics) == 1 else ("", None)
        bucketed = (res.get("plan") or {}).get("granularity")
        if bucketed in _BUCKETS and _holds_readings(res) and len(rows) == 1 and len(metrics) == 1:
            # 'inlet temp heatmap, node x hour': each node's hourly means, a row per node
            row, col, value, axis = rows[0], "timestamp", "value", str(bucketed)
            label = f"{_BUCKET_MEAN[axis]} {metric_label[:1].lower()}{metric_label[1:]}"
        elif len(values) != 1 or len(rows) != 1 or len(buckets) != 1 or len(cols) != 3:
            continue
        else:
            row, col, value = rows[0], buckets[0], values[0]
            axis = col
            label, unit = _value_label(value, metric_label, unit)
        title = _title(res)
        script = "import odaplot\n" + _call(
            "grid", data=input_name(i), row=row, col=col, value=value, title=title,
            row_label=_cap(_GRID_ROWS[row]), col_label=f"{_cap(axis)} (UTC)", label=label,
            unit=unit, row_prefix=f"{_GRID_ROWS[row]} ", out="heatmap.png",
            out_json="figures.json",
        ) + "\n"  # fmt: skip
        return ChartJob("heatmap", (i,), script,
                        (Output("heatmap.png", "image/png", title), _FIGURES))  # fmt: skip
    return None


def _heatmap(results: Sequence[Mapping[str, Any]], glossary: Glossary) -> ChartJob:
    idx = _readings(results)
    if idx is None or len(_metrics(results[idx])) < 2:
        grid = _grid(results, glossary)
        if grid is not None:
            return grid
        raise _mismatch("heatmap", "a heatmap needs one figure per entity and hour or day, or "
                        "readings of two or more metrics (a correlation matrix)")  # fmt: skip
    res = results[idx]
    metrics = _metrics(res)
    labels = [_label(m, glossary)[0] for m in metrics]
    title = _title(res, lead="Correlation of") + "\n(Pearson, on 1-minute means)"
    lines = [
        "import odaplot",
        f"df = odaplot.load({input_name(idx)!r}, time='timestamp')",
        # Metrics are sampled at different instants: correlate 1-minute means, not raw rows.
        "df['minute'] = df['timestamp'].dt.floor('1min')",
        "wide = df.pivot_table(index='minute', columns='metric_name', values='value')",
        "wide.to_csv('/tmp/wide.csv', index=False)",
        _call(
            "heatmap",
            data="/tmp/wide.csv",
            columns=metrics,
            labels=labels,
            title=title,
            out="heatmap.png",
        ),
    ]
    return ChartJob(
        "heatmap",
        (idx,),
        "\n".join(lines) + "\n",
        (Output("heatmap.png", "image/png", title.replace("\n", " ")),),
    )


def _one_series(result: Mapping[str, Any]) -> bool:
    """Whether a readings result is one series of one metric (a node's, the weather station's,
    the data centre's), so that its 1-minute means are that metric's own."""
    if len(_metrics(result)) != 1 or not _holds_readings(result):
        return False
    if "node_id" in result["columns"]:
        return _node_count(result) == 1
    return not {"rack_id", "job_id", "user_id"} & set(result["columns"])


def _scatter_apart(results: Sequence[Mapping[str, Any]], glossary: Glossary) -> ChartJob | None:
    """'outdoor temperature vs PUE': two metrics retrieved apart (the weather station's and the
    data centre's), one series each, paired by their 1-minute means; None when not that."""
    idx = [i for i, r in enumerate(results) if _holds_readings(r)]
    if len(idx) != 2 or not all(_one_series(results[i]) for i in idx):
        return None
    (y, *_), (x, *_) = (_metrics(results[i]) for i in idx)
    if x == y:
        return None
    (xlabel, xunit), (ylabel, yunit) = _label(x, glossary), _label(y, glossary)
    title = _wrap(f"{_cap(ylabel)} against {xlabel}, {_when(results[idx[0]])}")
    frames = ", ".join(f"odaplot.load({input_name(i)!r}, time='timestamp')" for i in idx)
    lines = [
        "import odaplot",
        "import pandas as pd",
        f"df = pd.concat([{frames}])",
        "df['minute'] = df['timestamp'].dt.floor('1min')",
        "wide = df.pivot_table(index='minute', columns='metric_name', values='value')",
        "wide.reset_index().to_csv('/tmp/wide.csv', index=False)",
        _call("scatter", data="/tmp/wide.csv", x=x, y=y, title=title, xlabel=_cap(xlabel),
              ylabel=_cap(ylabel), xunit=xunit, yunit=yunit, out="scatter.png",
              out_json="scatter.json"),
    ]  # fmt: skip
    return ChartJob("scatter", tuple(idx), "\n".join(lines) + "\n", (
        Output("scatter.png", "image/png", title.replace("\n", " ")),
        Output("scatter.json", "application/json", "Correlation of the scatter plot"),
    ))  # fmt: skip


def _scatter(results: Sequence[Mapping[str, Any]], glossary: Glossary) -> ChartJob:
    idx = _readings(results)
    if idx is None or len(_metrics(results[idx])) != 2:
        apart = _scatter_apart(results, glossary)
        if apart is not None:
            return apart
        raise _mismatch("scatter", "a scatter plot needs readings of exactly two metrics, one "
                        "per axis")  # fmt: skip
    res = results[idx]
    # 'A vs B', 'does A follow B': the first metric named goes up the y axis
    y, x = _metrics(res)
    (xlabel, xunit), (ylabel, yunit) = _label(x, glossary), _label(y, glossary)
    title = _wrap(f"{_cap(ylabel)} against {xlabel}, {_when(res)}")
    keys = [c for c in ("node_id", "job_id") if c in (res.get("columns") or [])]
    lines = [
        "import odaplot",
        f"df = odaplot.load({input_name(idx)!r}, time='timestamp')",
        # Readings of one source share their instants (a GPU's power and utilisation): pair
        # them there. Two metrics sampled at different instants pair their 1-minute means.
        f"exact = df.pivot_table(index={[*keys, 'timestamp']!r}, columns='metric_name', "
        "values='value').dropna()",
        "fewest = df.groupby('metric_name')['value'].count().min()",
        "df['minute'] = df['timestamp'].dt.floor('1min')",
        f"wide = exact.reset_index() if len(exact) >= 0.9 * fewest else df.pivot_table("
        f"index={[*keys, 'minute']!r}, columns='metric_name', values='value').reset_index()",
        "grid = 'readings at the same instants' if len(exact) >= 0.9 * fewest else "
        "'1-minute means'",
        "wide.to_csv('/tmp/wide.csv', index=False)",
        _call("scatter", data="/tmp/wide.csv", x=x, y=y, title=title, xlabel=_cap(xlabel),
              ylabel=_cap(ylabel), xunit=xunit, yunit=yunit, grid=_Name("grid"),
              out="scatter.png", out_json="scatter.json"),
    ]  # fmt: skip
    return ChartJob(
        "scatter",
        (idx,),
        "\n".join(lines) + "\n",
        (
            Output("scatter.png", "image/png", title.replace("\n", " ")),
            Output("scatter.json", "application/json", "Correlation of the scatter plot"),
        ),
    )


# A box's name per bucket; sorted as text they are in time order within a month or a day.
_BOX_BUCKETS = {"day": "%Y-%m-%d", "hour": "%d %b %H:00"}


def _box_of_readings(results: Sequence[Mapping[str, Any]], idx: int, glossary: Glossary,
                     figures: Sequence[str]) -> ChartJob:  # fmt: skip
    """One box of readings per series drawn: per metric ('the four GPU power series'), else per
    node, else one box; with the figures of each series for the answer to state."""
    res = results[idx]
    cols = set(res["columns"])
    metrics = _metrics(res)
    units = {_label(m, glossary)[1] for m in metrics}
    if len(units) > 1:
        raise _mismatch("box", "its metrics have different units "
                        f"({', '.join(sorted(str(u) for u in units))}); ask for one metric at "
                        "a time")  # fmt: skip
    if not metrics:
        raise _mismatch("box", "the result names no metric to label its axis with")
    label, unit = _label(metrics[0], glossary) if len(metrics) == 1 else ("Value", units.pop())
    lines = ["import odaplot", f"df = odaplot.load({input_name(idx)!r})"]
    bucket = next(iter(_asked(figures, "box_by") or []), "")
    if bucket in _BOX_BUCKETS and len(metrics) == 1:
        # 'boxplot of outdoor temp per day': one box of each day's (hour's) readings, in order
        lines[1] = f"df = odaplot.load({input_name(idx)!r}, time='timestamp')"
        lines.append(f"df['series'] = df['timestamp'].dt.strftime({_BOX_BUCKETS[bucket]!r})")
        group_label, order = f"{_cap(bucket)} (UTC)", None
    elif len(metrics) > 1:
        names = {m: _label(m, glossary)[0] for m in metrics}
        lines.append(f"df['series'] = df['metric_name'].map({names!r})")
        group_label, order = "Series", [names[m] for m in metrics]
    elif _node_count(res) != 1 and "node_id" in cols:
        lines.append("df['series'] = 'node ' + df['node_id'].astype(str)")
        group_label, order = "Node", None
    else:
        lines.append(f"df['series'] = {label!r}")
        group_label, order = "", None
    title = _title(res, lead="Distribution of")
    lines += [
        "df.to_csv('/tmp/box.csv', index=False)",
        _call("box", data="/tmp/box.csv", group="series", value="value", title=title,
              ylabel=_cap(label), unit=unit, group_label=group_label, order=order,
              out="box.png"),
        _figures_call("/tmp/box.csv", "series", label, unit, figures),
    ]  # fmt: skip
    return ChartJob("box", (idx,), "\n".join(lines) + "\n",
                    (Output("box.png", "image/png", title), _FIGURES))  # fmt: skip


_GROUP_FIELDS = ("partition", "job_state", "qos", "user_id")


def _job_box(idx: int, column: str, res: Mapping[str, Any], figures: Sequence[str]) -> ChartJob:
    """A per-job quantity per group of a job listing ('queue wait per partition'), one box per
    group (every job in one box when the listing has no group), with each group's median."""
    label, unit, factor = _per_job(column, figures)
    group = next((c for c in _GROUP_FIELDS if c in res["columns"]), None)
    lines = ["import odaplot", f"df = odaplot.load({input_name(idx)!r})", *_scaled(column, factor)]
    if group is None:
        lines.append("df['group'] = 'all jobs'")
        word = "job"
    elif group in _SELF_NAMED:
        lines.append(f"df['group'] = df[{group!r}].astype(str)")
        word = _CATEGORIES[group]
    else:
        word = _CATEGORIES[group]
        lines.append(f"df['group'] = {word + ' '!r} + df[{group!r}].astype(str)")
    per = f" per {word}" if group else ""
    title = _wrap(f"{label} per job{per}, {_when(res)}")
    lines += [
        "df.to_csv('/tmp/box.csv', index=False)",
        _call("box", data="/tmp/box.csv", group="group", value=column, title=title,
              ylabel=f"{label} per job", unit=unit, group_label=_cap(word) if group else "",
              out="box.png"),
        _job_figures("/tmp/box.csv", column, "group" if group else None, figures),
    ]  # fmt: skip
    return ChartJob("box", (idx,), "\n".join(lines) + "\n",
                    (Output("box.png", "image/png", title), _FIGURES))  # fmt: skip


def _box(results: Sequence[Mapping[str, Any]], glossary: Glossary,
         figures: Sequence[str] = ()) -> ChartJob:  # fmt: skip
    listing = _job_listing(results)
    if listing is not None and _readings(results) is None:
        return _job_box(listing[0], listing[1], results[listing[0]], figures)
    per_job = next(
        (
            i
            for i in range(len(results) - 1, -1, -1)
            if "job_id" in results[i]["columns"]
            and _stat_columns(results[i])
            and _category({"columns": [c for c in results[i]["columns"] if c != "job_id"]})
        ),
        None,
    )
    if per_job is None:
        idx = _readings(results)
        if idx is not None:
            return _box_of_readings(results, idx, glossary, figures)
        raise _mismatch("box", "a box plot needs readings, or one figure per job within each "
                        "group")  # fmt: skip
    res = results[per_job]
    group = _category({"columns": [c for c in res["columns"] if c != "job_id"]})
    assert group is not None
    value = _stat_columns(res)[0]
    metrics = _metrics(res)
    metric_label, unit = _label(metrics[0], glossary) if metrics else ("", None)
    ylabel, unit = _value_label(value, metric_label, unit)
    ylabel += " per job"
    lines = ["import odaplot", f"df = odaplot.load({input_name(per_job)!r})"]
    inputs = [per_job]
    ranking = next(
        (
            i
            for i, r in enumerate(results)
            if i != per_job and group in r["columns"] and "job_id" not in r["columns"]
        ),
        None,
    )
    word = _CATEGORIES[group]
    if ranking is not None:
        rank = results[ranking]
        count = next((c for c in rank["columns"] if c.startswith("count_")), None)
        lines.append(f"rank = odaplot.load({input_name(ranking)!r})")
        # The ranking result decides which groups are shown and in which order.
        tick = (
            f"{word!r} + ' ' + rank[{group!r}].astype(str)"
            if count is None
            else f"{word + ' '!r} + rank[{group!r}].astype(str) + '\\n(' + "
            f"rank[{count!r}].astype(str) + ' jobs)'"
        )
        lines += [
            f"rank['tick'] = {tick}",
            f"names = dict(zip(rank[{group!r}], rank['tick']))",
            f"df = df[df[{group!r}].isin(names)]",
            f"df['group'] = df[{group!r}].map(names)",
            "order = list(rank['tick'])",
        ]
        inputs.insert(0, ranking)
        group_label = f"{_cap(word)} (ranked as asked)"
    else:
        lines += [f"df['group'] = {word + ' '!r} + df[{group!r}].astype(str)", "order = None"]
        group_label = _cap(word)
    if ranking is not None:
        rank_text = str(results[ranking].get("understood_as") or "")
        by = re.search(r"the top (\d+) by ([^,.;]+)", rank_text)
        chosen_text = f"the top {by[1]} {word}s by {by[2]}" if by else f"the ranked {word}s"
        title = _wrap(f"{ylabel} of {chosen_text}, {_when(res)}")
    else:
        title = _wrap(f"{ylabel} per {word}, {_when(res)}")
    lines += [
        "df.to_csv('/tmp/box.csv', index=False)",
        _call(
            "box",
            data="/tmp/box.csv",
            group="group",
            value=value,
            title=title,
            ylabel=ylabel,
            unit=unit,
            group_label=group_label,
            order=_Name("order"),
            out="box.png",
        ),
    ]
    return ChartJob(
        "box", tuple(inputs), "\n".join(lines) + "\n", (Output("box.png", "image/png", title),)
    )


_MERGED = "/tmp/merged.csv"


def _window_of(result: Mapping[str, Any]) -> tuple[str, str] | None:
    window = (result.get("plan") or {}).get("window") or {}
    start, end = window.get("start"), window.get("end")
    return (str(start), str(end)) if start and end else None


def _one_span(
    results: Sequence[Mapping[str, Any]],
) -> tuple[list[int], dict[str, Any], bool] | None:
    """Readings of one metric set retrieved window by window ('across may and june', '8-9 and
    14-15') as one result: the indices in time order, the joined result, and whether the windows
    meet end to start; None when fewer than two readings results share columns, metrics and
    entities."""
    idx = [i for i, r in enumerate(results) if _holds_readings(r)]
    if len(idx) < 2:
        return None
    first = results[idx[0]]
    same = all(list(results[i]["columns"]) == list(first["columns"])
               and _metrics(results[i]) == _metrics(first)
               and (results[i].get("plan") or {}).get("entities")
               == (first.get("plan") or {}).get("entities") for i in idx)  # fmt: skip
    windows = [_window_of(results[i]) for i in idx]
    if not same or any(w is None for w in windows):
        return None
    order = sorted(range(len(idx)), key=lambda k: windows[k] or ("", ""))
    spans = [windows[k] or ("", "") for k in order]
    if any(a[1] > b[0] for a, b in pairwise(spans)):
        return None  # overlapping windows: the same readings twice
    meet = all(a[1] == b[0] for a, b in pairwise(spans))
    ordered = [idx[k] for k in order]
    said = [str(results[i].get("understood_as") or "").rstrip(".") for i in ordered]
    if meet and all(" to " in t for t in said):
        joined_said = said[0][: said[0].rindex(" to ")] + said[-1][said[-1].rindex(" to ") :]
    else:  # 'Readings of …, 1 Jun 2022 08:00 to 09:00 UTC and 14:00 to 15:00 UTC'
        common = os.path.commonprefix(said)  # noqa: RUF071 (sentences, by character)
        common = common[: common.rfind(" ") + 1] if " " in common else ""
        joined_said = common + " and ".join(t[len(common) :] for t in said)
    plan = dict(results[ordered[0]].get("plan") or {})
    plan["window"] = {**(plan.get("window") or {}), "end": spans[-1][1]}
    joined = {**results[ordered[0]], "plan": plan, "understood_as": joined_said,
              "row_count": sum(int(results[i].get("row_count") or 0) for i in ordered)}  # fmt: skip
    return ordered, joined, meet


def _joined(kind: ChartKind, results: Sequence[Mapping[str, Any]], glossary: Glossary,
            stats: bool, figures: Sequence[str]) -> ChartJob | None:  # fmt: skip
    """The chart of readings retrieved window by window, drawn from all of them: a chart that
    read only the last window's file would state a month's figures as two months' (analysis1
    A30's weekday humidity of 'may and june' was June's alone)."""
    span = _one_span(results)
    if span is None:
        return None
    ordered, joined, meet = span
    if not meet and (_energy(figures)[0] or _rolling_minutes(figures) is not None):
        raise _mismatch(kind, "an energy or a rolling mean runs over time, and these windows "
                        "do not meet (the gap between them would count); ask for each window "
                        "on its own")  # fmt: skip
    last = ordered[-1]
    view = [joined if i == last else r for i, r in enumerate(results)]
    job = _dispatch(kind, view, glossary, stats, figures)
    if last not in job.inputs:
        return job
    concat = ", ".join(f"odaplot.load({input_name(i)!r})" for i in ordered)
    # a line must not join the last reading of one window to the first of the next: a row with
    # no value at each window's end breaks every series there
    keys = [c for c in joined["columns"] if c not in ("timestamp", "value")]
    gaps = "" if meet else (
        "parts = [" + concat + "]\n"
        "ends = " + repr([(_window_of(results[i]) or ("", ""))[1] for i in ordered[:-1]]) + "\n"
        "gaps = [p.drop_duplicates(" + repr(keys) + ").assign(timestamp=e, value=float('nan'))"
        " for p, e in zip(parts[:-1], ends)]\n"
    )  # fmt: skip
    frames = "[*parts, *gaps]" if gaps else f"[{concat}]"
    prefix = ("import odaplot\nimport pandas as pd\n" + gaps
              + f"pd.concat({frames}).sort_values('timestamp', kind='stable')"
              f".to_csv({_MERGED!r}, index=False)\n")  # fmt: skip
    script = job.script.replace(repr(input_name(last)), repr(_MERGED))
    inputs = tuple(dict.fromkeys([*ordered, *job.inputs]))
    return replace(job, script=prefix + script, inputs=inputs)


def bind(
    kind: ChartKind,
    results: Sequence[Mapping[str, Any]],
    glossary: Glossary,
    *,
    stats: bool = False,
    figures: Sequence[str] = (),
) -> ChartJob:
    """The script that draws ``kind`` from ``results``; ChartError when the data cannot make it.

    ``stats`` (a request that also asks for min/max/avg) adds each line's statistics to a line
    plot's legend. ``figures``: statistics asked of the drawn readings ('p95', 'median', 'std'),
    computed beside a line plot, a histogram or a box plot for the answer to state.
    """
    if not results:
        raise _mismatch(kind, "nothing was retrieved")
    if all(r.get("row_count") == 0 for r in results):
        raise _mismatch(kind, "the retrieval returned no rows")
    _check_energy(kind, results, glossary, figures)
    _check_carries(kind, figures)
    joined = _joined(kind, results, glossary, stats, figures)
    return joined if joined is not None else _dispatch(kind, results, glossary, stats, figures)


def _dispatch(kind: ChartKind, results: Sequence[Mapping[str, Any]], glossary: Glossary,
              stats: bool, figures: Sequence[str]) -> ChartJob:  # fmt: skip
    cycle = _profile(figures)
    if cycle is not None and kind in ("line", "bar"):
        return _profile_job(kind, results, glossary, cycle)
    if cycle == "hour_of_day" and kind == "heatmap":
        return _day_hour_grid(results, glossary)
    if kind == "line":
        return _line(results, glossary, stats, figures)
    if kind == "histogram":
        hist = _histogram(results, glossary, figures)
        if any(o.name == _FIGURES.name for o in hist.outputs):
            return hist  # a job listing's: its figures are the jobs' own
        return _with_figures(hist, results, glossary, figures)
    if kind == "dual_axis":
        return _dual_axis(results, glossary)
    if kind == "bar":
        return _bar(results, glossary, figures)
    if kind == "pie":
        return _pie(results, glossary)
    if kind == "heatmap":
        return _heatmap(results, glossary)
    if kind == "scatter":
        return _scatter(results, glossary)
    job = _box(results, glossary, figures)
    if _FIGURES in job.outputs:
        return job  # the figures of each box (of readings or of a job listing's jobs) come with it
    return _with_figures(job, results, glossary, figures) if figures and _readings(results) is not \
        None and len(job.inputs) == 1 else job  # fmt: skip
