"""Readings plan builders of the rule-based planner (rules: ``planner``'s docstring).

Node-level metrics select nodes, racks, the room or jobs; facility metrics their own entity.
"""

from __future__ import annotations

from typing import Any

from oda_analyst.lake import topology
from oda_analyst.ontology.catalogue import MetricInfo
from oda_analyst.ontology.plan import GROUP_COLUMN, JOB_ATTRIBUTE_GROUPS, GroupKey
from oda_analyst.reading.rules.cues import AggCue
from oda_analyst.retriever.planning.drafts import (
    Body,
    Ctx,
    Draft,
    add_agg,
    agg,
    dump_filters,
    family,
    job_selector,
    metric_refs,
    ordered_groups,
    split_by_metric,
    user_filters,
)

NODE_NOUNS = ("node", "rack", "gpu")
_VALUE_ONLY_COUNT = frozenset({"count"})
_NOT_AGGREGATABLE_OK = frozenset({"count", "min", "max"})


def _value_aggs(ctx: Ctx, infos: list[MetricInfo], cues: tuple[AggCue, ...]) -> list[Body]:
    """Aggregates of readings' values the metrics admit (text: count; states: count/min/max)."""
    out: list[Body] = []
    for cue in cues:
        if cue.of != "value":
            continue
        bad = [
            i.name
            for i in infos
            if (i.dtype == "string" and cue.fn not in _VALUE_ONLY_COUNT)
            or (not i.aggregatable and cue.fn not in _NOT_AGGREGATABLE_OK)
        ]
        if bad:
            ctx.notes.append(f"{cue.fn} is meaningless for {', '.join(bad)}; not computed")
            continue
        add_agg(out, cue.fn)
        if cue.fn == "cv":
            add_agg(out, "avg", after=out.index(agg("cv")))  # the mean a CV is relative to
    return out


# --- readings -----------------------------------------------------------------------------------


def readings_drafts(ctx: Ctx, infos: list[MetricInfo]) -> list[Draft]:
    """One readings draft per metric family and dtype, in the order the metrics came."""
    parts: dict[tuple[str, bool], list[MetricInfo]] = {}
    for info in infos:
        parts.setdefault((family(info), info.dtype == "string"), []).append(info)
    if len(parts) > 1:
        ctx.notes.append(
            "the metrics live on different entities or types; one plan per group: "
            + "; ".join(", ".join(i.name for i in group) for group in parts.values())
        )
    out: list[Draft] = []
    for (fam, _), group in parts.items():
        draft = _node_readings(ctx, group) if fam == "node" else _facility_readings(ctx, fam, group)
        if draft is not None:
            out.append(draft)
    return out


def _jobs_mode(ctx: Ctx) -> bool:
    e, it = ctx.entities, ctx.intent
    return bool(
        e.jobs
        or e.users
        or it.job_cue
        or {"job", "user"} & set(it.groups)
        or (it.rank and it.rank.noun in ("job", "user"))
    )


def _node_selectors(ctx: Ctx, jobs_mode: bool) -> list[Body] | None:
    e = ctx.entities
    if jobs_mode:
        sel: list[Body] = [job_selector(e)]
        if e.nodes:
            sel.append({"kind": "node", "ids": list(e.nodes)})
        if e.racks or e.rooms:
            ctx.notes.append("jobs combine with nodes only; the rack/room selection is dropped")
        return sel
    sel = []
    if e.nodes:
        sel.append({"kind": "node", "ids": list(e.nodes)})
    elif e.all_nodes or (e.system and not (e.racks or e.rooms)):
        sel.append({"kind": "node", "all": True})
        if not e.all_nodes:
            ctx.notes.append("system-wide node metrics: every compute node is selected")
    if e.racks:
        all_racks = len(e.racks) == topology.N_RACKS
        sel.append(
            {"kind": "rack", "all": True} if all_racks else {"kind": "rack", "ids": list(e.racks)}
        )
    if e.rooms:
        sel.append({"kind": "room", "ids": list(e.rooms)})
    it = ctx.intent
    if not sel and (
        {"node", "gpu", "rack"} & set(it.groups)
        or (it.rank and it.rank.noun in NODE_NOUNS)
        or it.count_entities is not None
    ):
        # "per rack", "which 5 nodes", "count the nodes whose …": all of them
        sel.append({"kind": "node", "all": True})
        ctx.notes.append(
            "grouping, ranking or counting nodes/racks/GPUs: every compute node is selected"
        )
    return sel or None


