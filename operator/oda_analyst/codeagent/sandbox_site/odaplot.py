"""Chart and statistics recipes for the Appendix-A questions; runs INSIDE the sandbox.

Imported by the scripts that ``oda_analyst.codeagent.recipes`` writes (or by model-written code):
it needs pandas and matplotlib from the sandbox's environment, reads only /in and writes only
/out. Every chart has a title, labelled axes with units, a legend when there is more than one
series, and a UTC time axis; figures are 10 x 5.5 in at 120 dpi, readable at 100 %. Axes span
the data, tick values are written in full (no '1e6' corner), value labels that would overlap
are dropped and bar names beyond a dozen thinned: tests/chart_checks.py checks each recipe.
"""

import itertools
import json
import math
import os
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates
import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import numpy as np
import pandas as pd

IN = os.environ.get("ODA_IN", "/in")
OUT = os.environ.get("ODA_OUT", "/out")
FIGSIZE = (10, 5.5)
DPI = 120
MAX_BARS = 12
"""Bars (and category names) a reader can take in one by one; beyond, names are thinned."""
plt.rcParams.update(
    {"font.size": 11, "axes.titlesize": 13, "axes.grid": True, "grid.alpha": 0.3,
     "legend.framealpha": 0.9}
)  # fmt: skip


def _in(name):
    return name if name.startswith("/") else os.path.join(IN, name)


def _out(name):
    return os.path.join(OUT, os.path.basename(name))


def load(name, time=None):
    """A CSV/Parquet/Excel file from /in; ``time`` columns parsed as UTC."""
    path = _in(name)
    if path.endswith(".parquet"):
        df = pd.read_parquet(path)
    elif path.endswith((".xlsx", ".xls")):
        df = pd.read_excel(path)
    else:
        df = pd.read_csv(path)
    for col in [time] if isinstance(time, str) else (time or []):
        # ISO 8601 with and without fractional seconds mixed (Ganglia's and IPMI's stamps).
        df[col] = pd.to_datetime(df[col], utc=True, format="ISO8601")
    return df


def _label(text, unit):
    return f"{text} ({unit})" if unit else text


def _thousands(axis):
    axis.set_major_formatter(mticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))


class _Plain(mticker.Formatter):
    """Tick values written in full with thousands separators, as many decimals as the tick step
    needs: never a '1e6' or '+1.5e6' in the axis corner that the reader must apply to each tick."""

    def __call__(self, x, pos=None):
        locs = sorted(set(self.locs))
        steps = [b - a for a, b in itertools.pairwise(locs)]
        step = min(steps) if steps else abs(x)
        decimals = min(6, max(0, -math.floor(math.log10(step)))) if step > 0 else 0
        return f"{x:,.{decimals}f}".replace("-", "\u2212")


def _plain(*axes):
    for axis in axes:
        axis.set_major_formatter(_Plain())


def _num(v):
    """A value as a label: four significant digits, in full (with separators) from 10,000 up,
    where ``.4g`` would write '1.628e+06'."""
    return f"{v:,.0f}" if abs(v) >= 1e4 else f"{v:,.4g}"


def _set_title(ax, title, **kwargs):
    """The title, its long lines wrapped to the figure's width (a model-written call may pass one
    line of 150 characters, which would run off both edges)."""
    size = plt.rcParams["axes.titlesize"]
    size = size if isinstance(size, (int, float)) else 13
    width = int(ax.figure.get_figwidth() * 72 / (size * 0.6))
    lines = [w for line in str(title).split("\n") for w in (textwrap.wrap(line, width) or [""])]
    ax.set_title("\n".join(lines), **kwargs)


VALUE_LABEL = "value-label"
"""gid of a text that states a plotted value, dropped where it would overlap another."""


def _declutter(fig):
    """Value labels that would overlap each other or a legend are dropped, the first placed kept
    (the recipes place the extremes first); a chart's labels marked all-or-nothing (bars, where a
    missing label reads as a missing value) are dropped together."""
    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    for ax in fig.axes:
        labels = [t for t in ax.texts if t.get_gid() in (VALUE_LABEL, VALUE_LABEL + ":all")]
        if not labels:
            continue
        legend = ax.get_legend()
        kept = [legend.get_window_extent(renderer)] if legend is not None else []
        dropped = []
        for text in labels:
            box = text.get_window_extent(renderer)
            if any(box.overlaps(other) for other in kept):
                dropped.append(text)
            else:
                kept.append(box)
        if any(t.get_gid() == VALUE_LABEL + ":all" for t in dropped):
            dropped = labels
        for text in dropped:
            text.remove()


