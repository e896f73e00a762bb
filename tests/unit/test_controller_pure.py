"""The operator's pure parts: conditions, cache GC, schedules, the analysis recipe choice."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from oda_analyst.controller import gc, names, schedule
from oda_analyst.controller.analysis import MAX_TABLE_BYTES, asked_charts, build_analysis
from oda_analyst.controller.peering import peering_priority
from oda_analyst.controller.status import STATUS_ROWS, answer_fields, conditions, phase_patch
from oda_analyst.errors import UsageError

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def test_condition_keeps_its_transition_time_until_it_changes() -> None:
    first = conditions([], names.BUILDING, "Understood", "x", T0)
    again = conditions(first, names.BUILDING, "Still", "y", T0 + timedelta(minutes=5))
    assert again[0]["lastTransitionTime"] == "2026-01-01T12:00:00Z"
    assert again[0]["reason"] == "Still"
    done = conditions(again, names.COMPLETED, "Completed", "z", T0 + timedelta(minutes=9))
    assert {c["type"] for c in done} == {"GraphReady", "Completed"}
    assert next(c for c in done if c["type"] == "Completed")["status"] == "True"


def test_phase_patch_records_the_generation_it_saw() -> None:
    patch = phase_patch({}, names.RETRIEVING, reason="r", message="m", now=T0, generation=3)
    assert patch["status"]["phase"] == "Retrieving" and patch["status"]["observedGeneration"] == 3


def test_answer_fields_bound_the_rows_kept_in_status() -> None:
    answer = {
        "answer": "a",
        "columns": ["node", "value"],
        "rows": [[900, i] for i in range(STATUS_ROWS + 30)],
        "row_count": STATUS_ROWS + 30,
    }
    fields = answer_fields(answer)
    assert len(fields["rows"]) == STATUS_ROWS and fields["rows"][1] == {"node": 900, "value": 1}
    assert fields["rowCount"] == STATUS_ROWS + 30


def _cache(name: str, seen: datetime | None, phase: str = "Ready", ttl: int = 3600,
           size: int = 0) -> dict[str, Any]:  # fmt: skip
    status: dict[str, Any] = {"phase": phase, "bytes": size}
    if seen is not None:
        status["lastAccess"] = seen.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"metadata": {"name": name}, "spec": {"ttlSeconds": ttl}, "status": status}


def test_ttl_counts_from_the_last_access() -> None:
    assert not gc.expired(_cache("a", T0), T0 + timedelta(minutes=59))
    assert gc.expired(_cache("a", T0), T0 + timedelta(minutes=61))
    assert not gc.expired(_cache("a", T0, phase="Building"), T0 + timedelta(days=9))


def test_lru_evicts_the_least_recently_read_ready_caches_only() -> None:
    caches = [_cache("new", T0), _cache("old", T0 - timedelta(hours=2)),
              _cache("mid", T0 - timedelta(hours=1)),
              _cache("building", None, phase="Building")]  # fmt: skip
    assert gc.lru_victims(caches, 3) == []
    assert gc.lru_victims(caches, 2) == ["old"]
    assert gc.lru_victims(caches, 1) == ["old", "mid"]


def test_lru_bounds_the_total_size_too() -> None:
    caches = [_cache("new", T0, size=500), _cache("old", T0 - timedelta(hours=2), size=300),
              _cache("mid", T0 - timedelta(hours=1), size=400)]  # fmt: skip
    assert gc.lru_victims(caches, 10, max_bytes=1200) == []
    assert gc.lru_victims(caches, 10, max_bytes=1000) == ["old"]
    assert gc.lru_victims(caches, 10, max_bytes=800) == ["old", "mid"]
    assert gc.lru_victims(caches, 10, max_bytes=100) == ["old", "mid", "new"]
    assert gc.lru_victims(caches, 2, max_bytes=1000) == ["old"]  # both bounds met by one


def _query(phase: str, *caches: str) -> dict[str, Any]:
    return {"status": {"phase": phase, "graphs": [{"key": c, "cache": c} for c in caches]}}


def test_a_cache_a_running_query_reads_is_never_chosen() -> None:
    queries = [_query("Analysing", "old"), _query("Completed", "mid"), _query("Pending")]
    used = gc.in_use(queries)
    assert used == {"old"}
    caches = [_cache("new", T0, size=500), _cache("old", T0 - timedelta(hours=2), size=300),
              _cache("mid", T0 - timedelta(hours=1), size=400)]  # fmt: skip
    # old is least recently read, but in use: the next one goes instead, and old still counts
    assert gc.lru_victims(caches, 2, protected=used) == ["mid"]
    assert gc.lru_victims(caches, 1, protected=used) == ["mid", "new"]
    assert gc.lru_victims(caches, 10, max_bytes=800, protected=used) == ["mid"]


def test_a_running_query_keeps_its_cache_past_the_ttl_too() -> None:
    stale = _cache("stale", T0 - timedelta(hours=3), ttl=3600)
    fresh = _cache("fresh", T0)
    caches = [stale, fresh]
    assert gc.why_collect(stale, T0, caches=caches, queries=[], capacity=5) is not None
    assert "TTL" in (gc.why_collect(stale, T0, caches=caches, queries=[], capacity=5) or "")
    reading = [_query("Retrieving", "stale")]
    assert gc.why_collect(stale, T0, caches=caches, queries=reading, capacity=5) is None
    assert gc.why_collect(stale, T0, caches=caches, queries=[_query("Failed", "stale")],
                          capacity=5) is not None  # fmt: skip
    assert gc.why_collect(fresh, T0, caches=caches, queries=reading, capacity=1) is not None
    assert gc.why_collect(fresh, T0, caches=caches, queries=[], capacity=2) is None


def test_due_run_is_the_latest_missed_one() -> None:
    hourly = "0 * * * *"
    assert schedule.due_run(hourly, since=T0, now=T0 + timedelta(minutes=59)) is None
    assert schedule.due_run(hourly, since=T0, now=T0 + timedelta(hours=3, minutes=5)) == \
        T0 + timedelta(hours=3)  # fmt: skip
    seconds = "* * * * * */15"
    assert schedule.due_run(seconds, since=T0, now=T0 + timedelta(seconds=16)) == \
        T0 + timedelta(seconds=15)  # fmt: skip


def test_history_limit_deletes_finished_runs_oldest_first() -> None:
    def run(name: str, at: str, phase: str) -> dict[str, Any]:
        return {
            "metadata": {"name": name, "annotations": {names.ANNOTATION_RUN_TIME: at}},
            "status": {"phase": phase},
        }

    runs = [
        run("c", "2026-01-03", "Completed"),
        run("a", "2026-01-01", "Failed"),
        run("b", "2026-01-02", "Completed"),
        run("d", "2026-01-04", "Retrieving"),
    ]
    assert schedule.runs_to_delete(runs, 1) == ["a", "b"]
    assert schedule.runs_to_delete(runs, 3) == []


def test_bad_cron_is_a_usage_error() -> None:

    with pytest.raises(UsageError, match="not a cron expression"):
        schedule.check("every tuesday")


def test_analysis_draws_the_charts_the_reading_asked_for() -> None:
    table = "node_id,metric_name,timestamp,value\n900,total_power,2022-06-01T20:00:00Z,1.5\n"
    title = "Retrieve the power of node 900 and plot the time series"
    plot = build_analysis(table, title=title, charts=("line",))
    assert plot is not None and plot.outputs == ("summary.json", "line.png")
    script = plot.files["analysis.py"]
    assert "odaplot.line('result.csv', 'timestamp', 'value'" in script
    assert "series='node_id'" in script  # one metric: the lines are nodes
    assert plot.files["result.csv"] == table
    hist = build_analysis(table, title="inlet temperature, histogram", charts=("histogram",))
    assert hist is not None and hist.outputs == ("summary.json", "histogram.png")
    unnamed = build_analysis(table, title="visualise the power of node 900", charts=("chart",))
    assert unnamed is not None and unnamed.outputs == ("summary.json", "line.png")
    plain = build_analysis(table, title="the power of node 900")
    assert plain is not None and plain.outputs == ("summary.json",)
    assert "odaplot.line" not in plain.files["analysis.py"]
    # the title never chooses a chart: only the reading's kinds do
    worded = build_analysis(table, title="plot a histogram of the power of node 900")
    assert worded is not None and worded.outputs == ("summary.json",)
    assert build_analysis("node_id\n900\n", title="which nodes") is None


def test_the_charts_asked_come_from_the_answer() -> None:
    assert asked_charts({"asked": {"charts": ["line", "histogram"]}}) == ("line", "histogram")
    assert asked_charts({"asked": None}) == ()
    assert asked_charts({}) == ()


def test_analysis_tells_metrics_apart_and_refuses_oversized_tables() -> None:
    table = ("node_id,metric_name,timestamp,value\n900,ambient,2022-06-01T00:00:00Z,21\n"
             "900,total_power,2022-06-01T00:00:00Z,800\n")  # fmt: skip
    built = build_analysis(table, title="plot them", charts=("line",))
    assert built is not None and "by='metric_name'" in built.files["analysis.py"]
    huge = "node_id,value\n" + "900,1.0\n" * (MAX_TABLE_BYTES // 8)
    assert build_analysis(huge, title="plot them", charts=("line",)) is None


def test_status_rows_come_from_the_table_when_not_inline() -> None:
    table = "node_id,value\n" + "".join(f"900,{i}\n" for i in range(80))
    fields = answer_fields({"columns": ["node_id", "value"], "rows": None, "row_count": 80}, table)
    assert len(fields["rows"]) == STATUS_ROWS and fields["rows"][2] == {
        "node_id": "900",
        "value": "2",
    }


def test_replicas_rank_by_start_time_and_fit_a_json_integer() -> None:
    early, late = (
        peering_priority(1_700_000_000_000_000_000),
        peering_priority(1_700_000_000_000_001_000),
    )
    assert early > late > 0 and early < 2**63
