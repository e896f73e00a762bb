"""The Reading: what one question says, as typed spans over its text.

Every span carries its character offsets into ``Reading.text`` and the words it covers, so any
part that acts on a span can quote the question back, and a Reading made elsewhere (a model's
structured output, a Reading sent over MCP as JSON) is checked by the same rule: every span
quotes the question (``check_quotes``).

This module imports nothing of ours but the error hierarchy: the coordinator, the controller and
the web UI take a Reading without taking the reader (which needs the catalogue and the lake's
topology).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from oda_analyst.errors import UsageError
from oda_analyst.reading.types import Chunking, Entities, FormCues, Intent, SubQuery, TimeParse

ChartKind = Literal["histogram", "pie", "box", "heatmap", "dual_axis", "bar", "line", "scatter"]
CHART_KINDS: tuple[ChartKind, ...] = (
    "histogram", "pie", "box", "heatmap", "dual_axis", "bar", "line", "scatter",
)  # fmt: skip
CHART_NAMES: dict[ChartKind, str] = {
    "line": "a line plot over time",
    "histogram": "a histogram",
    "dual_axis": "a dual-axis plot",
    "bar": "a bar chart",
    "pie": "a pie chart",
    "heatmap": "a correlation heatmap",
    "box": "a box plot",
    "scatter": "a scatter plot",
}
Statistic = Literal[
    "mean", "max", "min", "median", "std", "percentile", "sum", "count", "cv", "correlation",
    "rolling", "energy", "anomalies", "profile",
]  # fmt: skip
# Statistics the retriever does not compute: the analysis computes them from the readings, so
# their words are the analysis request's and never reach metric grounding.
ANALYSIS_ONLY: frozenset[str] = frozenset(
    {"correlation", "rolling", "energy", "anomalies", "profile"}
)
# A power series' energy is its integral over time, per bucket when one is asked ('hourly'):
# computed from the readings, so a grouping beside it is the analysis's, not the retrieval's.
INTEGRALS: frozenset[str] = frozenset({"energy"})
# Statistics the analysis computes from the readings a chart draws (see ``over_readings``), and
# the charts that draw readings.
OF_READINGS: frozenset[str] = frozenset({"mean", "max", "min", "median", "std", "percentile", "cv"})
READING_CHARTS: frozenset[str] = frozenset({"line", "histogram", "box", "scatter", "dual_axis"})
# The words of a comparison phrase its sentence answers ('the difference', 'by how much'): the
# retrieval reads 'vs' and 'compare', never these.
_STATED_BY_COMPARISON = frozenset({"difference", "gap", "much"})
EntityKind = Literal[
    "node", "rack", "job", "user", "gpu", "cpu", "device", "all_nodes", "system", "weather",
]  # fmt: skip


class Span(BaseModel):
    """Words of the question: ``text == question[start:end]``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    start: int = Field(ge=0)
    end: int = Field(ge=0)
    text: str


class EntitySpan(Span):
    kind: EntityKind
    ids: list[int | str] = Field(default_factory=list)


class TimeSpan(Span):
    """A time expression resolved against the reference time: a window [start, end) in UTC."""

    window_start: datetime | None = None
    window_end: datetime | None = None


class StatisticSpan(Span):
    name: Statistic
    p: float | None = Field(default=None, description="the percentile asked (0-100)")
    window_minutes: float | None = Field(default=None, description="a rolling window's length")
    k: float | None = Field(
        default=None,
        gt=0,
        description="anomalies: readings more than k standard deviations off (None: not said)",
    )
    cycle: Literal["hour_of_day", "weekday"] | None = Field(
        default=None, description="a profile: the mean per hour of the day or per weekday"
    )
    side: Literal["above", "below", "both"] | None = Field(
        default=None, description="anomalies: above the mean, below it, or either way"
    )