def _time_axis(ax, times, pad=None):
    """Ticks in UTC; the date (or year) once in the axis label; no margin past the data, where a
    tick would show a time of the next day under this day's date."""
    times = pd.Series(times).dropna()
    if not len(times):
        ax.set_xlabel("Time (UTC)")
        return
    first, last = times.min(), times.max()
    if last - first <= pd.Timedelta(days=2):
        fmt = "%H:%M"
        day, end = first.strftime("%Y-%m-%d"), last.strftime("%Y-%m-%d")
        label = f"Time (UTC), {day}" + (f" – {end}" if end != day else "")
    else:
        years = sorted({first.year, last.year})
        fmt, label = "%d %b", "Date (UTC), " + "–".join(str(y) for y in years)
    pad = pad or pd.Timedelta(0)
    ax.set_xlim(first - pad, last + pad)
    ax.xaxis.set_major_locator(mdates.AutoDateLocator(tz="UTC", minticks=4, maxticks=10))
    ax.xaxis.set_major_formatter(mdates.DateFormatter(fmt, tz="UTC"))
    ax.set_xlabel(label)


def _save(fig, out):
    fig.tight_layout()
    _declutter(fig)
    path = _out(out)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    print(f"wrote {path}")
    return path


def _series(df, series):
    if series is None:
        return [(None, df)]
    return [(str(k), g) for k, g in df.groupby(series, sort=True)]


def _stats_text(values, unit):
    u = f" {unit}" if unit else ""
    return f"min {_num(values.min())}, avg {_num(values.mean())}, max {_num(values.max())}{u}"


def line(data, x, y, title, ylabel, unit=None, series=None, series_label=None, stats=False,
         marker=None, annotate=False, sigmas=None, side="both", out="line.png"):  # fmt: skip
    """Time-series line plot; with ``series`` (e.g. node) one line per value, with a legend.

    ``series_label`` prefixes each series' value in the legend ("node" gives "node 900", ""
    nothing; default the column name); ``stats`` adds each line's min/avg/max to its entry.
    ``marker`` marks each point (e.g. "o" for daily figures); ``annotate`` writes each point's
    value above it (for a few points only); ``sigmas`` marks the readings more than that many
    standard deviations off the mean of all the readings (``side``: above, below or both), with
    the bounds drawn.
    """
    df = load(data, time=x).sort_values(x)
    fig, ax = plt.subplots(figsize=FIGSIZE)
    groups = _series(df, series)
    prefix = series if series_label is None else series_label
    for name, g in groups:
        label = f"{prefix} {name}".strip() if name is not None else ylabel
        if stats:
            label = f"{label}: {_stats_text(g[y], unit)}"
        ax.plot(g[x], g[y], label=label, linewidth=1.4, marker=marker)
        if annotate:
            _annotate_points(ax, g[x], g[y])
    if sigmas:
        _mark_anomalies(ax, df, x, y, sigmas, side, unit)
    _set_title(ax, title)
    ax.set_ylabel(_label(ylabel, unit))
    _plain(ax.yaxis)
    if annotate:
        ax.margins(y=0.15)
    # Points on days or hours: half a step either side, so the first and last are not cut (a
    # fixed half day around hourly points left the day's data in the middle half of the axis).
    _time_axis(ax, df[x], pad=_half_step(df[x]) if marker else None)
    if (
        marker
        and df[x].nunique() <= 31
        and len(df)
        and (df[x].max() - df[x].min() >= pd.Timedelta(days=2))
    ):
        ax.xaxis.set_major_locator(mdates.DayLocator(tz="UTC"))
    if stats:  # long entries: below the axes, where they cover no line
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1, frameon=False)
    elif len(groups) > 8:  # a dozen entries inside the axes would cover the lines: beside them
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), ncol=math.ceil(len(groups) / 24),
                  fontsize=9, frameon=False)  # fmt: skip
    elif len(groups) > 1 or sigmas:
        ax.legend(loc="best")
    return _save(fig, out)


def _mark_anomalies(ax, df, x, y, k, side, unit):
    """The readings beyond k standard deviations as red points, the bounds as dashed lines."""
    found = anomalies(df, y, k, side)
    u = f" {unit}" if unit else ""
    for bound in (found["high"], found["low"]):
        if bound is not None:
            ax.axhline(bound, color="#C44E52", linestyle="--", linewidth=1,
                       label=f"mean {'+' if bound == found['high'] else '−'} {k:g}σ "
                       f"({_num(bound)}{u})")  # fmt: skip
    marked = df[_beyond(pd.to_numeric(df[y], errors="coerce"), found["high"], found["low"])]
    ax.scatter(marked[x], marked[y], color="#C44E52", s=18, zorder=3,
               label=f"beyond {k:g}σ ({len(marked):,} readings)")  # fmt: skip


def _half_step(times):
    """Half the usual spacing of points in time (half an hour for hourly means)."""
    steps = pd.Series(times).drop_duplicates().sort_values().diff().dropna()
    return steps.median() / 2 if len(steps) else pd.Timedelta(hours=12)


