"""The jobs running at an instant are a count the lake answers; a statistic at one still asks.

blind8 U55 'how many gpu jobs were runnning at 15:00 on june 10' was asked for a window: a job
runs over a span, so the jobs whose run overlaps the instant's second are the jobs running then.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from oda_analyst.reading.read import read
from oda_analyst.retriever.stages.stage1 import Clarify, Ready, run_stage1
from oda_analyst.retriever.understood import sentence

AS_OF = datetime(2022, 6, 13, 8, tzinfo=UTC)
MOMENT = datetime(2022, 6, 10, 15, tzinfo=UTC)


@pytest.mark.parametrize(
    "question",
    ["how many gpu jobs were running at 15:00 on june 10",
     "how many jobs were running at 15:00 on 10 June 2022"],
)  # fmt: skip
def test_the_jobs_running_at_an_instant_are_counted(question: str) -> None:
    got = run_stage1(read(question, AS_OF)).outcome
    assert isinstance(got, Ready), got
    (plan,) = got.plans
    assert plan.target == "jobs" and plan.job_event == "running"
    assert plan.window is not None
    assert (plan.window.start, plan.window.end) == (MOMENT, MOMENT + timedelta(seconds=1))
    assert sentence(plan).endswith("running at 10 Jun 2022 15:00 UTC")


@pytest.mark.parametrize(
    "question",
    ["how many jobs started at 15:00 on june 10",
     "average node power of node 12 at 15:00 on june 10"],
)  # fmt: skip
def test_an_event_or_a_statistic_at_an_instant_still_asks_for_a_window(question: str) -> None:
    got = run_stage1(read(question, AS_OF)).outcome
    assert isinstance(got, Clarify), got
    assert "one instant" in got.question
