"""A threshold in one unit never filters a metric measured in another.

Found on the blind sets: "which nodes stayed under 400 W for the whole hour …" names no metric
but a unit; grounding took 'nodes' for Slurm's count of down nodes, and the plan would have
compared a count with 400 watts. The unit guard refuses it, naming both units.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

AS_OF = datetime(2022, 6, 15, tzinfo=UTC)


def test_a_watt_threshold_on_a_count_metric_is_refused_naming_both_units(retriever: Any) -> None:
    answer = retriever.query(
        "Which nodes stayed under 400 W for the whole of 1 June 2022 02:00-03:00?", as_of=AS_OF
    )
    assert answer.status == "rejected"
    assert "threshold in W" in answer.answer and "measured in count" in answer.answer


def test_a_watt_threshold_on_node_power_runs(retriever: Any) -> None:
    answer = retriever.query(
        "Which nodes kept node power under 450 W for the whole of 1 June 2022 02:00-03:00?",
        as_of=AS_OF,
    )
    assert answer.status == "completed", answer.answer
    assert answer.understood_as.startswith("Maximum node power (W) per node")
    assert "only the nodes whose readings all stay below 450 W" in answer.understood_as