def _annotate_points(ax, xs, ys, **box):
    """Each point's value above it, the extremes, the first and the last placed first so that
    they are the ones kept where labels would overlap (``_declutter``)."""
    points = [(t, v) for t, v in zip(xs, ys, strict=True) if pd.notna(v)]
    if not points:
        return
    values = [v for _, v in points]
    first = {values.index(max(values)), values.index(min(values)), 0, len(points) - 1}
    for i in [*sorted(first), *(i for i in range(len(points)) if i not in first)]:
        t, v = points[i]
        ax.annotate(_num(v), (t, v), textcoords="offset points", xytext=(0, 8), ha="center",
                    fontsize=9, gid=VALUE_LABEL, **box)  # fmt: skip


def histogram(data, column, title, xlabel, unit=None, bins=40, sigmas=None, side="both",
              out="histogram.png", noun="readings"):  # fmt: skip
    """Distribution of a column with count per bin; mean and median marked; with ``sigmas``, the
    bounds k standard deviations off the mean (``side``: above, below or both). ``noun``: what
    one value is ('readings', 'jobs')."""
    df = load(data)
    values = pd.to_numeric(df[column], errors="coerce").dropna()
    fig, ax = plt.subplots(figsize=FIGSIZE)
    ax.hist(values, bins=bins, color="#4C72B0", edgecolor="white",
            label=f"{noun} (n={len(values):,})")  # fmt: skip
    mean, median = values.mean(), values.median()
    ax.axvline(mean, color="#C44E52", linestyle="--", label=f"mean {_decimals(mean)}")
    ax.axvline(median, color="#55A868", linestyle=":", label=f"median {_decimals(median)}")
    if sigmas:
        found = anomalies(df, column, sigmas, side)
        for bound, sign in ((found["high"], "+"), (found["low"], "−")):
            if bound is not None:
                ax.axvline(bound, color="#8172B2", linestyle="-.",
                           label=f"mean {sign} {sigmas:g}σ {_decimals(bound)} "
                           f"({found['count']:,} beyond)")  # fmt: skip
    _set_title(ax, title)
    ax.set_xlabel(_label(xlabel, unit))
    _plain(ax.xaxis)
    ax.set_ylabel(f"{noun[:1].upper()}{noun[1:]} (count)")
    _thousands(ax.yaxis)
    ax.legend(loc="best")
    return _save(fig, out)


def _decimals(v):
    """Two decimals below 10,000 (as before), whole numbers with separators above."""
    return f"{v:,.0f}" if abs(v) >= 1e4 else f"{v:.2f}"


def dual_axis(data, x, left, right, title, left_label, right_label, left_unit=None,
              right_unit=None, categorical_x=False, xlabel=None, same_scale=False,
              out="dual_axis.png"):  # fmt: skip
    """Two quantities over time on their own y axes (left and right), one legend for both.

    Each quantity is drawn from its own rows (a quantity sampled at other instants than the
    other leaves gaps in a joined table). ``categorical_x``: ``x`` holds labels, not times
    (e.g. day 1..7 of two periods compared), drawn in file order with ``xlabel``.
    ``same_scale``: both axes span the same range (quantities of one unit compared: the gap
    between the lines then reads true).
    """
    df = load(data) if categorical_x else load(data, time=x).sort_values(x)
    fig, ax = plt.subplots(figsize=FIGSIZE)
    if categorical_x:
        df = df.reset_index(drop=True)
        ticks = df[x].astype(str).tolist()
        df[x] = range(len(df))
    lf, rf = df[[x, left]].dropna(), df[[x, right]].dropna()
    marker = "o" if categorical_x else None
    a = ax.plot(lf[x], lf[left], color="#4C72B0", marker=marker,
                label=_label(left_label, left_unit))  # fmt: skip
    ax.set_ylabel(_label(left_label, left_unit), color="#4C72B0")
    ax.tick_params(axis="y", colors="#4C72B0")
    ax2 = ax.twinx()
    ax2.grid(False)
    b = ax2.plot(rf[x], rf[right], color="#DD8452", marker=marker,
                 label=_label(right_label, right_unit))  # fmt: skip
    ax2.set_ylabel(_label(right_label, right_unit), color="#DD8452")
    ax2.tick_params(axis="y", colors="#DD8452")
    _plain(ax.yaxis, ax2.yaxis)
    _set_title(ax, title, pad=28)
    if same_scale:
        lo = min(lf[left].min(), rf[right].min())
        hi = max(lf[left].max(), rf[right].max())
        pad = (hi - lo) * 0.05 or 1
        ax.set_ylim(lo - pad, hi + pad)
        ax2.set_ylim(lo - pad, hi + pad)
    if categorical_x:
        ax.set_xticks(range(len(ticks)), ticks)
        ax.set_xlabel(xlabel or x)
        ax.set_xlim(-0.5, len(ticks) - 0.5)
    else:
        _time_axis(ax, df[x])
    # Between the title and the axes: never over a line, never behind the twin axis.
    ax.legend(a + b, [h.get_label() for h in a + b], loc="lower center",
              bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False)  # fmt: skip
    return _save(fig, out)


