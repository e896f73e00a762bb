"""The job schedule: window-independent, rack by rack, in fixed 48-hour blocks.

Each (rack, block) is simulated alone by a numpy Generator seeded with (seed, rack, block): Poisson
arrivals, a FIFO list scheduler over the rack's 20 nodes, lognormal durations up to the time
limit. Jobs never cross a block end, so a block needs no knowledge of its predecessor; racks use
different block offsets so the boundary effect is spread over time instead of hitting the whole
system at once. Three jobs that the paper's Appendix A names are pinned on 1 June 2022.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from oda_analyst.lake import topology
from oda_analyst.lake.synth import noise

I64 = NDArray[np.int64]

MINUTE = 60_000
HOUR = 3_600_000
BLOCK_MS = 48 * HOUR
BASE_MS = int(datetime(2019, 12, 30, tzinfo=UTC).timestamp() * 1000)
N_BLOCKS = 512  # 9 bits of the job-id space: blocks cover 2019-12-30 .. 2022-10-27
VALID_FROM_MS = int(datetime(2020, 1, 1, tzinfo=UTC).timestamp() * 1000)
VALID_TO_MS = int(datetime(2022, 10, 20, tzinfo=UTC).timestamp() * 1000)

STATES = ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "OUT_OF_MEMORY", "NODE_FAIL")
COMPLETED, FAILED, TIMEOUT, CANCELLED, OOM, NODE_FAIL = range(6)
PARTITIONS = ("m100_usr_prod", "m100_usr_dbg", "m100_all_serial")
PROD, DBG, SERIAL = range(3)
QOS = ("1", "2", "3", "4")
N_USERS = 320
MAX_SEQ = 500

# Arrival rate per rack and hour, tuned so that ~80 % of node time is allocated.
_ARRIVALS_PER_RACK_HOUR = 3.8
_PROD_LIMITS = [60, 120, 240, 480, 720, 1440]
_PROD_LIMIT_CDF = [0.14, 0.3, 0.5, 0.7, 0.82, 1.0]
_MULTI_SIZES = [2, 3, 4, 6, 8, 12, 16]
_MULTI_CDF = [0.3, 0.45, 0.65, 0.75, 0.87, 0.95, 1.0]
_GPU_CDF = [0.2, 0.35, 0.45, 1.0]
_CPU_CHOICES = [1, 4, 8, 16, 32, 64, 128]
_CPU_CDF = [1 / 7 * (i + 1) for i in range(7)]
_POLL_CDF = [0.2, 0.7, 1.0]
_USER_CDF = (np.cumsum(1.0 / np.arange(1, N_USERS + 1) ** 1.05)).tolist()
_USER_CDF = [c / _USER_CDF[-1] for c in _USER_CDF]


def _pick(u: float, values: list[int], cdf: list[float]) -> int:
    """Inverse-CDF choice from one uniform draw."""
    for value, c in zip(values, cdf, strict=True):
        if u < c:
            return value
    return values[-1]


def _ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


@dataclass(frozen=True)
class Pinned:
    """A job the paper's questions name: its id, run interval and GPU levels are fixed."""

    job_id: int
    start_ms: int
    end_ms: int
    gpu_level: tuple[int, int, int, int]
    gpus: int
    cpu_level: int
    amp: int
    user: int


PINNED: tuple[Pinned, ...] = (
    Pinned(
        3423336,
        _ms("2022-06-01T01:12:00"),
        _ms("2022-06-01T21:47:00"),
        (88, 85, 90, 84),
        4,
        30,
        4,
        3,
    ),
    Pinned(
        4835969,
        _ms("2022-06-01T03:40:00"),
        _ms("2022-06-01T23:10:00"),
        (55, 49, 60, 52),
        4,
        22,
        20,
        17,
    ),
    Pinned(
        3776044,
        _ms("2022-05-31T22:05:00"),
        _ms("2022-06-01T19:30:00"),
        (71, 66, 0, 0),
        2,
        40,
        10,
        42,
    ),
)
NAMED_IDS = frozenset(p.job_id for p in PINNED)


def rack_offset(rack: int) -> int:
    """Start offset of a rack's blocks, spread over the block length."""
    return ((rack * 29) % topology.N_RACKS) * BLOCK_MS // topology.N_RACKS // MINUTE * MINUTE


