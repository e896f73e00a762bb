"""Facility series driven by the total IT power: room cooling (vertiv), the water loop
(schneider) and the electrical panels (logics)."""

from __future__ import annotations

import math
import re

import numpy as np
from numpy.typing import NDArray

from oda_analyst.lake.synth import noise, weather
from oda_analyst.lake.synth.context import Schedule

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
Value = F64 | str

NOMINAL_IT_W = 800_000.0
DAY_MS = 86_400_000
HOUR_MS = 3_600_000


def load(sched: Schedule, t: I64) -> F64:
    """IT power relative to a nominal 800 kW."""
    return sched.it_power_w(t) / NOMINAL_IT_W


def _const(seed: int, *parts: str | int) -> float:
    return noise.scalar_unit(seed, *parts)


# ---------------------------------------------------------------- vertiv (room air units)
def vertiv(sched: Schedule, device: str, metric: str, t: I64) -> F64:
    seed = sched.seed
    ld = load(sched, t)
    t_out = weather.temperature(seed, t)
    k = noise.key(seed, "vertiv", device, metric)
    w = noise.normal(k, t)
    s = noise.smooth(k, t, 20 * 60_000)
    off = 1.2 * (_const(seed, "vertiv-off", device) - 0.5)
    supply = 18.3 + 0.8 * ld + off + 0.15 * s
    if metric == "Return_Air_Temperature":
        return supply + 4.5 + 3.0 * ld + 0.2 * w
    if metric == "Supply_Air_Temperature":
        return supply + 0.05 * w
    if metric == "Supply_Air_Temperature_Set_Point":
        return np.full(len(t), 18.0)
    if metric == "Actual_Return_Air_Temperature_Set_Point":
        return np.full(len(t), 26.0)
    if metric in ("Humidity_Set_Point", "Actual_Return_Humidity_Set_Point"):
        return np.full(len(t), 50.0)
    if metric in ("Return_Humidity", "Adjusted_Humidity") or metric.endswith("_Humidity"):
        return 44.0 + 4.0 * s + (1.0 if metric == "Adjusted_Humidity" else 0.0) + 0.2 * w
    if metric.startswith("Ext_Air_Sensor"):
        return supply + 2.5 + 1.5 * ld + 0.3 * s
    if metric == "Fan_Speed":
        return np.clip(55.0 + 35.0 * (ld - 0.9) + 2.0 * s, 20.0, 100.0)
    free = t_out < 14.0
    if metric == "Compressor_Utilization":
        return np.where(free, 0.0, np.clip(35.0 * ld + 3.0 * (t_out - 14.0) + 3.0 * s, 0, 100))
    if metric == "Free_Cooling_Status":
        return free.astype(np.float64)
    if metric == "Free_Cooling_Valve_Open_Position":
        return np.where(free, np.clip(10.0 * (14.0 - t_out), 0.0, 100.0), 0.0)
    if metric == "Free_Cooling_Fluid_Temperature":
        return t_out + 4.0 + 0.3 * s
    if metric == "Filter_Pressure_Drop":
        return np.full(len(t), 70.0 + 30.0 * _const(seed, "filter", device)) + 0.5 * w
    if metric == "Underflow_Static_Pressure":
        return 18.0 + 4.0 * ld + 0.5 * w
    return np.zeros(len(t))  # humidifier, dehumidifier, reheat, hot-gas valve: idle in a DC


def _vertiv_rounded(sched: Schedule, device: str, metric: str, t: I64) -> F64:
    return np.round(vertiv(sched, device, metric, t), 2)


# ---------------------------------------------------------------- schneider (water loop PLC)
_PUMP = re.compile(r".*p10([1-4]).*")