class GroupingSpan(Span):
    by: str = Field(description="what each row stands for: node, rack, user, partition, gpu, "
                    "job, hour, day, week, minute")  # fmt: skip


class RankingSpan(Span):
    direction: Literal["top", "bottom"]
    k: int = Field(ge=1)
    by: str | None = Field(default=None, description="the words after 'by' that say what ranks")


class ChartRequest(Span):
    """A chart asked for. ``kind`` None: the question asks for a chart without naming which."""

    kind: ChartKind | None
    parts: list[Span] = Field(default_factory=list, description="every phrase naming it")
    in_clause: bool = Field(
        default=False,
        description="it lies in an analysis clause ('… and plot it over the 10 days'), which "
        "the retrieval leaves out whole",
    )


class AnalysisRequest(BaseModel):
    """What to do with the data once retrieved: charts, statistics to state, a comparison."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    charts: list[ChartRequest] = Field(default_factory=list)
    statistics: list[StatisticSpan] = Field(
        default_factory=list, description="statistics the answer must state"
    )
    report: list[Span] = Field(default_factory=list, description="words asking for figures")
    comparison: list[Span] = Field(
        default_factory=list, description="words asking which is higher, and by how much"
    )
    declined: list[Span] = Field(
        default_factory=list, description="words saying no chart is wanted ('no chart needed')"
    )
    answered: list[Span] = Field(
        default_factory=list,
        description="the question's own form words an analysis answers ('how many and which "
        "nodes' of an anomaly count): the analysis's, never the retrieval's",
    )
    over_readings: bool = Field(
        default=False,
        description="the statistics are of the readings a chart draws ('p95 … + histogram'): "
        "the retrieval returns the readings and the analysis computes them",
    )
    compared_on_mean: bool = Field(
        default=False,
        description="a comparison that names no statistic ('which of nodes 12 and 13 drew "
        "more power'): the entities are compared on their means, and the answer says so",
    )


Form = Literal["which", "how_many", "at_instant", "compare", "yes_no", "value"]


class ScopeSpan(Span):
    """Words asking for what no telemetry lake holds ('forecast', 'in euros', 'reboot …')."""

    kind: str = Field(description="forecast, money or action (ontology/scope.yaml)")
    message: str
    hint: str


class Problem(BaseModel):
    """Why a part of the question cannot be read as asked, and what to do (a refusal's words)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    message: str
    hint: str | None = None


class RetrievalReading(BaseModel):
    """The retrieval's part of a question as the reader's rules read it.

    ``text`` is what the rules read: the question with its analysis words left out, the gaps
    closed and one-letter typos read as the words they miss (``typos`` says which). Offsets of the
    parts below (entity spans, time spans) are into ``text``, not into the question.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    typos: list[str] = Field(default_factory=list, description="\"read 'averge' as 'average'\"")
    entities: Entities = Field(default_factory=Entities)
    entity_problem: Problem | None = Field(
        default=None, description="an id no lake can hold ('node 1200'): refused with its hint"
    )
    time: TimeParse
    chunking: Chunking = Field(description="the metric phrases and the analysis tail")
    named: dict[str, str] = Field(
        default_factory=dict, description="phrase -> the catalogue metric it names exactly"
    )
    conjoined: list[str] = Field(
        default_factory=list, description="phrases listed with another ('power and X')"
    )
    intent: Intent
    subqueries: list[SubQuery] = Field(
        default_factory=list, description="one per metric phrase, with the question's context"
    )
    psu: list[tuple[int, int, tuple[int, ...]]] = Field(
        default_factory=list, description="power supplies named: (start, end, indices)"
    )
    form: FormCues = Field(description="the answer's form, from the words before the analysis")
    vague: str | None = Field(
        default=None, description="a vague level stated with no threshold ('high GPU usage')"
    )
    value_filter: bool = Field(default=False, description="a threshold on readings is stated")
    threshold_units: list[str] = Field(default_factory=list, description="W, kW, °C, %")
    charts: list[str] = Field(
        default_factory=list,
        description="the kinds of chart the question asks, wherever it names them: a plan may "
        "need a companion series for one (a box plot's per-job values)",
    )
    compares: bool = Field(
        default=False,
        description="the question sets its entities side by side ('which of racks 3 and 4 ran "
        "hotter'), wherever it says so: each keeps its own figure",
    )
    time_spans: list[tuple[int, int]] = Field(default_factory=list)
    job_state_spans: list[tuple[int, int]] = Field(default_factory=list)
    threshold_spans: list[tuple[int, int]] = Field(default_factory=list)
    vague_spans: list[tuple[int, int]] = Field(
        default_factory=list,
        description="'way too much': a vague level, which a threshold given in a reply claims",
    )
    unit_note_spans: list[tuple[int, int]] = Field(
        default_factory=list, description="'(in W)': a unit the answer is asked in"
    )


# The units a duration can be asked in, and the seconds in each ('min' = 60 s)
TimeUnit = Literal["s", "min", "h", "d"]
TIME_UNIT_SECONDS: dict[str, float] = {"s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def time_factor(unit: str, to: str) -> float:
    """What a duration in ``unit`` is multiplied by to be in ``to`` (h -> min: 60)."""
    return TIME_UNIT_SECONDS[unit] / TIME_UNIT_SECONDS[to]


class Reading(BaseModel):
    """One question, read once. Parts take this and never the text."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    as_of: datetime
    entities: list[EntitySpan] = Field(default_factory=list)
    times: list[TimeSpan] = Field(default_factory=list)
    metric_phrases: list[Span] = Field(default_factory=list)
    statistics: list[StatisticSpan] = Field(default_factory=list)
    groupings: list[GroupingSpan] = Field(default_factory=list)
    rankings: list[RankingSpan] = Field(default_factory=list)
    form: Form = "value"
    analysis: AnalysisRequest = Field(default_factory=AnalysisRequest)
    units: list[Span] = Field(
        default_factory=list,
        description="units said for the figures ('the highest hPa', 'in kW') beside a metric "
        "named: they name no quantity of their own",
    )
    time_unit: TimeUnit | None = Field(
        default=None,
        description="the unit job run times and queue waits are asked in ('in minutes'); its "
        "words are among ``units``",
    )
    unused: list[Span] = Field(default_factory=list, description="words nothing could use")
    out_of_scope: ScopeSpan | None = Field(
        default=None, description="what the question asks that no lake holds: refused at once"
    )
    retrieval: RetrievalReading | None = Field(
        default=None,
        description="the retrieval's words as the rules read them (None: only a "
        "Reading made without the rules, e.g. in a test of the coordinator)",
    )

    def box_buckets(self) -> list[GroupingSpan]:
        """'boxplot of outdoor temp per day': the day or hour each box of a box plot holds the
        readings of, asked with no statistic to compute per bucket (a mean per day would leave
        the box plot nothing to draw)."""
        if not any(c.kind == "box" for c in self.analysis.charts):
            return []
        named = [(m.start, m.end) for m in self.metric_phrases]
        # 'total power' names a metric; its 'total' asks no sum per bucket
        asked = [s for s in self.statistics if not any(a <= s.start < b for a, b in named)]
        if asked or self.rankings:
            return []
        return [g for g in self.groupings if g.by in ("day", "hour")][:1]

    def analysis_spans(self) -> list[Span]:
        """The words that belong to the analysis and not to the retrieval: chart phrases and
        the statistics only an analysis computes (a correlation, a rolling mean)."""
        out: list[Span] = [p for c in self.analysis.charts if not c.in_clause for p in c.parts]
        profile = any(s.name == "profile" for s in self.analysis.statistics)
        out += [s for s in self.analysis.statistics
                if s.name in ANALYSIS_ONLY or self.analysis.over_readings
                or (profile and s.name == "mean")]  # fmt: skip
        if any(s.name in INTEGRALS for s in self.analysis.statistics):
            out += self.groupings  # 'hourly energy': buckets of the integral, of the readings
        if profile:  # 'hour-of-day profile (mean per hour)': the profile's own hours
            out += [g for g in self.groupings if g.by == "hour"]
        out += self.analysis.answered + self.analysis.declined + self.units
        # 'rack by rack' is 'by rack' to the retrieval: its first word names no part
        for g in self.groupings:
            first, *rest = g.text.split()
            if rest[:1] == ["by"] and len(rest) == 2:
                out.append(Span(start=g.start, end=g.start + len(first), text=first))
        out += self.box_buckets()
        if any(c.kind == "scatter" for c in self.analysis.charts) or any(
            s.name == "correlation" for s in self.analysis.statistics
        ):
            out += self.analysis.comparison  # 'node power against socket 0 power': the pairing
        else:  # 'may vs june, and the difference': the comparison states it, no metric does
            out += [c for c in self.analysis.comparison
                    if set(c.text.lower().split()) & _STATED_BY_COMPARISON]  # fmt: skip
        return sorted(out, key=lambda s: s.start)

    def retrieval_text(self) -> str:
        """The question with its analysis words blanked (offsets kept): what the retrieval
        answers. A stop-gap while the retriever's stages still take text."""
        chars = list(self.text)
        pairing = {(s.start, s.end) for s in self.analysis.statistics if s.name == "correlation"}
        pairing |= {(s.start, s.end) for s in self.analysis.comparison}
        for span in self.analysis_spans():
            # 'outside temp relate to humidity': the words that pair two series still part them
            # (a comma), so the retrieval reads two metrics, not one 'outside temp humidity'
            mark = "," if (span.start, span.end) in pairing else " "
            chars[span.start : span.end] = mark + " " * (span.end - span.start - 1)
        return "".join(chars)

    def asked(self) -> dict[str, object]:
        """What the question asks beyond the retrieval, as JSON: the chart kinds ("chart" for one
        named without a kind), the statistics to state and whether a comparison is asked."""
        a = self.analysis
        return {
            "charts": [c.kind or "chart" for c in a.charts],
            "statistics": [s.name for s in a.statistics],
            "comparison": bool(a.comparison),
        }

    def asks_analysis(self) -> bool:
        a = self.analysis
        return bool(a.charts or a.statistics or a.report or a.comparison)


def _spans(reading: Reading) -> list[Span]:
    a = reading.analysis
    out: list[Span] = [*reading.entities, *reading.times, *reading.metric_phrases,
                       *reading.statistics, *reading.groupings, *reading.rankings,
                       *reading.unused, *a.statistics, *a.report, *a.comparison, *a.answered,
                       *a.declined,
                       *([reading.out_of_scope] if reading.out_of_scope else [])]  # fmt: skip
    for chart in a.charts:
        out += [chart, *chart.parts]
    return out


def check_quotes(reading: Reading) -> None:
    """Every span quotes the question at its offsets (a Reading from a model or over the wire
    is held to what the reader guarantees); ``UsageError`` names the first that does not."""
    for span in _spans(reading):
        if not 0 <= span.start <= span.end <= len(reading.text):
            raise UsageError(
                f"a reading span {span.text!r} lies outside the question ({span.start}-{span.end})",
                hint="read the question again; spans are character offsets into it",
            )
        if reading.text[span.start : span.end] != span.text:
            raise UsageError(
                f"a reading span says {span.text!r} but the question has "
                f"{reading.text[span.start : span.end]!r} there",
                hint="every span must quote the question at its offsets",
            )


Reader = Callable[[str, datetime | None], Reading]
"""Reads a question against a reference time (None: now): ``oda_analyst.reading.read.read_now``,
handed to the parts that may not import the reader itself (the coordinator)."""
