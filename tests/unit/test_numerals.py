"""Number words that are ids are read as ids: 'gpu two' pooled all four GPUs, 'cpu one' both
sockets (answers to more than was asked); words that are no ids stay."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from oda_analyst.reading.read import read
from oda_analyst.reading.rules.numerals import numerals
from oda_analyst.retriever.stages.stage1 import Ready, run_stage1

AS_OF = datetime(2022, 6, 13, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("gpu two utilisation of node 5", "gpu 2 utilisation of node 5"),
        ("power usage of gpu one of node 5", "power usage of gpu 1 of node 5"),
        ("gpu two and three of node 5", "gpu 2 and 3 of node 5"),
        ("psu one input power", "psu 1 input power"),
        ("which one of nodes 4 and 5 was hotter", "which one of nodes 4 and 5 was hotter"),
        ("top three nodes by power", "top three nodes by power"),
        ("gpu three hours of user 7", "gpu three hours of user 7"),
    ],
)
def test_number_words_after_an_id_keyword_are_digits(text: str, want: str) -> None:
    assert numerals(text) == want


@pytest.mark.parametrize(
    ("question", "metrics"),
    [
        ("gpu two utilisation of node 5 on 1 june 2022 8-9", ["Gpu2_gpu_utilization"]),
        ("cpu one power of node 5 on 1 june 2022 8-9", ["p1_power"]),
        ("socket zero power of node 5 on 1 june 2022 8-9", ["p0_power"]),
    ],
)
def test_a_spelt_out_index_selects_that_part_only(question: str, metrics: list[str]) -> None:
    outcome = run_stage1(read(question, AS_OF)).outcome
    assert isinstance(outcome, Ready)
    assert [m.metric for p in outcome.plans for m in p.metrics] == metrics
