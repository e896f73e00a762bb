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

import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from oda_analyst.errors import QueryRejectedError
from oda_analyst.reading.model import CHART_NAMES, ChartKind
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
}
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


def _readings(results: Sequence[Mapping[str, Any]]) -> int | None:
    """The last result of raw readings (timestamp and value per row)."""
    for i in range(len(results) - 1, -1, -1):
        if {"timestamp", "value"} <= set(results[i]["columns"]):
            return i
    return None


def _stat_columns(result: Mapping[str, Any]) -> list[str]:
    return [c for c in result["columns"] if re.match(r"^(?:[a-z0-9]+_value|count_\w+|sum_\w+)$", c)]


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
                  figures: Sequence[str]) -> str:  # fmt: skip
    """The recipe that computes what the answer states of the drawn readings: min, mean, max
    and count per series, and the statistics asked of them ('p95', 'median', 'std')."""
    grouped: dict[str, Any] = {"series": series} if series else {}
    return _call("series_figures", data=data, value="value", **grouped, label=label, unit=unit,
                 extra=[f for f in figures if not f.startswith("rolling:")],
                 out="figures.json")  # fmt: skip


def _rolling_minutes(figures: Sequence[str]) -> float | None:
    """The window of a rolling mean asked ('rolling:10' in the plan's figures), in minutes."""
    for fig in figures:
        if fig.startswith("rolling:"):
            return float(fig.split(":", 1)[1])
    return None


def _with_figures(job: ChartJob, results: Sequence[Mapping[str, Any]], glossary: Glossary,
                  figures: Sequence[str]) -> ChartJob:  # fmt: skip
    """A histogram or box plot with the figures asked of its readings ('p95 … + histogram')."""
    (idx,) = job.inputs
    label, unit = _label(_metrics(results[idx])[0], glossary)
    call = _figures_call(input_name(idx), None, label, unit, figures)
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
        values = _stat_columns(res)
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


def _histogram(results: Sequence[Mapping[str, Any]], glossary: Glossary) -> ChartJob:
    idx = _readings(results)
    if idx is None:
        raise _mismatch("histogram", "no result holds individual readings")
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


def _bar(results: Sequence[Mapping[str, Any]], glossary: Glossary) -> ChartJob:
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
        else:
            lines.append(f"df['category'] = {_CATEGORIES[cat] + ' '!r} + df[{cat!r}].astype(str)")
        chosen = ["cv_value"] if "cv_value" in values else values
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
    raise _mismatch("bar", "no result holds one figure per job, node, user, metric or day")


def _pie(results: Sequence[Mapping[str, Any]], glossary: Glossary) -> ChartJob:
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
                ),
            ]
            return ChartJob(
                "pie", (i,), "\n".join(lines) + "\n", (Output("pie.png", "image/png", title),)
            )
    raise _mismatch("pie", "a pie chart needs one total per part (e.g. CPU and GPU hours)")


def _heatmap(results: Sequence[Mapping[str, Any]], glossary: Glossary) -> ChartJob:
    idx = _readings(results)
    if idx is None or len(_metrics(results[idx])) < 2:
        raise _mismatch("heatmap", "a correlation matrix needs readings of two or more metrics")
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


def _scatter(results: Sequence[Mapping[str, Any]], glossary: Glossary) -> ChartJob:
    idx = _readings(results)
    if idx is None or len(_metrics(results[idx])) != 2:
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
        # Two metrics are sampled at different instants: pair their 1-minute means per entity.
        "df['minute'] = df['timestamp'].dt.floor('1min')",
        f"wide = df.pivot_table(index={[*keys, 'minute']!r}, columns='metric_name', "
        "values='value').reset_index()",
        "wide.to_csv('/tmp/wide.csv', index=False)",
        _call("scatter", data="/tmp/wide.csv", x=x, y=y, title=title, xlabel=_cap(xlabel),
              ylabel=_cap(ylabel), xunit=xunit, yunit=yunit, out="scatter.png",
              out_json="scatter.json"),
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


def _box(results: Sequence[Mapping[str, Any]], glossary: Glossary) -> ChartJob:
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
        raise _mismatch("box", "a box plot needs one figure per job within each group")
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
    if kind == "line":
        return _line(results, glossary, stats, figures)
    if kind == "histogram":
        return _with_figures(_histogram(results, glossary), results, glossary, figures)
    if kind == "dual_axis":
        return _dual_axis(results, glossary)
    if kind == "bar":
        return _bar(results, glossary)
    if kind == "pie":
        return _pie(results, glossary)
    if kind == "heatmap":
        return _heatmap(results, glossary)
    if kind == "scatter":
        return _scatter(results, glossary)
    job = _box(results, glossary)
    return _with_figures(job, results, glossary, figures) if figures and _readings(results) is not \
        None and len(job.inputs) == 1 else job  # fmt: skip