def schneider(sched: Schedule, panel: str, metric: str, t: I64) -> F64:
    """Integer PLC registers; temperatures are °C x10 and flows m³/h x50, as on the real PLC."""
    seed = sched.seed
    name = metric.split(".", 1)[-1]
    ld = load(sched, t)
    k = noise.key(seed, "schneider", panel, metric)
    s = noise.smooth(k, t, 30 * 60_000)
    w = noise.normal(k, t)
    supply = 21.0 + 0.3 * s + (0.4 if panel == "Q102" else 0.0)
    delta = 3.0 + 5.0 * ld
    flow = 60.0 + 30.0 * ld + 1.0 * s
    hours = (t - 1_577_836_800_000) / HOUR_MS + 9000 * _const(seed, "hours", panel, name)
    pump = _PUMP.fullmatch(name)
    running = pump is not None and int(pump.group(1)) in ((1, 2) if panel == "Q101" else (2, 3))
    if name in ("Temp_mandata", "T_mandata_hmi"):
        return np.rint(10 * supply + 0.5 * w)
    if name in ("Temp_ritorno", "T_ritorno_hmi"):
        return np.rint(10 * (supply + delta) + 0.5 * w)
    if name == "Delta_temp":
        return np.rint(10 * delta)
    if name.startswith("T_scambio"):
        return np.rint(10 * (supply + 0.6 * delta) + w)
    if name.startswith(("Portata_1", "Portata_2", "Portata_attiva")):
        scale = 5 if name.endswith("_hmi") else 50
        return np.rint(scale * flow + 2 * w)
    if name.startswith(("Out_pid", "Pos_valvola", "Posizione_ty", "Rif_auto", "Rif_inverter")):
        return np.rint(np.clip(35.0 + 45.0 * ld + 2.0 * s, 0, 100))
    if name.startswith(("Ore_lavoro", "V_ore_tot", "Ore_parziali", "V_ore_parz")):
        return np.floor(hours if running or "quadro" in name else 0.4 * hours)
    if name.startswith(("Min_lavoro", "Min_parz")):
        return np.floor(np.mod(hours * 60.0, 60.0))
    if name.startswith(("V_ore_rem", "V_min_rem")):
        return np.floor(2000.0 - np.mod(hours, 2000.0))
    if name.startswith(("In_marcia", "Stato_p", "Start_p")) or re.fullmatch(
        r"P10\d_in_marcia", name
    ):
        return np.full(len(t), 1.0 if running else 0.0)
    if name.startswith(("Abilita", "Start_impianto", "Status_w", "Cmd_valvola", "Sel_mis")):
        return np.ones(len(t))
    if name == "Stato_quadro":
        return np.ones(len(t))
    if name == "Set_temperatura":
        return np.full(len(t), 210.0)
    if (
        name.startswith(("Alm", "Allarme"))
        or name.endswith("_fault")
        or name.startswith(("Manuale", "Pb_", "Rif_man", "Set_man"))
    ):
        return np.zeros(len(t))
    if name.startswith("Diff_minuti"):
        return np.floor(np.mod(hours * 60.0, 15.0))
    # Configuration registers (limits, PID gains): constants per panel.
    return np.full(len(t), float(int(10 + 190 * _const(seed, "cfg", panel, name))))


# ---------------------------------------------------------------- logics (electrical panels)
_CAP_KW = {"main_ict": 1100.0, "chiller": 260.0, "cdz": 60.0, "pumps": 30.0, "services": 40.0}
_STRINGS = {"Gateway": "gw-logics-01", "Prototype": "PM8000"}
TOTALS = frozenset(
    {
        "Tot",
        "Tot_cdz",
        "Tot_chiller",
        "Tot_ict",
        "Tot_qpompe",
        "Tot_servizi",
        "Pue",
        "pue",
        "Dcie",
        "pit",
        "pt",
    }
)


def device_kw(sched: Schedule, device: str, t: I64) -> F64:
    """Active power of a panel's feed, kW."""
    seed = sched.seed
    ict = sched.it_power_w(t) * 1.04 / 1000.0
    if device == "main_ict":
        return ict
    t_out = weather.temperature(seed, t)
    s = noise.smooth(noise.key(seed, "logics", device), t, 30 * 60_000)
    if device == "chiller":
        return np.maximum(0.12 * ict * (1.0 + 0.04 * (t_out - 20.0)) + 3.0 * s, 0.03 * ict)
    if device == "cdz":
        return 24.0 + 6.0 * (ict / 830.0 - 0.9) + 0.8 * s
    if device == "pumps":
        return 12.0 + 4.0 * ict / 830.0 + 0.4 * s
    return 18.0 + 1.5 * s


