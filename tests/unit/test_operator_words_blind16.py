"""Words operators typed that the reader did not read, found on blind14's leftovers and the
sixteenth blind pair: each question now reaches a plan of the right shape (no lake needed: the
stage-1 plan is the check)."""

from __future__ import annotations

from datetime import UTC, datetime

from oda_analyst.ontology.plan import JobFilter
from oda_analyst.reading.read import read
from oda_analyst.retriever.stages.stage1 import Ready, run_stage1

AS_OF = datetime(2022, 7, 5, 9, tzinfo=UTC)


def _plans(question: str) -> list:  # type: ignore[type-arg]
    got = run_stage1(read(question, AS_OF))
    assert isinstance(got.outcome, Ready), got.outcome
    return list(got.outcome.plans)


def _states(plan) -> list[str]:  # type: ignore[no-untyped-def]
    return [f.value for f in plan.filters if isinstance(f, JobFilter) and f.field == "state"]


def test_jobs_that_died_of_a_node_failure_ended_in_node_fail() -> None:
    # blind14 Z36: 'died because' was left a metric phrase ('node failures' alone Nagios counts)
    (plan,) = _plans("users whose jobs died because of a node failure on 2 june 2022")
    assert _states(plan) == ["NODE_FAIL"] and plan.group_by == ["user"]
    (plan,) = _plans("how many jobs failed due to node failure on 3 june")
    assert _states(plan) == ["NODE_FAIL"]


def test_users_whose_jobs_is_a_question_about_users() -> None:
    (plan,) = _plans("users who had a job time out on 3 june")
    assert _states(plan) == ["TIMEOUT"] and plan.group_by == ["user"]


def _window(question: str) -> tuple[datetime, datetime]:
    (plan,) = _plans(question)
    assert plan.window is not None
    return plan.window.start, plan.window.end


def test_a_clock_at_night_is_in_the_evening_and_the_night_no_second_window() -> None:
    # blind16 M03: 'ten past eleven at night' was 11:10 plus a window 00:00-06:00 (two results)
    start, end = _window("Gpu1 utilisation for node 64 at ten past eleven at night on June 1st")
    assert start < datetime(2022, 6, 1, 23, 10, tzinfo=UTC) < end
    start, end = _window("node 64 total power at 11pm at night on june 1")
    assert start < datetime(2022, 6, 1, 23, tzinfo=UTC) < end
    start, end = _window("node 64 total power at 2am at night on june 1")
    assert start < datetime(2022, 6, 1, 2, tzinfo=UTC) < end


def test_five_to_eight_after_at_is_an_instant() -> None:
    # blind16 M04: 'at five to eight' left 'five' a metric phrase (load_five offered)
    start, end = _window("what was the total_nodes_idle at five to eight in the morning, 1st of "
                         "june")  # fmt: skip
    assert start < datetime(2022, 6, 1, 7, 55, tzinfo=UTC) < end


def test_a_count_named_first_and_asked_last_counts_that_thing() -> None:
    # blind16 M36: '… - how many?' counted the jobs, not the distinct nodes asked (a wrong number)
    (plan,) = _plans("distinct nodes touched by jobs that got cancelld on 8 jun - how many?")
    assert [(a.fn, a.of) for a in plan.aggregations] == [("count", "node")]
    assert _states(plan) == ["CANCELLED"]


def test_cv_std_abbreviations_and_low_and_high() -> None:
    # blind16 M10 'std dev & CV of …', M07 'psu1 input pwr', M14 '- low and high'
    (plan,) = _plans("std dev & CV of pcie temprature on node 505 from 20:00 till 22:00, june 1")
    assert [a.fn for a in plan.aggregations][:2] == ["std", "cv"]
    (plan,) = _plans("node 812 psu1 input pwr 4-6am on 1 june: mean and max")
    assert [m.metric for m in plan.metrics] == ["ps1_input_power"]
    (plan,) = _plans("outside dew point on 22 May - low and high")
    assert [a.fn for a in plan.aggregations] == ["min", "max"]


def test_how_many_on_average_is_the_mean_of_a_count_series() -> None:
    # blind16 M13: refused as 'would count readings'
    (plan,) = _plans("how many cpus did slurm have allocated (whole cluster) on average between "
                     "2 and 3 pm, jun 1")  # fmt: skip
    assert [a.fn for a in plan.aggregations] == ["avg"]
    assert [m.metric for m in plan.metrics] == ["total_cpus_alloc"]