def bar(data, category, values, title, ylabel, unit=None, category_label=None,
        value_labels=None, out="bar.png"):  # fmt: skip
    """Bar chart; several value columns give side-by-side bars per category, with a legend."""
    df = load(data)
    cols = [values] if isinstance(values, str) else list(values)
    names = value_labels or cols
    cats = df[category].astype(str).tolist()
    xs = np.arange(len(cats))
    width = 0.8 / len(cols)
    fig, ax = plt.subplots(figsize=FIGSIZE)
    # A value over each bar while they fit (a dozen or so); beyond, the values are the table's.
    labelled = len(cats) * len(cols) <= MAX_BARS
    for i, (col, name) in enumerate(zip(cols, names, strict=True)):
        bars = ax.bar(xs + (i - (len(cols) - 1) / 2) * width, df[col], width, label=name)
        if labelled:
            for text in ax.bar_label(bars, labels=[_num(v) for v in df[col]], padding=2,
                                     fontsize=9):  # fmt: skip
                text.set_gid(VALUE_LABEL + ":all")
    # At most a dozen category names, the others thinned (every k-th, each bar keeps its tick).
    every = math.ceil(len(cats) / MAX_BARS)
    ax.set_xticks(xs, [c if i % every == 0 else "" for i, c in enumerate(cats)])
    if len(cats) > 6:
        plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
    ax.set_xlabel(category_label or category)
    ax.set_ylabel(_label(ylabel, unit))
    _plain(ax.yaxis)
    ax.margins(y=0.12)
    if len(cols) > 1:  # between the title and the bars: never over a bar or its value
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(cols), frameon=False)
        _set_title(ax, title, pad=28)
    else:
        _set_title(ax, title)
    return _save(fig, out)


def pie(data, label, value, title, unit=None, out="pie.png", out_json=None):
    """Shares of a whole, each wedge labelled with its percentage and its value; each part's
    value and share, largest first, in ``out_json``."""
    df = load(data)
    total = df[value].sum()
    u = f" {unit}" if unit else ""
    fig, ax = plt.subplots(figsize=(7.5, 6))
    names = df[label].astype(str).tolist()
    # Wedges under 5 % are too thin for their words (under 10 % beside four others, whose words
    # would touch): then every part is named in a legend, and only the wide wedges in words.
    thin = SMALL_WEDGE if len(df) <= 4 else 2 * SMALL_WEDGE
    small = bool(len(df) and total and (df[value] / total < thin).any())
    # counts are whole ('2,914 jobs'), amounts to a tenth ('27,500.4 h')
    places = 0 if (df[value] == df[value].round()).all() else 1

    def pct(p):
        if small and p < 100 * thin:
            return ""
        return f"{p:.1f} %\n({p * total / 100:,.{places}f}{u})"

    wedges, *_ = ax.pie(df[value], labels=None if small else names, autopct=pct, startangle=90,
                        counterclock=False, wedgeprops={"edgecolor": "white"})  # fmt: skip
    if small:
        ax.legend(wedges, [f"{n}: {100 * v / total:.1f} % ({v:,.{places}f}{u})"
                           for n, v in zip(names, df[value], strict=True)],
                  loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)  # fmt: skip
    _set_title(ax, f"{title}\n(total {total:,.{places}f}{u})", pad=24)
    ax.axis("equal")
    if out_json:
        shares = sorted(zip(names, (float(v) for v in df[value]), strict=True),
                        key=lambda nv: -nv[1])  # fmt: skip
        _write_json({"unit": unit, "pie": {
            "total": float(total), "places": places,
            "parts": [[n, v, 100 * v / total if total else 0.0] for n, v in shares],
        }}, out_json)  # fmt: skip
    return _save(fig, out)


SMALL_WEDGE = 0.05


def heatmap(data, columns, title, labels=None, out="heatmap.png"):
    """Correlation matrix (Pearson) of the columns, each cell annotated, diverging -1..1."""
    df = load(data)
    corr = df[columns].apply(pd.to_numeric, errors="coerce").corr()
    names = labels or columns
    fig, ax = plt.subplots(figsize=(8.5, 7))
    im = ax.imshow(corr.values, cmap="RdBu_r", vmin=-1, vmax=1)
    ax.set_xticks(range(len(names)), names, rotation=35, ha="right")
    ax.set_yticks(range(len(names)), names)
    ax.grid(False)
    for i in range(len(names)):
        for j in range(len(names)):
            v = corr.values[i, j]
            text = "n/a" if math.isnan(v) else f"{v:.2f}"
            color = "white" if abs(v) > 0.6 else "black"
            ax.text(j, i, text, ha="center", va="center", color=color, fontsize=10)
    fig.colorbar(im, ax=ax, label="Pearson correlation")
    ax.set_xlabel("Metric")
    ax.set_ylabel("Metric")
    _set_title(ax, title)
    return _save(fig, out)


