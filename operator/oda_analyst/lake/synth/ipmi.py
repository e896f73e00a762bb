"""IPMI values per node on its 20 s grid: power, temperatures following power, fans, supplies."""

from __future__ import annotations

import re

import numpy as np
from numpy.typing import NDArray

from oda_analyst.lake import topology
from oda_analyst.lake.synth import noise
from oda_analyst.lake.synth.frame import NodeFrame

F64 = NDArray[np.float64]

_CORE = re.compile(r"p([01])_core(\d+)_temp")
_DIMM = re.compile(r"dimm(\d+)_temp")
_GPU_T = re.compile(r"gpu(\d)_(core|mem)_temp")
_CARD = re.compile(r"gv100card(\d)")
_FAN = re.compile(r"fan(\d)_([01])")
_PS = re.compile(r"ps([01])_(input_power|input_voltag|output_curre|output_volta)")
_CPU_P = re.compile(r"p([01])_(power|io_power|mem_power|vdd_temp)")


def _offset(f: NodeFrame, name: str, spread: float) -> F64:
    """A constant per (node, sensor) offset: sensors of one kind differ a little."""
    return spread * noise.to_normal(f.keys(name, "offset"))


def _gpu_index(ipmi_index: int) -> int:
    return topology.IPMI_GPU_INDEX.index(ipmi_index)


def gpu_core_temp(f: NodeFrame, g: int) -> F64:
    """GPU core temperature (Ganglia index g), °C: ambient plus a power-driven rise."""
    return f.ambient() + 9.0 + 0.135 * f.gpu_power(g) + _offset(f, f"gpu{g}", 1.5)


def cpu_temp(f: NodeFrame, socket: int) -> F64:
    return f.ambient() + 9.0 + 0.12 * f.cpu_power(socket)


def hottest(f: NodeFrame) -> F64:
    """The temperature the fan controller follows."""
    temps = [cpu_temp(f, s) for s in (0, 1)] + [gpu_core_temp(f, g) for g in range(4)]
    out: F64 = np.maximum.reduce(temps)
    return out


def _ps_share(f: NodeFrame) -> F64:
    """Supply 0's share of the node's input power (node-specific, near one half)."""
    return 0.5 + 0.015 * noise.to_normal(f.keys("ps-share")) + 0.002 * f.white("ps-share-w")


def value(f: NodeFrame, metric: str) -> F64:
    """The value of an IPMI metric on the frame's rows (float; the writer casts)."""
    w = f.white(metric)
    if metric == "total_power":
        return f.total_power()
    if metric == "ambient":
        return f.ambient()
    if metric == "pcie":
        return np.round(f.ambient() + 11.0 + 0.006 * f.total_power() + 0.3 * w, 1)
    if m := _PS.fullmatch(metric):
        ps, kind = int(m.group(1)), m.group(2)
        share = _ps_share(f)
        p0 = np.rint(f.total_power() * share)
        p = p0 if ps == 0 else f.total_power() - p0 + np.rint(1.2 * w)
        if kind == "input_power":
            return p
        if kind == "input_voltag":
            return np.rint(229.0 + 2.0 * f.smooth(3_600_000, "mains") + 0.4 * w)
        if kind == "output_curre":
            return np.rint(p * 0.94 / 12.2)
        return np.round(12.2 + 0.02 * w, 2)
    if m := _CPU_P.fullmatch(metric):
        s, kind = int(m.group(1)), m.group(2)
        if kind == "power":
            return np.rint(f.cpu_power(s))
        if kind == "io_power":
            return np.rint(11.0 + 0.03 * f.cpu_util() + 0.5 * w)
        if kind == "mem_power":
            return np.rint(14.0 + 18.0 * f.mem_used_frac() + 0.05 * f.cpu_util() + 0.7 * w)
        return np.rint(cpu_temp(f, s) - 3.0 + 0.7 * w)
    if m := _CORE.fullmatch(metric):
        s = int(m.group(1))
        return np.rint(cpu_temp(f, s) + _offset(f, metric, 1.8) + 0.8 * w)
    if m := _DIMM.fullmatch(metric):
        rise = 8.0 + 12.0 * f.mem_used_frac() + 0.004 * f.total_power()
        return np.rint(f.ambient() + rise + _offset(f, metric, 1.2) + 0.5 * w)
    if m := _GPU_T.fullmatch(metric):
        g = _gpu_index(int(m.group(1)))
        extra = 0.0 if m.group(2) == "core" else 3.5
        return np.rint(gpu_core_temp(f, g) + extra + 0.6 * w)
    if m := _CARD.fullmatch(metric):
        g = _gpu_index(int(m.group(1)))
        return np.rint(gpu_core_temp(f, g) - 4.0 + 0.6 * w)
    if m := _FAN.fullmatch(metric):
        base = 4350.0 if m.group(2) == "0" else 4700.0
        rpm = base + 45.0 * np.maximum(hottest(f) - 45.0, 0.0) + _offset(f, metric, 60.0)
        return np.rint(rpm + 25.0 * w)
    if metric == "fan_disk_power":
        return np.rint(32.0 + 0.25 * np.maximum(hottest(f) - 45.0, 0.0) + 0.8 * w)
    raise KeyError(metric)
