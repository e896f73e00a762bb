"""The rule planner: a Reading becomes an ordered task list (retrieve, then chart/report), or a
clarification — never a guess.

The planner reads no text: the reader (``oda_analyst.reading``) has already found every chart
the question names, wherever it names it ("…, pie chart", "as a box plot", "plus a histogram"),
the statistics it asks to be reported and the comparisons it asks to be stated. Each chart
request becomes a chart task; a chart asked for without a kind ("visualise it") is asked about
(``Unclear``), with the kinds the analyst draws as choices. The retrieval task gets the whole
request with its Reading: the retriever answers the question less its analysis words.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from dataclasses import field as _field

from oda_analyst.reading.model import CHART_KINDS, CHART_NAMES, ChartKind, Reading

DEFAULT_SIGMAS = 3.0
"""How far off the mean a reading is an anomaly when the question says no k ('outliers')."""
_BUCKETS = ("minute", "hour", "day", "week")

KindOf = Callable[[str], ChartKind | None]
"""The chart kind a user's reply names ('histogram', 'a bar chart'), as the reader reads it."""


@dataclass(frozen=True)
class ChartTask:
    """Draw one chart of the retrieved data."""

    kind: ChartKind
    clause: str


@dataclass(frozen=True)
class Decomposition:
    """The ordered tasks of a request: one retrieval, then its charts and reports."""

    question: str
    retrieval: str
    charts: tuple[ChartTask, ...] = ()
    reports: tuple[str, ...] = ()
    compare: bool = False
    """The answer must say which is higher, and by how much."""
    figures: tuple[str, ...] = ()
    """Statistics of the drawn readings the answer must state ('p95', 'median', 'std')."""

    @property
    def tasks(self) -> list[str]:
        """The task list in plain words, in order (what progress and the answer show)."""
        out = [f"retrieve: {self.retrieval}"]
        out += [f"chart: {CHART_NAMES[c.kind]} ({c.clause})" for c in self.charts]
        out += [f"report: {r}" for r in self.reports]
        return out


@dataclass(frozen=True)
class Unclear:
    """A request the planner cannot decompose: what to ask, and the choices. ``charts`` holds
    every chart request in order, ``None`` for the one asked about."""

    question: str
    message: str
    clause: str
    candidates: list[dict[str, str]] = _field(default_factory=list)
    field: str = "analysis"
    charts: list[tuple[ChartKind | None, str]] = _field(default_factory=list)
    reports: list[str] = _field(default_factory=list)
    compare: bool = False
    figures: list[str] = _field(default_factory=list)


def _choices() -> list[dict[str, str]]:
    return [{"text": kind, "description": CHART_NAMES[kind]} for kind in CHART_KINDS]


def _report_clauses(reading: Reading) -> tuple[str, ...]:
    """Each report request, from its word to the end of its clause ('report min/max/avg
    power'): the clause ends at a punctuation mark or where a chart request starts."""
    text = reading.text
    starts = sorted(c.start for c in reading.analysis.charts)
    out = []
    for word in reading.analysis.report:
        end = len(text)
        for i in range(word.end, len(text)):
            if text[i] in ",;.?!":
                end = i
                break
        end = min([end, *(s for s in starts if s > word.start)])
        out.append(text[word.start : end].strip(" ,;"))
    return tuple(out)


def decompose(reading: Reading) -> Decomposition | Unclear:
    """The task list of a Reading, or what to ask when a chart names no kind we draw."""
    question = " ".join(reading.text.split())
    charts = [(c.kind, c.text) for c in reading.analysis.charts] + _implied_charts(reading)
    reports = list(_report_clauses(reading))
    compare = reading.form == "compare" or bool(reading.analysis.comparison)
    figures = _figures(reading)
    found = _decided(question, charts, reports, compare)
    return replace(found, figures=figures) if isinstance(found, Decomposition) else \
        replace(found, figures=list(figures))  # fmt: skip