def grid(data, row, col, value, title, row_label, col_label, label, unit=None, row_prefix="",
         out="heatmap.png", out_json=None):  # fmt: skip
    """A heatmap of one figure per (row, col) cell ('mean node power per rack per hour'): a
    sequential colour scale with its unit, at most a dozen tick labels per axis (rows named
    ``row_prefix`` + id, in id order), the highest cell outlined; ``out_json`` gets the highest
    and lowest cells for the answer to state."""
    df = load(data)
    wide = df.pivot_table(index=row, columns=col, values=value, aggfunc="mean")
    rows = [f"{row_prefix}{r}" for r in wide.index]
    cols = [_tick(c) for c in wide.columns]
    if out_json:
        cells = df[[row, col, value]].dropna().sort_values([value, row, col])
        ends = {
            name: [f"{row_prefix}{cell[row]}", _tick(cell[col]), float(cell[value])]
            for name, cell in (("highest", cells.iloc[-1]), ("lowest", cells.iloc[0]))
        }
        _write_json({"grid": {**ends, "cells": len(cells), "col": col_label},
                     "label": label, "unit": unit}, out_json)  # fmt: skip
    fig, ax = plt.subplots(figsize=(10, max(4.5, min(9, 0.18 * len(rows) + 2.5))))
    im = ax.imshow(wide.values, cmap="viridis", aspect="auto", interpolation="nearest")
    for names, place in ((cols, ax.set_xticks), (rows, ax.set_yticks)):
        every = math.ceil(len(names) / MAX_BARS)
        place(range(0, len(names), every), names[::every])
    if len(cols) > 6:
        plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
    ax.grid(False)
    top = np.unravel_index(np.nanargmax(wide.values), wide.values.shape)
    ax.add_patch(plt.Rectangle((top[1] - 0.5, top[0] - 0.5), 1, 1, fill=False, edgecolor="red",
                               linewidth=2, label="highest cell"))  # fmt: skip
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    fig.colorbar(im, ax=ax, label=_label(label, unit))
    ax.set_xlabel(col_label)
    ax.set_ylabel(row_label)
    _set_title(ax, title, pad=24)
    return _save(fig, out)


def _tick(value):
    """A column of the grid as a tick: '09:00' for an hour of one day, else as it is."""
    text = str(value)
    return text[11:16] if len(text) >= 16 and text[10] in "T " else text


def scatter(
    data,
    x,
    y,
    title,
    xlabel,
    ylabel,
    xunit=None,
    yunit=None,
    grid="1-minute means",
    out="scatter.png",
    out_json="scatter.json",
):
    """One metric against another, each point a pair of readings on one time grid, with the
    Pearson and Spearman coefficients and the number of pairs in the title and in ``out_json``."""
    df = load(data)
    pairs = df[[x, y]].apply(pd.to_numeric, errors="coerce").dropna()
    n = len(pairs)
    pearson = float(pairs[x].corr(pairs[y])) if n > 2 else float("nan")
    spearman = float(pairs[x].corr(pairs[y], method="spearman")) if n > 2 else float("nan")
    fig, ax = plt.subplots(figsize=FIGSIZE)
    ax.scatter(pairs[x], pairs[y], s=10, alpha=0.5, label=f"{n:,} pairs ({grid})")
    ax.set_xlabel(_label(xlabel, xunit))
    ax.set_ylabel(_label(ylabel, yunit))
    _plain(ax.xaxis, ax.yaxis)
    _set_title(ax, f"{title}\nPearson r = {pearson:.2f}, Spearman ρ = {spearman:.2f}, n = {n:,}")
    ax.legend(loc="best")
    _write_json(
        {"pearson": pearson, "spearman": spearman, "n": n, "grid": grid, "x": xlabel, "y": ylabel},
        out_json,
    )
    return _save(fig, out)


def box(data, group, value, title, ylabel, unit=None, group_label=None, order=None,
        out="box.png"):  # fmt: skip
    """Box plot of ``value`` per ``group`` (whiskers 1.5 IQR, outliers as points, mean marked)."""
    df = load(data)
    keys = order or sorted(df[group].astype(str).unique())
    samples = [df.loc[df[group].astype(str) == k, value].dropna() for k in keys]
    fig, ax = plt.subplots(figsize=FIGSIZE)
    ax.boxplot(samples, tick_labels=keys, showmeans=True)
    ax.legend(handles=[
        plt.Line2D([], [], color="C1", label="median"),
        plt.Line2D([], [], color="C2", marker="^", linestyle="", label="mean"),
        plt.Line2D([], [], color="black", marker="o", markerfacecolor="none", linestyle="",
                   label="outlier (beyond 1.5 IQR)"),
    ], loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, frameon=False)  # fmt: skip
    ax.set_xlabel(group_label or group)
    ax.set_ylabel(_label(ylabel, unit))
    _plain(ax.yaxis)
    _set_title(ax, title, pad=30)  # room for the legend between the title and the boxes
    if len(keys) > 6:
        plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
    return _save(fig, out)


