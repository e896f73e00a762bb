"""Words operators typed that the reader did not read, found on the nineteenth blind pair (stage
1's outcome, the Reading and the chart binding are the checks; no lake needed)."""

from __future__ import annotations

from datetime import UTC, datetime

from test_coordinator_charts import GLOSSARY, READINGS, result

from oda_analyst.coordinator.charts import bind
from oda_analyst.reading.read import read
from oda_analyst.retriever.stages.stage1 import Ready, run_stage1

AS_OF = datetime(2022, 7, 5, 9, tzinfo=UTC)


def _plan(question: str):  # type: ignore[no-untyped-def]
    got = run_stage1(read(question, AS_OF)).outcome
    assert isinstance(got, Ready), got
    (plan,) = got.plans
    return plan


def test_every_single_reading_is_a_level_on_every_reading() -> None:
    # blind19 BB21 (wrong-completed): 'at or above 95% on every single reading' listed the nodes
    # with some reading at the level (12 for 7)
    for question in ("rack 5 nodes that had cpu idle at or above 95% on every single reading, "
                     "12-1pm jun 1",
                     "rack 5 nodes with all their readings of cpu idle at or above 95%, 12-1pm "
                     "jun 1"):  # fmt: skip
        plan = _plan(question)
        assert [(f.fn, f.op, f.value) for f in plan.filters] == [("min", "ge", 95.0)]
    # some reading at the level stays as it was
    plan = _plan("rack 5 nodes with any cpu idle reading at or above 95%, 12-1pm jun 1")
    assert [(f.about, f.op) for f in plan.filters] == [("value", "ge")]


def test_a_month_named_alone_is_that_month() -> None:
    # analysis10 AA12: 'June wind speed by hour of day' asked which window
    plan = _plan("June wind speed by hour of day (UTC), averaged")
    assert plan.window is not None
    assert (plan.window.start, plan.window.end) == (datetime(2022, 6, 1, tzinfo=UTC),
                                                    datetime(2022, 7, 1, tzinfo=UTC))  # fmt: skip
    # 'may' and 'march' alone are no months ('may i see …')
    reading = read("may i see node 5 power on 1 june 2022 8-9am", AS_OF)
    assert reading.times and all(t.start > 0 for t in reading.times)


def test_a_partition_split_is_per_partition() -> None:
    # analysis10 AA09: 'partition split of the jobs that started on 8 june' asked which metric
    plan = _plan("partition split of the jobs that started on 8 june")
    assert plan.group_by == ["partition"] and plan.job_event == "started"


def test_node_x_hour_is_a_grid_of_hourly_means_per_node() -> None:
    # analysis10 AA15: 'node x hour' and 'which node-hour ran hottest' were unread
    question = ("rack 3 inlet temp heatmap, node x hour, midnight to 6am jun 1 - and which "
                "node-hour ran hottest")  # fmt: skip
    reading = read(question, AS_OF)
    assert not reading.unused
    assert [g.by for g in reading.groupings] == ["node", "hour"]
    assert [a.text for a in reading.analysis.answered] == ["which node-hour ran hottest"]
    plan = _plan(question)
    assert plan.granularity == "hour" and [m.metric for m in plan.metrics] == ["ambient"]
    # the hourly means of each node drawn as a grid, its extreme cells stated
    hourly = result(READINGS, ["ambient"], nodes=[60, 61])
    hourly["plan"]["granularity"] = "hour"
    job = bind("heatmap", [hourly], GLOSSARY)
    assert "odaplot.grid(" in job.script and "col='timestamp'" in job.script
    assert "col_label='Hour (UTC)'" in job.script
    assert "label='Hourly mean inlet temperature'" in job.script


def test_a_typo_of_percentile_after_its_rank_is_the_percentile() -> None:
    # analysis10 AA03: '95th percentle' left '95' unread (the rank's shape matched the word as
    # typed, the phrases its correction)
    reading = read("95th percentle of total power across rack 15, 8-10am 1 June, as a histogram",
                   AS_OF)  # fmt: skip
    assert ("percentile", 95.0) in [(s.name, s.p) for s in reading.statistics]
    assert not reading.unused