def _implied_charts(reading: Reading) -> list[tuple[ChartKind | None, str]]:
    """A correlation is computed on a scatter's pairs and a rolling mean is drawn as a line:
    asked without that chart ('correlation between X and Y on node 5'), the chart is added, so
    the statistic is never dropped."""
    kinds = {c.kind for c in reading.analysis.charts}
    if None in kinds:
        return []  # the user is asked which chart first
    out: list[tuple[ChartKind | None, str]] = []
    for stat in reading.analysis.statistics:
        if stat.name == "correlation" and not kinds & {"scatter", "heatmap"}:
            out.append(("scatter", stat.text))
            kinds.add("scatter")
        if stat.name == "rolling" and "line" not in kinds:
            out.append(("line", stat.text))
            kinds.add("line")
        if stat.name == "energy" and not kinds:
            out.append(("line", stat.text))  # the power integrated, drawn over time
            kinds.add("line")
        if stat.name == "profile" and not kinds:
            # a day's profile is a curve over the hours; a week's, a bar per weekday
            out.append(("line" if stat.cycle != "weekday" else "bar", stat.text))
            kinds.add("line")
        if stat.name == "anomalies" and not kinds:
            out.append(("histogram", stat.text))  # the readings, the k-sigma bounds marked
            kinds.add("histogram")
    return out


def _figures(reading: Reading) -> tuple[str, ...]:
    """What the analysis computes of the drawn readings beyond min, mean and max: a rolling
    mean's window ('rolling:10', in minutes; an hour when none is said) and the statistics of
    the readings a chart draws."""
    stats = reading.analysis.statistics
    # 'smooth … with a 30 min rolling avg … the smoothed line': the window one of them states
    rolling = [s for s in stats if s.name == "rolling"]
    said = [s.window_minutes for s in rolling if s.window_minutes]
    out = [f"rolling:{said[0] if said else 60:g}"] if rolling else []
    if any(s.name == "energy" for s in stats):
        # 'hourly energy': the integral per bucket as well as over the whole window
        bucket = next((g.by for g in reading.groupings if g.by in _BUCKETS), None)
        out.append(f"energy:{bucket}" if bucket else "energy")
    out += [f"anomalies:{s.k or DEFAULT_SIGMAS:g}:{s.side or 'both'}" for s in stats
            if s.name == "anomalies"][:1]  # fmt: skip
    out += [f"profile:{s.cycle or 'hour_of_day'}" for s in stats if s.name == "profile"][:1]
    out += [f"box_by:{g.by}" for g in reading.box_buckets()]
    if reading.time_unit:  # 'run times …, with the median of each in minutes'
        out.append(f"time_unit:{reading.time_unit}")
    if not reading.analysis.over_readings:
        return tuple(out)
    for stat in stats:
        name = f"p{stat.p:g}" if stat.name == "percentile" and stat.p is not None else stat.name
        if name not in ("mean", "min", "max", "rolling", "correlation", "energy", "anomalies",
                        "profile") and name not in out:  # fmt: skip
            out.append(name)
    return tuple(out)


def _decided(question: str, charts: list[tuple[ChartKind | None, str]], reports: list[str],
             compare: bool) -> Decomposition | Unclear:  # fmt: skip
    for kind, clause in charts:
        if kind is None:
            return Unclear(
                question=question,
                clause=clause,
                message=f"which chart do you want for '{clause}'? I can draw "
                + ", ".join(CHART_NAMES[k] for k in CHART_KINDS),
                candidates=_choices(),
                charts=charts,
                reports=reports,
                compare=compare,
            )
    return Decomposition(
        question=question,
        retrieval=question,
        charts=tuple(ChartTask(k, c) for k, c in charts if k is not None),
        reports=tuple(reports),
        compare=compare,
    )


def resolve(unclear: Unclear, answer: str, kind_of: KindOf) -> Decomposition | Unclear:
    """The request again, with the chart that named no kind given the kind the user chose
    ('histogram', 'a bar chart', '2' for the second choice); still Unclear when the answer
    names none either."""
    choice = answer.strip().lower()
    kind: ChartKind | None
    if choice.isdigit() and 1 <= int(choice) <= len(CHART_KINDS):
        kind = CHART_KINDS[int(choice) - 1]
    elif choice.replace(" ", "_") in CHART_KINDS:
        kind = choice.replace(" ", "_")  # type: ignore[assignment]
    else:
        kind = kind_of(answer)
    if kind is None:
        return replace(
            unclear,
            message=f"'{answer}' names no chart I can draw; choose one of "
            + ", ".join(CHART_KINDS),
            candidates=_choices(),
        )
    charts = list(unclear.charts)
    at = next(i for i, (k, _) in enumerate(charts) if k is None)
    charts[at] = (kind, charts[at][1])
    found = _decided(unclear.question, charts, list(unclear.reports), unclear.compare)
    return replace(found, figures=tuple(unclear.figures)) if isinstance(found, Decomposition) \
        else found  # fmt: skip
