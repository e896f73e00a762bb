"""'Boxplot of outdoor temp per day for the first week of june': the day is what each box holds,
not a mean per day to retrieve. The question was refused after retrieving seven daily means
('a box plot needs readings', analysis1 A43); it retrieves the readings and draws a box per day.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from test_job_charts import _run

from oda_analyst.coordinator.charts import bind
from oda_analyst.coordinator.planner import Decomposition, decompose
from oda_analyst.reading.read import read

AS_OF = datetime(2022, 6, 15, 12, tzinfo=UTC)


def test_a_box_plot_per_day_buckets_the_boxes_not_the_retrieval() -> None:
    reading = read("boxplot of outdoor temp per day for the first week of june", AS_OF)
    assert [g.by for g in reading.box_buckets()] == ["day"]
    assert "per day" not in reading.retrieval_text()
    plan = decompose(reading)
    assert isinstance(plan, Decomposition)
    assert "box_by:day" in plan.figures


@pytest.mark.parametrize(
    "question",
    [
        "mean outdoor temp per day for the first week of june, box plot",  # a mean per day
        "outdoor temp per day for the first week of june, line chart",  # no box
    ],
)
def test_a_statistic_per_bucket_or_another_chart_keeps_the_grouping(question: str) -> None:
    reading = read(question, AS_OF)
    assert reading.box_buckets() == []


def test_each_days_readings_are_one_box_in_order(tmp_path: Path) -> None:
    start = datetime(2022, 6, 1, tzinfo=UTC)
    rows = [["temp", (start + timedelta(hours=h)).isoformat(), 10.0 + h // 24 + (h % 24) / 24]
            for h in range(72)]  # fmt: skip
    res: dict[str, Any] = {
        "columns": ["metric_name", "timestamp", "value"], "rows": rows, "row_count": 72,
        "csv_handle": None,
        "understood_as": "Readings of outside temperature (°C) for the weather station.",
        "plan": {"metrics": [{"plugin": "weather", "metric": "temp"}], "entities": [],
                 "window": {"start": start.isoformat(),
                            "end": (start + timedelta(days=3)).isoformat()}},
    }  # fmt: skip
    job = bind("box", [res], {"temp": ("outside temperature", "°C")}, figures=("box_by:day",))
    violations, figures = _run(job, [res], tmp_path, ("°C",))
    assert violations == []
    groups = figures["groups"]
    assert list(groups) == ["2022-06-01", "2022-06-02", "2022-06-03"]
    assert [groups[d]["count"] for d in groups] == [24, 24, 24]
    assert groups["2022-06-02"]["min"] == pytest.approx(11.0)
