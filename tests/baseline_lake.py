"""A small synthetic lake for the baseline and harness tests: nodes 900-901 (rack 45) and the
job table over 1 June 2022 00:00-01:00, with node power and inlet temperature, GPU-0
utilisation, the weather station and the job table — enough for every SoTA#1 archetype."""

from __future__ import annotations

from pathlib import Path

from oda_analyst.lake.synth import build_spec, generate

START, END = "2022-06-01T00:00", "2022-06-01T01:00"
NODES = "900,901"
PLUGINS = "ipmi,ganglia,weather,job_table"
METRICS = "total_power,ambient,Gpu0_gpu_utilization,temp,job_info_marconi100"


def write_baseline_lake(root: Path) -> Path:
    spec = build_spec("tiny", start=START, end=END, nodes=NODES, plugins=PLUGINS,
                      metrics=METRICS)  # fmt: skip
    generate(spec, root)
    return root