def _node_readings(ctx: Ctx, infos: list[MetricInfo]) -> Draft | None:
    e, it = ctx.entities, ctx.intent
    jobs_mode = _jobs_mode(ctx)
    selectors = _node_selectors(ctx, jobs_mode)
    if selectors is None:
        ctx.missing.append("entity")
        ctx.notes.append("no node, rack, room, job or 'all nodes' is named for node metrics")
        return None
    if (e.gpus or e.cpus) and any(
        i.entity_index is not None and i.entity_index not in (e.gpus or e.cpus) for i in infos
    ):
        ctx.notes.append("a grounded metric's GPU/CPU index differs from the one named")
    filters: list[Any] = []
    if jobs_mode:
        filters += list(it.job_filters) + user_filters(e.users)
    elif it.job_filters:
        ctx.notes.append("job filters ignored: the question selects no jobs")
    if it.value_filters and infos[0].dtype != "string":
        filters += list(it.value_filters)
    aggs = _value_aggs(ctx, infos, it.aggs)
    # "how many jobs/nodes …": distinct jobs/nodes of the selected readings, in text order
    for of in ("job", "node") if jobs_mode else ("node",):
        if any(a.fn == "count" and a.of == of for a in it.aggs):
            count_at = next(i for i, a in enumerate(it.aggs) if (a.fn, a.of) == ("count", of))
            before = sum(1 for a in it.aggs[:count_at] if agg(a.fn, a.of) in aggs)
            aggs.insert(before, agg("count", of))
    for cue in it.aggs:
        if cue.of == "duration_h":
            ctx.notes.append(f"{cue.fn} of {cue.of} is not an aggregate of readings; dropped")
    groups = _reading_groups(ctx, infos, jobs_mode, bool(aggs))
    body: Body = {
        "target": "readings",
        "metrics": metric_refs(infos),
    }
    body["entities"] = selectors
    named_jobs_only = bool(e.jobs) and (it.job_window or not ctx.has_windows)
    job_window = jobs_mode and (it.job_window or not ctx.has_windows or not e.jobs)
    order, limit, derived = _reading_rank(ctx, aggs, groups, jobs_mode)
    granularity = "raw"
    if not aggs:
        if "day" in groups:
            aggs.append(agg("avg"))
            ctx.notes.append("daily values of a series are its daily means (avg per day)")
        elif "hour" in groups or it.minute:
            granularity = "minute" if it.minute else "hour"
            groups = []
        else:
            groups = []  # raw rows already carry the node, GPU and job of each reading
    body.update(
        job_window=job_window, filters=dump_filters(filters), derived=derived, aggregations=aggs
    )
    body.update(
        group_by=ordered_groups(groups), order_by=order, limit=limit, granularity=granularity
    )
    draft = Draft(body, "optional" if named_jobs_only and job_window else "required")
    draft.companions = _companions(ctx, body)
    return draft


def _reading_groups(
    ctx: Ctx, infos: list[MetricInfo], jobs_mode: bool, aggs: bool
) -> list[GroupKey]:
    e, it = ctx.entities, ctx.intent
    groups: list[GroupKey] = list(it.groups)
    if it.rank and it.rank.noun in ("node", "rack", "gpu", "user"):
        groups.append(it.rank.noun)  # type: ignore[arg-type]  # checked just above
    if it.rank and it.rank.noun == "job" and aggs:
        groups.append("job")
    if aggs and (not it.no_split or it.compare):
        # 'node 100 vs node 900 avg gpu utilisation (all 4 GPUs pooled)': what is pooled is the
        # GPUs; the entities compared stay one figure each
        for key, ids in (("node", e.nodes), ("job", e.jobs), ("user", e.users)):
            if len(ids) > 1 and (key != "node" or not jobs_mode):
                groups.append(key)  # type: ignore[arg-type]  # literal group keys
        if it.compare and len(e.racks) > 1 and not jobs_mode:
            # 'rack 9 vs rack 40 … which ran warmer?': one figure per rack, set side by side
            # (several racks named without a comparison stay one figure taken together)
            groups.append("rack")
    if aggs and split_by_metric(ctx, infos):
        groups.append("metric")
    keep: list[GroupKey] = []
    for g in dict.fromkeys(groups):
        why = None
        if g == "gpu" and any(i.entity != "GPU" for i in infos):
            why = "per GPU needs GPU metrics only"
        elif g == "rack" and jobs_mode:
            why = "per rack does not apply to readings of jobs"
        elif g in JOB_ATTRIBUTE_GROUPS:
            # stage 1 refuses the question when it asks for this grouping and no plan makes it
            why = f"per {g} groups jobs, not readings"
        if why:
            ctx.notes.append(f"grouping dropped: {why}")
        elif g == "gpu" and it.no_split and all(i.entity_index is not None for i in infos):
            # 'each GPU across nodes 0-99': one figure per GPU index over the nodes pooled, and
            # each index is its own metric (a 'gpu' group is one GPU of one node)
            keep.append("metric")
        else:
            keep.append(g)
    return list(dict.fromkeys(keep))


