"""Questions about jobs per partition, final state or QoS, jobs by submission and queue waits
are read and planned with no model (issue 29). Before, 'in each partition' was refused ('I cannot
group by partition yet'), the states listed as examples of 'how the jobs finished' became a filter
on them, 'submitted' was refused as out of scope, and 'queue wait' or 'run times' were asked
about as metrics. The phrasings here are other than the blind set's.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from oda_analyst.ontology.plan import JobFilter, QueryPlan
from oda_analyst.reading.read import read
from oda_analyst.reading.rules.cues import read_intent
from oda_analyst.reading.rules.form import read_form, words_of
from oda_analyst.retriever.stages.stage1 import Ready, run_stage1
from oda_analyst.retriever.understood import sentence

AS_OF = datetime(2022, 6, 12, 9, tzinfo=UTC)


def _plans(question: str) -> tuple[QueryPlan, ...]:
    got = run_stage1(read(question, AS_OF)).outcome
    assert isinstance(got, Ready), got
    return tuple(got.plans)


def _states(plan: QueryPlan) -> list[JobFilter]:
    return [f for f in plan.filters if isinstance(f, JobFilter) and f.field == "state"]


@pytest.mark.parametrize(
    ("text", "groups"),
    [
        ("number of jobs per partition", ("partition",)),
        ("jobs that ended, broken down by partition", ("partition",)),
        ("gpu hours across partitions", ("partition",)),
        ("break the jobs down by final state", ("state",)),
        ("how the jobs of user 5 fared in the end", ("state",)),
        ("how did those jobs finish", ("state",)),
        ("jobs per qos", ("qos",)),
        ("jobs of quality of service per partition", ("partition",)),
        ("jobs on partition m100_usr_dbg", ()),  # a partition named: a filter, no grouping
    ],
)
def test_grouping_cues_of_job_attributes(text: str, groups: tuple[str, ...]) -> None:
    assert read_intent(text).groups == groups


def test_states_given_as_examples_of_the_groups_are_no_filter() -> None:
    grouped = read_intent("break down how the jobs finished, e.g. failed, timed out or completed")
    assert grouped.groups == ("state",) and not grouped.job_filters
    listed = read_intent("count of jobs by final state (completed, cancelled, etc.)")
    assert listed.groups == ("state",) and not listed.job_filters
    # a state named outside a list of examples still filters: failed jobs, per partition
    failed = read_intent("failed jobs per partition")
    assert [f.value for f in failed.job_filters] == ["FAILED"]


@pytest.mark.parametrize(
    ("text", "wait", "duration"),
    [
        ("average time spent in the queue by jobs", True, False),
        ("median waiting time per partition", True, False),
        ("how long jobs queued for", True, False),
        ("distribution of job runtimes", False, True),
        ("wall time of the debug jobs", False, True),
        ("jobs per partition", False, False),
    ],
)
def test_per_job_quantity_cues(text: str, wait: bool, duration: bool) -> None:
    cues = read_intent(text)
    assert (cues.wait, cues.duration) == (wait, duration)


@pytest.mark.parametrize(
    ("text", "event"),
    [
        ("how many jobs were submitted", "submitted"),
        ("job submissions per hour", "submitted"),
        ("jobs submitted by user 12", None),  # who submitted them: the jobs running
        ("jobs that were submitted and started", None),  # which window? the jobs running
        ("how the jobs that ended finished completed failed and so on", "ended"),
        ("jobs that ended in the failed state", None),  # the final state, not the end time
        # analysis5 V21: 'ended up' is how they turned out; the jobs running that day were
        # counted ('started' and 'ended' cancelled out)
        ("how the jobs started on 7 june 2022 ended up, counts by final state", "started"),
    ],
)
def test_the_job_event_a_window_selects(text: str, event: str | None) -> None:
    assert read_form(words_of(text)).job_event == event


@pytest.mark.parametrize(
    ("question", "group", "event"),
    [
        ("number of jobs per partition that ended on 3 june", "partition", "ended"),
        ("break down the jobs that started on june 2 by final state", "state", "started"),
        ("jobs per qos that started on june 3", "qos", "started"),
    ],
)
def test_jobs_counted_per_attribute(question: str, group: str, event: str) -> None:
    (plan,) = _plans(question)
    assert plan.target == "jobs" and plan.group_by == [group]
    assert [a.column for a in plan.aggregations] == ["count_job"]
    assert plan.job_event == event and not _states(plan)


def test_how_the_jobs_finished_is_a_count_per_final_state() -> None:
    (plan,) = _plans("how did the jobs that ended on june 5 fare, e.g. completed or timed out?")
    assert plan.group_by == ["state"] and plan.job_event == "ended"
    assert not _states(plan)  # every final state, not the two given as examples


def test_hours_per_partition_are_summed_per_partition() -> None:
    (plan,) = _plans("gpu hours by partition on june 2")
    assert plan.group_by == ["partition"] and plan.derived == ["gpu_hours"]
    assert [a.column for a in plan.aggregations] == ["sum_gpu_hours", "count_job"]


def test_failed_jobs_per_partition_keep_their_state_filter() -> None:
    (plan,) = _plans("failed jobs per partition on june 4")
    assert plan.group_by == ["partition"]
    assert [f.value for f in _states(plan)] == ["FAILED"]


@pytest.mark.parametrize(
    ("question", "groups"),
    [
        ("how many jobs were submitted on june 6", []),
        ("number of jobs submitted each hour on june 7", ["hour"]),
    ],
)
def test_jobs_selected_by_their_submission(question: str, groups: list[str]) -> None:
    (plan,) = _plans(question)
    assert plan.job_event == "submitted" and plan.group_by == groups
    assert [a.column for a in plan.aggregations] == ["count_job"]


def test_a_statistic_of_queue_waits_per_partition() -> None:
    (plan,) = _plans("median queue wait per partition for jobs that started on june 3")
    assert plan.derived == ["queue_wait"] and plan.group_by == ["partition"]
    assert [a.column for a in plan.aggregations] == ["median_queue_wait_min", "count_job"]
    assert plan.job_event == "started"


def test_a_box_plot_of_waits_lists_each_job_with_its_partition() -> None:
    listing, per_group = _plans(
        "waiting time of jobs that started on june 1 by partition, as a box plot with medians"
    )
    assert listing.derived == ["queue_wait"] and listing.job_fields == ["partition"]
    assert not listing.aggregations and listing.job_event == "started"
    assert per_group.group_by == ["partition"]
    assert "median_queue_wait_min" in [a.column for a in per_group.aggregations]


def test_a_histogram_of_runtimes_lists_the_jobs_with_their_duration() -> None:
    (listing,) = _plans("histogram of the runtimes of serial queue jobs that started on june 4")
    assert listing.derived == ["job_duration"] and not listing.aggregations
    assert [(f.field, f.value) for f in listing.filters] == [("partition", "m100_all_serial")]


@pytest.mark.parametrize(
    "question",
    [
        "number of jobs per partition that ended on 3 june",
        "how did the jobs that ended on june 5 fare, e.g. completed or timed out?",
        "gpu hours by partition on june 2",
        "number of jobs submitted each hour on june 7",
        "median queue wait per partition for jobs that started on june 3",
        "jobs per qos that started on june 3",
    ],
)
def test_what_was_understood_reads_back_as_the_same_plan(question: str) -> None:
    # 'queue wait (min)' read back as a minimum of the waits before the unit was spelled out
    (plan,) = _plans(question)
    assert _plans(sentence(plan)) == (plan,)