def _write_json(obj, out):
    with open(_out(out), "w") as fh:
        json.dump(obj, fh, indent=2, default=str)
    print(json.dumps(obj, default=str))
    return obj


def summary(data, value, by=None, out="summary.json"):
    """min/max/avg (and count) of ``value``, overall or per ``by`` group."""
    df = load(data)
    rows = {}
    for name, g in _series(df, by):
        v = pd.to_numeric(g[value], errors="coerce").dropna()
        rows[name or "all"] = {"count": int(v.count()), "min": float(v.min()),
                               "max": float(v.max()), "avg": float(v.mean())}  # fmt: skip
    return _write_json(rows, out)


def rolled(data, value, minutes, series=None, time="timestamp", out="/tmp/rolled.csv"):
    """A trailing ``minutes`` rolling mean of ``value`` per ``series``, written to ``out``; each
    series starts once its first full window has passed (partial windows are dropped)."""
    df = load(data, time=time)
    window = pd.Timedelta(minutes=minutes)
    parts = []
    for _, group in _series(df, series):
        ordered = group.sort_values(time)
        raw = pd.to_numeric(ordered[value], errors="coerce").set_axis(ordered[time])
        smooth = ordered.assign(**{value: raw.rolling(window).mean().to_numpy()})
        parts.append(smooth[smooth[time] >= smooth[time].iloc[0] + window])
    result = pd.concat(parts) if parts else df.iloc[0:0]
    result.to_csv(out, index=False)
    return out


def series_figures(data, value, series=None, label=None, unit=None, extra=(), out="figures.json",
                   time="timestamp", by=None, noun="readings"):  # fmt: skip
    """min/mean/max and the count of ``value`` per ``series`` (or overall), and the statistics in
    ``extra`` ('p95': the 95th percentile, linear interpolation; 'median'; 'std': sample;
    'cv': sample std / mean;
    'energy' / 'energy:hour': the integral over ``time`` in kWh, in all and per bucket;
    'anomalies:3:above': readings more than 3 standard deviations above the mean of all the
    readings, counted per ``by`` or per series), with what the value is and its unit, for the
    answer to state."""
    df = load(data)
    if time in df.columns:
        df[time] = pd.to_datetime(df[time], utc=True, format="ISO8601")
    groups = {}
    for name, g in _series(df, series):
        v = pd.to_numeric(g[value], errors="coerce").dropna()
        if len(v):
            groups[name or "all"] = _figures_of(v, extra)
    found = {
        "series": series,
        "label": label or value,
        "unit": unit,
        "groups": groups,
        "noun": noun,
    }
    if len(groups) > 1 and any(s.startswith("p") or s in ("median", "std", "cv") for s in extra):
        # 'inlet temps across rack 7, box plot, median too': the statistic of every reading
        # drawn as well as of each series
        found["pooled"] = _figures_of(pd.to_numeric(df[value], errors="coerce").dropna(), extra)
    for stat in extra:
        if stat.startswith("energy"):
            bucket = stat.split(":", 1)[1] if ":" in stat else None
            found["energy"] = energy(df, value, unit, series=series, time=time, bucket=bucket)
            for name, kwh in found["energy"]["by_series"].items():
                if name in groups:
                    groups[name]["energy_kwh"] = kwh
        elif stat.startswith("anomalies:"):
            _, k, side = stat.split(":")
            found["anomalies"] = anomalies(df, value, float(k), side, series=by or series,
                                           time=time)  # fmt: skip
    return _write_json(found, out)


def _figures_of(v, extra):
    row = {"count": int(v.count()), "min": float(v.min()), "max": float(v.max()),
           "avg": float(v.mean())}  # fmt: skip
    for stat in extra:
        if stat.startswith("p"):
            row[stat] = float(v.quantile(float(stat[1:]) / 100))
        elif stat == "median":
            row[stat] = float(v.median())
        elif stat == "std":
            row[stat] = float(v.std())
        elif stat == "cv":  # sample std / mean, as the retriever's CV (SPARQL) computes it
            row[stat] = float(v.std() / v.mean()) if v.mean() else float("nan")
    return row


_KWH_PER = {"W": 1e-3, "kW": 1.0, "MW": 1e3}
"""kWh per (unit x hour): power integrated over time."""


