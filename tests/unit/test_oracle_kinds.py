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
