"""A value at an instant: the reading nearest it per series, within one sampling period.

"node 12's inlet temperature at 11:00 on 1 June" names one moment. The time parser marks such a
window ``instant`` ([t, t + 1 s)); here a raw-readings plan over it is widened to [t - P, t + P]
with P the longest sampling period of its metrics, and the executor keeps, per series (entity
and metric), the one reading nearest t (``nearest`` post step), with its own timestamp. A
statistic at one instant ("the average power at 11:00") has no meaning, so it is asked about;
the jobs running at an instant ("how many jobs were running at 15:00") are those whose run
overlaps it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from oda_analyst.ontology.catalogue import Catalogue, load_catalogue
from oda_analyst.ontology.plan import QueryPlan, TimeWindow, entity_columns
from oda_analyst.reading.types import ParsedWindow
from oda_analyst.sparql.compiler import CompiledQuery, PostStep

DEFAULT_PERIOD_S = 60


def period_s(plan: QueryPlan, catalogue: Catalogue | None = None) -> int:
    """The longest nominal sampling period of the plan's metrics (seconds)."""
    cat = catalogue or load_catalogue()
    periods = [cat.get(m.metric).period_s for m in plan.metrics if m.metric in cat]
    return max((p for p in periods if p), default=DEFAULT_PERIOD_S)


def at_instants(
    plans: Sequence[QueryPlan], windows: Sequence[ParsedWindow]
) -> tuple[tuple[QueryPlan, ...], tuple[datetime | None, ...], str | None]:
    """Plans over an instant widened to one sampling period each side, the instant of each plan
    (None for windows), or why a plan cannot be answered at one instant."""
    moments = {w.start for w in windows if w.instant}
    out: list[QueryPlan] = []
    instants: list[datetime | None] = []
    for plan in plans:
        moment = plan.window.start if plan.window is not None else None
        if moment is None or moment not in moments or _running_jobs(plan):
            out.append(plan)
            instants.append(None)
            continue
        if plan.target != "readings" or plan.aggregations or plan.granularity != "raw":
            return (
                tuple(plans),
                tuple(instants),
                (
                    f"{moment:%Y-%m-%d %H:%M} UTC is one instant: a statistic or a count needs a "
                    "window; give a start and an end, e.g. 08:00–09:00"
                ),
            )
        span = timedelta(seconds=period_s(plan))
        wide = TimeWindow(start=moment - span, end=moment + span + timedelta(milliseconds=1))
        out.append(plan.model_copy(update={"window": wide}))
        instants.append(moment)
    return tuple(out), tuple(instants), None


def _running_jobs(plan: QueryPlan) -> bool:
    """'how many jobs were running at 15:00': the jobs whose run overlaps the instant's second
    are the jobs running then, so the plan answers as it is."""
    return plan.target == "jobs" and plan.job_event == "running"


def nearest_query(compiled: CompiledQuery, plan: QueryPlan, moment: datetime) -> CompiledQuery:
    """``compiled`` with the step that keeps the reading nearest ``moment`` per series."""
    step = PostStep(
        op="nearest",
        output="timestamp",
        inputs=(*entity_columns(plan), "metric_name"),
        q=moment.timestamp(),
        n=period_s(plan),
    )
    return replace(compiled, post=(*compiled.post, step))
