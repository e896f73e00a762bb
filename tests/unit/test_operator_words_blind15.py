"""Words operators typed on the fifteenth blind pair (blind15, analysis6) that the reader did
not read: each question now reaches a plan of the right shape, or its Reading says what the
analysis answers (no lake needed: the stage-1 plan is the check)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from oda_analyst.ontology.plan import JobFilter
from oda_analyst.reading.read import read
from oda_analyst.reading.rules import spelling
from oda_analyst.retriever.stages.stage1 import Ready, run_stage1

AS_OF = datetime(2022, 7, 20, 9, tzinfo=UTC)


def _plans(question: str) -> list:  # type: ignore[type-arg]
    got = run_stage1(read(question, AS_OF))
    assert isinstance(got.outcome, Ready), got.outcome
    return list(got.outcome.plans)


def test_rack_by_rack_groups_by_rack() -> None:
    # X17: 'psu 1 input power rack' was read as one metric phrase and asked about
    (plan,) = _plans("avg psu 1 input power rack by rack for racks 10, 11 and 12, 9-10pm on june 1")
    assert plan.group_by == ["rack"] and [m.metric for m in plan.metrics] == ["ps1_input_power"]


def test_a_possessive_day_is_a_window_and_no_metric() -> None:
    # X44: "yesterday's avg outdoor temp" left "'s" a metric phrase ('no metric matches s')
    (plan,) = _plans("yesterday's avg outdoor temp")
    assert plan.window is not None and plan.window.start == datetime(2022, 7, 19, tzinfo=UTC)


def test_no_dot_of_is_a_number_of() -> None:
    # X34: 'no. of jobs' made 'no' a metric phrase
    (plan,) = _plans("no. of jobs in the serial partition running at any point on june 9")
    assert [a.fn for a in plan.aggregations] == ["count"]
    assert any(isinstance(f, JobFilter) and f.value == "m100_all_serial" for f in plan.filters)


def test_the_busiest_users_by_jobs_rank_by_jobs_not_utilisation() -> None:
    # X21: 'busiest' became 'highest utilisation' beside '(most jobs running)'
    (plan,) = _plans("5 busiest users (most jobs running) on june 8th")
    assert plan.limit == 5 and plan.group_by == ["user"]
    assert not plan.metrics


def test_killed_for_running_out_of_memory_is_the_state() -> None:
    # X31: 'job killed' was left a metric phrase
    (plan,) = _plans("number of distinc users with a job killed for running out of memory on "
                     "6 june")  # fmt: skip
    states = [f.value for f in plan.filters if isinstance(f, JobFilter) and f.field == "state"]
    assert states == ["OUT_OF_MEMORY"]


def test_run_times_of_jobs_that_completed_select_them_by_their_end() -> None:
    # analysis6 U35: 'run times' read as 'running', so the jobs running that day were drawn
    (plan,) = _plans("run times of the jobs that completed on 4 june 2022")
    assert plan.job_event == "ended"


@pytest.mark.parametrize(
    ("typed", "meant"),
    [("lowst", "lowest"), ("tempreture", "temperature"), ("utilisaton", "utilisation"),
     ("corelaton", "correlation")],
)  # fmt: skip
def test_a_typo_of_a_known_word_is_read_as_it(typed: str, meant: str) -> None:
    # analysis6 U18, U29: two slips, or one slip two known words share
    assert spelling.correction(typed, spelling.vocabulary()) == meant


def test_unknown_and_english_words_stay() -> None:
    known = spelling.vocabulary()
    assert spelling.correction("tracks", known) is None
    assert spelling.correction("zzzzzzzzz", known) is None


def test_what_an_analysis_answers_is_not_retrieved() -> None:
    # U28: 'count them' of an anomaly count was a count of the readings (1,440 beside 43)
    said = read("Tot_ict minutes on 1 june more than 2 sigma away from the day's mean - count "
                "them, line chart", AS_OF)  # fmt: skip
    assert "count" not in said.retrieval_text() and "count" in [
        a.text for a in said.analysis.answered
    ]
    # U29: 'mean per hour' of an hour-of-day profile is the profile's (raw readings retrieved)
    said = read("hour-of-day profile of the outdoor temp over june 2022 (mean per hour), line "
                "chart", AS_OF)  # fmt: skip
    assert "per hour" not in said.retrieval_text()
    # U26: 'the difference' is the comparison's, no metric
    said = read("mean outdoor temp in may 2022 vs june 2022, and the difference", AS_OF)
    assert "difference" not in said.retrieval_text()
    # U09: '(r)' asks the correlation
    said = read("outside temp vs humidity for may 2022 as a scatter, how correlated are they "
                "(r)?", AS_OF)  # fmt: skip
    assert not said.unused


def test_a_cv_of_the_drawn_readings_is_the_analysis() -> None:
    # U07: the CV beside a histogram and a percentile was left in the retrieval's words
    said = read("socket 0 power of every node in rack 5, 10-11am jun 1: histogram, 99th "
                "percentile and the CV", AS_OF)  # fmt: skip
    assert said.analysis.over_readings
    assert {s.name for s in said.analysis.statistics} == {"percentile", "cv"}


@pytest.mark.parametrize(
    "question",
    ["scatter: allocated cpus (slurm, cluster-wide) against idle node count over 1 June 2022",
     "slurm's cluster cpu util vs the allocated node count over 1 June 2022: scatter"],
)  # fmt: skip
def test_a_scheduler_node_count_is_a_series_not_a_count(question: str) -> None:
    # U10, V10: 'idle node count' asked 'how many nodes' and the plan was refused
    plans = _plans(question)
    assert all("count" not in [a.fn for a in p.aggregations] for p in plans)


def test_killed_for_running_out_of_time_is_a_timeout() -> None:
    # blind14 Z34: 'out' was left over
    (plan,) = _plans("how many jobs got killed for running out of time on 4 june 2022")
    states = [f.value for f in plan.filters if isinstance(f, JobFilter) and f.field == "state"]
    assert states == ["TIMEOUT"]


def test_start_and_finish_times_of_a_job_are_its_start_and_end() -> None:
    # blind14 Z45: 'times' was left over ('time' alone was read)
    (plan,) = _plans("job 14581534 — start and finish times?")
    assert plan.target == "jobs"


def test_a_unit_written_with_a_slash_is_the_figures_unit() -> None:
    # blind14 Z14: 'average wind speed on 20 june 2022, m/s' ('no metric matches m/s')
    said = read("mean wind speed in m/s on 20 june 2022", AS_OF)
    assert [u.text for u in said.units] == ["m/s"]
    assert [m.text for m in said.metric_phrases] == ["wind speed"]
    (plan,) = _plans("average wind speed on 20 june 2022, m/s")
    assert [m.metric for m in plan.metrics] == ["wind_speed"]


def test_for_every_node_still_groups() -> None:
    # the 'rack by rack' shape must not take 'for every node' (three words, no 'by')
    assert [g.by for g in read("mean power for every node on 1 June 2022", AS_OF).groupings] == [
        "node"
    ]


def test_the_hottest_it_got_outside_is_the_weather() -> None:
    # blind14 Z09: 'outside' was asked about as a metric
    (plan,) = _plans("hottest and coldest it got outside in may 2022 (max + min temp)")
    assert [m.metric for m in plan.metrics] == ["temp"]
    assert sorted(a.fn for a in plan.aggregations) == ["max", "min"]


def test_a_fortnight_of_a_month_is_its_days() -> None:
    # blind14 Z10: 'first fortnight' was read as a metric phrase
    (plan,) = _plans("median outdoor humidty, first fortnight of june 2022 (1st-14th)")
    assert plan.window is not None
    assert (plan.window.start.day, plan.window.end.day) == (1, 15)


def test_according_to_names_only_the_source() -> None:
    # blind14 Z13: 'according' was read as a metric phrase; blind9 V21: with the words dropped,
    # 'down nodes slurm' became one phrase two metrics matched (a comma parts them)
    (plan,) = _plans("peak number of allocted cpus cluster-wide according to slurm, 1 June 2022")
    assert [m.metric for m in plan.metrics] == ["total_cpus_alloc"]
    (plan,) = _plans("mean number of down nodes according to slurm on 1 june 2022")
    assert [m.metric for m in plan.metrics] == ["total_nodes_down"]


def test_jobs_of_n_nodes_or_more_filter_the_node_count() -> None:
    # blind14 Z42: '8' was left over ('8 or more nodes' was read, '8 nodes or more' was not)
    (plan,) = _plans("jobs of 8 nodes or more that were on the go at some point on 6 june 2022 "
                     "— how many")  # fmt: skip
    assert [(f.field, f.op, f.value) for f in plan.filters if isinstance(f, JobFilter)] == [
        ("num_nodes", "ge", 8)
    ]


def test_the_biggest_ranks_as_the_highest() -> None:
    # blind14 Z22: 'biggest' was left over ('largest' was read)
    (plan,) = _plans("4 nodes with the biggest socket 0 power peak, 1 june 2022 20:00-22:00")
    assert plan.limit == 4 and plan.group_by == ["node"]
