"""Progress of long lake scans: throttled lines, the latest figures per request, the routing."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest

from oda_analyst.lake.storage import FileInfo
from oda_analyst.ontology.plan import QueryPlan, parse_plan
from oda_analyst.retriever.monthscale import aggregate_key, route
from oda_analyst.retriever.scanprogress import ScanBoard, reporter
from oda_analyst.vkg.pushdown import AggregateRequest, ScanProgress

JUNE = {"start": "2022-06-01T00:00:00Z", "end": "2022-07-01T00:00:00Z"}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_lines_are_throttled_but_the_first_and_last_always_said() -> None:
    said: list[str] = []
    clock, board = Clock(), ScanBoard()
    report = reporter("r1", said.append, plan="1/1", every_s=1.0, board=board, clock=clock)
    for done in range(1, 11):  # ten partitions, 0.3 s apart
        report(ScanProgress(done, 10, f"22-06/ipmi/m{done}", rows=done * 1000))
        clock.now += 0.3
    assert said[0] == "lake scan of plan 1/1: 1/10 partitions, 1,000 rows (22-06/ipmi/m1)"
    assert said[-1].startswith("lake scan of plan 1/1: 10/10 partitions, 10,000 rows")
    assert [int(s.split(": ")[1].split("/")[0]) for s in said] == [1, 5, 9, 10]
    latest = board.get("r1")
    assert latest is not None and (latest.done, latest.total, latest.rows) == (10, 10, 10_000)
    assert board.get("another") is None


def test_the_board_keeps_the_latest_of_the_most_recent_requests() -> None:
    board = ScanBoard(size=3)

    def work(i: int) -> None:
        report = reporter(f"r{i}", lambda _: None, board=board, clock=Clock())
        for done in range(1, 4):
            report(ScanProgress(done, 3, "p", rows=done))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    kept = [r for i in range(8) if (r := board.get(f"r{i}")) is not None]
    assert len(kept) == 3 and all((s.done, s.rows) == (3, 3) for s in kept)


def _plan(nodes: dict[str, object]) -> QueryPlan:
    return parse_plan(
        {"target": "readings", "window": JUNE, "entities": [nodes],
         "metrics": [{"plugin": "ipmi", "metric": "total_power"}],
         "aggregations": [{"fn": "max"}], "group_by": ["node"]}
    )  # fmt: skip


def test_plans_are_routed_by_their_estimated_readings() -> None:
    every = _plan({"kind": "node", "all": True})  # 980 nodes x 30 days / 20 s
    assert route(every, 127_000_000) is not None
    assert route(every, 128_000_000) is None
    two = _plan({"kind": "node", "ids": [1, 2]})  # 259,200 readings
    assert route(two, 259_200) is not None and route(two, 259_201) is None
    jobs = parse_plan(
        {"target": "jobs", "window": JUNE, "entities": [{"kind": "user", "all": True}],
         "derived": ["cpu_hours"], "group_by": ["user"],
         "aggregations": [{"fn": "sum", "of": "cpu_hours"}]}
    )  # fmt: skip
    assert route(jobs, 0) is None  # the job table is small: jobs plans stay on the graph


@pytest.mark.parametrize("late", [False, True])
def test_the_aggregate_key_follows_the_lake_files(late: bool) -> None:
    start = datetime(2022, 6, 1, tzinfo=UTC)
    req = AggregateRequest(
        metrics=(("ipmi", "total_power"),), statistic="max", level="node", start=start,
        end=datetime(2022, 7, 1, tzinfo=UTC),
    )  # fmt: skip
    now = datetime(2022, 6, 30, 23, 30, tzinfo=UTC) if late else datetime(2023, 1, 1, tzinfo=UTC)
    files = [FileInfo(rel="year_month=22-06/plugin=ipmi_pub/metric=total_power/a_0.parquet",
                      size=10, stamp="1")]  # fmt: skip
    key = aggregate_key(req, "/lake", files, now=now)
    assert key == aggregate_key(req, "/lake", list(files), now=now)
    rewritten = [FileInfo(rel=files[0].rel, size=10, stamp="2")]
    assert aggregate_key(req, "/lake", rewritten, now=now) != key
    assert aggregate_key(req, "/other", files, now=now) != key
    assert aggregate_key(req, "/lake", files, owner="ann", now=now) != key
    a_minute_later = now.replace(minute=31)
    assert (aggregate_key(req, "/lake", files, now=a_minute_later) != key) is late