def block_start(rack: int, block: int) -> int:
    return BASE_MS + rack_offset(rack) + block * BLOCK_MS


def blocks_overlapping(rack: int, t0: int, t1: int) -> range:
    """Blocks of a rack that intersect [t0, t1)."""
    first = (t0 - BASE_MS - rack_offset(rack)) // BLOCK_MS
    last = (t1 - 1 - BASE_MS - rack_offset(rack)) // BLOCK_MS
    return range(max(0, first), min(N_BLOCKS - 1, last) + 1)


def _perm24(x: I64, seed: int) -> I64:
    """A bijection on 24-bit integers (invertible multiply / xor-shift steps)."""
    m = (1 << 24) - 1
    x = (x ^ (noise.key(seed, "job-id") & m)) & m
    x = (x * 0x9E3779) & m
    x ^= x >> 13
    x = (x * 0x5BD1E9) & m
    x ^= x >> 11
    return x


def natural_ids(seed: int, block: int, rack: int, seq: I64) -> I64:
    packed = (np.int64(block) << 15) | (np.int64(rack) << 9) | seq.astype(np.int64)
    return _perm24(packed, seed) + 1_000_000


@lru_cache(maxsize=8)
def _pinned_places(seed: int) -> dict[tuple[int, int], tuple[tuple[int, int, Pinned], ...]]:
    """(rack, block) -> ((slot, seq, pinned), ...): each named job on its own rack."""
    order = sorted(range(topology.N_RACKS), key=lambda r: noise.key(seed, "pin-rack", r))
    used: set[int] = set()
    places: dict[tuple[int, int], list[tuple[int, int, Pinned]]] = {}
    for i, pin in enumerate(PINNED):
        for rack in order:
            if rack in used:
                continue
            (block,) = blocks_overlapping(rack, pin.start_ms, pin.start_ms + 1)
            bs = block_start(rack, block)
            if bs <= pin.start_ms - 2 * HOUR and bs + BLOCK_MS >= pin.end_ms + 2 * HOUR:
                used.add(rack)
                slot = noise.key(seed, "pin-slot", i) % topology.NODES_PER_RACK
                places.setdefault((rack, block), []).append((slot, MAX_SEQ + i, pin))
                break
    return {k: tuple(v) for k, v in places.items()}


@lru_cache(maxsize=8)
def id_swaps(seed: int) -> dict[int, int]:
    """Natural id -> final id for the named jobs and the jobs whose natural id they take.

    The natural-id map is a bijection; renaming three jobs and handing their natural ids to any
    job that would otherwise collide keeps it one.
    """
    naturals: list[int] = []
    for (rack, block), pins in _pinned_places(seed).items():
        for _slot, seq, _pin in pins:
            naturals.append(int(natural_ids(seed, block, rack, np.array([seq]))[0]))
    named = [p.job_id for p in PINNED][: len(naturals)]
    swaps = dict(zip(naturals, named, strict=True))
    spare = sorted(set(naturals) - set(named))
    for target in sorted(set(named) - set(naturals)):
        swaps[target] = spare.pop(0)
    return swaps


@dataclass
class JobSet:
    """Columns of a set of jobs (one row per job) and their node lists (CSR)."""

    job_id: I64
    user: I64
    submit: I64
    start: I64  # -1: never started
    end: I64
    limit_min: I64
    state: I64
    partition: I64
    qos: I64
    num_nodes: I64
    cpus_pn: I64
    gpus_pn: I64
    mem_pn: I64
    gpu_level: I64  # (n, 4) percent
    cpu_level: I64  # percent of the node
    amp: I64  # smooth-noise amplitude, utilisation points
    fb_frac: I64  # GPU memory used, percent
    polls: I64
    node_ptr: I64
    node_ids: I64
    down_node: I64  # drained nodes: (node, start, end)
    down_start: I64
    down_end: I64

    def __len__(self) -> int:
        return len(self.job_id)

    def nodes_of(self, i: int) -> I64:
        return self.node_ids[self.node_ptr[i] : self.node_ptr[i + 1]]

    def overlapping(self, t0: int, t1: int) -> NDArray[np.bool_]:
        """Jobs whose run (or, never started, whose life in the queue) overlaps [t0, t1)."""
        begin = np.where(self.start >= 0, self.start, self.submit)
        return (begin < t1) & (self.end > t0)

    def intervals(self) -> tuple[I64, I64, I64, I64]:
        """Node-level run intervals (node, start, end, job index), sorted by node then start."""
        counts = np.diff(self.node_ptr)
        job = np.repeat(np.arange(len(self), dtype=np.int64), counts)
        node = self.node_ids
        order = np.lexsort((self.start[job], node))
        return node[order], self.start[job][order], self.end[job][order], job[order]