def _reading_rank(
    ctx: Ctx, aggs: list[Body], groups: list[GroupKey], jobs_mode: bool
) -> tuple[list[Body], int | None, list[str]]:
    rank = ctx.intent.rank
    derived = ["job_duration"] if jobs_mode and ctx.intent.duration else []
    if rank is None:
        return [], None, derived
    if rank.key == "duration":
        if not jobs_mode:
            ctx.notes.append("longest/shortest rank jobs; no jobs are selected, so no ranking")
            return [], None, []
        if aggs and "job" not in groups:
            groups.append("job")
        return [{"key": "duration_h", "desc": rank.desc}], rank.k, ["job_duration"]
    if rank.key in ("cpu_hours", "gpu_hours"):
        ctx.notes.append("ranking by CPU/GPU hours belongs to the jobs plan")
        return [], None, derived
    if not groups:
        ctx.notes.append("the ranking has nothing to rank (no per-node/job/user grouping); ignored")
        return [], None, derived
    if rank.key == "count_job":
        if not jobs_mode:
            return [], None, derived
        add_agg(aggs, "count", "job")
        order = [{"key": "count_job", "desc": rank.desc}]
        order += [{"key": GROUP_COLUMN[g], "desc": False} for g in ordered_groups(groups)]
        return order, rank.k, derived
    fn = rank.fn
    if rank.key is None:
        first = next((a for a in aggs if a["of"] == "value"), None)
        fn = first["fn"] if first else "avg"
        ctx.notes.append(f"no ranking key given: ranked by {fn} of the value, highest first")
    add_agg(aggs, fn or "avg")
    return [{"key": f"{fn}_value", "desc": rank.desc}], rank.k, derived


def _companions(ctx: Ctx, body: Body) -> list[Body]:
    """Raw series beside aggregates for a line plot; per-job values by user for a box plot."""
    plots, aggs = ctx.intent.plots, body["aggregations"]
    if not aggs:
        return []
    values = [a for a in aggs if a["of"] == "value"]
    if "box" in plots and "user" in body["group_by"] and values:
        return [
            {
                **body,
                "aggregations": values,
                "group_by": ["user", "job"],
                "order_by": [],
                "limit": None,
            }
        ]
    if ("line" in plots or "box" in plots) and not {"day", "hour"} & set(body["group_by"]):
        job_ranked = all(o["key"] in ("duration_h", "job_id") for o in body["order_by"])
        if not job_ranked:
            ctx.notes.append("no series plan: a top-k of nodes/users must be ranked first")
            return []
        raw = {**body, "aggregations": [], "group_by": []}
        raw["filters"] = [f for f in body["filters"] if f["about"] == "job"] + [
            f for f in body["filters"] if f["about"] == "value"
        ]
        return [raw]
    return []


def _facility_readings(ctx: Ctx, fam: str, infos: list[MetricInfo]) -> Draft:
    it = ctx.intent
    if fam == "system":
        selector: Body = {"kind": "system", "ids": [topology.SYSTEM]}
    elif fam == "weather":
        selector = {"kind": "weather", "all": True}
    else:
        ids = [key for kind, key in ctx.entities.devices if kind == fam]
        selector = {"kind": fam, "ids": ids} if ids else {"kind": fam, "all": True}
        if not ids:
            ctx.notes.append(f"no {fam} device named: all of them are selected")
    aggs = _value_aggs(ctx, infos, it.aggs)
    groups: list[GroupKey] = [g for g in it.groups if g in ("metric", "day", "hour")]
    dropped = [g for g in it.groups if g not in groups]
    if dropped:
        ctx.notes.append(f"grouping by {', '.join(dropped)} does not apply to {fam} metrics")
    if aggs and split_by_metric(ctx, infos):
        groups.append("metric")
    if it.rank is not None:
        ctx.notes.append(f"rankings of {fam} metrics are not supported; ignored")
    granularity = "raw"
    if not aggs:
        if "day" in groups:
            aggs.append(agg("avg"))
            ctx.notes.append("daily values of a series are its daily means (avg per day)")
        else:
            granularity = "minute" if it.minute else ("hour" if "hour" in groups else "raw")
            groups = []
    body: Body = {
        "target": "readings",
        "metrics": metric_refs(infos),
        "entities": [selector],
        "filters": dump_filters(list(it.value_filters)) if infos[0].dtype != "string" else [],
        "aggregations": aggs,
        "group_by": ordered_groups(list(dict.fromkeys(groups))),
        "granularity": granularity,
    }
    draft = Draft(body, "required")
    draft.companions = _companions(ctx, {**body, "order_by": [], "limit": None})
    return draft
