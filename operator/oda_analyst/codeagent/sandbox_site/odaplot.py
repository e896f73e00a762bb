"""Chart and statistics recipes for the Appendix-A questions; runs INSIDE the sandbox.

Imported by the scripts that ``oda_analyst.codeagent.recipes`` writes (or by model-written code):
it needs pandas and matplotlib from the sandbox's environment, reads only /in and writes only
/out. Every chart has a title, labelled axes with units, a legend when there is more than one
series, and a UTC time axis; figures are 10 x 5.5 in at 120 dpi, readable at 100 %.
"""

import json
import math
import os

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
    return f"min {values.min():,.4g}, avg {values.mean():,.4g}, max {values.max():,.4g}{u}"


def line(data, x, y, title, ylabel, unit=None, series=None, series_label=None, stats=False,
         marker=None, annotate=False, out="line.png"):  # fmt: skip
    """Time-series line plot; with ``series`` (e.g. node) one line per value, with a legend.

    ``series_label`` prefixes each series' value in the legend ("node" gives "node 900", ""
    nothing; default the column name); ``stats`` adds each line's min/avg/max to its entry.
    ``marker`` marks each point (e.g. "o" for daily figures); ``annotate`` writes each point's
    value above it (for a few points only).
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
            for t, v in zip(g[x], g[y], strict=True):
                ax.annotate(f"{v:,.4g}", (t, v), textcoords="offset points", xytext=(0, 8),
                            ha="center", fontsize=9)  # fmt: skip
    ax.set_title(title)
    ax.set_ylabel(_label(ylabel, unit))
    if annotate:
        ax.margins(y=0.15)
    # Points on days or hours: half a step either side, so the first and last are not cut.
    pad = pd.Timedelta(hours=12) if marker else None
    _time_axis(ax, df[x], pad=pad)
    if (
        marker
        and df[x].nunique() <= 31
        and len(df)
        and (df[x].max() - df[x].min() >= pd.Timedelta(days=2))
    ):
        ax.xaxis.set_major_locator(mdates.DayLocator(tz="UTC"))
    if stats:  # long entries: below the axes, where they cover no line
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1, frameon=False)
    elif len(groups) > 1:
        ax.legend(loc="best")
    return _save(fig, out)


def histogram(data, column, title, xlabel, unit=None, bins=40, out="histogram.png"):
    """Distribution of a column with count per bin; mean and median marked."""
    df = load(data)
    values = pd.to_numeric(df[column], errors="coerce").dropna()
    fig, ax = plt.subplots(figsize=FIGSIZE)
    ax.hist(values, bins=bins, color="#4C72B0", edgecolor="white",
            label=f"readings (n={len(values):,})")  # fmt: skip
    ax.axvline(values.mean(), color="#C44E52", linestyle="--", label=f"mean {values.mean():.2f}")
    ax.axvline(values.median(), color="#55A868", linestyle=":",
               label=f"median {values.median():.2f}")  # fmt: skip
    ax.set_title(title)
    ax.set_xlabel(_label(xlabel, unit))
    ax.set_ylabel("Readings (count)")
    _thousands(ax.yaxis)
    ax.legend(loc="best")
    return _save(fig, out)


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
    ax.set_title(title, pad=28)
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
    for i, (col, name) in enumerate(zip(cols, names, strict=True)):
        bars = ax.bar(xs + (i - (len(cols) - 1) / 2) * width, df[col], width, label=name)
        ax.bar_label(bars, fmt="%.3g", padding=2, fontsize=9)
    ax.set_xticks(xs, cats)
    ax.set_xlabel(category_label or category)
    ax.set_ylabel(_label(ylabel, unit))
    ax.set_title(title)
    ax.margins(y=0.12)
    if len(cols) > 1:
        ax.legend(loc="best")
    return _save(fig, out)


def pie(data, label, value, title, unit=None, out="pie.png"):
    """Shares of a whole, each wedge labelled with its percentage and its value."""
    df = load(data)
    total = df[value].sum()
    u = f" {unit}" if unit else ""
    fig, ax = plt.subplots(figsize=(7.5, 6))

    def pct(p):
        return f"{p:.1f} %\n({p * total / 100:,.1f}{u})"

    ax.pie(df[value], labels=df[label].astype(str), autopct=pct, startangle=90,
           counterclock=False, wedgeprops={"edgecolor": "white"})  # fmt: skip
    ax.set_title(f"{title}\n(total {total:,.1f}{u})", pad=24)
    ax.axis("equal")
    return _save(fig, out)


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
    ax.set_title(title)
    return _save(fig, out)


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
    ax.set_title(f"{title}\nPearson r = {pearson:.2f}, Spearman ρ = {spearman:.2f}, n = {n:,}")
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
    ax.set_title(title, pad=30)  # room for the legend between the title and the boxes
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


def series_figures(data, value, series=None, label=None, unit=None, extra=(), out="figures.json"):
    """min/mean/max and the count of ``value`` per ``series`` (or overall), and the statistics in
    ``extra`` ('p95': the 95th percentile, linear interpolation; 'median'; 'std': sample), with
    what the value is and its unit, for the answer to state in words."""
    df = load(data)
    groups = {}
    for name, g in _series(df, series):
        v = pd.to_numeric(g[value], errors="coerce").dropna()
        if len(v):
            row = {"count": int(v.count()), "min": float(v.min()), "max": float(v.max()),
                   "avg": float(v.mean())}  # fmt: skip
            for stat in extra:
                if stat.startswith("p"):
                    row[stat] = float(v.quantile(float(stat[1:]) / 100))
                elif stat == "median":
                    row[stat] = float(v.median())
                elif stat == "std":
                    row[stat] = float(v.std())
            groups[name or "all"] = row
    return _write_json({"series": series, "label": label or value, "unit": unit,
                        "groups": groups}, out)  # fmt: skip


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
        for t, v in zip(days.index, days.values, strict=True):
            ax.annotate(f"{v:,}", (t, v), textcoords="offset points", xytext=(0, 8),
                        ha="center", fontsize=9, bbox={"boxstyle": "round,pad=0.15",
                        "fc": "white", "ec": "none", "alpha": 0.85})  # fmt: skip
        ax.set_title(title)
        ax.set_ylabel(f"{ylabel} per day (count)")
        ax.set_ylim(bottom=0, top=max(days.values) * 1.15 if len(days) else 1)
        _thousands(ax.yaxis)
        # Half a day either side, so the first and last points and labels are not cut.
        _time_axis(ax, days.index.to_series(), pad=pd.Timedelta(hours=12))
        if len(days) <= 31:  # a tick per day: the reader counts days, not every other one
            ax.xaxis.set_major_locator(mdates.DayLocator(tz="UTC"))
        _save(fig, out)
    return table
