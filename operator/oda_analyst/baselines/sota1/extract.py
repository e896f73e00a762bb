"""EXASAGE's entity extraction: hand-written regular expressions over a fixed set of categories.

The categories are the published tool's: node, rack, job, metric, plugin and temporal markers,
plus the few keywords its archetypes read (a statistic, a threshold, "jobs", "how many"). What
makes it the baseline rather than our understanding:

- a metric is found only by its exact catalogue name (``total_power``, ``ipmi/total_power``),
  case as the lake spells it — "power consumption" names nothing;
- a time is found only as ``[YYYY-MM-DD HH:MM:SS]`` (brackets optional); any other temporal
  phrasing ("1 June 2022", "08:00", "last 10 hours") fails the request at once;
- it is single-sensor: the first metric name wins, later ones are not read;
- words outside these categories are not read at all (there is no accounting of the question),
  so "daily" or "per user" change nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from oda_analyst.baselines.ids import all_ids
from oda_analyst.errors import QueryRejectedError
from oda_analyst.ontology.catalogue import Catalogue, MetricInfo

STRICT_TS = re.compile(r"\[?(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})\]?")
_IDS = r"(\d+(?:\s*(?:,|and|&|-|to)\s*\d+)*)"
NODE = re.compile(rf"\bnodes?\s+{_IDS}", re.I)
RACK = re.compile(rf"\bracks?\s+{_IDS}", re.I)
JOB = re.compile(rf"\bjobs?\s+(?:ids?\s+)?{_IDS}", re.I)
ALL_NODES = re.compile(r"\b(all|every|each)\s+(the\s+)?nodes?\b", re.I)
STAT = re.compile(
    r"\b(average|avg|mean|maximum|max|minimum|min|sum|std|standard deviation)\b", re.I
)
STAT_FN = {"average": "avg", "avg": "avg", "mean": "avg", "maximum": "max", "max": "max",
           "minimum": "min", "min": "min", "sum": "sum", "std": "std",
           "standard deviation": "std"}  # fmt: skip
THRESHOLD = re.compile(
    r"\b(above|over|greater than|more than|exceeding|exceeds|below|under|less than)\s+"
    r"(-?\d+(?:\.\d+)?)",
    re.I,
)
UPWARD = frozenset({"above", "over", "greater than", "more than", "exceeding", "exceeds"})
JOBS_WORD = re.compile(r"\bjobs\b", re.I)
COUNT = re.compile(r"\b(how many|number of|count)\b", re.I)
PLUGIN = re.compile(r"\b(ipmi|ganglia|vertiv|schneider|weather|logics|nagios|slurm)\b", re.I)
# Temporal phrasing the strict format does not cover: the tool fails on it, never guesses.
LOOSE_TIME = re.compile(
    r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}:\d{2}\b|\b(yesterday|today|tonight|last|past|previous|"
    r"morning|afternoon|evening|night|hours?|minutes?|days?|weeks?|months?|daily|hourly|"
    r"january|february|march|april|may|june|july|august|september|october|november|"
    r"december|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)\b",
    re.I,
)
_TOKEN = re.compile(r"[A-Za-z0-9_.\-/]+")


@dataclass(frozen=True)
class Extraction:
    """What the regular expressions found; every field is literal text of the question."""

    nodes: tuple[int, ...]
    all_nodes: bool
    racks: tuple[int, ...]
    jobs: tuple[int, ...]
    metric: MetricInfo | None
    dropped_metrics: tuple[str, ...]
    plugin: str | None
    start: datetime | None
    end: datetime | None
    stat: str | None
    threshold: tuple[str, float] | None
    jobs_word: bool
    count: bool


class MalformedInputError(QueryRejectedError):
    """The question is not in the form the tool reads (it has no way to ask or recover)."""

    code = "malformed_input"


def _timestamps(text: str) -> list[datetime]:
    out = []
    for m in STRICT_TS.finditer(text):
        try:
            moment = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")
        except ValueError:
            raise MalformedInputError(
                f"timestamp {m.group(0)!r} is not a valid date and time",
                hint="write times as [YYYY-MM-DD HH:MM:SS], e.g. [2022-06-01 08:00:00]",
            ) from None
        out.append(moment.replace(tzinfo=UTC))
    return out


def _metrics(text: str, cat: Catalogue) -> list[MetricInfo]:
    """Exact catalogue names, in the order they appear (``plugin/metric`` accepted)."""
    found: list[MetricInfo] = []
    for token in _TOKEN.findall(text):
        name = token.strip(".-/")
        plugin, _, metric = name.rpartition("/")
        try:
            info = cat.get(metric)
        except Exception:  # not a catalogue name: the tool does not look further
            continue
        if plugin and plugin.removesuffix("_pub") != info.plugin:
            continue
        if info.entity == "Job":  # job-table columns are not sensor metrics
            continue
        if info not in found:
            found.append(info)
    return found


def extract(question: str, cat: Catalogue) -> Extraction:
    """Run the category regexes; MalformedInputError on a time it cannot read."""
    stamps = _timestamps(question)
    rest = STRICT_TS.sub(" ", question)
    loose = LOOSE_TIME.search(rest)
    if loose:
        raise MalformedInputError(
            f"the time expression {loose.group(0)!r} is not in the [YYYY-MM-DD HH:MM:SS] format",
            hint="give the window as two timestamps, e.g. from [2022-06-01 08:00:00] to "
            "[2022-06-01 09:00:00]",
        )
    if len(stamps) not in (0, 2):
        raise MalformedInputError(
            f"found {len(stamps)} timestamp(s); a window needs a start and an end",
            hint="give both, e.g. from [2022-06-01 08:00:00] to [2022-06-01 09:00:00]",
        )
    start, end = (stamps[0], stamps[1]) if stamps else (None, None)
    if start is not None and end is not None and end <= start:
        raise MalformedInputError(
            "the window's end is not after its start", hint="put the earlier timestamp first"
        )
    metrics = _metrics(rest, cat)
    stat = STAT.search(rest)
    thr = THRESHOLD.search(rest)
    plugin = PLUGIN.search(rest)
    return Extraction(
        nodes=all_ids(NODE, rest),
        all_nodes=bool(ALL_NODES.search(rest)),
        racks=all_ids(RACK, rest),
        jobs=all_ids(JOB, rest),
        metric=metrics[0] if metrics else None,
        dropped_metrics=tuple(m.name for m in metrics[1:]),
        plugin=plugin.group(1).lower() if plugin else None,
        start=start,
        end=end,
        stat=STAT_FN[stat.group(1).lower()] if stat else None,
        threshold=(
            ("gt" if thr.group(1).lower() in UPWARD else "lt", float(thr.group(2))) if thr else None
        ),
        jobs_word=bool(JOBS_WORD.search(rest)),
        count=bool(COUNT.search(rest)),
    )
