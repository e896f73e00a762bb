"""Pronouns are no metric: 'which one', 'the two', 'that one's' were read as metric phrases and
the question refused ("no metric matches 'one'"); 'load one' stays the one-minute load."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from oda_analyst.reading.read import read
from oda_analyst.retriever.stages.stage1 import Clarify, run_stage1

AS_OF = datetime(2022, 6, 13, tzinfo=UTC)


@pytest.mark.parametrize(
    ("question", "phrases"),
    [
        # 'hotter' names its quantity (lexicon qualities): the phrase is the temperature
        ("which one of nodes 4 and 5 was hotter on 1 june 2022", ["temperature"]),
        ("which of the two, node 4 or node 5, drew more power on 1 june 2022", ["power"]),
        ("node 4 power on 1 june 2022 and that one's inlet temp", ["power", "inlet temp"]),
        ("load one of node 4 on 1 june 2022 8-9", ["load one"]),
    ],
)
def test_pronouns_are_no_metric_phrase(question: str, phrases: list[str]) -> None:
    said = read(question, AS_OF).retrieval
    assert said is not None
    assert [p.text for p in said.chunking.phrases] == phrases


def test_which_was_hotter_asks_which_temperature() -> None:
    outcome = run_stage1(read("which one of nodes 4 and 5 was hotter on 1 june 2022", AS_OF))
    assert isinstance(outcome.outcome, Clarify) and outcome.outcome.field == "metric"
    assert any("temperature" in str(c["description"]).lower() for c in outcome.outcome.candidates)


def test_which_was_busier_asks_which_utilisation() -> None:
    outcome = run_stage1(read("which of nodes 4 and 5 was busier on 1 june 2022 8-9", AS_OF))
    assert isinstance(outcome.outcome, Clarify) and outcome.outcome.field == "metric"


def test_a_follow_up_with_no_conversation_asks_what_it_is_about() -> None:
    # 'same again but for rack 12' (no earlier question) and 'what was rack 30 pulling' were
    # refused: 'same again but' and 'pulling' were read as metric names
    for question in ("same again but for rack 12", "what was rack 30 pulling at noon june 1"):
        outcome = run_stage1(read(question, AS_OF)).outcome
        assert isinstance(outcome, Clarify), question
