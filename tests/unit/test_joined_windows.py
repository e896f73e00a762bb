"""A chart of readings retrieved window by window draws every window. 'Weekly profile of humidity
across may and june' retrieved May and June as two results, and the profile read June's file
alone: its weekday means, stated as May's and June's, were June's (analysis1 A30). A histogram or
line of '8-9 and 14-15' drew 14-15 only. The scripts run with the sandbox's odaplot under the
chart checks.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from test_job_charts import _run

from oda_analyst.coordinator.charts import ChartError, bind

GLOSSARY = {"humidity": ("outside humidity", "%"), "total_power": ("node power", "W")}
WEATHER = ["metric_name", "timestamp", "value"]
NODE = ["node_id", "metric_name", "timestamp", "value"]


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _readings(columns: list[str], metric: str, start: datetime, end: datetime, step: timedelta,
              value: Any, understood: str,
              entities: list[dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
    rows, t, k = [], start, 0
    while t < end:
        row = [metric, _stamp(t), value(t, k)]
        rows.append([900, *row] if "node_id" in columns else row)
        t, k = t + step, k + 1
    return {
        "columns": columns, "rows": rows, "row_count": len(rows), "csv_handle": None,
        "understood_as": understood,
        "plan": {"metrics": [{"plugin": "x", "metric": metric}], "entities": entities,
                 "window": {"start": _stamp(start), "end": _stamp(end)}},
    }  # fmt: skip


def _humidity(month: int) -> dict[str, Any]:
    start, end = datetime(2022, month, 1, tzinfo=UTC), datetime(2022, month + 1, 1, tzinfo=UTC)

    # May is wettest on Mondays, June on Fridays: a profile of June alone names Friday
    def value(t: datetime, _: int) -> float:
        return 80.0 if t.weekday() == (0 if month == 5 else 4) else 50.0 + month

    said = (f"Readings of outside humidity (%) for the weather station, 1 {start:%b} 2022 00:00 "
            f"to 1 {end:%b} 2022 00:00 UTC.")  # fmt: skip
    return _readings(WEATHER, "humidity", start, end, timedelta(hours=6), value, said, [])


def test_a_profile_over_back_to_back_months_reads_both(tmp_path: Path) -> None:
    results = [_humidity(5), _humidity(6)]
    job = bind("bar", results, GLOSSARY, figures=("profile:weekday",))
    assert job.inputs == (0, 1)
    assert "odaplot.load('r1.csv'), odaplot.load('r2.csv')" in job.script
    assert " ".join(job.outputs[0].title.split()).endswith(
        "1 May 2022 00:00 to 1 Jul 2022 00:00 UTC"
    )
    violations, figures = _run(job, results, tmp_path, ("%",))
    assert violations == []
    profile = figures["profile"]
    assert profile["readings"] == 4 * 61  # four a day, every day of May and June
    # Mondays: May's 5 (80 %) and June's 4 (56 %); June alone would have named Friday highest
    assert profile["highest"][0] == "Monday"
    assert profile["means"]["Monday"] == pytest.approx((20 * 80 + 16 * 56) / 36)
    assert profile["means"]["Friday"] == pytest.approx((16 * 55 + 16 * 80) / 32)


def test_two_windows_of_one_day_are_drawn_both_with_a_break_between(tmp_path: Path) -> None:
    day = datetime(2022, 6, 1, tzinfo=UTC)
    node = [{"kind": "node", "ids": [900]}]
    results = [
        _readings(NODE, "total_power", day + timedelta(hours=h), day + timedelta(hours=h + 1),
                  timedelta(minutes=1), lambda _, k, h=h: 1000.0 + h + k % 7,
                  f"Readings of node power (W) for node 900, 1 Jun 2022 {h:02d}:00 to "
                  f"{h + 1:02d}:00 UTC.", node)
        for h in (8, 14)
    ]  # fmt: skip
    job = bind("line", results, GLOSSARY)
    assert job.inputs == (0, 1)
    assert job.outputs[0].title == ("Node power for node 900, 1 Jun 2022 08:00 to 09:00 UTC and "
                                    "14:00 to 15:00 UTC")  # fmt: skip
    assert "value=float('nan')" in job.script  # the line breaks between the windows
    violations, _ = _run(job, results, tmp_path, ("W",))
    assert violations == []
    hist = bind("histogram", results, GLOSSARY, figures=("p95",))
    assert hist.inputs == (0, 1)
    (tmp_path / "h").mkdir()
    _, figures = _run(hist, results, tmp_path / "h", ("W",))
    # 60 readings in each window; the 14:00 window's are 1014..1020, the 08:00's 1008..1014
    assert figures["groups"]["all"]["count"] == 120
    assert (figures["groups"]["all"]["min"], figures["groups"]["all"]["max"]) == (1008.0, 1020.0)


def test_an_energy_over_windows_that_do_not_meet_is_refused() -> None:
    day = datetime(2022, 6, 1, tzinfo=UTC)
    node = [{"kind": "node", "ids": [900]}]
    results = [
        _readings(NODE, "total_power", day + timedelta(hours=h), day + timedelta(hours=h + 1),
                  timedelta(minutes=1), lambda *_: 1000.0, "Readings of node power (W).", node)
        for h in (8, 14)
    ]  # fmt: skip
    with pytest.raises(ChartError, match="do not meet"):
        bind("bar", results, GLOSSARY, figures=("energy",))


def test_readings_of_different_metrics_are_not_joined() -> None:
    may, june = _humidity(5), _humidity(6)
    june["plan"]["metrics"] = [{"plugin": "x", "metric": "total_power"}]
    job = bind("line", [may, june], GLOSSARY)
    assert len(job.inputs) == 1
