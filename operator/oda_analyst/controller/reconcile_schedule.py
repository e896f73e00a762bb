"""A scheduled AnalystQuery: a child query per due run, finished runs kept up to historyLimit."""

from __future__ import annotations

from datetime import UTC, datetime

import kopf

from oda_analyst.controller import events, manifests, names, schedule
from oda_analyst.controller.context import Context
from oda_analyst.controller.reconcile_query import _parse_time, query_path
from oda_analyst.controller.status import phase_patch, stamp
from oda_analyst.errors import UsageError


async def reconcile_schedule(ctx: Context, name: str, namespace: str) -> None:
    obj = await ctx.kube.get(query_path(namespace, name))
    if obj is None or obj["metadata"].get("deletionTimestamp"):
        return
    spec, status = obj["spec"], obj.get("status") or {}
    try:
        schedule.check(spec["schedule"])
    except UsageError as err:
        raise kopf.PermanentError(err.message) from None
    now = datetime.now(UTC)
    since = _parse_time(status.get("lastRunTime") or obj["metadata"]["creationTimestamp"])
    due = schedule.due_run(spec["schedule"], since=since, now=now)
    fields: dict[str, object] = {}
    if due is not None:
        run = await ctx.kube.create(manifests.get_scheduled_run(obj, due))
        events.info(obj, "RunStarted", f"run {run['metadata']['name']} for {due}")
        fields = {"lastRunTime": stamp(due), "lastRun": run["metadata"]["name"],
                  "runs": int(status.get("runs") or 0) + 1}  # fmt: skip
    runs = await ctx.kube.list(query_path(namespace, "").rstrip("/"),
                               labels={names.LABEL_SCHEDULE: name})  # fmt: skip
    limit = int(spec.get("historyLimit") or schedule.DEFAULT_HISTORY)
    for old in schedule.runs_to_delete(runs, limit):
        await ctx.kube.delete(query_path(namespace, old))
        events.info(obj, "RunDeleted", f"{old} (beyond historyLimit {limit})")
    if due is not None or status.get("phase") != names.SCHEDULED:
        nxt = schedule.next_run(spec["schedule"], after=due or now)
        patch = phase_patch(status, names.SCHEDULED, reason="Scheduled",
                            message=f"next run {stamp(nxt)}", now=now,
                            generation=obj["metadata"].get("generation"), nextRunTime=stamp(nxt),
                            **fields)  # fmt: skip
        await ctx.kube.patch(query_path(namespace, name, "status"), patch)
