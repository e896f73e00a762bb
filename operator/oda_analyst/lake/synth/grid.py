"""Sampling grids on absolute time: ``k * period + phase (+ jitter)`` per entity.

Grids are anchored at the Unix epoch, never at the window start, so slicing a window out of
them gives the same timestamps whatever window was asked for.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from oda_analyst.lake.synth import noise

I64 = NDArray[np.int64]
U64 = NDArray[np.uint64]


def phases(base_key: int, entities: I64 | list[int], period_ms: int, step_ms: int = 1000) -> I64:
    """A hash-chosen phase in [0, period) per entity, a multiple of ``step_ms``."""
    h = noise.keys(base_key, list(entities))
    steps = max(1, period_ms // step_ms)
    return ((h % np.uint64(steps)).astype(np.int64)) * step_ms


def entity_grid(
    start_ms: int,
    end_ms: int,
    period_ms: int,
    phase_ms: I64,
    jitter_keys: U64 | None = None,
    jitter_frac: float = 0.0,
) -> tuple[I64, I64]:
    """Rows (entity position, timestamp ms) of every sample in [start, end), entity-major.

    With ``jitter_keys`` each sample moves forward by a hash-drawn fraction (< jitter_frac) of the
    period, which keeps timestamps increasing per entity (ganglia's irregular cadence).
    """
    n = len(phase_ms)
    if n == 0 or end_ms <= start_ms:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    max_jit = int(period_ms * jitter_frac)
    k_lo = np.floor_divide(start_ms - phase_ms - max_jit, period_ms)
    k_hi = np.floor_divide(end_ms - 1 - phase_ms, period_ms)
    counts = np.maximum(k_hi - k_lo + 1, 0)
    ent = np.repeat(np.arange(n, dtype=np.int64), counts)
    offsets = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(
        np.cumsum(counts) - counts, counts
    )
    k = np.repeat(k_lo, counts) + offsets
    t = k * period_ms + phase_ms[ent]
    if jitter_keys is not None and max_jit > 0:
        t = t + (noise.uniform(jitter_keys[ent], k) * max_jit).astype(np.int64)
    keep = (t >= start_ms) & (t < end_ms)
    return ent[keep], t[keep]


def global_grid(start_ms: int, end_ms: int, period_ms: int, phase_ms: int = 0) -> I64:
    """Timestamps of a single untagged series in [start, end)."""
    first = -((-(start_ms - phase_ms)) // period_ms) * period_ms + phase_ms
    return np.arange(first, end_ms, period_ms, dtype=np.int64)
