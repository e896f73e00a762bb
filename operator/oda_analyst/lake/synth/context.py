"""Shared state of one generation window: the job schedule and per-node constants.

Node constants (idle power, inlet temperature, the few hot nodes) are hash draws per node, and
the schedule covers all 980 nodes, so system aggregates (IT power, Slurm totals) never depend on
which nodes or which window were asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np
from numpy.typing import NDArray

from oda_analyst.lake import topology
from oda_analyst.lake.synth import jobs, noise

I64 = NDArray[np.int64]
F64 = NDArray[np.float64]

_SHIFT = np.int64(1 << 40)
GPU_IDLE_W = 38.0
GPU_W_PER_UTIL = 2.45
CPU_IDLE_W = 48.0
CPU_W_PER_UTIL = 2.1
IDLE_CPU_UTIL = 0.45
N_HOT_NODES = 2


@dataclass(frozen=True)
class NodeConstants:
    """Per-node constants, indexed by node id."""

    base_w: F64  # idle power of everything but CPUs and GPUs
    ambient: F64  # mean inlet temperature
    hot: NDArray[np.bool_]


@lru_cache(maxsize=4)
def node_constants(seed: int) -> NodeConstants:
    ids = range(topology.N_NODES)
    base = np.array([135.0 + 55.0 * noise.scalar_unit(seed, "base-w", n) for n in ids])
    row = np.array([topology.rack_position(topology.rack_of(n))[0] for n in ids], dtype=float)
    amb = np.array([23.5 + 0.7 * noise.scalar_normal(seed, "ambient", n) for n in ids])
    amb = np.clip(amb + 0.35 * (row - 1.0), 17.5, 29.5)
    order = sorted(ids, key=lambda n: noise.key(seed, "hot-node", n))
    hot = np.zeros(topology.N_NODES, dtype=bool)
    hot[order[:N_HOT_NODES]] = True
    for n in order[:N_HOT_NODES]:
        amb[n] = 40.8 + 1.2 * noise.scalar_unit(seed, "hot-ambient", n)
    return NodeConstants(base_w=base, ambient=amb, hot=hot)


def idle_power_w(base_w: F64) -> F64:
    """Expected power of an idle node."""
    return base_w + 2 * (CPU_IDLE_W + CPU_W_PER_UTIL * IDLE_CPU_UTIL) + 4 * GPU_IDLE_W


class Schedule:
    """The jobs of a window and fast (node, time) -> running job lookups."""

    def __init__(self, seed: int, t0: int, t1: int) -> None:
        self.seed = seed
        self.t0, self.t1 = t0, t1
        self.jobs = jobs.jobs_in(seed, t0, t1)
        node, start, end, job = self.jobs.intervals()
        self.i_node, self.i_start, self.i_end, self.i_job = node, start, end, job
        self._ikey = node * _SHIFT + (start - jobs.BASE_MS)
        self.const = node_constants(seed)

    def running(self, node: I64, t: I64) -> I64:
        """Index of the job running on ``node`` at ``t`` for every row, -1 when idle."""
        if len(self._ikey) == 0:
            return np.full(len(t), -1, dtype=np.int64)
        skey = node * _SHIFT + (t - jobs.BASE_MS)
        idx = np.searchsorted(self._ikey, skey, side="right") - 1
        safe = np.maximum(idx, 0)
        ok = (idx >= 0) & (self.i_node[safe] == node) & (t < self.i_end[safe])
        return np.where(ok, self.i_job[safe], -1)

    @cached_property
    def job_power_w(self) -> I64:
        """Expected (noise-free) power of each job's node above the node's idle power, in W."""
        js = self.jobs
        gpu = (GPU_W_PER_UTIL * js.gpu_level).sum(axis=1)
        cpu = 2 * CPU_W_PER_UTIL * (js.cpu_level - IDLE_CPU_UTIL)
        out: I64 = np.rint(gpu + cpu).astype(np.int64)
        return out

    def covering_sum(self, t: I64, weight: I64) -> I64:
        """Sum of integer interval weights over the node intervals covering each t (exact)."""
        order_s = np.argsort(self.i_start, kind="stable")
        order_e = np.argsort(self.i_end, kind="stable")
        cs = np.concatenate([[0], np.cumsum(weight[order_s])])
        ce = np.concatenate([[0], np.cumsum(weight[order_e])])
        n_s = np.searchsorted(self.i_start[order_s], t, side="right")
        n_e = np.searchsorted(self.i_end[order_e], t, side="right")
        out: I64 = cs[n_s] - ce[n_e]
        return out

    def covering_count(self, t: I64, weight: I64 | None = None) -> I64:
        """Number (or weighted sum) of node intervals running at each t."""
        w = np.ones(len(self.i_job), np.int64) if weight is None else weight
        return self.covering_sum(t, w)

    def it_power_w(self, t: I64) -> F64:
        """Expected total IT power of the 980 nodes at each t, in W."""
        idle = float(idle_power_w(self.const.base_w).sum())
        return idle + self.covering_sum(t, self.job_power_w[self.i_job]).astype(np.float64)

    def down_count(self, t: I64) -> I64:
        js = self.jobs
        s = np.sort(js.down_start)
        e = np.sort(js.down_end)
        return np.searchsorted(s, t, side="right") - np.searchsorted(e, t, side="right")


@lru_cache(maxsize=4)
def schedule(seed: int, t0: int, t1: int) -> Schedule:
    """The schedule of a window (cached: every plugin of one window shares it)."""
    return Schedule(seed, t0, t1)