def energy(df, value, unit, series=None, time="timestamp", bucket=None):
    """The energy of power readings in kWh: each series integrated over time, every reading
    standing for the interval around it (half the step to each neighbour, as trapezoids do;
    half a sampling step held where the series starts, ends or pauses for more than an hour,
    so that a day of one-minute readings is 24 h, not 23 h 59 min), summed over the series;
    per ``bucket`` ('hour', 'day', …) by the bucket of each reading."""
    if unit not in _KWH_PER:
        raise ValueError(f"energy needs power readings (W, kW or MW), not {unit!r}")
    per_series, per_bucket = {}, {}
    for name, group in _series(df, series):
        ordered = group.sort_values(time)
        t = ordered[time]
        v = np.nan_to_num(pd.to_numeric(ordered[value], errors="coerce").to_numpy())
        dt = t.diff().dt.total_seconds().to_numpy()[1:] / 3600.0
        kept = dt <= 1.0
        step = float(np.median(dt[kept])) if kept.any() else 0.0
        gaps = np.where(kept, dt, step)  # an interval too long to span is half a step a side
        left = np.concatenate([[step], gaps])
        right = np.concatenate([gaps, [step]])
        parts = v * (left + right) / 2 * _KWH_PER[unit]
        per_series[name or "all"] = float(parts.sum())
        if bucket:
            for key, kwh in pd.Series(parts, index=_bucket(t, bucket)).groupby(
                    level=0).sum().items():  # fmt: skip
                stamp = key.strftime("%Y-%m-%d %H:%M")
                per_bucket[stamp] = per_bucket.get(stamp, 0.0) + float(kwh)
    return {"total_kwh": sum(per_series.values()), "by_series": per_series, "bucket": bucket,
            "by_bucket": per_bucket, "series_count": len(per_series), "by": series}  # fmt: skip


def _beyond(values, high, low):
    """A mask of the readings above ``high`` or below ``low`` (either may be None)."""
    hit = pd.Series(False, index=values.index)
    if high is not None:
        hit |= values > high
    if low is not None:
        hit |= values < low
    return hit


def _bucket(times, bucket):
    """The start of each time's bucket: its minute, hour, day or week (weeks start on Monday)."""
    if bucket == "week":
        day = times.dt.floor("D")
        return day - pd.to_timedelta(day.dt.weekday, unit="D")
    return times.dt.floor({"minute": "min", "hour": "h", "day": "D"}[bucket])


def anomalies(df, value, k, side="both", series=None, time="timestamp"):
    """Readings more than ``k`` standard deviations (sample) off the mean of all the readings,
    on ``side`` ('above', 'below', 'both'): the bounds, how many, and how many per series."""
    v = pd.to_numeric(df[value], errors="coerce")
    mean, std = float(v.mean()), float(v.std())
    high = mean + k * std if side != "below" else None
    low = mean - k * std if side != "above" else None
    flagged = df[_beyond(v, high, low)]
    per = {}
    if series:
        per = {str(key): int(n) for key, n in flagged.groupby(series).size().items() if n}
    out = {
        "k": k,
        "side": side,
        "mean": mean,
        "std": std,
        "count": len(flagged),
        "readings": int(v.notna().sum()),
        "by": series,
        "by_series": per,
        "high": high,
        "low": low,
    }
    if time in flagged.columns and len(flagged):
        out["first"], out["last"] = str(flagged[time].min()), str(flagged[time].max())
    return out


def coefficient_of_variation(data, value, by=None, out="cv.json"):
    """CV = standard deviation / mean (population std), overall or per group, in percent too."""
    df = load(data)
    rows = {}
    for name, g in _series(df, by):
        v = pd.to_numeric(g[value], errors="coerce").dropna()
        mean, std = float(v.mean()), float(v.std(ddof=0))
        cv = std / mean if mean else float("nan")
        rows[name or "all"] = {"mean": mean, "std": std, "cv": cv, "cv_percent": 100 * cv}
    return _write_json(rows, out)


def daily_counts(data, time, title=None, ylabel="Jobs", out_csv="daily_counts.csv",
                 out="daily_counts.png"):  # fmt: skip
    """Rows per UTC day of ``time`` (e.g. jobs started per day): a CSV and, with a title, a plot."""
    df = load(data, time=time)
    days = df[time].dt.floor("D").value_counts().sort_index()
    table = pd.DataFrame({"day": days.index.strftime("%Y-%m-%d"), "count": days.values})
    table.to_csv(_out(out_csv), index=False)
    print(table.to_string(index=False))
    if title:
        fig, ax = plt.subplots(figsize=FIGSIZE)
        ax.plot(days.index, days.values, marker="o", linewidth=1.6, label=ylabel)
        _annotate_points(ax, days.index, days.values, bbox={"boxstyle": "round,pad=0.15",
                         "fc": "white", "ec": "none", "alpha": 0.85})  # fmt: skip
        _set_title(ax, title)
        ax.set_ylabel(f"{ylabel} per day (count)")
        # The counts' own range (room above for the labels), not from zero: a floor at 0 left
        # the lower half of the chart empty.
        ax.margins(y=0.15)
        _thousands(ax.yaxis)
        # Half a day either side, so the first and last points and labels are not cut.
        _time_axis(ax, days.index.to_series(), pad=pd.Timedelta(hours=12))
        if len(days) <= 31:  # a tick per day: the reader counts days, not every other one
            ax.xaxis.set_major_locator(mdates.DayLocator(tz="UTC"))
        _save(fig, out)
    return table


