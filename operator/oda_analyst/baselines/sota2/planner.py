"""SoTA#2's planner with no model: the simplest honest reading of a question over the raw lake.

Exactly what it does, step by step:

1. **Schema discovery**: it lists every plugin and each plugin's metrics from the lake itself
   (``Datalake.list_plugins`` / ``list_metrics``); no catalogue, no synonyms, no ontology.
2. **Metric by name match**: a metric is chosen when the question contains its name verbatim, or
   every part of its name (split at ``_`` and ``.``, lower case) as a word of the question —
   "total power" picks ``total_power``; "inlet temperature" or "GPU-0 utilisation" pick nothing.
   A match whose parts are all inside another match's parts is dropped (``total_power`` beats
   ``power``). A plugin named in the question ("the weather plugin") restricts the search to it.
3. **Entities**: ``node N``/``nodes N and M``/``nodes 10-14``, "all nodes", ``job J``. No racks
   or rooms (the lake has no topology columns): a question naming one fails.
4. **Window**: two ``YYYY-MM-DD HH:MM[:SS]`` timestamps, or one date (``2022-06-01``,
   ``1 June 2022``, ``June 1, 2022``) with two ``HH:MM`` times, or one date alone (the whole
   day). Windows are [start, end); an end at ``HH:59`` counts as the end of that minute.
5. **One query per source**: each chosen metric is one targeted query (its nodes, the window, a
   value condition from "above/below X"); job ids add one job-table query, and each job's
   readings are the rows of its nodes inside its own [start_time, end_time) — the join by node
   and time is done here, in the caller, not by the lake.
6. **Shape**: a statistic word (average/mean, max, min, sum, std) aggregates per node and metric
   (per job and metric for jobs; per metric without nodes); "which nodes" lists the nodes with
   matching readings, "how many nodes" counts them; "how many jobs"/"number of jobs" counts the
   job-table rows that overlap the window. Everything else returns the raw rows.

Anything it cannot read fails with what it found; it never asks (no clarification) and reads no
word it has no rule for ("daily", "per user" change nothing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from oda_analyst.baselines.ids import all_ids
from oda_analyst.baselines.sota2.datalake import JOB_TABLE, Datalake, Op
from oda_analyst.errors import QueryRejectedError

MONTHS = {
    m: i
    for i, m in enumerate(
        [
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ],
        start=1,
    )
}
_IDS = r"(\d+(?:\s*(?:,|and|&|-|to)\s*\d+)*)"
NODE = re.compile(rf"\bnodes?\s+{_IDS}", re.I)
JOB = re.compile(rf"\bjobs?\s+(?:ids?\s+)?{_IDS}", re.I)
ALL_NODES = re.compile(r"\b(all|every|each)\s+(the\s+)?nodes\b", re.I)
RACK = re.compile(r"\b(rack|racks|room|rooms)\b", re.I)
ISO_TS = re.compile(r"(\d{4}-\d{2}-\d{2})[ T](\d{1,2}:\d{2}(?::\d{2})?)")
ISO_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
DAY_MONTH = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+([A-Za-z]+),?\s+(\d{4})\b")
MONTH_DAY = re.compile(r"\b([A-Za-z]+)\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b")
CLOCK = re.compile(r"\b(\d{1,2}):(\d{2})(?::(\d{2}))?\b")
STAT = re.compile(r"\b(average|avg|mean|maximum|max|minimum|min|sum|std)\b", re.I)
STAT_FN = {
    "average": "avg",
    "avg": "avg",
    "mean": "avg",
    "maximum": "max",
    "max": "max",
    "minimum": "min",
    "min": "min",
    "sum": "sum",
    "std": "std",
}
THRESHOLD = re.compile(
    r"\b(above|over|greater than|more than|exceeding|below|under|less than)\s+(-?\d+(?:\.\d+)?)",
    re.I,
)
WHICH_NODES = re.compile(r"\b(which|what|list( the)?)\s+nodes\b", re.I)
HOW_MANY_NODES = re.compile(r"\b(how many|number of)\s+nodes\b", re.I)
HOW_MANY_JOBS = re.compile(r"\b(how many|number of)\s+jobs\b", re.I)
WORD = re.compile(r"[a-z0-9]+")


class PlannerError(QueryRejectedError):
    """The simple planner could not read the question (it says what it found)."""

    code = "not_planned"


@dataclass(frozen=True)
class LakePlan:
    """What the planner read: one lake query per metric (plus the job table when jobs)."""

    metrics: tuple[tuple[str, str], ...]
    start: datetime | None
    end: datetime | None
    nodes: tuple[int, ...] | None  # None: every node (or a series with no node)
    jobs: tuple[int, ...] = ()
    stat: str | None = None
    threshold: tuple[Op, float] | None = None
    form: str = "rows"  # rows | nodes | node_count | job_count
    notes: tuple[str, ...] = field(default_factory=tuple)

    def describe(self) -> str:
        what = ", ".join(f"{p}/{m}" for p, m in self.metrics) or "the job table"
        who = (
            ("jobs " + ", ".join(map(str, self.jobs)))
            if self.jobs
            else ("all nodes" if self.nodes is None else "nodes " + ", ".join(map(str, self.nodes)))
        )
        when = (
            ""
            if self.start is None
            else f" in [{self.start:%Y-%m-%d %H:%M}, {self.end:%Y-%m-%d %H:%M})"
        )
        how = f", {self.stat}" if self.stat else ""
        return f"{what} of {who}{when}{how} ({self.form})"


def _parts(name: str) -> frozenset[str]:
    return frozenset(p for p in re.split(r"[_.\-/]+", name.lower()) if p)


def match_metrics(question: str, listing: dict[str, list[str]]) -> list[tuple[str, str]]:
    """Step 2: the lake's metrics whose name (or every name part) the question holds."""
    words = set(WORD.findall(question.lower()))
    named = [p for p in listing if p.lower() in words and p != JOB_TABLE]
    plugins = named or [p for p in listing if p != JOB_TABLE]
    hits: list[tuple[str, str, frozenset[str]]] = []
    for plugin in plugins:
        for metric in listing[plugin]:
            parts = _parts(metric)
            verbatim = re.search(rf"(?<![\w.]){re.escape(metric)}(?![\w.])", question)
            if verbatim or (parts and parts <= words):
                hits.append((plugin, metric, parts))
    kept = [h for h in hits if not any(h[2] < o[2] for o in hits)]
    return [(p, m) for p, m, _ in kept]


