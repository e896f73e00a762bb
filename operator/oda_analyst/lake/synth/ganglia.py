"""Ganglia values per node: 36 GPU stems x 4 GPUs on a ~20 s grid, node metrics at their periods."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from oda_analyst.lake.synth import context, jobs, noise
from oda_analyst.lake.synth.frame import NodeFrame

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
Value = F64 | str

FB_TOTAL_MB = 16_160
MEM_TOTAL_KB = 261_616_768.0
STRINGS = {
    "os_name": "Linux",
    "os_release": "4.18.0-147.51.2.el8_1.ppc64le",
    "machine_type": "ppc64le",
    "gexec": "OFF",
}
_CONSTANTS = {
    "fb_total": float(FB_TOTAL_MB),
    "power_management_limit": 300.0,
    "mem_app_clock": 877.0,
    "sm_app_clock": 1530.0,
    "gpu_util_samples": 6.0,
}
_RARE_COUNTERS = (
    "ecc_dbe_aggregate_total",
    "ecc_dbe_volatile_total",
    "ecc_sbe_aggregate_total",
    "ecc_sbe_volatile_total",
    "retired_pages_dbe",
    "retired_pages_pending",
    "retired_pages_sbe",
    "nvlink_data_crc_error_count_total",
    "nvlink_flit_crc_error_count_total",
    "nvlink_recovery_error_count_total",
    "nvlink_replay_error_count_total",
)
_VIOLATIONS = (
    "board_limit_violation",
    "low_util_violation",
    "power_violation",
    "reliability_violation",
    "sync_boost_violation",
    "thermal_violation",
)
_BOOT_PERIOD_MS = 41 * 86_400_000


def _rare_count(f: NodeFrame, name: str) -> F64:
    """Counters that are zero on almost every GPU and a small constant on a few."""
    u = noise.to_unit(f.keys(name, "rare"))
    return np.where(u < 0.01, np.floor(1.0 + 40.0 * u * 100.0), 0.0)


def energy_mj(f: NodeFrame, g: int) -> F64:
    """Cumulative GPU energy, mJ: closed form so it is window-independent and never decreases.

    Within a 48 h block it is the exact integral of the expected power (idle draw plus each
    job's level); at a block start it resumes from a reference that advances at 300 W, the
    power cap, so a counter never runs backwards across blocks.
    """
    sched = f.sched
    rack = f.node // 20
    offs = np.array([jobs.rack_offset(r) for r in range(49)], dtype=np.int64)[rack]
    bidx = np.floor_divide(f.t - jobs.BASE_MS - offs, jobs.BLOCK_MS)
    bstart = jobs.BASE_MS + offs + bidx * jobs.BLOCK_MS
    ref = (bstart - jobs.BASE_MS) * 300 + noise.to_unit(f.keys("energy0", g)) * 1e12
    idle = context.GPU_IDLE_W * (f.t - bstart)
    # Work above idle of the jobs that ran on this node since the block start (exact, integers).
    extra = np.zeros(len(f.t), dtype=np.float64)
    w = np.rint(context.GPU_W_PER_UTIL * sched.jobs.gpu_level[:, g]).astype(np.int64)
    i_node, i_start, i_end, i_job = sched.i_node, sched.i_start, sched.i_end, sched.i_job
    for pos, node in enumerate(f.nodes):
        rows = np.flatnonzero(f.ent == pos)
        if len(rows) == 0:
            continue
        sel = np.flatnonzero(i_node == node)
        s, e, wj = i_start[sel], i_end[sel], w[i_job[sel]]
        t = f.t[rows][:, None]
        lo = np.maximum(s[None, :], bstart[rows][:, None])
        done = np.clip(np.minimum(e[None, :], t) - lo, 0, None)
        extra[rows] = (done * wj[None, :]).sum(axis=1)
    out: F64 = np.floor(ref + idle + extra)
    return out


def gpu_value(f: NodeFrame, g: int, stem: str) -> F64:
    util = f.gpu_util(g)
    busy = util > 0
    w = f.white(f"Gpu{g}_{stem}")
    if stem == "gpu_utilization":
        return np.rint(util)
    if stem == "power_usage":
        return np.round(f.gpu_power(g), 2)
    if stem == "total_energy_consumption":
        return energy_mj(f, g)
    if stem in _CONSTANTS:
        return np.full(len(f), _CONSTANTS[stem])
    if stem in ("gpu_temp", "memory_temp"):
        temp = f.ambient() + 9.0 + 0.135 * f.gpu_power(g) + (0.0 if stem == "gpu_temp" else 3.5)
        return np.rint(temp + 0.6 * w)
    frac = f.job_attr(f.sched.jobs.fb_frac).astype(np.float64)
    used = np.where(f.job_attr(f.sched.jobs.gpus_pn) > g, frac / 100.0 * FB_TOTAL_MB, 0.0)
    if stem == "fb_used":
        return np.rint(used)
    if stem == "fb_free":
        return FB_TOTAL_MB - np.rint(used)
    if stem == "mem_copy_utilization":
        return np.rint(np.clip(0.45 * util + 2.0 * w * busy, 0, 100))
    if stem == "sm_clock":
        return np.where(busy, 1530.0, 135.0)
    if stem == "memory_clock":
        return np.where(busy, 877.0, 405.0)
    if stem == "pstate":
        return np.where(busy, 0.0, 8.0)
    if stem == "current_clock_throttle_reasons":
        return np.where(busy, 0.0, 1.0)
    if stem == "nvlink_bandwidth_total":
        return np.rint(np.where(busy, 40.0 * util * (1.0 + 0.2 * w), 0.0))
    if stem == "xid_errors":
        # Rare Xid events: a few GPUs show an error code for a few hours.
        event = noise.smooth(f.keys("xid", g), f.t, 3_600_000) > 3.2
        return np.where(event, 79.0, 0.0)
    if stem in _RARE_COUNTERS:
        return _rare_count(f, f"Gpu{g}_{stem}")
    if stem in _VIOLATIONS:
        if stem == "power_violation":
            return np.where(f.gpu_power(g) > 270.0, np.rint(1000.0 * (1.0 + w * w)), 0.0)
        return np.zeros(len(f))
    raise KeyError(stem)


def _pct(x: F64) -> F64:
    """A percentage clipped to [0, 100] with one decimal."""
    out: F64 = np.asarray(np.clip(x, 0.0, 100.0), dtype=np.float64).round(1)
    return out


def node_value(f: NodeFrame, metric: str) -> Value:
    if metric in STRINGS:
        return STRINGS[metric]
    cpu = f.cpu_util()
    w = f.white(metric)
    user = _pct(0.9 * cpu + 0.2 * f.white("cpu_user"))
    system = _pct(0.3 + 0.07 * cpu + 0.1 * f.white("cpu_system"))
    if metric == "cpu_user":
        return user
    if metric == "cpu_system":
        return system
    if metric == "cpu_wio":
        return _pct(0.05 + 0.05 * np.abs(w))
    if metric in ("cpu_idle", "cpu_aidle"):
        return _pct(100.0 - user - system - 0.1)
    if metric == "cpu_nice":
        return np.zeros(len(f))
    if metric == "cpu_num":
        return np.full(len(f), 128.0)
    if metric == "cpu_speed":
        return np.full(len(f), 3783.0)
    if metric == "cpu_steal":
        return np.zeros(len(f))
    if metric.startswith("load_"):
        smooth = {"load_one": 0.15, "load_five": 0.07, "load_fifteen": 0.03}[metric]
        load: F64 = np.maximum(1.28 * cpu * (1.0 + smooth * w), 0.0)
        return np.round(load, 2)
    if metric == "proc_run":
        return np.rint(np.maximum(1.28 * cpu * (1.0 + 0.1 * w), 1.0))
    if metric == "proc_total":
        return np.rint(1450.0 + 3.0 * cpu + 10.0 * w)
    if metric == "mem_total":
        return np.full(len(f), MEM_TOTAL_KB)
    used = f.mem_used_frac()
    if metric == "mem_free":
        return np.floor(MEM_TOTAL_KB * (1.0 - used) * (0.7 + 0.01 * w))
    if metric == "mem_cached":
        return np.floor(MEM_TOTAL_KB * (1.0 - used) * 0.28)
    if metric == "mem_buffers":
        return np.full(len(f), 8_192.0)
    if metric == "mem_shared":
        return np.rint(2_000_000.0 + 1_000_000.0 * used)
    if metric in ("swap_free", "swap_total"):
        return np.zeros(len(f))
    if metric in ("bytes_in", "bytes_out", "pkts_in", "pkts_out"):
        scale = 2.0e5 if metric.startswith("bytes") else 400.0
        rate: F64 = np.maximum(scale * (0.02 + cpu / 100.0) * (1.0 + 0.5 * w), 0.0)
        return np.round(rate, 1)
    if metric == "disk_total":
        return np.full(len(f), 439.4)
    if metric == "disk_free":
        return np.round(439.4 * (0.6 + 0.1 * noise.to_unit(f.keys("disk"))), 1)
    if metric == "part_max_used":
        return np.round(35.0 + 10.0 * noise.to_unit(f.keys("disk")), 1)
    if metric == "boottime":
        phase = (noise.to_unit(f.keys("boot")) * _BOOT_PERIOD_MS).astype(np.int64)
        boot = np.floor_divide(f.t - phase, _BOOT_PERIOD_MS) * _BOOT_PERIOD_MS + phase
        seconds: F64 = np.floor(boot / 1000.0)
        return seconds
    raise KeyError(metric)


def value(f: NodeFrame, metric: str) -> Value:
    if metric.startswith("Gpu"):
        return gpu_value(f, int(metric[3]), metric[5:])
    return node_value(f, metric)