def energy_bars(data, value, unit, title, series=None, series_label=None, bucket=None,
                time="timestamp", out="energy.png"):  # fmt: skip
    """A bar of energy (kWh) per ``bucket`` ('hour', 'day') summed over the series, or per series
    when no bucket is asked; the table beside it as energy.csv."""
    df = load(data, time=time)
    found = energy(df, value, unit, series=series, time=time, bucket=bucket)
    parts = found["by_bucket"] if bucket else found["by_series"]
    names = [k[11:16] if bucket in ("hour", "minute") else k[:10] if bucket else
             f"{series_label or ''} {k}".strip() for k in parts]  # fmt: skip
    table = pd.DataFrame({"category": names, "energy_kwh": list(parts.values())})
    table.to_csv(_out("energy.csv"), index=False)
    table.to_csv("/tmp/energy.csv", index=False)
    label = {"hour": "Hour (UTC)", "day": "Day", "minute": "Minute (UTC)", "week": "Week"}
    return bar(
        "/tmp/energy.csv",
        "category",
        "energy_kwh",
        title,
        "Energy",
        unit="kWh",
        category_label=label.get(bucket, (series_label or "series").capitalize()),
        out=out,
    )


def day_hour_grid(data, value, title, label, unit=None, time="timestamp", out="heatmap.png"):
    """'outdoor temp 1-7 June as a heatmap, day x hour of day': the mean of ``value`` in each
    (UTC day, hour of the day) cell, drawn by ``grid`` (rows the days in order, columns the
    hours); its highest and lowest cells, each a mean of its readings, go to figures.json."""
    df = load(data, time=time)
    df["day"] = df[time].dt.strftime("%Y-%m-%d")
    df["hour"] = df[time].dt.strftime("%H:00")
    df[value] = pd.to_numeric(df[value], errors="coerce")
    cells = df.groupby(["day", "hour"], as_index=False)[value].mean().dropna()
    cells.to_csv(_out("cells.csv"), index=False)
    cells.to_csv("/tmp/cells.csv", index=False)
    return grid("/tmp/cells.csv", "day", "hour", value, title, row_label="Day (UTC)",
                col_label="Hour of the day (UTC)", label=label, unit=unit, out=out,
                out_json="figures.json")  # fmt: skip


_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def profile(data, value, cycle, title, ylabel, unit=None, label=None, kind="line",
            time="timestamp", out="profile.png"):  # fmt: skip
    """The mean of ``value`` per hour of the day (UTC, ``cycle='hour_of_day'``) or per day of the
    week (``'weekday'``) over every reading, drawn as a line or bars; the table as profile.csv and
    the figures (each mean, the highest and the lowest) as figures.json."""
    df = load(data, time=time)
    v = pd.to_numeric(df[value], errors="coerce")
    if cycle == "weekday":
        keys = df[time].dt.weekday
        names = {i: _WEEKDAYS[i] for i in range(7)}
        xlabel = "Day of the week"
    else:
        keys = df[time].dt.hour
        names = {h: f"{h:02d}:00" for h in range(24)}
        xlabel = "Hour of the day (UTC)"
    means = v.groupby(keys).mean().dropna()
    counts = v.groupby(keys).count()
    table = pd.DataFrame({"category": [names[int(k)] for k in means.index],
                          "mean_value": means.to_numpy(),
                          "readings": [int(counts[k]) for k in means.index]})  # fmt: skip
    table.to_csv(_out("profile.csv"), index=False)
    table.to_csv("/tmp/profile.csv", index=False)
    if kind == "bar":
        bar("/tmp/profile.csv", "category", "mean_value", title, ylabel, unit=unit,
            category_label=xlabel, out=out)  # fmt: skip
    else:
        fig, ax = plt.subplots(figsize=FIGSIZE)
        xs = np.arange(len(table))
        ax.plot(xs, table["mean_value"], marker="o", linewidth=1.6, label=ylabel)
        every = 3 if len(xs) > 12 else 1
        ax.set_xticks(xs[::every], table["category"][::every])
        ax.set_xlabel(xlabel)
        ax.set_ylabel(_label(ylabel, unit))
        _plain(ax.yaxis)
        ax.margins(x=0.02, y=0.12)
        _set_title(ax, title)
        _save(fig, out)
    top, low = table.loc[table["mean_value"].idxmax()], table.loc[table["mean_value"].idxmin()]
    found = {"label": label or value, "unit": unit, "profile": {
        "cycle": cycle, "means": dict(zip(table["category"], table["mean_value"], strict=True)),
        "highest": [top["category"], float(top["mean_value"])],
        "lowest": [low["category"], float(low["mean_value"])],
        "readings": int(table["readings"].sum())}}  # fmt: skip
    return _write_json(found, "figures.json")