def _date(text: str) -> datetime | None:
    iso = ISO_DATE.search(text)
    if iso:
        return datetime.fromisoformat(iso.group(1)).replace(tzinfo=UTC)
    for pattern, order in ((DAY_MONTH, (0, 1, 2)), (MONTH_DAY, (1, 0, 2))):
        m = pattern.search(text)
        if m:
            day, month, year = (m.group(i + 1) for i in order)
            if month.lower() in MONTHS:
                return datetime(int(year), MONTHS[month.lower()], int(day), tzinfo=UTC)
    return None


def _end_minute(moment: datetime) -> datetime:
    """'to 23:59' means up to the end of that minute."""
    return moment + timedelta(minutes=1) if moment.minute == 59 and moment.second == 0 else moment


def window(question: str) -> tuple[datetime, datetime] | None:
    """Step 4: the window, or None when the question gives none the planner can read."""
    stamps = ISO_TS.findall(question)
    if len(stamps) >= 2:
        a, b = (
            datetime.fromisoformat(f"{d}T{t.zfill(5) if len(t) < 6 else t}").replace(tzinfo=UTC)
            for d, t in stamps[:2]
        )
        return a, _end_minute(b)
    day = _date(question)
    if day is None:
        return None
    rest = ISO_DATE.sub(" ", question)
    clocks = [(int(h), int(m), int(s or 0)) for h, m, s in CLOCK.findall(rest)]
    if len(clocks) >= 2:
        (h1, m1, s1), (h2, m2, s2) = clocks[:2]
        start = day.replace(hour=h1, minute=m1, second=s1)
        end = _end_minute(day.replace(hour=h2, minute=m2, second=s2))
        return (start, end) if end > start else None
    if not clocks:
        return day, day + timedelta(days=1)
    return None


def plan(question: str, lake: Datalake) -> LakePlan:
    """Steps 1-4 and 6: read the question into one LakePlan, or PlannerError."""
    if RACK.search(question):
        raise PlannerError(
            "the lake has no rack or room column, so this planner cannot select "
            "nodes by rack or room",
            hint="name the nodes, e.g. 'nodes 900-919'",
        )
    listing = {p: lake.list_metrics(p) for p in lake.list_plugins()}
    win = window(question)
    jobs = all_ids(JOB, question)
    nodes = all_ids(NODE, question)
    thr = THRESHOLD.search(question)
    threshold: tuple[Op, float] | None = None
    if thr:
        up = thr.group(1).lower() in {"above", "over", "greater than", "more than", "exceeding"}
        threshold = ("gt" if up else "lt", float(thr.group(2)))
    stat = STAT.search(question)
    if HOW_MANY_JOBS.search(question) and not jobs:
        if win is None:
            raise PlannerError(
                "no time window found for counting jobs",
                hint="give a date and times, e.g. 2022-06-01 08:00 to 09:00",
            )
        return LakePlan((), win[0], win[1], nodes or None, form="job_count")
    metrics = match_metrics(question, listing)
    if not metrics:
        total = sum(len(v) for v in listing.values())
        raise PlannerError(
            f"no metric name of the lake ({len(listing)} plugins, {total} metrics) appears in "
            "the question",
            hint="use the metric's name as the lake spells it, e.g. total_power",
        )
    if win is None and not jobs:
        raise PlannerError(
            "no time window found in the question",
            hint="give a date and times, e.g. 2022-06-01 08:00 to 09:00",
        )
    form = "rows"
    if HOW_MANY_NODES.search(question):
        form = "node_count"
    elif WHICH_NODES.search(question):
        form = "nodes"
    return LakePlan(
        metrics=tuple(metrics),
        start=win[0] if win else None,
        end=win[1] if win else None,
        nodes=None if (ALL_NODES.search(question) or not nodes) else nodes,
        jobs=jobs,
        stat=STAT_FN[stat.group(1).lower()] if stat else None,
        threshold=threshold,
        form=form,
    )
