"""What a lake holds per plugin: metrics, months, files, rows, bytes (`oda-analyst lake describe`).

Rows come from the Parquet footers and bytes from the listing, so describing a lake never reads
its data pages.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class PluginDescription:
    """One plugin of a lake: ``plugin`` without ``_pub``, ``folder`` as named in the lake."""

    plugin: str
    folder: str
    metrics: tuple[str, ...]
    months: tuple[str, ...]
    files: int
    rows: int
    bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "plugin": self.plugin,
            "folder": self.folder,
            "metrics": list(self.metrics),
            "months": list(self.months),
            "files": self.files,
            "rows": self.rows,
            "bytes": self.bytes,
        }


@dataclass(frozen=True)
class LakeDescription:
    """A whole lake: its location, the months present and one entry per plugin."""

    location: str
    months: tuple[str, ...]
    plugins: tuple[PluginDescription, ...] = field(default_factory=tuple)

    @property
    def metrics(self) -> int:
        return sum(len(p.metrics) for p in self.plugins)

    @property
    def files(self) -> int:
        return sum(p.files for p in self.plugins)

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.plugins)

    @property
    def bytes(self) -> int:
        return sum(p.bytes for p in self.plugins)

    def plugin(self, name: str) -> PluginDescription | None:
        """The entry of one plugin (with or without ``_pub``), or None."""
        bare = name.removesuffix("_pub")
        return next((p for p in self.plugins if p.plugin == bare), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "location": self.location,
            "months": list(self.months),
            "plugins": [p.to_dict() for p in self.plugins],
            "totals": {
                "metrics": self.metrics,
                "files": self.files,
                "rows": self.rows,
                "bytes": self.bytes,
            },
        }


def human_bytes(size: int) -> str:
    """``1536`` -> ``1.5 KiB``."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _month_span(months: tuple[str, ...]) -> str:
    if not months:
        return "-"
    if len(months) == 1:
        return months[0]
    return f"{months[0]}..{months[-1]} ({len(months)})"


def format_description(desc: LakeDescription, *, show_metrics: bool = True) -> str:
    """The text `oda-analyst lake describe` prints: a table per plugin, then the metric names."""
    header = ("plugin", "folder", "metrics", "months", "files", "rows", "bytes")
    body = [
        (
            p.plugin,
            p.folder,
            str(len(p.metrics)),
            _month_span(p.months),
            f"{p.files:,}",
            f"{p.rows:,}",
            human_bytes(p.bytes),
        )
        for p in desc.plugins
    ]
    total = (
        "total",
        "",
        str(desc.metrics),
        _month_span(desc.months),
        f"{desc.files:,}",
        f"{desc.rows:,}",
        human_bytes(desc.bytes),
    )
    table = [header, *body, total]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    right = {2, 4, 5, 6}  # numbers align right

    def line(row: tuple[str, ...]) -> str:
        cells = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    rule = "  ".join("-" * w for w in widths)
    lines = [f"lake: {desc.location}", line(header), rule, *map(line, body), rule, line(total)]
    if show_metrics:
        for p in desc.plugins:
            lines.append("")
            wrapped = textwrap.fill(
                ", ".join(p.metrics), width=100, initial_indent="  ", subsequent_indent="  "
            )
            lines.extend([f"{p.plugin} metrics ({len(p.metrics)}):", wrapped])
    return "\n".join(lines)


@dataclass
class PluginTally:
    """Running totals of one plugin while describing a lake."""

    folder: str
    metrics: set[str] = field(default_factory=set)
    months: set[str] = field(default_factory=set)
    files: int = 0
    rows: int = 0
    bytes: int = 0

    def add(self, month: str, metric: str, rows: int, size: int) -> None:
        self.metrics.add(metric)
        self.months.add(month)
        self.files += 1
        self.rows += rows
        self.bytes += size

    def result(self, plugin: str) -> PluginDescription:
        return PluginDescription(
            plugin=plugin,
            folder=self.folder,
            metrics=tuple(sorted(self.metrics)),
            months=tuple(sorted(self.months)),
            files=self.files,
            rows=self.rows,
            bytes=self.bytes,
        )


def metric_of(rel: str) -> str | None:
    """The metric of a path ``.../metric=<metric>/...``, or None."""
    for part in rel.split("/"):
        if part.startswith("metric="):
            return part.removeprefix("metric=")
    return None
