"""The ten query archetypes EXASAGE was built around, as templates over the typed plan.

The published tool answered questions generated from ten archetypes; its paper names the
categories they combine (node, rack, job, metric, plugin, time) but this repository holds no copy
of the templates, so these ten are our reconstruction from those categories, each a question
shape an operator asks of node telemetry and the job table:

 1. ``node_series``    metric M of node(s) N (or all nodes) from T1 to T2: the readings
 2. ``node_stat``      avg/min/max/sum/std of M of node(s) N from T1 to T2: per node
 3. ``rack_series``    M of the nodes of rack R from T1 to T2: the readings
 4. ``rack_stat``      a statistic of M over rack R from T1 to T2: per rack
 5. ``job_series``     M of job J over its run: the readings of its nodes
 6. ``job_stat``       a statistic of M for job J over its run: per job
 7. ``job_list``       the jobs (on node N) running from T1 to T2
 8. ``job_count``      how many jobs (on node N) ran from T1 to T2
 9. ``threshold``      the nodes whose M went above/below X from T1 to T2 (with how many readings)
10. ``facility``       a facility metric (weather, Slurm, cooling, panels) from T1 to T2, raw or a
                       statistic

A question is matched to the first archetype whose categories it holds, in the order above,
most specific first (``ORDER``). The template fills a ``QueryPlan``, which the shared compiler
turns into SPARQL over the per-query VKG: the baseline reuses our graph and query layers, not our
understanding. A question that fits no archetype fails, saying which categories were found.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from oda_analyst.baselines.sota1.extract import Extraction, MalformedInputError
from oda_analyst.ontology.plan import NODE_PARTS, QueryPlan, parse_plan

NODE_LEVEL = NODE_PARTS
FACILITY_SELECTOR: dict[str, dict[str, Any]] = {
    "HPCSystem": {"kind": "system", "ids": ["M100"]},
    "Weather": {"kind": "weather", "all": True},
    "CRAC": {"kind": "crac", "all": True},
    "LiquidCoolingPLC": {"kind": "plc", "all": True},
    "ElectricalPanel": {"kind": "panel", "all": True},
}
HINT = (
    "name one exact metric (e.g. total_power, see `oda-analyst metrics`), the nodes, rack or job, "
    "and the window as [YYYY-MM-DD HH:MM:SS] timestamps"
)


def _window(x: Extraction) -> dict[str, str] | None:
    if x.start is None or x.end is None:
        return None
    return {"start": x.start.isoformat(), "end": x.end.isoformat()}


def _metric(x: Extraction) -> list[dict[str, str]]:
    assert x.metric is not None
    return [{"plugin": x.metric.plugin, "metric": x.metric.name}]


def _node_selector(x: Extraction) -> dict[str, Any]:
    if x.nodes:
        return {"kind": "node", "ids": list(x.nodes)}
    return {"kind": "node", "all": True}


def _node_metric(x: Extraction) -> bool:
    return x.metric is not None and x.metric.entity in NODE_LEVEL


def node_series(x: Extraction) -> dict[str, Any] | None:
    if not (_node_metric(x) and (x.nodes or x.all_nodes) and _window(x)):
        return None
    return {"target": "readings", "metrics": _metric(x), "entities": [_node_selector(x)],
            "window": _window(x)}  # fmt: skip


def node_stat(x: Extraction) -> dict[str, Any] | None:
    plan = node_series(x)
    if plan is None or x.stat is None:
        return None
    return {**plan, "aggregations": [{"fn": x.stat, "of": "value"}], "group_by": ["node"]}


def rack_series(x: Extraction) -> dict[str, Any] | None:
    if not (_node_metric(x) and x.racks and _window(x)):
        return None
    return {"target": "readings", "metrics": _metric(x),
            "entities": [{"kind": "rack", "ids": list(x.racks)}], "window": _window(x)}  # fmt: skip


def rack_stat(x: Extraction) -> dict[str, Any] | None:
    plan = rack_series(x)
    if plan is None or x.stat is None:
        return None
    return {**plan, "aggregations": [{"fn": x.stat, "of": "value"}], "group_by": ["rack"]}


def job_series(x: Extraction) -> dict[str, Any] | None:
    if not (_node_metric(x) and x.jobs):
        return None
    plan: dict[str, Any] = {"target": "readings", "metrics": _metric(x),
                            "entities": [{"kind": "job", "ids": list(x.jobs)}],
                            "job_window": True, "derived": ["job_duration"]}  # fmt: skip
    if _window(x):
        plan["window"] = _window(x)
    return plan


def job_stat(x: Extraction) -> dict[str, Any] | None:
    plan = job_series(x)
    if plan is None or x.stat is None:
        return None
    return {**plan, "aggregations": [{"fn": x.stat, "of": "value"}], "group_by": ["job"]}


def _jobs_entities(x: Extraction) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"kind": "job", "all": True}]
    if x.nodes:
        out.append({"kind": "node", "ids": list(x.nodes)})
    return out


def job_list(x: Extraction) -> dict[str, Any] | None:
    if not (x.jobs_word and not x.jobs and x.metric is None and _window(x)):
        return None
    return {"target": "jobs", "entities": _jobs_entities(x), "window": _window(x)}


def job_count(x: Extraction) -> dict[str, Any] | None:
    plan = job_list(x)
    if plan is None or not x.count:
        return None
    return {**plan, "aggregations": [{"fn": "count", "of": "job"}]}


def threshold(x: Extraction) -> dict[str, Any] | None:
    if x.threshold is None or x.jobs:
        return None
    if not (_node_metric(x) and _window(x)):
        return None
    op, value = x.threshold
    entities = [{"kind": "rack", "ids": list(x.racks)}] if x.racks else [_node_selector(x)]
    return {"target": "readings", "metrics": _metric(x), "entities": entities,
            "window": _window(x), "filters": [{"about": "value", "op": op, "value": value}],
            "aggregations": [{"fn": "count", "of": "value"}], "group_by": ["node"]}  # fmt: skip


def facility(x: Extraction) -> dict[str, Any] | None:
    if x.metric is None or x.metric.entity not in FACILITY_SELECTOR or not _window(x):
        return None
    plan: dict[str, Any] = {"target": "readings", "metrics": _metric(x),
                            "entities": [FACILITY_SELECTOR[x.metric.entity]],
                            "window": _window(x)}  # fmt: skip
    if x.stat is not None:
        plan |= {"aggregations": [{"fn": x.stat, "of": "value"}], "group_by": ["metric"]}
    return plan


Template = Callable[[Extraction], dict[str, Any] | None]
ARCHETYPES: dict[str, Template] = {
    "node_series": node_series, "node_stat": node_stat, "rack_series": rack_series,
    "rack_stat": rack_stat, "job_series": job_series, "job_stat": job_stat,
    "job_list": job_list, "job_count": job_count, "threshold": threshold, "facility": facility,
}  # fmt: skip
# Most specific first: a statistic before the series it aggregates, a threshold before both.
ORDER = ("threshold", "job_count", "job_list", "job_stat", "job_series", "rack_stat",
         "rack_series", "node_stat", "node_series", "facility")  # fmt: skip


def found(x: Extraction) -> str:
    """The categories the regexes found, for the failure message."""
    parts = []
    if x.nodes or x.all_nodes:
        parts.append("nodes " + (", ".join(map(str, x.nodes)) if x.nodes else "all"))
    if x.racks:
        parts.append("rack " + ", ".join(map(str, x.racks)))
    if x.jobs:
        parts.append("job " + ", ".join(map(str, x.jobs)))
    if x.metric is not None:
        parts.append(f"metric {x.metric.plugin}/{x.metric.name}")
    if x.start is not None:
        parts.append("a window")
    if x.stat:
        parts.append(f"statistic {x.stat}")
    if x.threshold:
        parts.append(f"threshold {x.threshold[0]} {x.threshold[1]:g}")
    return ", ".join(parts) or "nothing"


def match(x: Extraction) -> tuple[str, QueryPlan]:
    """The first archetype the extraction fits, and its plan; MalformedInputError if none."""
    if x.plugin and x.metric is not None and x.plugin != x.metric.plugin:
        raise MalformedInputError(
            f"metric {x.metric.name} belongs to plugin {x.metric.plugin}, not {x.plugin}",
            hint=HINT,
        )
    for name in ORDER:
        raw = ARCHETYPES[name](x)
        if raw is not None:
            try:
                return name, parse_plan(raw)
            except ValueError as exc:  # pydantic's ValidationError is a ValueError
                raise MalformedInputError(
                    f"archetype {name} cannot be filled from this question: {exc}", hint=HINT
                ) from None
    missing = "an exact metric name" if x.metric is None and not x.jobs_word else "a window"
    raise MalformedInputError(
        f"the question fits none of the ten query archetypes (found: {found(x)}; "
        f"lacking e.g. {missing})",
        hint=HINT,
    )
