"""Per-plugin chunk producers: each yields (metric, columns, rows) in file order.

Node-level plugins go chunk by chunk of nodes (about one row group each) so memory stays flat
whatever the window; within a chunk the latent state (running job, utilisation, power) is built
once per sampling grid and shared by every metric on that grid.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from numpy.typing import NDArray

from oda_analyst.lake import topology
from oda_analyst.lake.schema import sampling_period_s, tag_columns
from oda_analyst.lake.synth import (
    cluster,
    context,
    facility,
    ganglia,
    grid,
    ipmi,
    nagios,
    noise,
    weather,
)
from oda_analyst.lake.synth.frame import NodeFrame
from oda_analyst.lake.synth.writer import ROW_GROUP, Coded, TagValues, ValueData

I64 = NDArray[np.int64]
Columns = dict[str, TagValues | ValueData]
Chunk = tuple[str, Columns, int]


def _period_ms(plugin: str, metric: str) -> int:
    return int((sampling_period_s(plugin, metric) or 0) * 1000)


def _grid_key(plugin: str, metric: str) -> tuple[int, float]:
    """(period ms, jitter fraction) of the grid a metric is sampled on."""
    period = _period_ms(plugin, metric)
    if plugin == "ganglia":
        return period, 0.1 if metric.startswith("Gpu") else 0.3
    return period, 0.0


def node_chunks(
    seed: int, plugin: str, metrics: tuple[str, ...], nodes: tuple[int, ...], t0: int, t1: int
) -> Iterator[Chunk]:
    """ipmi / ganglia rows, (node, timestamp)-sorted, chunk by chunk of nodes."""
    sched = context.schedule(seed, t0, t1)
    grids: dict[tuple[int, float], list[str]] = {}
    for metric in metrics:
        grids.setdefault(_grid_key(plugin, metric), []).append(metric)
    shortest = min(p for p, _ in grids)
    per_node = max(1, (t1 - t0) // shortest)
    step = max(1, ROW_GROUP // per_node)
    dictionary = [str(n) for n in nodes]
    all_nodes = np.array(nodes, dtype=np.int64)
    value = ipmi.value if plugin == "ipmi" else ganglia.value
    for lo in range(0, len(nodes), step):
        chunk = all_nodes[lo : lo + step]
        for (period, jitter), names in grids.items():
            gkey = noise.key(seed, plugin, "grid", period)
            phase = grid.phases(gkey, chunk, period)
            jkeys = noise.keys(noise.key(seed, plugin, "jitter", period), chunk) if jitter else None
            ent, t = grid.entity_grid(t0, t1, period, phase, jkeys, jitter)
            frame = NodeFrame(sched, chunk, ent, t)
            codes = Coded(ent + lo, dictionary)
            for metric in names:
                yield metric, {"timestamp": t, "node": codes, "value": value(frame, metric)}, len(t)


def nagios_chunks(seed: int, nodes: tuple[int, ...], t0: int, t1: int) -> Iterator[Chunk]:
    per_node = max(1, (t1 - t0) // nagios.PERIOD_MS) * len(nagios.DESCRIPTIONS)
    step = max(1, ROW_GROUP // per_node)
    dictionary = [str(n) for n in nodes]
    position = {n: i for i, n in enumerate(nodes)}
    for lo in range(0, len(nodes), step):
        chunk = np.array(nodes[lo : lo + step], dtype=np.int64)
        node, desc, t, state, prev = nagios.rows(seed, chunk, t0, t1)
        codes = np.array([position[int(n)] for n in chunk], dtype=np.int64)
        node_codes = codes[np.searchsorted(chunk, node)]
        drained = (state == 2) & (desc < 6)
        cols: Columns = {
            "timestamp": t,
            "node": Coded(node_codes, dictionary),
            "description": Coded(desc, list(nagios.DESCRIPTIONS)),
            "host_group": nagios.HOST_GROUP,
            "nagiosdrained": Coded(drained.astype(np.int64), ["0", "1"]),
            "state_type": Coded(((state == 0) | (prev == state)).astype(np.int64), ["0", "1"]),
            "value": state.astype(np.float64),
        }
        yield "state", cols, len(t)


def weather_chunks(seed: int, metrics: tuple[str, ...], t0: int, t1: int) -> Iterator[Chunk]:
    t = grid.global_grid(t0, t1, _period_ms("weather", "temp"))
    values = weather.values(seed, t)
    for metric in metrics:
        yield metric, {"timestamp": t, "value": values[metric]}, len(t)


def facility_chunks(
    seed: int, plugin: str, metrics: tuple[str, ...], t0: int, t1: int
) -> Iterator[Chunk]:
    """vertiv (device), schneider (panel), logics (panel, device): entity by entity."""
    sched = context.schedule(seed, t0, t1)
    if plugin == "vertiv":
        entities = [("device", d) for d in topology.VERTIV_DEVICES]
        dicts = {"device": list(topology.VERTIV_DEVICES)}
    elif plugin == "schneider":
        entities = [("panel", p) for p in topology.SCHNEIDER_PANELS]
        dicts = {"panel": list(topology.SCHNEIDER_PANELS)}
    else:
        entities = [("pair", f"{p}/{d}") for p, d in topology.LOGICS_DEVICES]
        dicts = {
            "panel": sorted({p for p, _ in topology.LOGICS_DEVICES}),
            "device": [d for _, d in topology.LOGICS_DEVICES],
        }
    for i, (_kind, name) in enumerate(entities):
        period = _period_ms(plugin, metrics[0])
        phase = (
            0 if plugin == "logics" else int(grid.phases(noise.key(seed, plugin), [i], period)[0])
        )
        t = grid.global_grid(t0, t1, period, phase)
        n = len(t)
        for metric in metrics:
            if plugin == "vertiv":
                tags: Columns = {"device": Coded(np.full(n, i), dicts["device"])}
                v: ValueData = np.round(facility.vertiv(sched, name, metric, t), 2)
            elif plugin == "schneider":
                tags = {"panel": Coded(np.full(n, i), dicts["panel"])}
                v = facility.schneider(sched, name, metric, t)
            else:
                panel, device = name.split("/")
                if metric in facility.TOTALS and device != "main_ict":
                    continue
                tags = {
                    "panel": Coded(np.full(n, dicts["panel"].index(panel)), dicts["panel"]),
                    "device": Coded(np.full(n, i), dicts["device"]),
                }
                v = facility.logics(sched, device, metric, t, period)
            yield metric, {"timestamp": t, **tags, "value": v}, n


def slurm_chunks(seed: int, metrics: tuple[str, ...], t0: int, t1: int) -> Iterator[Chunk]:
    sched = context.schedule(seed, t0, t1)
    for metric in metrics:
        period = _period_ms("slurm", metric)
        family = "s21" if metric.startswith("s21.") else "slurm"
        phase = int(grid.phases(noise.key(seed, "slurm-phase", family), [0], period)[0])
        t = grid.global_grid(t0, t1, period, phase)
        tags = tag_columns("slurm", metric)
        if metric in ("job_id", "num_nodes"):
            series = cluster.job_events(sched, metric, t0, t1)
        elif metric.startswith("s21.jobs."):
            series = cluster.s21_jobs(sched, metric, t)
        elif tags == ("partition",):
            v = cluster.s21_partition(sched, metric, t)
            yield metric, {"timestamp": t, "partition": cluster.PARTITION, "value": v}, len(t)
            continue
        else:
            yield metric, {"timestamp": t, "value": cluster.untagged(sched, metric, t)}, len(t)
            continue
        cols: Columns = {"timestamp": series.t, "value": series.value}
        cols.update({name: values for name, values in series.tags.items()})
        yield metric, cols, len(series.t)