def test_w_slash_the_ones_and_debug_jobs() -> None:
    # analysis7 N15 'racks w/ the lowest', N17 'for the ones that ended'
    (plan,) = _plans("the 4 racks w/ the lowest avg cpu_user 3-4am jun 1")
    assert plan.limit == 4 and plan.group_by == ["rack"]
    (plan,) = _plans("FAILED jobs per partition, for the ones that ended on 6 june")
    assert plan.group_by == ["partition"] and _states(plan) == ["FAILED"]
    (plan,) = _plans("how many debug jobs ended on june 3")
    assert any(f.value == "m100_usr_dbg" for f in plan.filters if isinstance(f, JobFilter))


def test_whats_r_asks_for_the_correlation() -> None:
    # analysis7 N07: 'scatter … - what's r?' refused for 'r'
    got = read("scatter of gpu0 power against gpu0 util for node 714, 8-10am jun 1 - what's r?",
               AS_OF)  # fmt: skip
    assert [s.name for s in got.analysis.statistics] == ["correlation"] and got.unused == []


def test_a_duration_unit_is_read_after_in_or_as_or_in_parentheses() -> None:
    asked = read("box plot of job run times per partition for jobs that ended on june 3, with "
                 "the median of each in minutes", AS_OF)  # fmt: skip
    assert asked.time_unit == "min" and asked.unused == []
    assert read("median queue wait (hrs) of jobs submitted on 4 june", AS_OF).time_unit == "h"
    assert read("avg node 5 power in the last 10 minutes", AS_OF).time_unit is None


def test_the_least_on_average_ranks_by_the_mean() -> None:
    # blind17 E18: 'the least total power on average' ranked the racks by their minimum
    (plan,) = _plans("which 3 racks drew the least total power on average, 10-11pm jun 1")
    assert [(o.key, o.desc) for o in plan.order_by] == [("avg_value", False)]
    assert plan.limit == 3 and plan.group_by == ["rack"]


def test_not_once_under_is_never_under() -> None:
    # blind17 E23: 'not once under 97%' counted the nodes with some reading under 97
    (plan,) = _plans("how many nodes had cpu idle not once under 97% from 4 to 5am on june 1")
    assert plan.filters
    assert all(getattr(f, "fn", None) == "min" and f.op == "ge" for f in plan.filters)


def test_hash_of_jobs_is_a_count() -> None:
    # blind17 E26: '# of jobs that hit TIMEOUT' listed the jobs
    (plan,) = _plans("# of jobs that hit TIMEOUT on 8 june")
    assert [(a.fn, a.of) for a in plan.aggregations] == [("count", "job")]


def test_a_trailing_percentile_heaviest_vs_lists_and_a_glued_day() -> None:
    # blind17 E07 ': p90 and std dev', E19 'heaviest', E16 'rack 40 vs 41 vs 42', E24 'jun1'
    (plan,) = _plans("cpu_user on node 855 all day june 1: p90 and std dev")
    assert [a.fn for a in plan.aggregations] == ["p90", "std"]
    (plan,) = _plans("4 heaviest users by cpu hours on June 6th")
    assert plan.limit == 4 and plan.group_by == ["user"]
    (plan,) = _plans("avg pcie temp rack 40 vs 41 vs 42, 2-3am on the 1st of june")
    assert [e.ids for e in plan.entities] == [[40, 41, 42]] and plan.group_by == ["rack"]
    start, _ = _window("node 190 vs 191 - mean inlet temp 10am-12pm jun1")
    assert start == datetime(2022, 6, 1, 10, tzinfo=UTC)


def test_jobs_finishing_per_hour_and_all_four_gpus() -> None:
    # blind17 E27 'jobs finishing per hour', E15 'per gpu (all 4)'
    (plan,) = _plans("jobs finishing per hour on 5 Jun from 6pm to 10pm")
    assert plan.job_event == "ended" and plan.group_by == ["hour"]
    (plan,) = _plans("GPU utilisation of node 702 per gpu (all 4), avg, 8-9 am 1 june")
    assert plan.group_by == ["gpu"]
