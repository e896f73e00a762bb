"""The answer's words: a comparison the question asks for is stated (which is higher, by how
much) or said not to be made; it is never left out in silence ('which of nodes 12 and 13 drew
more power' answered with 360 readings and no winner)."""

from __future__ import annotations

from typing import Any

from oda_analyst.coordinator.state import CoordinatorState
from oda_analyst.coordinator.summary import summary_text


def _state(results: list[dict[str, Any]], *, compare: bool) -> CoordinatorState:
    return {"plan": {"compare": compare, "reports": []},
            "retrieval": {"status": "completed", "answer": "Retrieved.", "results": results},
            "artifacts": []}  # fmt: skip


READINGS = {
    "columns": ["node_id", "metric_name", "timestamp", "value"],
    "rows": None,
    "row_count": 360,
    "csv_handle": "h",
    "understood_as": "Readings of node power.",
}
MEANS = {"columns": ["node_id", "avg_value"], "rows": [[12, 926.6], [13, 967.0]], "row_count": 2,
         "csv_handle": None, "understood_as": "Average node power (W) per node.",
         "plan": {"metrics": [{"plugin": "ipmi", "metric": "total_power"}]}}  # fmt: skip


def test_a_comparison_no_result_makes_is_said_not_to_be_made() -> None:
    text = summary_text(_state([READINGS], compare=True), "completed")
    assert "The comparison asked for is not made" in text
    assert "not made" not in summary_text(_state([READINGS], compare=False), "completed")


def test_a_comparison_made_is_stated_and_nothing_more() -> None:
    text = summary_text(_state([MEANS], compare=True), "completed")
    assert "Node 13 is higher" in text and "not made" not in text
