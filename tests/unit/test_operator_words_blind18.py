"""Words operators typed that the reader did not read, found on blind17's leftovers and the
eighteenth blind pair: each question now reaches the outcome an operator expects (no lake
needed: stage 1's outcome is the check)."""

from __future__ import annotations

from datetime import UTC, datetime

from oda_analyst.reading.read import read
from oda_analyst.retriever.stages.stage1 import Clarify, Ready, run_stage1

AS_OF = datetime(2022, 7, 5, 9, tzinfo=UTC)


def _outcome(question: str) -> object:
    return run_stage1(read(question, AS_OF)).outcome


def test_too_hot_beside_a_named_temperature_asks_the_threshold() -> None:
    # blind17 E36, blind16 M46: 'hot' became a second, bare 'temperature' beside the named one,
    # which asked which temperature; the temperature is named, the level has no number
    for question in ("which nodes ran too hot on pcie temp 2-3pm jun 1",
                     "which nodes ran too hot on jun 1 (inlet)"):  # fmt: skip
        got = _outcome(question)
        assert isinstance(got, Clarify), got
        assert got.field == "threshold", got
        assert "°C" in got.question, got
    # with nothing named, 'hot' still names the quantity, and asks which temperature
    got = _outcome("which nodes ran too hot 2-3pm jun 1")
    assert isinstance(got, Clarify) and got.field == "metric", got
    # the threshold given, the named temperature is the one filtered
    got = _outcome("which nodes ran too hot on pcie temp 2-3pm jun 1 above 57 C")
    assert isinstance(got, Ready), got
    (plan,) = got.plans
    assert [m.metric for m in plan.metrics] == ["pcie"]


def _groups(question: str) -> list[list[str]]:
    got = _outcome(question)
    assert isinstance(got, Ready), got
    return [list(p.group_by) for p in got.plans]


def test_a_bar_chart_over_named_racks_has_a_bar_per_rack() -> None:
    # analysis8 D07: the five racks were pooled into one mean, and a bar chart of one figure
    # was refused
    question = "bar chart: avg node power for racks 10 thru 14, 6-7pm jun 1, list the means"
    assert _groups(question) == [["rack"]]
    assert _groups("avg node power of racks 10 and 11 as a pie, 6-7pm jun 1") == [["rack"]]
    # without a chart, or said combined, the racks stay one figure taken together
    assert _groups("avg node power for racks 10 thru 14, 6-7pm jun 1") == [[]]
    assert _groups("bar chart: avg node power of racks 10 thru 14 combined, 6-7pm jun 1") == [[]]


def _plan(question: str):  # type: ignore[no-untyped-def]
    got = _outcome(question)
    assert isinstance(got, Ready), got
    (plan,) = got.plans
    return plan


def test_bottom_k_ranks_the_lowest_first_whatever_the_key() -> None:
    # blind18 C17 (wrong-completed): 'bottom 3 racks for mean …' listed the top 3
    plan = _plan("bottom 3 racks for mean gpu0 utilization between 3 and 4pm jun 1")
    assert plan.limit == 3 and [(o.key, o.desc) for o in plan.order_by] == [("avg_value", False)]
    plan = _plan("bottom 5 users by number of jobs on 3 june")
    assert (plan.order_by[0].key, plan.order_by[0].desc) == ("count_job", False)
    plan = _plan("bottom 5 users by cpu hours on 3 june")
    assert (plan.order_by[0].key, plan.order_by[0].desc) == ("sum_cpu_hours", False)
    plan = _plan("top 5 users by cpu hours on 3 june")
    assert (plan.order_by[0].key, plan.order_by[0].desc) == ("sum_cpu_hours", True)


def test_total_in_a_metric_name_is_no_sum_level() -> None:
    # blind18 C22 (wrong-completed): 'kept total power below 700 W on every reading' tested the
    # sum of the readings (0 nodes for 6)
    for question in ("in rack 12, count the nodes that kept total power below 700 W on every "
                     "reading, 3-4am jun 1",
                     "in rack 12, count the nodes whose total power stayed below 700 W, 3-4am "
                     "jun 1"):  # fmt: skip
        plan = _plan(question)
        assert [(f.fn, f.op, f.value) for f in plan.filters] == [("max", "lt", 700.0)]
        assert plan.count_groups


def test_gpus_named_after_their_node_qualify_the_power() -> None:
    # blind18 C14 (wrong-completed): 'power draw of each of node 260's gpus' was the node's total
    plan = _plan("avg power draw of each of node 260's gpus, 12-1pm jun 1")
    assert [m.metric for m in plan.metrics] == [f"Gpu{i}_power_usage" for i in range(4)]
    assert plan.group_by == ["gpu"]
    plan = _plan("avg power draw of node 260 gpus, 12-1pm jun 1")
    assert [m.metric for m in plan.metrics] == [f"Gpu{i}_power_usage" for i in range(4)]
    # a node between the phrase and something else is no part of it
    plan = _plan("avg power of nodes 5 and 6 on jun 1 12-1pm")
    assert [m.metric for m in plan.metrics] == ["total_power"]


def test_logged_pct_job_starts_covers_and_split_by() -> None:
    # blind18 C04, C19 ('logged'), C05 ('95th pct'), C26 ('job starts'), C29 ('that covers'),
    # analysis9 I10 ('split by')
    plan = _plan("every wind speed value logged on may 3 between 6 and 7 in the morning")
    assert [m.metric for m in plan.metrics] == ["wind_speed"] and not plan.aggregations
    plan = _plan("node 57: mean and 95th pct of gpu3 utilizaton, 10am-1pm jun 1")
    assert [a.fn for a in plan.aggregations] == ["avg", "p95"]
    plan = _plan("count of job starts per hour, 8am to noon on jun 2")
    assert plan.job_event == "started" and plan.group_by == ["hour"]
    plan = _plan("cpu-hours burned in m100_usr_prod on 8 june, and how many jobs that covers")
    assert {(a.fn, a.of) for a in plan.aggregations} == {("count", "job"), ("sum", "cpu_hours")}
    plan = _plan("jobs that started on 10 june, split by final state")
    assert plan.group_by == ["state"]


def test_where_the_smoothed_curve_tops_out_is_the_rolling_means_max() -> None:
    # analysis9 I06: 'top out' was a metric phrase ('out'), then, read by the retrieval only, a
    # max of the raw readings stated beside the rolling mean's (1,243 W for the 1,144.78 asked)
    question = ("node 301 total power 8am-noon jun 1 with a 15-min rolling avg, line chart - "
                "where does the smoothed curve top out?")  # fmt: skip
    plan = _plan(question)
    assert not plan.aggregations  # the readings the rolling mean is drawn from
    names = [s.name for s in read(question, AS_OF).statistics]
    assert names.index("max") > names.index("rolling")


def test_a_heatmap_per_hour_of_racks_has_a_row_per_node_or_rack() -> None:
    # analysis3 V19: 'heatmap of hourly avg node power for the rack 33 nodes' was one mean per
    # hour of the rack, and a heatmap of one row was refused
    assert _groups("heatmap of hourly avg node power for the rack 33 nodes over jun 1") == [
        ["node", "hour"]
    ]
    assert _groups("heatmap of hourly avg node power of racks 3 and 4 over jun 1") == [
        ["rack", "hour"]
    ]
    # without a heatmap, the rack's nodes stay one figure per hour taken together
    assert _groups("hourly avg node power for the rack 33 nodes over jun 1") == [["hour"]]
