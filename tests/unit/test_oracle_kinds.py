"""Expectation kinds of the retrieval oracle (``bench/devset/oracle.py``) on a hand-made job table.

The job table is written as Parquet with the real schema, so the oracle reads it the way it reads
the sample lake; every expected value below is worked out by hand from the polls.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fixtures_lake import utc, write_job_polls

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "bench") not in sys.path:
    sys.path.insert(0, str(REPO / "bench"))

from devset import oracle  # noqa: E402  (plain Polars on the files)

# (month, job_id, state, start, end, last_sched_eval, nodes); user_id = 1000 + job_id
POLLS = (
    # starts the day before, fails on 2 June: an end event on 2 June, not a start event
    ("22-06", 1, "FAILED", utc(2022, 6, 1, 22), utc(2022, 6, 2, 3), utc(2022, 6, 1, 22), "[5]"),
    # starts and fails on 2 June, two nodes
    ("22-06", 2, "FAILED", utc(2022, 6, 2, 9), utc(2022, 6, 2, 10), utc(2022, 6, 2, 9), "[7, 8]"),
    # starts on 2 June and ends on 3 June, completed
    ("22-06", 3, "COMPLETED", utc(2022, 6, 2, 23), utc(2022, 6, 3, 1), utc(2022, 6, 2), "[8]"),
    # running on 2 June, but neither starts nor ends then
    ("22-06", 4, "FAILED", utc(2022, 6, 1, 12), utc(2022, 6, 3, 12), utc(2022, 6, 1, 12), "[9]"),
    # ends exactly at the window's end: outside the half-open window
    ("22-06", 5, "FAILED", utc(2022, 6, 2, 20), utc(2022, 6, 3), utc(2022, 6, 2, 20), "[5]"),
)
DAY = ["2022-06-02T00:00:00Z", "2022-06-03T00:00:00Z"]


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("oracle-lake")
    folder = root / "year_month=22-06/plugin=job_table/metric=job_info_marconi100"
    write_job_polls(folder / "a_0.parquet", POLLS)
    return root


def _rows(spec: dict[str, object], lake: Path) -> list[tuple[object, ...]]:
    exp = oracle.expected({"kind": "job_events", **spec}, lake, oracle.jobs(lake))
    return sorted(exp.frame.rows())


def test_end_events_are_the_jobs_that_ended_in_the_window(lake: Path) -> None:
    assert _rows({"event": "end", "window": DAY}, lake) == [(1,), (2,)]


def test_start_events_are_the_jobs_that_started_in_the_window(lake: Path) -> None:
    assert _rows({"event": "start", "window": DAY}, lake) == [(2,), (3,), (5,)]


def test_filters_apply_before_the_event(lake: Path) -> None:
    spec = {"event": "start", "window": DAY, "filters": {"states": ["FAILED"]}}
    assert _rows(spec, lake) == [(2,), (5,)]


def test_distinct_users_and_nodes_and_counts(lake: Path) -> None:
    assert _rows({"event": "end", "window": DAY, "of": "user"}, lake) == [(1001,), (1002,)]
    assert _rows({"event": "end", "window": DAY, "of": "node"}, lake) == [(5,), (7,), (8,)]
    spec = {"event": "start", "window": DAY, "of": "node", "form": "count"}
    assert _rows(spec, lake) == [(3,)]  # nodes 5, 7, 8 (8 twice)


def test_answers_compare_through_the_mapped_columns(lake: Path) -> None:
    spec = {"kind": "job_events", "event": "end", "window": DAY, "form": "count"}
    exp = oracle.expected(spec, lake, oracle.jobs(lake))
    assert exp.check(["count_job"], [[2]]).ok
    assert not exp.check(["count_job"], [[5]]).ok  # every job running on 2 June
    listed = oracle.expected({**spec, "form": "list"}, lake, oracle.jobs(lake))
    assert listed.check(["job_id", "start_time"], [[2, None], [1, None]]).ok
    assert not listed.check(["job_id"], [[1], [2], [4]]).ok


def test_partition_filter_keeps_only_the_named_partitions(lake: Path) -> None:
    # every poll of the fixture is in m100_usr_prod
    prod = {"event": "end", "window": DAY, "filters": {"partitions": ["m100_usr_prod"]}}
    assert _rows(prod, lake) == [(1,), (2,)]
    dbg = {"event": "end", "window": DAY, "filters": {"partitions": ["m100_usr_dbg"]}}
    assert _rows(dbg, lake) == []


def test_job_attrs_give_the_duration_in_hours(lake: Path) -> None:
    spec = {"kind": "job_attrs", "jobs": [2, 4], "fields": ["duration_h"]}
    exp = oracle.expected(spec, lake, oracle.jobs(lake))
    (j2, h2), (j4, h4) = sorted(exp.frame.rows())
    assert (j2, j4) == (2, 4)
    assert (h2, h4) == (pytest.approx(1.0), pytest.approx(48.0))
    assert exp.check(["job_id", "duration_h"], [[4, 48.0], [2, 1.0]]).ok
    assert not exp.check(["job_id", "duration_h"], [[4, 47.0], [2, 1.0]]).ok


def test_the_nodes_of_a_job_may_come_as_its_node_list_or_one_node_per_row(lake: Path) -> None:
    exp = oracle.expected({"kind": "job_attrs", "jobs": [2], "fields": ["nodes"]}, lake,
                          oracle.jobs(lake))  # fmt: skip
    assert exp.check(["job_id", "nodes"], [[2, "[7, 8]"]]).ok
    assert exp.check(["node_id", "count_job"], [[8, 1], [7, 1]]).ok
    assert not exp.check(["node_id", "count_job"], [[7, 1]]).ok  # a node missing
    assert not exp.check(["node_id"], [[7], [8], [9]]).ok  # one too many


def _frame(spec: dict[str, object], lake: Path) -> list[tuple[object, ...]]:
    return sorted(oracle.expected(spec, lake, oracle.jobs(lake)).frame.rows())


def test_an_event_on_a_window_kind_selects_that_event(lake: Path) -> None:
    failed = {"filters": {"states": ["FAILED"]}, "window": DAY}
    assert _frame({"kind": "job_count", **failed}, lake) == [(4,)]  # 1, 2, 4, 5 overlap it
    assert _frame({"kind": "job_count", "event": "end", **failed}, lake) == [(2,)]  # 1 and 2


def test_jobs_per_bucket_with_an_event_counts_each_job_in_the_bucket_of_its_event(
    lake: Path,
) -> None:
    window = ["2022-06-01T00:00:00Z", "2022-06-04T00:00:00Z"]
    spec = {"kind": "jobs_per_bucket", "window": window, "filters": {"states": ["FAILED"]}}
    # overlap: job 4 runs 1-3 June and counts on each day
    assert _frame(spec, lake) == [("2022-06-01", 2), ("2022-06-02", 4), ("2022-06-03", 1)]
    ended = _frame({**spec, "event": "end"}, lake)
    assert ended == [("2022-06-01", 0), ("2022-06-02", 2), ("2022-06-03", 2)]


# --- a by-metric expectation over one metric per GPU is the same grouping as by GPU ----------

GPU_POWER = [f"ganglia/Gpu{i}_power_usage" for i in range(2)]


def _per_metric(metrics: list[str]) -> oracle.Expectation:
    frame = oracle.pl.DataFrame({"metric": metrics, "avg": [100.0, 250.0]})
    same = oracle._equivalent_stats(frame, {"metrics": metrics}, ["avg"], ["metric"])
    return oracle.Expectation(frame, oracle._agg_mapping(["avg"]), same_as=same)


def test_a_per_gpu_answer_matches_a_per_metric_expectation_on_the_same_values() -> None:
    exp = _per_metric(GPU_POWER)
    assert exp.check(["node_id", "gpu_index", "avg_value"], [(120, 0, 100.0), (120, 1, 250.0)]).ok
    assert exp.check(
        ["metric_name", "avg_value"], [(GPU_POWER[0], 100.0), (GPU_POWER[1], 250.0)]
    ).ok


def test_a_per_gpu_answer_with_other_values_is_refuted() -> None:
    verdict = _per_metric(GPU_POWER).check(["gpu_index", "avg_value"], [(0, 250.0), (1, 100.0)])
    assert not verdict.ok
    assert "differs" in verdict.reason


def test_metrics_that_are_not_one_per_gpu_have_no_gpu_grouping() -> None:
    mixed = ["ganglia/Gpu0_power_usage", "ganglia/Gpu0_gpu_utilization"]  # one GPU, two families
    assert oracle._by_gpu(oracle.pl.DataFrame({"metric": mixed, "avg": [1.0, 2.0]}), mixed) is None
    plain = ["ipmi/total_power", "ipmi/pcie"]
    assert oracle._by_gpu(oracle.pl.DataFrame({"metric": plain, "avg": [1.0, 2.0]}), plain) is None
    verdict = _per_metric([*GPU_POWER[:1], "ipmi/total_power"]).check(
        ["gpu_index", "avg_value"], [(0, 100.0), (1, 250.0)]
    )
    assert not verdict.ok


def test_an_hourly_mean_may_come_as_readings_at_hourly_granularity() -> None:
    hours = [utc(2022, 6, 1, 0), utc(2022, 6, 1, 1)]
    frame = oracle.pl.DataFrame({"hour": hours, "avg": [10.0, 20.0]})
    spec = {"metrics": ["weather/dew_point"]}
    exp = oracle.Expectation(
        frame,
        oracle._agg_mapping(["avg"]),
        same_as=oracle._equivalent_stats(frame, spec, ["avg"], ["hour"]),
    )
    cols = ["metric_name", "timestamp", "value"]
    assert exp.check(cols, [("dew_point", hours[0], 10.0), ("dew_point", hours[1], 20.0)]).ok
    assert not exp.check(cols, [("dew_point", hours[0], 20.0), ("dew_point", hours[1], 10.0)]).ok
    assert not exp.check(cols, [("dew_point", hours[0], 10.0)]).ok  # an hour missing
    maxima = oracle._equivalent_stats(frame.rename({"avg": "max"}), spec, ["max"], ["hour"])
    assert maxima == ()  # a maximum per hour is not what hourly readings hold
