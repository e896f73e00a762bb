"""Charts a reader trusts, checked mechanically (issue 29, item 3).

``check_figure`` inspects a Matplotlib figure as it is about to be saved (laid out, drawn once)
and returns what a reader would stumble on: an axis range the data fills only part of, text
drawn over text or cut off at the edge, an axis without a label or unit, several series without
a legend, a title not in sentence case or padded with filler, a time axis that does not say UTC,
more than a dozen category labels on a bar axis. ``intercept`` runs a callback on every figure
saved while it is active (``Figure.savefig`` patched), so the recipes in ``odaplot`` are checked
without changing how they save.

Run as a script (with the sandbox's Python, which has pandas) it draws every odaplot recipe on
realistic small data and reports the violations per chart:

    $SANDBOX_PYTHON tests/chart_checks.py [--odaplot DIR] [--json]

Only Matplotlib and NumPy are imported at module level, so the test suite's own environment
(no pandas) can check figures it draws itself.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import json
import math
import re
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates
import numpy as np
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.backend_bases import RendererBase
from matplotlib.collections import Collection
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.text import Text
from matplotlib.transforms import Bbox

MIN_COVERAGE = 0.6
"""Share of an axis range the data must span: below it, part of the chart is empty."""
MAX_CATEGORIES = 12
"""Category labels on a bar axis before they must be thinned."""
SLACK_PX = 1.0
"""Overlaps and overhangs smaller than this (anti-aliasing, rounding) are not violations."""

CHECKS = ("limits", "overlap", "clipped", "label", "unit", "legend", "title", "utc", "categories")


@dataclass(frozen=True)
class Violation:
    check: str
    """One of CHECKS."""
    message: str

    def __str__(self) -> str:
        return f"{self.check}: {self.message}"


# --- what a figure shows ------------------------------------------------------------------------


def _is_colorbar(ax: Axes) -> bool:
    return hasattr(ax, "_colorbar")


def _drawn_ticklabels(axis: Axis) -> list[Text]:
    """The tick labels Matplotlib draws (ticks outside the view are kept but not drawn)."""
    if not axis.get_visible():
        return []
    labels: list[Text] = []
    for tick in axis._update_ticks():  # the ticks to draw; the public getters return all
        for label in (tick.label1, tick.label2):
            if label.get_visible() and label.get_text().strip():
                labels.append(label)
    return labels


def _is_time(axis: Axis) -> bool:
    formatter = axis.get_major_formatter()
    return isinstance(
        formatter, mdates.DateFormatter | mdates.AutoDateFormatter | mdates.ConciseDateFormatter
    )


_NUMBER = re.compile(r"^[−\-+]?[\d,.]+(?:e[−\-+]?\d+)?\s*%?$", re.IGNORECASE)


def _kind(axis: Axis) -> str:
    """'time', 'numeric', 'categorical', or 'none' (no tick labels: the axis shows nothing)."""
    labels = _drawn_ticklabels(axis)
    if not labels:
        return "none"
    if _is_time(axis):
        return "time"
    if all(_NUMBER.match(t.get_text().strip()) for t in labels):
        return "numeric"
    return "categorical"


def _data_artists(ax: Axes) -> list[Any]:
    """Artists placed in data coordinates (an axvline's height is in axes units: not data)."""
    found: list[Any] = []
    for line in ax.lines:
        if line.get_visible() and line.get_transform() is ax.transData:
            found.append(line)
    for patch in ax.patches:
        if patch.get_visible() and patch.get_data_transform() is ax.transData:
            found.append(patch)
    for coll in ax.collections:
        if coll.get_visible() and ax.transData in (coll.get_offset_transform(),
                                                    coll.get_transform()):  # fmt: skip
            found.append(coll)
    found.extend(im for im in ax.images if im.get_visible())
    return found


def _extent(artist: Any, ax: Axes, renderer: RendererBase) -> Bbox | None:
    """Where an artist's data is drawn, in pixels, within the axes."""
    if isinstance(artist, Line2D):
        xy = artist.get_xydata()
        xy = np.asarray(xy, dtype=float)
        xy = xy[np.isfinite(xy).all(axis=1)]
        if not len(xy):
            return None
        pts = ax.transData.transform(xy)
    elif isinstance(artist, Collection) and artist.get_offset_transform() is ax.transData:
        offsets = np.asarray(artist.get_offsets(), dtype=float)
        offsets = offsets[np.isfinite(offsets).all(axis=1)] if offsets.ndim == 2 else offsets
        if not len(offsets):
            return None
        pts = ax.transData.transform(offsets)
    elif isinstance(artist, Patch | Collection | AxesImage):
        box = artist.get_window_extent(renderer)
        if not np.isfinite(box.get_points()).all():
            return None
        pts = box.get_points()
    else:
        return None
    box = Bbox.from_extents(pts[:, 0].min(), pts[:, 1].min(), pts[:, 0].max(), pts[:, 1].max())
    return Bbox.intersection(box, ax.bbox)


def _series_count(ax: Axes) -> int:
    """Series a reader must tell apart: lines through three or more points in order of x
    (a box plot's boxes, whiskers and caps are not), scatters, bar groups."""
    n = 0
    for line in ax.lines:
        if line.get_transform() is not ax.transData:
            continue
        x = np.asarray(line.get_xydata(), dtype=float)[:, 0]
        if len(x) >= 3 and len(np.unique(x)) >= 2 and (np.diff(x) >= 0).all():
            n += 1
    for coll in ax.collections:
        if coll.get_offset_transform() is ax.transData and len(coll.get_offsets()) >= 2:
            n += 1
    n += sum(1 for c in ax.containers if isinstance(c, BarContainer))
    return n


def _texts(fig: Figure) -> list[tuple[str, Text]]:
    """Every text drawn, with what it is (for the message)."""
    out: list[tuple[str, Text]] = []
    if fig._suptitle is not None:
        out.append(("suptitle", fig._suptitle))
    out += [("figure text", t) for t in fig.texts]
    legends = list(fig.legends)
    for i, ax in enumerate(fig.axes):
        name = f"axes {i}"
        for title in (ax.title, ax._left_title, ax._right_title):
            out.append((f"{name} title", title))
        for axis, which in ((ax.xaxis, "x"), (ax.yaxis, "y")):
            if axis.get_visible():
                out.append((f"{name} {which} label", axis.label))
                out.append((f"{name} {which} offset", axis.offsetText))
                out += [(f"{name} {which} tick", t) for t in _drawn_ticklabels(axis)]
        out += [(f"{name} text", t) for t in ax.texts]
        if ax.get_legend() is not None:
            legends.append(ax.get_legend())
    for legend in legends:
        if legend.get_visible():
            out += [("legend entry", t) for t in legend.get_texts()]
            out.append(("legend title", legend.get_title()))
    return [(k, t) for k, t in out if t.get_visible() and t.get_text().strip()]


# --- the checks ---------------------------------------------------------------------------------


def _check_limits(axes: Sequence[Axes], renderer: RendererBase) -> list[Violation]:
    """``axes``: one plot area; twins with the same limits (one scale on both sides) are read
    as one axis, so their data is taken together."""
    ax = axes[0]
    boxes = [b for a in axes for art in _data_artists(a)
             if (b := _extent(art, a, renderer)) is not None]  # fmt: skip
    if not boxes:
        return []
    data = Bbox.union(boxes)
    found = []
    for which, span, full, axis in (
        ("x", data.width, ax.bbox.width, ax.xaxis),
        ("y", data.height, ax.bbox.height, ax.yaxis),
    ):
        kind = _kind(axis)
        if kind not in ("numeric", "time") or full <= 0 or span <= 0.01 * full:
            continue  # categories are placed, not scaled; a flat line spans nothing
        if span / full < MIN_COVERAGE:
            what = f"the {which} axis ({axis.label.get_text()!r})"
            found.append(Violation("limits", f"the data spans {span / full:.0%} of {what}"))
    return found


def _plot_areas(plots: Sequence[Axes]) -> list[list[Axes]]:
    """Axes grouped by what a reader sees as one scale: twins with the same limits together."""
    groups: list[list[Axes]] = []
    for ax in plots:
        key = (tuple(ax.get_position().bounds), ax.get_xlim(), ax.get_ylim())
        for group in groups:
            g = group[0]
            if (tuple(g.get_position().bounds), g.get_xlim(), g.get_ylim()) == key:
                group.append(ax)
                break
        else:
            groups.append([ax])
    return groups


def _corners(text: Text, renderer: RendererBase) -> np.ndarray:
    """The four corners of a text's box as drawn, rotation included (the axis-aligned extent
    of a slanted tick label is far wider than the label, and would meet its neighbours')."""
    box = text.get_window_extent(renderer)
    angle = text.get_rotation() % 180
    if angle == 0:
        return np.array([[box.x0, box.y0], [box.x1, box.y0], [box.x1, box.y1], [box.x0, box.y1]])
    # The unrotated size, measured with the rotation briefly taken off.
    text.set_rotation(0)
    flat = text.get_window_extent(renderer)
    text.set_rotation(angle)
    w, h, theta = flat.width / 2, flat.height / 2, math.radians(angle)
    rot = np.array([[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]])
    half = np.array([[-w, -h], [w, -h], [w, h], [-w, h]]) @ rot.T
    # A rotated rectangle's axis-aligned extent is centred where the rectangle is.
    return half + np.array([(box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2])


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Two convex quadrilaterals overlap by more than SLACK_PX along every separating axis."""
    for poly in (a, b):
        for i in range(4):
            edge = poly[(i + 1) % 4] - poly[i]
            normal = np.array([-edge[1], edge[0]])
            length = float(np.hypot(*normal))
            if length == 0:
                continue
            normal /= length
            pa, pb = a @ normal, b @ normal
            if min(pa.max(), pb.max()) - max(pa.min(), pb.min()) <= SLACK_PX:
                return False
    return True


def _check_overlap(texts: Sequence[tuple[str, Text]], renderer: RendererBase,
                   fig: Figure) -> list[Violation]:  # fmt: skip
    shapes = [(k, t, _corners(t, renderer)) for k, t in texts]
    found = []
    for i, (k1, t1, c1) in enumerate(shapes):
        for k2, t2, c2 in shapes[i + 1 :]:
            if _overlap(c1, c2):
                found.append(Violation("overlap", f"{k1} {t1.get_text()!r} overlaps "
                                       f"{k2} {t2.get_text()!r}"))  # fmt: skip
    page = fig.bbox
    for k, t, c in shapes:
        if (c[:, 0].min() < page.x0 - SLACK_PX or c[:, 1].min() < page.y0 - SLACK_PX
                or c[:, 0].max() > page.x1 + SLACK_PX
                or c[:, 1].max() > page.y1 + SLACK_PX):  # fmt: skip
            found.append(Violation("clipped", f"{k} {t.get_text()!r} runs off the figure"))
    return found


# A quantity without a unit says what it counts or compares.
_DIMENSIONLESS = re.compile(
    r"\b(count|number of|correlation|coefficient|ratio|fraction|share|rank)\b", re.IGNORECASE
)
_UNIT = re.compile(r"\([^()]+\)\s*$|\(([^()]+)\)")


def _check_axis_labels(ax: Axes, units: Sequence[str]) -> list[Violation]:
    found = []
    for which, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
        kind = _kind(axis)
        if kind == "none":
            continue
        label = axis.label.get_text().strip() if axis.label.get_visible() else ""
        if not label:
            found.append(Violation("label", f"the {which} axis ({kind}) has no label"))
            continue
        if kind == "time" and "UTC" not in label:
            found.append(Violation("utc", f"the time axis label {label!r} does not say UTC"))
        if kind == "numeric":
            if not _UNIT.search(label) and not _DIMENSIONLESS.search(label):
                found.append(Violation("unit", f"the {which} axis label {label!r} has no unit"))
            offset = axis.offsetText.get_text().strip()
            if axis.offsetText.get_visible() and offset:
                what = f"the {which} axis ({label!r}) is scaled by {offset!r} in its corner"
                found.append(Violation("unit", f"{what}: its ticks are not the values"))
    return found


def _check_units(fig: Figure, units: Sequence[str]) -> list[Violation]:
    labels = [a.label.get_text() for ax in fig.axes for a in (ax.xaxis, ax.yaxis)]
    return [
        Violation("unit", f"no axis label states the unit {unit!r}: {labels}")
        for unit in units
        if not any(f"({unit})" in lab or f" {unit})" in lab for lab in labels)
    ]


_PROPER = {"pearson", "spearman", "june", "july", "monday", "utc", "kwh"}
_LOWER_ACRONYM = re.compile(r"\b(cpu|gpu|psu|pue|ipmi|dimm|pcie|utc)\b")
_FILLER = re.compile(r"\bfor all panels\b|\ball panels\b", re.IGNORECASE)
# 'for each node' over one line says there were several; 'of all nodes' (readings pooled) is
# what was plotted, and stays.
_ONE_SERIES_FILLER = re.compile(
    r"\bfor (each|every) (series|node|job|metric|rack|user|gpu|cpu)\b", re.IGNORECASE
)


def _check_titles(fig: Figure, series: int) -> list[Violation]:
    titles = [fig._suptitle.get_text()] if fig._suptitle is not None else []
    titles += [t.get_text() for ax in fig.axes for t in (ax.title, ax._left_title,
                                                         ax._right_title)]  # fmt: skip
    titles = [t.strip() for t in titles if t.strip()]
    if not titles:
        return [Violation("title", "the figure has no title")]
    found = []
    for title in titles:
        text = " ".join(title.split())
        first = text[:1]
        if first.isalpha() and not first.isupper():
            found.append(Violation("title", f"{text!r} does not start with a capital"))
        words = [w for w in re.findall(r"[A-Za-z][a-z]{3,}|[A-Z][A-Z]+", text)[1:]
                 if w.lower() not in _PROPER and not w.isupper()]  # fmt: skip
        capitals = [w for w in words if w[0].isupper()]
        if len(capitals) >= 3 and len(capitals) > len(words) / 2:
            found.append(Violation("title", f"{text!r} is in title case, not sentence case"))
        if m := _LOWER_ACRONYM.search(text):
            found.append(Violation("title", f"{text!r} writes {m[0]!r} in lower case"))
        if m := _FILLER.search(text):
            found.append(Violation("title", f"{text!r} says {m[0]!r}"))
        elif series <= 1 and (m := _ONE_SERIES_FILLER.search(text)):
            found.append(Violation("title", f"{text!r} says {m[0]!r} of one series"))
    return found


def _check_legend(fig: Figure, series: int) -> list[Violation]:
    if series <= 1:
        return []
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    entries = sum(len(lg.get_texts()) for lg in [*legends, *fig.legends] if lg.get_visible())
    if entries < series:
        return [Violation("legend", f"{series} series drawn, {entries} legend entries")]
    return []


def _check_categories(ax: Axes) -> list[Violation]:
    if not any(isinstance(c, BarContainer) for c in ax.containers):
        return []
    found = []
    for which, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
        if _kind(axis) == "categorical":
            n = len(_drawn_ticklabels(axis))
            if n > MAX_CATEGORIES:
                found.append(Violation("categories", f"{n} category labels on the {which} "
                                       f"axis (at most {MAX_CATEGORIES})"))  # fmt: skip
    return found


def check_figure(fig: Figure, *, units: Sequence[str] = ()) -> list[Violation]:
    """What a reader would stumble on in ``fig`` as it stands (laid out as it will be saved).

    ``units``: the units of the quantities plotted; each must appear in some axis label.
    """
    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()  # ticks, tight layout and text positions as they will be saved
    plots = [ax for ax in fig.axes if ax.get_visible() and not _is_colorbar(ax)]
    series = sum(_series_count(ax) for ax in plots)
    found: list[Violation] = []
    for area in _plot_areas(plots):
        found += _check_limits(area, renderer)
    for ax in plots:
        found += _check_categories(ax)
    for ax in fig.axes:
        if ax.get_visible():
            found += _check_axis_labels(ax, units)
    found += _check_units(fig, units)
    found += _check_overlap(_texts(fig), renderer, fig)
    found += _check_legend(fig, series)
    found += _check_titles(fig, series)
    return found


@contextmanager
def intercept(record: Callable[[Figure, str], None]) -> Iterator[None]:
    """Every figure saved meanwhile is passed to ``record`` (figure, file name) first, at the
    resolution it is saved at."""
    original = Figure.savefig

    def savefig(self: Figure, fname: Any, *args: Any, **kwargs: Any) -> Any:
        dpi = kwargs.get("dpi")
        saved = self.dpi
        if isinstance(dpi, int | float):
            self.set_dpi(dpi)
        try:
            record(self, Path(str(fname)).name)
        finally:
            self.set_dpi(saved)
        return original(self, fname, *args, **kwargs)

    Figure.savefig = savefig  # type: ignore[method-assign]
    try:
        yield
    finally:
        Figure.savefig = original  # type: ignore[method-assign]


# --- realistic cases: every odaplot recipe, in the shapes the coordinator writes -----------------


@dataclass(frozen=True)
class Case:
    """One recipe call; ``out`` names the chart, ``units`` must show on its axes."""

    name: str
    recipe: str
    kwargs: dict[str, Any]
    units: tuple[str, ...] = ()
    before: tuple[tuple[str, dict[str, Any]], ...] = field(default_factory=tuple)
    """Recipes run first (e.g. ``rolled``), whose output the chart reads."""


DAY = datetime(2022, 6, 1, tzinfo=UTC)


def _stamps(start: datetime, n: int, step: timedelta) -> list[str]:
    return [(start + step * i).strftime("%Y-%m-%dT%H:%M:%SZ") for i in range(n)]


def _write(path: Path, columns: dict[str, Sequence[Any]]) -> str:
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        writer.writerows(zip(*columns.values(), strict=True))
    return str(path)


def _readings(path: Path, rng: np.random.Generator, nodes: Sequence[int], metric: str,
              hours: float, step_s: int, base: float, swing: float,
              start: datetime = DAY) -> str:  # fmt: skip
    """Long readings as the retriever returns them: node_id, metric_name, timestamp, value."""
    n = int(hours * 3600 / step_s)
    cols: dict[str, list[Any]] = {"node_id": [], "metric_name": [], "timestamp": [], "value": []}
    for k, node in enumerate(nodes):
        wave = base + swing * np.sin(np.arange(n) / (n / 6) + k) + rng.normal(0, swing / 8, n)
        cols["node_id"] += [node] * n
        cols["metric_name"] += [metric] * n
        cols["timestamp"] += _stamps(start, n, timedelta(seconds=step_s))
        cols["value"] += [round(float(v), 3) for v in wave]
    return _write(path, cols)


def write_cases(folder: Path) -> list[Case]:
    """Seeded CSVs in ``folder`` and a call of every chart recipe on them, edge cases included
    (one series, 16 nodes, 30 bars, a long title, values in the millions)."""
    rng = np.random.default_rng(29)
    f = folder
    power1 = _readings(f / "power1.csv", rng, [900], "total_power", 4, 20, 1200, 200)
    power2 = _readings(f / "power2.csv", rng, [900, 920], "total_power", 7, 60, 1100, 300)
    many = _readings(f / "many.csv", rng, list(range(100, 116)), "total_power", 6, 120, 1000, 250)
    facility = _readings(f / "facility.csv", rng, [0], "facility_power", 24, 300, 1.6e6, 2e5)
    metrics: dict[str, list[Any]] = {"node_id": [], "metric_name": [], "timestamp": [],
                                     "value": [], "metric": []}  # fmt: skip
    for name, base in (("CPU utilisation", 55.0), ("GPU utilisation", 70.0)):
        n = 240
        metrics["node_id"] += [900] * n
        metrics["metric_name"] += [name] * n
        metrics["timestamp"] += _stamps(DAY, n, timedelta(minutes=1))
        metrics["value"] += list(np.clip(base + 20 * np.sin(np.arange(n) / 30)
                                         + rng.normal(0, 4, n), 0, 100).round(2))  # fmt: skip
        metrics["metric"] += [name] * n
    two_metrics = _write(f / "metrics.csv", metrics)
    hours = [h.strftime("%Y-%m-%dT%H:%M:%SZ") for h in (DAY + timedelta(hours=i)
                                                         for i in range(24))]  # fmt: skip
    hourly = _write(
        f / "hourly.csv",
        {
            "hour": hours,
            "avg_value": list(
                (1.52e6 + 1.2e5 * np.sin(np.arange(24) / 4) + rng.normal(0, 1e4, 24)).round(1)
            ),
        },
    )
    days = [(DAY + timedelta(days=i)).strftime("%Y-%m-%d") for i in range(7)]
    daily = _write(
        f / "daily.csv", {"day": days, "avg_value": list((31.5 + rng.normal(0, 1.5, 7)).round(2))}
    )
    inlet = _write(
        f / "inlet.csv",
        {
            "value": list(
                np.concatenate([rng.normal(23.5, 1.2, 20_000), rng.normal(41, 1, 600)]).round(2)
            )
        },
    )
    energy = _write(f / "energy.csv", {"value": list(rng.lognormal(13, 0.4, 5000).round(0))})

    def per_node(path: str, n: int, base: float, spread: float) -> str:
        nodes = [f"node {900 + 3 * i}" for i in range(n)]
        avg = base + rng.normal(0, spread, n)
        return _write(Path(path), {"category": nodes, "avg_value": list(avg.round(2)),
                                   "min_value": list((avg * 0.6).round(2)),
                                   "max_value": list((avg * 1.3).round(2)),
                                   "sum_value": list((avg * 3.6e3).round(0))})  # fmt: skip

    bars5 = per_node(str(f / "bars5.csv"), 5, 1150, 120)
    bars30 = per_node(str(f / "bars30.csv"), 30, 1150, 120)
    bars16 = per_node(str(f / "bars16.csv"), 16, 1150, 120)
    parts = _write(f / "parts.csv", {"part": ["CPU hours", "GPU hours"],
                                     "value": [15234.5, 6021.25]})  # fmt: skip
    parts3 = _write(f / "parts3.csv", {"part": ["CPU hours", "GPU hours", "Idle hours"],
                                       "value": [152340.5, 1021.25, 803.0]})  # fmt: skip
    m = 240
    common = rng.normal(0, 1, m)
    names = ["Inlet temperature", "CPU utilisation", "GPU 0 utilisation", "GPU 1 utilisation",
             "GPU 2 utilisation", "GPU 3 utilisation", "Node power"]  # fmt: skip
    wide = {f"m{i}": list((50 + common * (5 + i) * (-1) ** i + rng.normal(0, 4, m)).round(3))
            for i in range(len(names))}  # fmt: skip
    heat = _write(f / "wide.csv", wide)
    racks, hours = range(1, 50), [f"2022-06-01T{h:02d}:00:00Z" for h in range(24)]
    cells = [(r, h) for r in racks for h in hours]
    grid = _write(f / "grid.csv", {"rack_id": [r for r, _ in cells], "hour": [h for _, h in cells],
                                   "avg_value": list((1000 + rng.normal(0, 120, len(cells)))
                                                     .round(1))})  # fmt: skip
    k = 7 * 144  # a week of 10-minute weather readings
    week = _write(f / "week.csv", {
        "timestamp": _stamps(DAY, k, timedelta(minutes=10)),
        "value": list((21 + 6 * np.sin((np.arange(k) % 144 - 54) / 144 * 2 * np.pi)
                       + rng.normal(0, 0.8, k)).round(2))})  # fmt: skip
    n = 24 * 60
    dual = _write(f / "dual.csv", {
        "timestamp": _stamps(DAY, n, timedelta(minutes=1)),
        "total_power": list((1500 + 300 * np.sin(np.arange(n) / 229)
                             + rng.normal(0, 40, n)).round(1)),
        "ambient": list((24 + 3 * np.sin(np.arange(n) / 229 - 0.5)
                         + rng.normal(0, 0.2, n)).round(2)),
    })  # fmt: skip
    ticks = [f"day {i}\n06-{i:02d} | 06-{i + 7:02d}" for i in range(1, 8)]
    periods = _write(
        f / "periods.csv",
        {
            "tick": ticks,
            "left": list((1.4e6 + rng.normal(0, 5e4, 7)).round(0)),
            "right": list((1.5e6 + rng.normal(0, 5e4, 7)).round(0)),
        },
    )
    sx = rng.normal(1500, 200, 400)
    pairs = _write(f / "pairs.csv", {"node_id": [900] * 400, "total_power": list(sx.round(1)),
                                     "ambient": list((10 + sx / 100 + rng.normal(0, 1, 400))
                                                     .round(2))})  # fmt: skip

    def jobs(path: str, groups: int) -> str:
        rows: dict[str, list[Any]] = {"group": [], "job_id": [], "avg_value": []}
        for g in range(groups):
            k = int(rng.integers(15, 60))
            rows["group"] += [f"user {g:02d}"] * k
            rows["job_id"] += list(range(g * 1000, g * 1000 + k))
            rows["avg_value"] += list(rng.normal(300 + 30 * g, 60, k).round(1))
        return _write(Path(path), rows)

    box8, box16 = jobs(str(f / "box8.csv"), 8), jobs(str(f / "box16.csv"), 16)
    starts = [
        (DAY + timedelta(days=d, seconds=int(s))).strftime("%Y-%m-%dT%H:%M:%SZ")
        for d in range(10)
        for s in rng.integers(0, 86_400, int(rng.integers(300, 900)))
    ]
    jobs10 = _write(f / "jobs10.csv", {"start_time": starts})
    starts40 = [
        (DAY + timedelta(days=d, seconds=int(s))).strftime("%Y-%m-%dT%H:%M:%SZ")
        for d in range(40)
        for s in rng.integers(0, 86_400, int(rng.integers(50, 120)))
    ]
    jobs40 = _write(f / "jobs40.csv", {"start_time": starts40})

    long_title = ("Node power for nodes 900 and 920 while jobs of the climate and the materials "
                  "projects ran on them, with the cooling loop in its summer setting, "
                  "1 Jun 2022 00:00–07:00 UTC")  # fmt: skip
    line = {"x": "timestamp", "y": "value", "ylabel": "Node power", "unit": "W"}
    return [
        Case("line_one_node", "line", {**line, "data": power1, "out": "line_one_node.png",
             "title": "Node power for node 900, 1 Jun 2022 00:00–04:00 UTC"}, ("W",)),
        Case("line_two_nodes", "line", {**line, "data": power2, "series": "node_id",
             "series_label": "node", "out": "line_two_nodes.png",
             "title": "Node power for nodes 900 and 920, 1 Jun 2022 00:00–07:00 UTC"}, ("W",)),
        Case("line_16_nodes", "line", {**line, "data": many, "series": "node_id",
             "series_label": "node", "out": "line_16_nodes.png",
             "title": "Node power for 16 nodes of rack 3, 1 Jun 2022 00:00–06:00 UTC"}, ("W",)),
        Case("line_stats", "line", {**line, "data": power2, "series": "node_id",
             "series_label": "node", "stats": True, "out": "line_stats.png",
             "title": "Node power for nodes 900 and 920, 1 Jun 2022 00:00–07:00 UTC"}, ("W",)),
        Case("line_long_title", "line", {**line, "data": power2, "series": "node_id",
             "series_label": "node", "out": "line_long_title.png", "title": long_title},
             ("W",)),
        Case("line_metrics", "line", {**line, "data": two_metrics, "series": "metric",
             "series_label": "", "ylabel": "Utilisation", "unit": "%", "out": "line_metrics.png",
             "title": "CPU and GPU utilisation of node 900, 1 Jun 2022 00:00–04:00 UTC"},
             ("%",)),
        Case("line_millions", "line", {**line, "data": facility, "ylabel": "Facility power",
             "out": "line_millions.png", "title": "Facility power, 1 Jun 2022"}, ("W",)),
        Case("line_rolled", "line", {**line, "data": str(f / "rolled.csv"),
             "series": "node_id", "series_label": "node",
             "ylabel": "Node power (10-minute rolling mean)", "out": "line_rolled.png",
             "title": "10-minute rolling mean of node power for nodes 900 and 920, "
             "1 Jun 2022 00:00–07:00 UTC"}, ("W",),
             before=(("rolled", {"data": power2, "value": "value", "minutes": 10,
                                 "series": "node_id", "out": str(f / "rolled.csv")}),)),
        Case("line_hourly", "line", {"data": hourly, "x": "hour", "y": "avg_value",
             "ylabel": "Average facility power", "unit": "W", "marker": "o", "annotate": True,
             "out": "line_hourly.png",
             "title": "Hourly average of facility power, 1 Jun 2022"}, ("W",)),
        Case("line_daily", "line", {"data": daily, "x": "day", "y": "avg_value",
             "ylabel": "Average inlet temperature", "unit": "°C", "marker": "o",
             "annotate": True, "out": "line_daily.png",
             "title": "Daily average of inlet temperature, 1–7 Jun 2022"}, ("°C",)),
        Case("histogram", "histogram", {"data": inlet, "column": "value",
             "xlabel": "Inlet temperature", "unit": "°C", "out": "histogram.png",
             "title": "Distribution of inlet temperature of all nodes, 1 Jun 2022"}, ("°C",)),
        Case("histogram_large", "histogram", {"data": energy, "column": "value",
             "xlabel": "Job energy", "unit": "kJ", "out": "histogram_large.png",
             "title": "Distribution of job energy, 1–7 Jun 2022"}, ("kJ",)),
        Case("bar_5", "bar", {"data": bars5, "category": "category", "values": "avg_value",
             "ylabel": "Average node power", "unit": "W", "category_label": "Node",
             "out": "bar_5.png", "title": "Average node power per node, 1 Jun 2022"}, ("W",)),
        Case("bar_30", "bar", {"data": bars30, "category": "category", "values": "avg_value",
             "ylabel": "Average node power", "unit": "W", "category_label": "Node",
             "out": "bar_30.png", "title": "Average node power per node, 1 Jun 2022"}, ("W",)),
        Case("bar_grouped_16", "bar", {"data": bars16, "category": "category",
             "values": ["min_value", "avg_value", "max_value"], "ylabel": "Value", "unit": "W",
             "value_labels": ["Minimum node power", "Average node power", "Maximum node power"],
             "category_label": "Node", "out": "bar_grouped_16.png",
             "title": "Minimum, average and maximum node power per node, 1 Jun 2022"}, ("W",)),
        Case("bar_large", "bar", {"data": bars5, "category": "category", "values": "sum_value",
             "ylabel": "Total node energy", "unit": "J", "category_label": "Node",
             "out": "bar_large.png", "title": "Total node energy per node, 1 Jun 2022"},
             ("J",)),
        Case("pie", "pie", {"data": parts, "label": "part", "value": "value", "unit": "h",
             "out": "pie.png", "title": "CPU hours and GPU hours, 1–7 Jun 2022 (2,345 jobs)"}),
        Case("pie_small_slices", "pie", {"data": parts3, "label": "part", "value": "value",
             "unit": "h", "out": "pie_small_slices.png",
             "title": "CPU, GPU and idle hours, 1–30 Jun 2022"}),
        Case("heatmap", "heatmap", {"data": heat, "columns": list(wide), "labels": names,
             "out": "heatmap.png",
             "title": "Correlation of seven metrics of node 900, 1 Jun 2022\n"
             "(Pearson, on 1-minute means)"}),
        Case("heatmap_grid", "grid", {"data": grid, "row": "rack_id", "col": "hour",
             "value": "avg_value", "row_label": "Rack", "col_label": "Hour (UTC)",
             "label": "Average node power", "unit": "W", "row_prefix": "rack ",
             "out": "heatmap_grid.png",
             "title": "Average node power per rack and hour, 1 Jun 2022"}, ("W",)),
        Case("dual_axis", "dual_axis", {"data": dual, "x": "timestamp", "left": "total_power",
             "right": "ambient", "left_label": "Node power", "right_label": "Inlet temperature",
             "left_unit": "W", "right_unit": "°C", "out": "dual_axis.png",
             "title": "Node power and inlet temperature of node 900, 1 Jun 2022"},
             ("W", "°C")),
        Case("dual_axis_periods", "dual_axis", {"data": periods, "x": "tick", "left": "left",
             "right": "right", "categorical_x": True, "same_scale": True,
             "left_label": "Average facility power, 1–7 Jun 2022",
             "right_label": "Average facility power, 8–14 Jun 2022", "left_unit": "W",
             "right_unit": "W", "xlabel": "Day of the period (month-day: 1–7 Jun 2022 | "
             "8–14 Jun 2022)", "out": "dual_axis_periods.png",
             "title": "Average facility power per day: 1–7 Jun 2022 compared with "
             "8–14 Jun 2022"}, ("W",)),
        Case("scatter", "scatter", {"data": pairs, "x": "total_power", "y": "ambient",
             "xlabel": "Node power", "ylabel": "Inlet temperature", "xunit": "W", "yunit": "°C",
             "out": "scatter.png", "out_json": "scatter.json",
             "title": "Inlet temperature against node power, 1 Jun 2022"}, ("W", "°C")),
        Case("box_8", "box", {"data": box8, "group": "group", "value": "avg_value",
             "ylabel": "Average node power per job", "unit": "W", "group_label": "User",
             "out": "box_8.png", "title": "Average node power per job per user, 1–7 Jun 2022"},
             ("W",)),
        Case("box_16", "box", {"data": box16, "group": "group", "value": "avg_value",
             "ylabel": "Average node power per job", "unit": "W", "group_label": "User",
             "out": "box_16.png",
             "title": "Average node power per job per user, 1–7 Jun 2022"}, ("W",)),
        Case("line_anomalies", "line", {**line, "data": power1, "sigmas": 2.0, "side": "both",
             "out": "line_anomalies.png",
             "title": "Node power for node 900, 1 Jun 2022 00:00–04:00 UTC"}, ("W",)),
        Case("histogram_anomalies", "histogram", {"data": inlet, "column": "value",
             "xlabel": "Inlet temperature", "unit": "°C", "sigmas": 3.0, "side": "above",
             "out": "histogram_anomalies.png",
             "title": "Distribution of inlet temperature of all nodes, 1 Jun 2022"}, ("°C",)),
        Case("energy_hourly", "energy_bars", {"data": power2, "value": "value", "unit": "W",
             "series": "node_id", "series_label": "node", "bucket": "hour",
             "out": "energy_hourly.png",
             "title": "Energy per hour (kWh) of node power for nodes 900 and 920, 1 Jun 2022"},
             ("kWh",)),
        Case("energy_nodes", "energy_bars", {"data": many, "value": "value", "unit": "W",
             "series": "node_id", "series_label": "node", "out": "energy_nodes.png",
             "title": "Energy per node (kWh) of node power for 16 nodes, 1 Jun 2022"},
             ("kWh",)),
        Case("profile_hours", "profile", {"data": many, "value": "value",
             "cycle": "hour_of_day", "ylabel": "Mean node power", "unit": "W",
             "out": "profile_hours.png",
             "title": "Mean node power per hour of the day (UTC) for 16 nodes, 1 Jun 2022"},
             ("W",)),
        Case("profile_weekdays", "profile", {"data": many, "value": "value", "cycle": "weekday",
             "kind": "bar", "ylabel": "Mean node power", "unit": "W",
             "out": "profile_weekdays.png",
             "title": "Mean node power per day of the week for 16 nodes, 1 Jun 2022"}, ("W",)),
        Case("heatmap_day_hour", "day_hour_grid", {"data": week, "value": "value",
             "label": "Outside temperature", "unit": "°C", "out": "heatmap_day_hour.png",
             "title": "Mean outside temperature per day and hour of the day for the weather "
             "station, 1–7 Jun 2022"}, ("°C",)),
        Case("daily_counts", "daily_counts", {"data": jobs10, "time": "start_time",
             "title": "Jobs started per day, 1–10 Jun 2022", "out_csv": "daily_counts.csv",
             "out": "daily_counts.png"}),
        Case("daily_counts_40", "daily_counts", {"data": jobs40, "time": "start_time",
             "title": "Jobs started per day, 1 Jun – 10 Jul 2022",
             "out_csv": "daily_counts_40.csv", "out": "daily_counts_40.png"}),
    ]  # fmt: skip


def run_cases(cases: Sequence[Case], odaplot_dir: Path, out: Path) -> dict[str, list[str]]:
    """Each case's chart drawn by the odaplot in ``odaplot_dir``, checked as it is saved."""
    import os  # noqa: PLC0415 - the recipes read their folders when imported

    os.environ["ODA_IN"], os.environ["ODA_OUT"] = str(out), str(out)
    sys.path.insert(0, str(odaplot_dir))
    odaplot = importlib.import_module("odaplot")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    found: dict[str, list[str]] = {}
    current: list[Case] = []

    def record(fig: Figure, _name: str) -> None:
        case = current[-1]
        found[case.name] = [str(v) for v in check_figure(fig, units=case.units)]

    with intercept(record):
        for case in cases:
            current.append(case)
            for recipe, kwargs in case.before:
                getattr(odaplot, recipe)(**kwargs)
            getattr(odaplot, case.recipe)(**case.kwargs)
            plt.close("all")
            found.setdefault(case.name, ["no figure saved"])
    return found


def main(argv: Sequence[str] | None = None) -> int:
    here = Path(__file__).resolve().parent
    default = here.parent / "operator" / "oda_analyst" / "codeagent" / "sandbox_site"
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--odaplot", type=Path, default=default, help="folder of odaplot.py")
    parser.add_argument("--json", action="store_true", help="print the violations as JSON")
    parser.add_argument("--keep", type=Path, help="write the data and charts here, to look at")
    args = parser.parse_args(argv)
    # The recipes print what they wrote: kept off stdout, which carries the report.
    with tempfile.TemporaryDirectory() as tmp, redirect_stdout(sys.stderr):
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        found = run_cases(write_cases(folder), args.odaplot, folder)
    if args.json:
        print(json.dumps(found))
    else:
        for name, violations in found.items():
            print(f"{name:20} {len(violations)}")
            for v in violations:
                print(f"    {v}")
        total = sum(len(v) for v in found.values())
        print(f"{total} violations in {len(found)} charts")
    return 0 if not any(found.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
