"""A scatter pairs readings where they were taken together: a GPU's power and utilisation share
their instants, so each reading is a pair (analysis1 A01 asked for 720 pairs over four hours and
was told of 240 paired 1-minute means). Metrics sampled at different instants still pair their
1-minute means. The scripts run with the sandbox's odaplot under the chart checks."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from test_job_charts import _run

from oda_analyst.coordinator.charts import ChartError, bind

GLOSSARY = {"power": ("GPU 0 power", "W"), "util": ("GPU 0 utilisation", "%")}
START = datetime(2022, 6, 1, 8, tzinfo=UTC)


def _result(offset_s: float) -> dict[str, Any]:
    """Readings every 20 s for 10 minutes; utilisation taken ``offset_s`` after each power."""
    rows = []
    for k in range(30):
        t = START + timedelta(seconds=20 * k)
        util = 10.0 + (k * 37 % 90)
        rows.append([920, "power", t.isoformat(), 50.0 + 2.5 * util])
        rows.append([920, "util", (t + timedelta(seconds=offset_s)).isoformat(), util])
    return {
        "columns": ["node_id", "metric_name", "timestamp", "value"], "rows": rows,
        "row_count": len(rows), "csv_handle": None,
        "understood_as": "Readings of GPU 0 power (W) and GPU 0 utilisation (%) for node 920.",
        "plan": {"metrics": [{"plugin": "ganglia", "metric": "power"},
                             {"plugin": "ganglia", "metric": "util"}],
                 "entities": [{"kind": "node", "ids": [920]}],
                 "window": {"start": START.isoformat(),
                            "end": (START + timedelta(minutes=10)).isoformat()}},
    }  # fmt: skip


def test_readings_taken_together_are_paired_one_by_one(tmp_path: Path) -> None:
    res = _result(0.0)
    job = bind("scatter", [res], GLOSSARY)
    _run(job, [res], tmp_path, ("W", "%"))
    said = json.loads((tmp_path / "scatter.json").read_text())
    assert (said["n"], said["grid"]) == (30, "readings at the same instants")
    assert said["pearson"] == pytest.approx(1.0)


def test_readings_taken_apart_pair_their_minute_means(tmp_path: Path) -> None:
    res = _result(7.0)
    job = bind("scatter", [res], GLOSSARY)
    _run(job, [res], tmp_path, ("W", "%"))
    said = json.loads((tmp_path / "scatter.json").read_text())
    assert (said["n"], said["grid"]) == (10, "1-minute means")


def _site(metric: str, every_min: int, value: Any, columns: list[str]) -> dict[str, Any]:
    rows = []
    for k in range(0, 60, every_min):
        t = START + timedelta(minutes=k)
        row = [metric, t.isoformat(), value(k)]
        rows.append(["panel-1", "gw", *row] if "panel" in columns else row)
    return {
        "columns": columns, "rows": rows, "row_count": len(rows), "csv_handle": None,
        "understood_as": f"Readings of {metric}.",
        "plan": {"metrics": [{"plugin": "x", "metric": metric}], "entities": [],
                 "window": {"start": START.isoformat(),
                            "end": (START + timedelta(hours=1)).isoformat()}},
    }  # fmt: skip


def test_two_site_metrics_retrieved_apart_pair_their_minute_means(tmp_path: Path) -> None:
    # analysis1 A02 'outdoor temperature vs PUE': the weather station's readings (every 10
    # minutes) and the data centre's (every minute) come as two results, one series each
    weather = _site("temp", 10, lambda k: 14.0 + k / 10, ["metric_name", "timestamp", "value"])
    pue = _site("Pue", 1, lambda k: 1.1 + k / 1000,
                ["panel", "device", "metric_name", "timestamp", "value"])  # fmt: skip
    glossary = {"temp": ("outside temperature", "°C"), "Pue": ("PUE", None)}
    job = bind("scatter", [weather, pue], glossary)
    assert job.inputs == (0, 1)
    _run(job, [weather, pue], tmp_path, ("°C",))
    said = json.loads((tmp_path / "scatter.json").read_text())
    assert (said["n"], said["grid"]) == (6, "1-minute means")  # one pair per weather reading
    assert said["pearson"] == pytest.approx(1.0)


def test_many_nodes_retrieved_apart_from_a_site_metric_are_no_scatter() -> None:
    nodes = _result(0.0)
    nodes["plan"]["metrics"] = nodes["plan"]["metrics"][:1]
    nodes["plan"]["entities"] = [{"kind": "node", "ids": [920, 921]}]
    weather = _site("temp", 10, lambda k: 14.0, ["metric_name", "timestamp", "value"])
    with pytest.raises(ChartError, match="exactly two metrics"):
        bind("scatter", [nodes, weather], GLOSSARY)
