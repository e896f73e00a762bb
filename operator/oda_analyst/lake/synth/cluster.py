"""Slurm cluster metrics computed from the job schedule (so they agree with the job table)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from oda_analyst.lake import topology
from oda_analyst.lake.synth import context, jobs, noise
from oda_analyst.lake.synth.context import Schedule

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

CPUS_PER_NODE = 128
MEM_PER_NODE_MB = 246_000
PARTITION = "m100_usr_prod"  # the system-wide partition the s21 totals report
STATE_NAMES = ("RUNNING", "PENDING")


@dataclass
class TaggedSeries:
    """Rows of a tagged slurm series: timestamps, tag values per row, values."""

    t: I64
    tags: dict[str, list[str]]
    value: F64


def _totals(sched: Schedule, t: I64) -> dict[str, F64]:
    js = sched.jobs
    job = sched.i_job
    n = topology.N_NODES
    alloc = sched.covering_count(t)
    down = sched.down_count(t)
    cpus = sched.covering_sum(t, js.cpus_pn[job])
    gpus = sched.covering_sum(t, js.gpus_pn[job])
    mem = sched.covering_sum(t, js.mem_pn[job])
    mixed = sched.covering_count(t, (js.cpus_pn[job] < CPUS_PER_NODE).astype(np.int64))
    cpu_sum = sched.covering_sum(t, js.cpu_level[job])
    gpu_sum = sched.covering_sum(t, js.gpu_level[job].sum(axis=1))
    idle_cpu = (n - alloc) * context.IDLE_CPU_UTIL
    f = np.float64
    out = {
        "nodes_config": np.full(len(t), f(n)),
        "nodes_alloc": alloc.astype(f),
        "nodes_down": down.astype(f),
        "nodes_idle": (n - alloc - down).astype(f),
        "nodes_mixed": mixed.astype(f),
        "nodes_eligible": (n - down).astype(f),
        "cpu_util": (cpu_sum + idle_cpu) / n,
        "gpu_util": gpu_sum / (4.0 * n),
        "mem_util": 100.0 * mem * 0.62 / (MEM_PER_NODE_MB * n),
    }
    for kind, used, per_node in (
        ("cpus", cpus, CPUS_PER_NODE),
        ("gpus", gpus, 4),
        ("memory", mem, MEM_PER_NODE_MB),
    ):
        out[f"{kind}_config"] = np.full(len(t), f(n * per_node))
        out[f"{kind}_alloc"] = used.astype(f)
        out[f"{kind}_down"] = (down * per_node).astype(f)
        out[f"{kind}_idle"] = (n * per_node - used - down * per_node).astype(f)
        out[f"{kind}_eligible"] = ((n - down) * per_node).astype(f)
    return out


def untagged(sched: Schedule, metric: str, t: I64) -> F64:
    """``cluster_*`` and ``total_*`` series (no tags)."""
    tot = _totals(sched, t)
    if metric == "cluster_cpu_util":
        return np.rint(tot["cpu_util"])
    if metric == "cluster_memory_util":
        return np.rint(tot["mem_util"])
    name = metric.removeprefix("total_")
    return tot[name]


def s21_partition(sched: Schedule, metric: str, t: I64) -> F64:
    """``s21.cluster_*`` and ``s21.totals.*`` series (tag partition)."""
    tot = _totals(sched, t)
    if metric.startswith("s21.cluster_"):
        kind = metric.removeprefix("s21.cluster_").removesuffix("_util")
        jitter = 0.05 * noise.normal(noise.key(sched.seed, "slurm", metric), t)
        return np.round(tot[f"{kind}_util"] + jitter, 3)
    name = metric.removeprefix("s21.totals.").removeprefix("total_")
    return tot[name]


def _group_intervals(sched: Schedule) -> tuple[I64, I64, I64, I64]:
    """Queue intervals of every job: (group, begin, end, job), group = (qos, partition, state)."""
    js = sched.jobs
    started = js.start >= 0
    run_end = np.where(started, js.end, -1)
    pend_end = np.where(started, js.start, js.end)
    idx = np.arange(len(js), dtype=np.int64)
    base = (js.qos * len(jobs.PARTITIONS) + js.partition) * 2
    group = np.concatenate([base[started], base + 1])
    begin = np.concatenate([js.start[started], js.submit])
    end = np.concatenate([run_end[started], pend_end])
    return group, begin, end, np.concatenate([idx[started], idx])


def s21_jobs(sched: Schedule, metric: str, t: I64) -> TaggedSeries:
    """``s21.jobs.*`` per (qos, partition, job_state) group present at each time."""
    js = sched.jobs
    group, begin, end, job = _group_intervals(sched)
    name = metric.removeprefix("s21.jobs.")
    out_t, out_g, out_v = [], [], []
    for g in np.unique(group):
        sel = group == g
        b, e, j = begin[sel], end[sel], job[sel]
        ob, oe = np.argsort(b, kind="stable"), np.argsort(e, kind="stable")

        def covering(w: I64, b: I64 = b, e: I64 = e, ob: I64 = ob, oe: I64 = oe) -> I64:
            cs = np.concatenate([[0], np.cumsum(w[ob])])
            ce = np.concatenate([[0], np.cumsum(w[oe])])
            out: I64 = (
                cs[np.searchsorted(b[ob], t, "right")] - ce[np.searchsorted(e[oe], t, "right")]
            )
            return out

        count = covering(np.ones(len(j), np.int64))
        pending = g % 2 == 1
        if name == "tot_jobs":
            v = count.astype(np.float64)
        elif name in ("eligible", "eligible_v2"):
            v = (count if pending else np.zeros_like(count)).astype(np.float64)
        elif name in ("tot_nodes", "nodes_eligible", "nodes_eligible_v2"):
            v = covering(js.num_nodes[j]).astype(np.float64)
            if name != "tot_nodes" and not pending:
                v = np.zeros_like(v)
        elif name == "tot_gpus":
            v = covering(js.num_nodes[j] * js.gpus_pn[j]).astype(np.float64)
        elif name == "tot_node_hour":
            v = covering(js.num_nodes[j] * js.limit_min[j]).astype(np.float64) / 60.0
        else:  # waiting hours: now - submit while pending, start - submit once running
            if pending:
                total = count * t - covering(js.submit[j])
            else:
                total = covering(js.start[j] - js.submit[j])
            avg = np.where(count > 0, total / np.maximum(count, 1) / 3_600_000.0, 0.0)
            v = np.round(avg if name == "avg_waiting_hour" else 2.2 * avg, 4)
        keep = count > 0
        out_t.append(t[keep])
        out_g.append(np.full(int(keep.sum()), g))
        out_v.append(v[keep])
    if not out_t:
        return TaggedSeries(
            np.zeros(0, np.int64), {"qos": [], "partition": [], "job_state": []}, np.zeros(0)
        )
    tt, gg, vv = np.concatenate(out_t), np.concatenate(out_g), np.concatenate(out_v)
    n_part = len(jobs.PARTITIONS)
    tags = {
        "qos": [jobs.QOS[x // 2 // n_part] for x in gg],
        "partition": [jobs.PARTITIONS[x // 2 % n_part] for x in gg],
        "job_state": [STATE_NAMES[x % 2] for x in gg],
    }
    return TaggedSeries(tt, tags, vv)


def job_events(sched: Schedule, metric: str, t0: int, t1: int) -> TaggedSeries:
    """``job_id`` / ``num_nodes``: one row per job state change (submit, start, end)."""
    js = sched.jobs
    started = js.start >= 0
    idx = np.arange(len(js), dtype=np.int64)
    t = np.concatenate([js.submit, js.start[started], js.end])
    j = np.concatenate([idx, idx[started], idx])
    state = (
        ["PENDING"] * len(js)
        + ["RUNNING"] * int(started.sum())
        + [jobs.STATES[s] for s in js.state]
    )
    keep = np.flatnonzero((t >= t0) & (t < t1))
    order = keep[np.lexsort((js.job_id[j[keep]], t[keep]))]
    value = js.job_id if metric == "job_id" else js.num_nodes
    return TaggedSeries(
        t[order],
        {
            "partition": [jobs.PARTITIONS[js.partition[j[i]]] for i in order],
            "user_id": [str(user_id(int(js.user[j[i]]))) for i in order],
            "job_state": [state[i] for i in order],
        },
        value[j[order]].astype(np.float64),
    )


def user_id(index: int) -> int:
    """Anonymised user id of a user index (a bijection on 0..3999, so ids never collide)."""
    return 25_000 + (index * 7919) % 4000