def energy_kwh(sched: Schedule, device: str, t: I64, period_ms: int) -> F64:
    """Cumulative energy, kWh: the exact sum of the grid's readings since midnight, resumed each
    midnight from a reference that advances at the feed's cap (monotone, window-independent)."""
    day0 = np.floor_divide(t, DAY_MS) * DAY_MS
    since_midnight = np.zeros(len(t), dtype=np.float64)
    # One cumulative sum per day, always from its midnight: the same sums whatever the window.
    for day in np.unique(day0):
        rows = np.flatnonzero(day0 == day)
        grid = np.arange(int(day), int(t[rows].max()) + 1, period_ms, dtype=np.int64)
        kwh = device_kw(sched, device, grid) * period_ms / HOUR_MS
        steps = np.concatenate([[0.0], np.cumsum(kwh)])
        since_midnight[rows] = steps[(t[rows] - day) // period_ms]
    start = (day0 - 1_577_836_800_000) / HOUR_MS * _CAP_KW[device]
    base = 1e6 * _const(sched.seed, "energy", device)
    return np.round(base + start + since_midnight, 3)


def logics(sched: Schedule, device: str, metric: str, t: I64, period_ms: int) -> Value:
    if metric in _STRINGS:
        return _STRINGS[metric]
    if metric == "address":
        return f"10.10.1.{11 + list(_CAP_KW).index(device)}"
    seed = sched.seed
    w = noise.normal(noise.key(seed, "logics", device, metric), t)
    if metric in TOTALS:
        parts = {d: device_kw(sched, d, t) for d in _CAP_KW}
        total: F64 = np.sum(list(parts.values()), axis=0)
        pue = total / parts["main_ict"]
        table: dict[str, F64] = {
            "Tot": total,
            "Tot_ict": parts["main_ict"],
            "Tot_chiller": parts["chiller"],
            "Tot_cdz": parts["cdz"],
            "Tot_qpompe": parts["pumps"],
            "Tot_servizi": parts["services"],
            "Pue": pue,
            "pue": pue,
            "Dcie": 100.0 / pue,
            "pit": np.rint(parts["main_ict"]),
            "pt": np.rint(total),
        }
        return np.round(table[metric], 3)
    kw = device_kw(sched, device, t)
    pf = 0.95 + 0.02 * _const(seed, "pf", device)
    amps = kw * 1000.0 / (np.sqrt(3.0) * 400.0 * pf)
    if metric in ("Potenza_attiva",):
        return np.round(kw, 2)
    if metric == "Potenza":
        return np.round(kw / pf, 2)
    if metric == "Mw":
        return np.round(kw / 1000.0, 4)
    if metric == "Mvar":
        return np.round(kw / pf * math.sqrt(1 - pf * pf) / 1000.0, 4)
    if metric == "Fattore_di_potenza":
        return np.full(len(t), round(pf, 3))
    if metric.startswith("Corrente"):
        spread: F64 = 0.015 * w if metric != "Corrente" else np.zeros(len(t))
        current: F64 = np.round(amps * (1.0 + spread), 1)
        return current
    if metric == "Tensione":
        return np.rint(400.0 + 1.5 * w)
    if metric in ("Volt1", "Volt3"):
        return np.rint(230.0 + 1.0 * w)
    if metric == "Volt2":
        return np.round(230.0 + 1.0 * w, 1)
    if metric == "Frequenza":
        return np.round(50.0 + 0.02 * w, 2)
    if metric in ("Energia", "Mwh", "Mvarh"):
        e = energy_kwh(sched, device, t, period_ms)
        return {
            "Energia": e,
            "Mwh": np.round(e / 1000.0, 3),
            "Mvarh": np.round(e * 0.33 / 1000, 3),
        }[metric]
    if metric == "ID_Modbus":
        return np.full(len(t), 1.0 + list(_CAP_KW).index(device))
    if metric == "deviceid":
        return np.full(len(t), 100.0 + list(_CAP_KW).index(device))
    if metric == "Stato":
        return np.ones(len(t))
    return np.zeros(len(t))  # Status, Bad_values, Comlost: healthy
