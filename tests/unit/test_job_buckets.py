"""'jobs started per hour …' counts the jobs that started in each hour (blind8 U59: 'jobs
started' was read as a metric phrase and asked about)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from oda_analyst.reading.read import read
from oda_analyst.retriever.stages.stage1 import Ready, run_stage1

AS_OF = datetime(2022, 6, 12, 9, tzinfo=UTC)


@pytest.mark.parametrize(
    ("question", "event", "bucket"),
    [
        ("jobs started per hour on june 6 from 06:00 to 12:00", "started", "hour"),
        ("jobs that ended each day between june 1 and june 5", "ended", "day"),
    ],
)
def test_jobs_per_bucket_by_their_event(question: str, event: str, bucket: str) -> None:
    got = run_stage1(read(question, AS_OF)).outcome
    assert isinstance(got, Ready), got
    (plan,) = got.plans
    assert (plan.target, plan.job_event, plan.group_by) == ("jobs", event, [bucket])
    assert [a.of for a in plan.aggregations] == ["job"]
