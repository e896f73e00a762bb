"""Forecasts, money and actions are refused at once, saying why (blind7 T73, T74: they were
asked back as 'which PUE?' and 'which metric do you mean by electricity bill?'). The words that
decide it are data (ontology/scope.yaml), read by the reader."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from oda_analyst.reading.read import read
from oda_analyst.retriever.stages.stage1 import Reject, run_stage1

AS_OF = datetime(2022, 6, 13, 8, tzinfo=UTC)


@pytest.mark.parametrize(
    ("question", "why"),
    [
        ("forecast the PUE for tomorrow", "forecast"),
        ("predict which nodes will fail next week", "forecast"),
        ("what was the electricity bill in euros for 1 june", "money"),
        ("energy cost of rack 3 yesterday in €", "money"),
        ("reboot node 17 please, it looks stuck", "acts on the system"),
        ("pls drain rack 4", "acts on the system"),
    ],
)
def test_what_no_lake_holds_is_refused_saying_why(question: str, why: str) -> None:
    outcome = run_stage1(read(question, AS_OF)).outcome
    assert isinstance(outcome, Reject)
    assert why in outcome.message


@pytest.mark.parametrize(
    "question",
    [
        "how many jobs were cancelled on 3 June 2022?",
        "which jobs were killed for exceeding their time limit on 7 June",
        "total energy of the panels on 1 June 2022",
        "average PUE on 1 June 2022",
        "how many jobs failed on 4 june",
        "who submitted job 6522971",
        "jobs submitted by user 12 on june 6",
        # the job table's submit_time selects them (issue 29)
        "how many jobs were submitted on june 6",
        "jobs submitted per user on june 6",
    ],
)
def test_questions_about_what_was_measured_are_in_scope(question: str) -> None:
    assert read(question, AS_OF).out_of_scope is None


def test_the_scope_span_quotes_the_words_that_decided_it() -> None:
    reading = read("Could you power off rack 3 tonight", AS_OF)
    assert reading.out_of_scope is not None
    assert (reading.out_of_scope.kind, reading.out_of_scope.text) == ("action", "power off")
    money = read("energy cost of rack 3 yesterday in €", AS_OF).out_of_scope
    assert money is not None and (money.kind, money.text) == ("money", "cost")
    assert read("rack 3 power, and reboot it", AS_OF).out_of_scope is None  # not its opening
