"""A window the lake does not reach is never asked about (which metric, what threshold): no
answer could bring data, so it is said at once; a question that needs no question goes on to its
no-data answer. Jobs keep their own route."""

from __future__ import annotations

from datetime import UTC, datetime

from oda_analyst.reading.read import read
from oda_analyst.retriever.stages.stage1 import Answer, Clarify, Ready, Reject, run_stage1
from oda_analyst.retriever.stages.stage3 import compile_checked

LAKE = {("ipmi", "ambient"): ["22-05", "22-06"], ("weather", "temp"): ["22-05", "22-06"]}
NOW = datetime(2026, 12, 6, 12, tzinfo=UTC)


def test_a_vague_question_outside_the_lake_is_refused_before_its_threshold_is_asked() -> None:
    reading = read("hot inlet air 9-10 yesterday", NOW)
    asked = run_stage1(reading).outcome  # without the lake's months: the threshold is asked
    assert isinstance(asked, Clarify) and asked.field == "threshold"
    found = run_stage1(reading, lake_months=LAKE).outcome
    assert isinstance(found, Reject)
    assert found.message == ("no data in 2026-12-05 09:00–2026-12-05 10:00 UTC: the lake holds "
                             "May 2022 to June 2022")  # fmt: skip


def test_a_window_the_lake_reaches_and_a_job_question_go_on() -> None:
    inside = run_stage1(read("hot inlet air 9-10 on 1 june 2022", NOW), lake_months=LAKE)
    assert isinstance(inside.outcome, Clarify)  # the threshold, as before
    jobs = run_stage1(read("how many jobs ran yesterday", NOW), lake_months=LAKE)
    assert not (isinstance(jobs.outcome, Reject) and "the lake holds" in jobs.outcome.message)


def test_a_question_that_needs_no_question_goes_on_to_its_no_data_answer() -> None:
    # answered 'completed' with no rows and the reason, as every no-data question is
    found = run_stage1(read("outdoor humidity on 3 july 2022", NOW), lake_months=LAKE)
    assert isinstance(found.outcome, Ready)


JULY_5 = datetime(2022, 7, 5, 9, tzinfo=UTC)


def test_a_day_said_without_its_month_outside_the_lake_is_refused_naming_the_lakes_day() -> None:
    # 'on the 1st' on 5 July is 1 July, which the lake does not hold; its 'no data' answered a
    # question about 1 June (the blind set's reading) with no rows
    found = run_stage1(read("lowest inlet temp node 903 saw between 2 and 3am on the 1st",
                            JULY_5), lake_months=LAKE).outcome  # fmt: skip
    assert isinstance(found, Reject)
    assert "1 July 2022" in found.message and "'1 June 2022'" in (found.hint or "")
    said = run_stage1(read("lowest inlet temp of node 903 on 3 july 2022", JULY_5),
                      lake_months=LAKE).outcome  # fmt: skip
    assert isinstance(said, Ready)  # a month said goes on to its no-data answer


def test_a_window_after_the_reference_time_is_refused_before_a_metric_is_asked() -> None:
    found = run_stage1(read("humidity on june 25", datetime(2022, 6, 20, 8, tzinfo=UTC)),
                       lake_months=LAKE).outcome  # fmt: skip
    assert isinstance(found, Reject) and "after the reference time" in found.message
    tomorrow = run_stage1(read("will PUE go over 1.3 tomorrow?",
                               datetime(2022, 6, 1, 12, tzinfo=UTC))).outcome  # fmt: skip
    assert isinstance(tomorrow, Reject) and "after the reference time" in tomorrow.message


def test_a_bare_kind_the_lake_holds_one_metric_of_is_that_metric() -> None:
    lake = {**LAKE, ("weather", "humidity"): ["22-05", "22-06"]}
    found = run_stage1(read("daily max humidity jun 20 thru jun 24", JULY_5), lake_months=lake)
    assert isinstance(found.outcome, Ready)
    assert found.grounding is not None
    assert [m for _, m in found.grounding.metrics()] == ["humidity"]
    assert any("the only humidity the lake holds" in w for w in found.warnings)
    # without the lake's months the kind is asked about, as before
    asked = run_stage1(read("daily max humidity jun 20 thru jun 24", JULY_5)).outcome
    assert isinstance(asked, Clarify) and asked.field == "metric"


