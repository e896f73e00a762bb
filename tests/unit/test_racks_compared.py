"""Racks set side by side are one figure each. 'Rack 9 vs rack 40 inlet temperature …, which ran
warmer on average?' was answered with one mean over both racks 'taken together', the comparison
asked for silently unanswered (analysis1 A19); with 'as a box plot' the mean went to the drawn
readings, whose series are nodes, and no rack's mean was stated."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from oda_analyst.reading.read import read
from oda_analyst.retriever.stages.stage1 import Ready, run_stage1

AS_OF = datetime(2022, 6, 15, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    "question",
    [
        "rack 9 vs rack 40 inlet temperature midnight-6am 1 june, which ran warmer on average?",
        "rack 9 vs rack 40 inlet temperature midnight-6am 1 june, which ran warmer on average? "
        "as a box plot",
        "compare mean node power of racks 3 and 4 on june 1 10-11",
    ],
)
def test_racks_compared_are_one_figure_each(question: str) -> None:
    reading = read(question, AS_OF)
    assert not reading.analysis.over_readings
    got = run_stage1(reading).outcome
    assert isinstance(got, Ready), got
    assert got.plans[0].group_by == ["rack"]
    assert [a.fn for a in got.plans[0].aggregations] == ["avg"]


def test_racks_named_without_a_comparison_stay_taken_together() -> None:
    got = run_stage1(read("mean node power of racks 3 and 4 on june 1 10-11", AS_OF)).outcome
    assert isinstance(got, Ready), got
    assert got.plans[0].group_by == []


def test_nodes_compared_stay_apart_when_their_gpus_are_pooled() -> None:
    # analysis5 V22: '(all 4 GPUs pooled)' pooled the two nodes too: one mean 'taken together'
    # answered 'which is higher and by how much?'
    got = run_stage1(
        read(
            "node 100 vs node 900 avg gpu utilisation (all 4 GPUs pooled), 1 june "
            "2022 10am to noon — which is higher and by how much?",
            AS_OF,
        )
    ).outcome
    assert isinstance(got, Ready), got
    (plan,) = got.plans
    assert plan.group_by == ["node"] and len(plan.metrics) == 4
    pooled = run_stage1(
        read("avg gpu utilisation of nodes 100 and 900 pooled, 1 june 2022 10am to noon", AS_OF)
    ).outcome
    assert isinstance(pooled, Ready) and pooled.plans[0].group_by == []
