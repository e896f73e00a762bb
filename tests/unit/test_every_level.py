"""'any node in rack 7 where X never dropped below L … show their min' names the nodes that kept
the level (each with its min); it completed as one pooled min of the readings at or above L."""

from __future__ import annotations

from datetime import UTC, datetime

from oda_analyst.reading.read import read
from oda_analyst.retriever.stages.stage1 import Ready, run_stage1

AS_OF = datetime(2022, 6, 14, tzinfo=UTC)


def test_a_level_every_reading_kept_names_the_nodes_that_kept_it() -> None:
    question = (
        "any node in rack 7 where inlet temp never dropped below 22 C on jun 1 8-9? their min"
    )
    outcome = run_stage1(read(question, AS_OF)).outcome
    assert isinstance(outcome, Ready)
    (plan,) = outcome.plans
    assert plan.group_by == ["node"]
    assert [a.fn for a in plan.aggregations] == ["min"]
    assert any(f.about == "aggregate" for f in plan.filters)  # each node's min, not readings