_FIELDS = [f for f in JobSet.__dataclass_fields__ if f not in ("node_ptr", "node_ids")]


_N_U = 14  # uniforms per job
_N_Z = 5  # normals per job


class _Draws:
    """Pre-drawn random numbers of a block, consumed one job at a time (fast scalar access)."""

    def __init__(self, rng: np.random.Generator, n: int) -> None:
        self.u = rng.random((n, _N_U)).tolist()
        self.z = rng.standard_normal((n, _N_Z)).tolist()
        self.beta = rng.beta(1.3, 1.5, n).tolist()
        self.i = 0

    def next(self) -> tuple[list[float], list[float], float]:
        i = self.i
        self.i += 1
        return self.u[i], self.z[i], self.beta[i]


def _draw(draws: _Draws, single: bool) -> dict[str, Any]:
    """Attributes of one job (everything but its placement)."""
    u, z, beta = draws.next()
    if u[0] < 0.07:
        part, limit, k, qos = DBG, 30, 1 if u[1] < 0.8 else 2, 1
    elif u[0] < 0.13:
        part, limit, k, qos = SERIAL, 240, 1, 0
    else:
        part = PROD
        limit = _pick(u[2], _PROD_LIMITS, _PROD_LIMIT_CDF)
        k = 1 if u[1] < 0.82 else _pick(u[3], _MULTI_SIZES, _MULTI_CDF)
        qos = 0 if u[4] < 0.85 else (2 if u[4] < 0.95 else 3)
    if single:
        k = 1
    dur = min(0.35 * limit * math.exp(0.9 * z[0]), limit * 0.99)
    r = u[5]
    state = COMPLETED
    if r < 0.07:
        state, dur = TIMEOUT, float(limit)
    elif r < 0.14:
        state, dur = FAILED, dur * 0.3
    elif r < 0.19:
        state, dur = CANCELLED, dur * 0.5
    elif r < 0.21:
        state, dur = OOM, dur * 0.4
    elif r < 0.225:
        state, dur = NODE_FAIL, dur * 0.6
    never = r > 0.98 and not single
    if part == SERIAL:
        gpus = 0
    elif k > 1:
        gpus = 4
    else:
        gpus = _pick(u[6], [0, 1, 2, 4], _GPU_CDF)
    if k > 1 or u[7] < 0.3:
        cpus = 128
    elif gpus:
        cpus = 32 * gpus
    else:
        cpus = _pick(u[8], _CPU_CHOICES, _CPU_CDF)
    base = 0.0 if u[9] < 0.12 else 100.0 * beta
    levels = [
        min(100, max(1, int(base + 6.0 * z[1 + g]))) if g < gpus and base > 0 else 0
        for g in range(4)
    ]
    intensity = 0.15 + 0.45 * u[10] if gpus else 0.5 + 0.5 * u[10]
    return {
        "user": bisect.bisect_right(_USER_CDF, u[11]),
        "limit_min": limit,
        "dur_ms": max(20_000, int(dur * 60) * 1000),
        "state": CANCELLED if never else state,
        "never": int(never),
        "partition": part,
        "qos": qos,
        "num_nodes": k,
        "cpus_pn": cpus,
        "gpus_pn": gpus,
        "mem_pn": min(cpus * 1850, 237_000),
        "gpu_level": levels,
        "cpu_level": round(100 * cpus / 128 * intensity),
        "amp": 2 + int(14 * u[12]),
        "fb_frac": 10 + int(85 * u[13]) if gpus else 0,
        "polls": _pick((u[12] * 7919.0) % 1.0, [2, 3, 4], _POLL_CDF),
    }


