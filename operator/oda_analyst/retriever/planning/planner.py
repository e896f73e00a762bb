"""Rule-based planner: a question plus its stage-1 results → ``QueryPlan``s, with no model.

``plan_question(PlannerInput)`` reads the computation cues of the question
(``understanding.cues.read_intent``; the cue list is documented there) and assembles plans from
them, the grounded metrics, the extracted entities and the parsed windows. Rules:

- **Target.** Grounded metrics → ``readings``; one plan per metric family (node-level metrics,
  the system's slurm metrics, weather, CRAC, PLC, electrical panel) and per dtype (text and
  numbers apart), since one plan cannot mix them. No metrics: "how many nodes/racks/GPUs" →
  ``entities`` (count of node; racks are the rows of a per-rack count, GPUs are 4 per node);
  job cues (jobs, job count, CPU/GPU hours, users, longest/shortest) → ``jobs``; otherwise
  ``missing=("metric",)``. CPU/GPU hours are always a ``jobs`` plan (they are job-table
  quantities), beside any readings plan. ``non_metric_kind`` (grounding's verdict) overrides.
- **Entities.** Node metrics take the named nodes, racks and room, or all nodes for "all nodes"
  or the whole system; a named GPU or CPU only qualifies the metric (the grounded metric already
  carries its index), so the node is selected. Node metrics over jobs (job cues, job or user ids,
  per-job/per-user grouping) select the named jobs or all jobs, and the named nodes. Facility
  metrics take their own entity (M100, the weather station, the named or all devices). Node
  metrics with no node, rack, room, system or job named → ``missing=("entity",)``.
- **Windows.** One plan per window (two windows → two plans of the same shape). Readings over all
  jobs use each job's own duration (``job_window``) with the window selecting the jobs; named
  jobs with no window, or with a job-window cue ("over their whole duration"), likewise. Any
  other readings plan, and a jobs plan over all jobs, needs a window → ``missing=("window",)``.
- **Aggregations** keep the question's order. ``cv`` brings the mean it divides by (``avg``): a
  CV cannot be read without it. "How many nodes" over node readings counts the distinct nodes of
  the selected (value-filtered) readings (``count_node``). A grounded metric's own words are no
  cue (the reader's ``cues_of``): "total ICT power" is Tot_ict, "number of idle nodes" the value
  of total_nodes_idle, "user CPU" cpu_user (no user's jobs). A jobs plan that aggregates also
  counts its jobs (``count_job``), so a zero sum is told apart from no jobs. CPU/GPU hours of
  all jobs are summed unless said otherwise; daily values of a series are daily means.
- **Grouping.** Cued groups, the ranked noun ("top 10 users" → user), and implicit ones when
  aggregating: several named nodes/jobs/users → per node/job/user ("overall", "combined" keep
  them pooled); several named racks → per rack when compared or drawn as bars or a pie, else
  pooled; a heatmap per hour or day of racks → per node (one rack) or per rack (several);
  metrics of different quantities → per metric (the four GPUs' utilisation is one quantity,
  pooled, unless the question compares two or more named GPUs or sockets). A group
  that cannot apply is dropped with a note.
- **Ranking.** A top-k orders by its key and limits to k; ties of a count are broken by the group
  columns (counts tie often). A top-k without a key orders by the first aggregate (jobs: by job
  count for users, by duration for jobs), with a note.
- **Companions.** Aggregates plus a line plot/time series add the raw series of the same
  selection (only when the selection is not a top-k of non-job entities); aggregates per user
  plus a box plot add the per-job values by user (the box's points).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from oda_analyst.errors import UsageError
from oda_analyst.ontology.catalogue import MetricInfo, load_catalogue
from oda_analyst.ontology.plan import QueryPlan, describe_errors, plan_model
from oda_analyst.reading.model import RetrievalReading
from oda_analyst.reading.rules.cues import cues_of
from oda_analyst.reading.types import Entities, ParsedWindow
from oda_analyst.retriever.planning.drafts import Ctx, Draft, entities_draft, family, jobs_draft
from oda_analyst.retriever.planning.readings import readings_drafts

NON_METRIC_KINDS: tuple[str, ...] = ("count_entities", "jobs")


@dataclass(frozen=True)
class PlannerInput:
    """A question and what stage 1 made of it (metrics as grounded ``(plugin, metric)``)."""

    said: RetrievalReading  # the question's retrieval words as the reader read them
    entities: Entities
    windows: tuple[ParsedWindow, ...] = ()
    metrics: tuple[tuple[str, str], ...] = ()
    non_metric_kind: str | None = None  # "count_entities" or "jobs" when grounding says so


@dataclass(frozen=True)
class PlannerOutput:
    """Plans to run, notes for the answer, and what is missing (then ``plans`` is empty).

    ``missing`` names: ``window`` (no time window and none implied by jobs), ``metric`` (a
    readings question with no grounded metric), ``entity`` (node metrics of no named node),
    ``plan`` (the rules built a plan the model rejects; see notes).
    """

    plans: tuple[QueryPlan, ...]
    notes: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()


def plan_question(inp: PlannerInput) -> PlannerOutput:
    """Plan the retrieval of a question by rules (see the module docstring)."""
    if inp.non_metric_kind is not None and inp.non_metric_kind not in NON_METRIC_KINDS:
        raise UsageError(
            f"unknown non-metric kind {inp.non_metric_kind!r}",
            hint=f"use one of {', '.join(NON_METRIC_KINDS)} or None",
        )
    notes: list[str] = []
    infos = _metric_infos(inp.metrics, notes)
    intent = cues_of(inp.said, inp.windows, inp.entities, infos)
    ctx = Ctx(inp.entities, intent, bool(inp.windows), notes + list(intent.notes))
    built: list[Draft] = []
    kind = inp.non_metric_kind
    if infos:
        built += readings_drafts(ctx, infos)
        node_plans = any(family(i) == "node" for i in infos)
        wants_jobs = intent.hours or (not node_plans and any(a.of == "job" for a in intent.aggs))
        if wants_jobs:
            built.append(jobs_draft(ctx))
    elif (kind == "count_entities" or (kind is None and intent.count_entities)) and not (
        # 'how many different nodes did user U's jobs touch': the jobs' nodes, not the machine's
        intent.job_cue or inp.entities.jobs or inp.entities.users
    ):
        built.append(entities_draft(ctx))
    elif (
        kind == "jobs" or intent.job_cue or intent.hours or inp.entities.jobs or inp.entities.users
    ):
        built.append(jobs_draft(ctx))
    else:
        ctx.missing.append("metric")
    # node metrics of no named entity still need a window: ask for both at once (a question
    # with no metric is rejected, so asking it for a window first would be wasted)
    unbuilt = "entity" in ctx.missing and not inp.entities.jobs
    if not inp.windows and (unbuilt or any(d.window == "required" for d in built)):
        ctx.missing.append("window")
    if ctx.missing:
        return PlannerOutput((), tuple(dict.fromkeys(ctx.notes)), tuple(dict.fromkeys(ctx.missing)))
    return _emit(built, inp.windows, ctx)


def _emit(built: list[Draft], windows: tuple[ParsedWindow, ...], ctx: Ctx) -> PlannerOutput:
    model = plan_model()
    bodies: list[dict[str, Any]] = []
    for d in built:
        if d.window == "none" and windows:
            ctx.notes.append("the time window does not apply to counting the nodes; ignored")
    for d in [d for d in built if d.window == "none"]:
        bodies += [d.body, *d.companions]
    for window in windows or (None,):
        for d in [d for d in built if d.window != "none"]:
            for body in (d.body, *d.companions):
                bodies.append(body if window is None else {**body, "window": _window(window)})
    plans: list[QueryPlan] = []
    for body in bodies:
        try:
            plans.append(model.model_validate(body))
        except ValidationError as exc:
            ctx.notes.append(f"rules built an invalid plan: {describe_errors(exc)}")
            ctx.missing.append("plan")
    notes = tuple(dict.fromkeys(ctx.notes))
    if ctx.missing:
        return PlannerOutput((), notes, tuple(dict.fromkeys(ctx.missing)))
    return PlannerOutput(tuple(plans), notes, ())


def _window(w: ParsedWindow) -> dict[str, str]:
    return {"start": w.start.isoformat(), "end": w.end.isoformat()}


# --- stage-1 inputs ---------------------------------------------------------------------------


def _metric_infos(metrics: tuple[tuple[str, str], ...], notes: list[str]) -> list[MetricInfo]:
    cat = load_catalogue()
    out: list[MetricInfo] = []
    for plugin, name in dict.fromkeys(metrics):
        try:
            info = cat.get(name)
        except UsageError as exc:
            notes.append(f"grounded metric dropped: {exc.message} ({exc.hint})")
            continue
        if info.plugin != plugin.removesuffix("_pub"):
            notes.append(
                f"grounded metric dropped: {name} is of plugin {info.plugin}, not {plugin}"
            )
        elif info.entity == "Job":
            notes.append(f"{name} is a job-table attribute, not a reading; ask about jobs instead")
        else:
            out.append(info)
    return out


__all__ = ["NON_METRIC_KINDS", "PlannerInput", "PlannerOutput", "plan_question"]
