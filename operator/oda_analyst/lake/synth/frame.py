"""Latent per-node state on a sampling grid: the running job, utilisation and power.

IPMI and Ganglia sample different grids but evaluate the same functions of (node, time), so a
GPU's utilisation in Ganglia and its power in IPMI agree wherever both are sampled.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from oda_analyst.lake.synth import context, noise
from oda_analyst.lake.synth.context import Schedule

I64 = NDArray[np.int64]
F64 = NDArray[np.float64]
U64 = NDArray[np.uint64]

DAY_MS = 86_400_000
FIVE_MIN = 300_000


def diurnal(t: I64, peak_hour_utc: float = 14.0) -> F64:
    """Cosine day cycle in [-1, 1] with its maximum at ``peak_hour_utc``."""
    phase = (t % DAY_MS).astype(np.float64) / DAY_MS - peak_hour_utc / 24.0
    return np.cos(2.0 * np.pi * phase)


class NodeFrame:
    """Rows (node, t) of one grid for a chunk of nodes, entity-major, with cached latents."""

    def __init__(self, sched: Schedule, nodes: I64, ent: I64, t: I64) -> None:
        self.sched = sched
        self.seed = sched.seed
        self.nodes = nodes  # the chunk's node ids
        self.ent = ent  # position in ``nodes`` of each row
        self.node = nodes[ent]
        self.t = t
        self.job = sched.running(self.node, t)
        self.busy = self.job >= 0
        self._cache: dict[str, Any] = {}

    def __len__(self) -> int:
        return len(self.t)

    def keys(self, *parts: int | str) -> U64:
        """Per-row noise keys for a (name, ...) coordinate of each row's node."""
        name = "/".join(str(p) for p in parts)
        cache_key = "k:" + name
        if cache_key not in self._cache:
            self._cache[cache_key] = noise.keys(noise.key(self.seed, name), self.nodes)[self.ent]
        out: U64 = self._cache[cache_key]
        return out

    def white(self, *parts: int | str) -> F64:
        return noise.normal(self.keys(*parts), self.t)

    def smooth(self, knot_ms: int, *parts: int | str) -> F64:
        return noise.smooth(self.keys(*parts), self.t, knot_ms)

    def job_attr(self, values: I64, idle: int = 0) -> I64:
        """A job attribute per row (``idle`` where no job runs)."""
        if len(values) == 0:
            return np.full(len(self.t), idle, dtype=np.int64)
        return np.where(self.busy, values[np.maximum(self.job, 0)], idle)

    def _cached(self, name: str, build: Any) -> F64:
        if name not in self._cache:
            self._cache[name] = build()
        out: F64 = self._cache[name]
        return out

    def gpu_util(self, g: int) -> F64:
        """GPU g (Ganglia index 0..3) utilisation, percent: job level + smooth + white noise."""

        def build() -> F64:
            level = self.job_attr(self.sched.jobs.gpu_level[:, g]).astype(np.float64)
            amp = self.job_attr(self.sched.jobs.amp).astype(np.float64)
            value = level + 0.6 * amp * self.smooth(FIVE_MIN, "gpu-util", g)
            value += 2.5 * self.white("gpu-util-w", g)
            return np.where(level > 0, np.clip(value, 1.0, 100.0), 0.0)

        return self._cached(f"gpu{g}", build)

    def cpu_util(self) -> F64:
        """CPU utilisation of the node (user + system), percent."""

        def build() -> F64:
            level = self.job_attr(self.sched.jobs.cpu_level).astype(np.float64)
            amp = self.job_attr(self.sched.jobs.amp).astype(np.float64)
            busy = level + 0.4 * amp * self.smooth(FIVE_MIN, "cpu-util") + 1.5 * self.white("cpu-w")
            idle = context.IDLE_CPU_UTIL + 0.3 * noise.uniform(self.keys("cpu-idle"), self.t)
            return np.where(self.busy, np.clip(busy, 0.5, 100.0), idle)

        return self._cached("cpu", build)

    def gpu_power(self, g: int) -> F64:
        """Power of GPU g, W."""

        def build() -> F64:
            util = self.gpu_util(g)
            p = context.GPU_IDLE_W + context.GPU_W_PER_UTIL * util + 1.5 * self.white("gpu-p", g)
            return np.asarray(p, dtype=np.float64)

        return self._cached(f"gpu-p{g}", build)

    def cpu_power(self, socket: int) -> F64:
        """Power of CPU socket 0 or 1, W."""

        def build() -> F64:
            scale = 1.0 + 0.04 * (socket - 0.5)
            p = context.CPU_IDLE_W + context.CPU_W_PER_UTIL * scale * self.cpu_util()
            return np.asarray(p + 1.5 * self.white("cpu-p", socket), dtype=np.float64)

        return self._cached(f"cpu-p{socket}", build)

    def total_power(self) -> F64:
        """Node input power, W: idle base + CPU part + GPU part + noise."""

        def build() -> F64:
            base = self.sched.const.base_w[self.node]
            gpus = sum(self.gpu_power(g) for g in range(4))
            p = base + self.cpu_power(0) + self.cpu_power(1) + gpus + 6.0 * self.white("total-w")
            return np.rint(p)

        return self._cached("total", build)

    def ambient(self) -> F64:
        """Inlet temperature, °C: node mean, a slight day cycle and noise (0.1 °C steps)."""

        def build() -> F64:
            mean = self.sched.const.ambient[self.node]
            wiggle = 0.3 * diurnal(self.t) + 0.2 * self.smooth(10 * 60_000, "amb-s")
            value = mean + wiggle + 0.05 * self.white("amb-w")
            hot = self.sched.const.hot[self.node]
            value = np.where(hot, np.clip(value, 40.1, 42.9), np.minimum(value, 30.4))
            return np.round(value, 1)

        return self._cached("ambient", build)

    def mem_used_frac(self) -> F64:
        """Host memory in use, fraction (job footprint plus the OS)."""

        def build() -> F64:
            cpus = self.job_attr(self.sched.jobs.cpus_pn).astype(np.float64)
            fill = 0.3 + 0.5 * noise.uniform(
                self.keys("mem-fill"), self.job_attr(self.sched.jobs.job_id)
            )
            return 0.04 + np.where(self.busy, cpus / 128.0 * fill, 0.0)

        return self._cached("mem", build)