def test_a_grouping_no_plan_can_make_is_refused_not_pooled() -> None:
    # readings have no partition: one average over every partition would answer another question
    found = run_stage1(read("average power of all nodes per partition on june 3", JULY_5)).outcome
    assert isinstance(found, Reject)
    assert "cannot group by partition" in found.message
    # jobs have one (issue 29): each was refused, and before that one count of every job
    for question, what in (("how many jobs started on june 6 in each partition?", "partition"),
                           ("cpu hours per partition on june 3", "partition"),
                           ("how many jobs ended on june 4 per state", "state")):  # fmt: skip
        ready = run_stage1(read(question, JULY_5)).outcome
        assert isinstance(ready, Ready), question
        assert [p.group_by for p in ready.plans] == [[what]]
    kept = run_stage1(read("jobs per user on june 2", JULY_5)).outcome
    assert isinstance(kept, Ready)


def test_hours_of_no_day_said_when_today_is_outside_the_lake_ask_the_day() -> None:
    question = read("nodes where inlet temp dropped below 20 C, 6 till 9 in the morning", JULY_5)
    found = run_stage1(question, lake_months=LAKE).outcome
    assert isinstance(found, Clarify) and found.field == "time"
    assert "names no day" in found.question and "June 2022" in found.question
    # the reply names the day of those hours: one round
    done = run_stage1(question, answers=[Answer("time", "1 June")], lake_months=LAKE)
    assert isinstance(done.outcome, Ready)
    (window,) = [p.window for p in done.outcome.plans]
    assert window is not None
    assert (window.start, window.end) == (datetime(2022, 6, 1, 6, tzinfo=UTC),
                                          datetime(2022, 6, 1, 9, tzinfo=UTC))  # fmt: skip
    # hours later today (asked at 9 am: no data yet) are asked about the same way
    later = run_stage1(read("mean inlet temp of node 3 between 2 and 3pm", JULY_5)).outcome
    assert isinstance(later, Clarify) and later.field == "time" and "no data yet" in later.question
    inside = run_stage1(read("mean inlet temp of node 3 from 6 till 9 in the morning",
                             datetime(2022, 6, 1, 12, tzinfo=UTC)), lake_months=LAKE)  # fmt: skip
    assert isinstance(inside.outcome, Ready)  # today is in the lake: today's hours


def test_a_bare_kind_not_named_by_its_held_metric_is_still_asked_about() -> None:
    # the paper's Q6: 'temperature' of a node asks which, even where a small lake holds one
    found = run_stage1(read("temperature and power of node 900 on 1 june 2022", JULY_5),
                       lake_months={("ipmi", "ambient"): ["22-06"],
                                    ("ipmi", "total_power"): ["22-06"]})  # fmt: skip
    assert isinstance(found.outcome, Clarify) and found.outcome.field == "metric"


def test_every_rack_is_all_racks_grouped_not_a_dropped_list() -> None:
    # 'for every rack' named racks 0-48, which the plan over all racks was said not to select
    found = run_stage1(read("mean inlet temperature for every rack, 3-4pm june 1", JULY_5))
    assert isinstance(found.outcome, Ready)
    (plan,) = found.outcome.plans
    assert plan.group_by == ["rack"]


def test_how_many_racks_the_jobs_ran_on_counts_the_racks_of_their_nodes() -> None:
    # 'how many distinct racks …' was refused: racks could not be counted
    found = run_stage1(read("how many different racks did user 27180's jobs touch on 3 June",
                            JULY_5))  # fmt: skip
    assert isinstance(found.outcome, Ready)
    (plan,) = found.outcome.plans
    assert plan.target == "jobs" and plan.group_by == ["rack"] and plan.count_groups
    compiled, report = compile_checked(plan, "https://w3id.org/oda-analyst/m100/graph/vkg/0a1b")
    assert report.ok and "?rack oda:hasNode ?node" in compiled.sparql
    assert [c.name for c in compiled.columns] == ["count_rack"]


def test_the_units_of_equipment_are_no_unknown_word() -> None:
    # 'room cooling units', 'CRAC units': 'units' was the one word left unused
    found = run_stage1(read("supply air temperature of the room cooling units on june 1 "
                            "14:00-15:00", JULY_5))  # fmt: skip
    assert isinstance(found.outcome, Ready)