def _fill_node(
    rng: np.random.Generator, node: int, t_from: int, t_to: int, out: list[dict[str, Any]]
) -> None:
    draws = _Draws(rng, 64)
    """Single-node jobs back to back (with idle gaps) on a node reserved around a pinned job."""
    t = t_from + int(rng.integers(1, 30)) * MINUTE
    while t < t_to - 15 * MINUTE and draws.i < 64:
        job = _draw(draws, single=True)
        job["never"], job["state"] = 0, job["state"]
        dur = min(int(job["dur_ms"]), t_to - t - 5 * MINUTE)
        if dur < 10 * MINUTE:
            break
        if dur < int(job["dur_ms"]) and job["state"] == TIMEOUT:
            job["state"] = COMPLETED
        job.update(
            submit=t - int(rng.integers(10, 3600)) * 1000, start=t, end=t + dur, nodes=[node]
        )
        out.append(job)
        t = t + dur + int(rng.exponential(20 * MINUTE))


@lru_cache(maxsize=4096)
def rack_block(seed: int, rack: int, block: int) -> JobSet:
    """Every job of one rack in one 48-hour block."""
    bs = block_start(rack, block)
    be = bs + BLOCK_MS
    rng = np.random.default_rng([seed & 0xFFFFFFFF, seed >> 32, rack, block, 0x10B5])
    nodes = np.array(topology.nodes_of_rack(rack), dtype=np.int64)
    free = np.full(len(nodes), bs, dtype=np.int64)
    drained = rng.random(len(nodes)) < 0.03
    drain_len = rng.uniform(2 * HOUR, 18 * HOUR, len(nodes)).astype(np.int64)
    free[drained] += drain_len[drained]
    pins = _pinned_places(seed).get((rack, block), ())
    pool = np.ones(len(nodes), dtype=bool)
    for slot, _seq, _pin in pins:
        pool[slot] = False
    pool_idx = np.flatnonzero(pool)
    hole_s = np.zeros(len(nodes), dtype=np.int64)
    hole_e = np.zeros(len(nodes), dtype=np.int64)

    jobs: list[dict[str, Any]] = []
    n_arr = min(int(rng.poisson(_ARRIVALS_PER_RACK_HOUR * 48)), MAX_SEQ - 60)
    arrivals = np.sort(rng.integers(bs // 1000, (be - 10 * MINUTE) // 1000, n_arr)) * 1000
    draws = _Draws(rng, n_arr)
    for arrival in arrivals:
        job = _draw(draws, single=False)
        submit = int(arrival)
        if job["never"]:
            job.update(
                submit=submit,
                start=-1,
                end=submit + int(rng.integers(60, 3 * 3600)) * 1000,
                nodes=[],
            )
            jobs.append(job)
            continue
        k = min(int(job["num_nodes"]), len(pool_idx))
        dur = int(job["dur_ms"])
        delay = int(rng.integers(1, 60)) * 1000
        if k == 1:
            # Backfill: a single-node job may run in the idle hole before a wide job's start.
            fits = np.flatnonzero(
                np.maximum(hole_s[pool_idx], submit) + delay + dur <= hole_e[pool_idx]
            )
            if len(fits):
                slot = pool_idx[fits[0]]
                start = max(submit, int(hole_s[slot])) + delay
                job.update(submit=submit, start=start, end=start + dur, nodes=[int(nodes[slot])])
                hole_s[slot] = start + dur + int(rng.integers(5, 180)) * 1000
                jobs.append(job)
                continue
        chosen = pool_idx[np.argsort(free[pool_idx], kind="stable")[:k]]
        start = max(submit, int(free[chosen].max())) + delay
        if start + dur > be:
            if be - start < 15 * MINUTE:
                continue  # would not start before the block ends: never submitted here
            dur = be - start - int(rng.integers(1, 10)) * MINUTE
            if job["state"] == TIMEOUT:
                job["state"] = COMPLETED
        if k > 1:
            waiting = chosen[free[chosen] < start - 20 * MINUTE]
            hole_s[waiting], hole_e[waiting] = np.maximum(free[waiting], submit), start - MINUTE
        job.update(
            submit=submit,
            start=start,
            end=start + dur,
            num_nodes=k,
            nodes=sorted(int(n) for n in nodes[chosen]),
        )
        free[chosen] = start + dur + int(rng.integers(5, 180)) * 1000
        jobs.append(job)
    for slot, _seq, pin in pins:
        node = int(nodes[slot])
        _fill_node(rng, node, int(free[slot]), pin.start_ms - 10 * MINUTE, jobs)
        _fill_node(rng, node, pin.end_ms + 5 * MINUTE, be, jobs)

    seq = np.arange(len(jobs), dtype=np.int64)
    cols: dict[str, list[Any]] = {f: [] for f in _FIELDS}
    ptr: list[int] = [0]
    ids: list[int] = []
    for job in jobs:
        for f in _FIELDS:
            if f in job:
                cols[f].append(job[f])
        ids.extend(job["nodes"])
        ptr.append(len(ids))
    for slot, pin_seq, pin in pins:
        seq = np.append(seq, pin_seq)
        values: dict[str, Any] = dict(
            user=pin.user,
            submit=pin.start_ms - 7 * MINUTE,
            start=pin.start_ms,
            end=pin.end_ms,
            limit_min=1440,
            state=COMPLETED,
            partition=PROD,
            qos=0,
            num_nodes=1,
            cpus_pn=128,
            gpus_pn=pin.gpus,
            mem_pn=237_000,
            gpu_level=list(pin.gpu_level),
            cpu_level=pin.cpu_level,
            amp=pin.amp,
            fb_frac=60,
            polls=3,
        )
        for f, v in values.items():
            cols[f].append(v)
        ids.append(int(nodes[slot]))
        ptr.append(len(ids))
    natural = natural_ids(seed, block, rack, seq)
    swaps = id_swaps(seed)
    job_id = np.array([swaps.get(int(x), int(x)) for x in natural], dtype=np.int64)
    n = len(job_id)
    arr = {f: np.array(cols[f], dtype=np.int64) for f in _FIELDS if cols[f] or f == "job_id"}
    return JobSet(
        job_id=job_id,
        user=arr.get("user", np.zeros(0, np.int64)),
        submit=arr["submit"] if n else np.zeros(0, np.int64),
        start=arr["start"] if n else np.zeros(0, np.int64),
        end=arr["end"] if n else np.zeros(0, np.int64),
        limit_min=arr["limit_min"] if n else np.zeros(0, np.int64),
        state=arr["state"] if n else np.zeros(0, np.int64),
        partition=arr["partition"] if n else np.zeros(0, np.int64),
        qos=arr["qos"] if n else np.zeros(0, np.int64),
        num_nodes=arr["num_nodes"] if n else np.zeros(0, np.int64),
        cpus_pn=arr["cpus_pn"] if n else np.zeros(0, np.int64),
        gpus_pn=arr["gpus_pn"] if n else np.zeros(0, np.int64),
        mem_pn=arr["mem_pn"] if n else np.zeros(0, np.int64),
        gpu_level=arr["gpu_level"].reshape(n, 4) if n else np.zeros((0, 4), np.int64),
        cpu_level=arr["cpu_level"] if n else np.zeros(0, np.int64),
        amp=arr["amp"] if n else np.zeros(0, np.int64),
        fb_frac=arr["fb_frac"] if n else np.zeros(0, np.int64),
        polls=arr["polls"] if n else np.zeros(0, np.int64),
        node_ptr=np.array(ptr, dtype=np.int64),
        node_ids=np.array(ids, dtype=np.int64),
        down_node=nodes[drained],
        down_start=np.full(int(drained.sum()), bs, dtype=np.int64),
        down_end=bs + drain_len[drained],
    )


def concat(parts: list[JobSet]) -> JobSet:
    """One JobSet from several (node lists re-based)."""
    fields = {}
    for f in _FIELDS:
        arrays = [getattr(p, f) for p in parts]
        fields[f] = np.concatenate(arrays) if arrays else np.zeros(0, np.int64)
    if not parts:
        fields["gpu_level"] = np.zeros((0, 4), np.int64)
    ptrs, offset = [np.zeros(1, np.int64)], 0
    for p in parts:
        ptrs.append(p.node_ptr[1:] + offset)
        offset += len(p.node_ids)
    node_ids = [p.node_ids for p in parts]
    return JobSet(
        node_ptr=np.concatenate(ptrs),
        node_ids=np.concatenate(node_ids) if node_ids else np.zeros(0, np.int64),
        **fields,
    )


def jobs_in(seed: int, t0: int, t1: int, racks: range | None = None) -> JobSet:
    """All jobs of the blocks that intersect [t0, t1) (a superset of the overlapping jobs)."""
    chosen = range(topology.N_RACKS) if racks is None else racks
    parts = [rack_block(seed, r, b) for r in chosen for b in blocks_overlapping(r, t0, t1)]
    return concat(parts)
