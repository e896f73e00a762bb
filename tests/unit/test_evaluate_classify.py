"""The benchmark's classes: each one reachable, each decided against the Polars oracle.

Answers are built by hand from the oracle's own rows, then altered: a value changed is
hallucinated, rows dropped are incomplete, a refusal is failed, a question back is a
clarification, numbers where the lake has none are hallucinated."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from baseline_lake import write_baseline_lake

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from devset import oracle
from evalkit.classify import CLASSES, classify
from evalkit.report import Row, summary_line
from evalkit.runners import Run

SPEC = {
    "kind": "readings",
    "metrics": ["ipmi/total_power"],
    "nodes": [900],
    "window": ["2022-06-01T00:00", "2022-06-01T00:10"],
}


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_baseline_lake(tmp_path_factory.mktemp("lake"))


@pytest.fixture(scope="module")
def table(lake: Path) -> pl.DataFrame:
    return oracle.jobs(lake)


def _answer(rows: list[list[Any]], **extra: Any) -> dict[str, Any]:
    cols = ["node_id", "metric_name", "timestamp", "value"]
    res = {"columns": cols, "rows": rows, "row_count": len(rows), **extra}
    return {"status": "completed", "answer": "", "results": [res]}


def _oracle_rows(lake: Path, table: pl.DataFrame) -> list[list[Any]]:
    frame = oracle.expected(SPEC, lake, table).frame
    return [[n, m, ts, v] for n, m, ts, v in frame.select("node", "metric", "ts", "value").rows()]


def test_every_class_is_reachable(lake: Path, table: pl.DataFrame) -> None:
    rows = _oracle_rows(lake, table)
    assert len(rows) > 3
    got = {
        "correct": classify(_answer(rows), SPEC, lake, table),
        "hallucinated": classify(
            _answer([[*rows[0][:3], rows[0][3] + 1.0], *rows[1:]]), SPEC, lake, table
        ),
        "incomplete": classify(_answer(rows[:-2]), SPEC, lake, table),
        "failed": classify({"status": "rejected", "answer": "no"}, SPEC, lake, table),
        "clarification": classify(
            {"status": "clarification", "answer": "which?"}, SPEC, lake, table
        ),
    }
    assert {k: v.cls for k, v in got.items()} == {c: c for c in CLASSES}


def test_an_extra_row_or_another_node_is_hallucinated(lake: Path, table: pl.DataFrame) -> None:
    rows = _oracle_rows(lake, table)
    other = [[901, *r[1:]] for r in rows]
    assert classify(_answer(other), SPEC, lake, table).cls == "hallucinated"
    assert classify(_answer([*rows, rows[0]]), SPEC, lake, table).cls == "hallucinated"


def test_a_cut_inline_result_is_incomplete(lake: Path, table: pl.DataFrame) -> None:
    rows = _oracle_rows(lake, table)
    cut = classify(_answer(rows[:2], truncated=True), SPEC, lake, table)
    assert cut.cls == "incomplete"


def test_refusals_and_no_data(lake: Path, table: pl.DataFrame) -> None:
    refuse = {"status": "rejected", "message_includes": ["unknown"]}
    assert (
        classify({"status": "rejected", "answer": "unknown metric"}, refuse, lake, table).cls
        == "correct"
    )
    assert classify(_answer(_oracle_rows(lake, table)), refuse, lake, table).cls == "hallucinated"
    empty = {"status": "completed", "no_data": True}
    assert classify(_answer([]), empty, lake, table).cls == "correct"
    assert classify(_answer(_oracle_rows(lake, table)), empty, lake, table).cls == "hallucinated"


def test_the_summary_line_counts_correct_answers_and_our_hallucinations(
    lake: Path, table: pl.DataFrame
) -> None:
    rows = _oracle_rows(lake, table)
    made = [
        Row("A", "nsa", classify(_answer(rows), SPEC, lake, table), Run(_answer(rows), 0.1)),
        Row("B", "nsa", classify(_answer(rows[:1] * 2), SPEC, lake, table), Run({}, 0.1)),
        Row("A", "sota1", classify({"status": "failed"}, SPEC, lake, table), Run({}, 0.1)),
    ]
    line = summary_line("retrieval", made, ["nsa", "sota1", "sota2"])
    assert line == "evaluate: set=retrieval nsa=1/2 sota1=0/1 sota2=0/0 nsa_hallucinated=1"


def test_rows_without_their_key_columns_are_not_a_part_of_the_answer(
    lake: Path, table: pl.DataFrame
) -> None:
    """One unlabelled number that happens to equal one day's count is wrong, not incomplete."""
    spec = {
        "kind": "jobs_per_bucket",
        "unit": "day",
        "window": ["2022-06-01T00:00", "2022-06-03T00:00"],
    }
    frame = oracle.expected(spec, lake, table).frame
    one_day = int(frame["count_job"][0])
    answer = {
        "status": "completed",
        "results": [{"columns": ["count_job"], "rows": [[one_day]], "row_count": 1}],
    }
    assert classify(answer, spec, lake, table).cls == "hallucinated"
    labelled = {
        "status": "completed",
        "results": [
            {"columns": ["day", "count_job"], "rows": [list(frame.row(0))], "row_count": 1}
        ],
    }
    assert classify(labelled, spec, lake, table).cls == "incomplete"


def test_hourly_means_as_a_series_are_the_same_answer(lake: Path, table: pl.DataFrame) -> None:
    spec = {
        "kind": "stats",
        "metrics": ["ipmi/total_power"],
        "nodes": [900],
        "fns": ["avg"],
        "by": ["hour"],
        "window": ["2022-06-01T00:00", "2022-06-01T01:00"],
    }
    frame = oracle.expected(spec, lake, table).frame
    series = [[900, "total_power", h, v] for h, v in frame.select("hour", "avg").rows()]
    assert classify(_answer(series), spec, lake, table).cls == "correct"
    wrong = [[900, "total_power", h, v + 1] for h, v in frame.select("hour", "avg").rows()]
    assert classify(_answer(wrong), spec, lake, table).cls == "hallucinated"


def test_an_empty_result_is_not_a_part_of_the_answer(lake: Path, table: pl.DataFrame) -> None:
    assert classify(_answer([]), SPEC, lake, table).cls == "hallucinated"


def test_per_gpu_is_per_gpu_metric(lake: Path, table: pl.DataFrame) -> None:
    spec = {
        "kind": "stats",
        "metrics": ["ganglia/Gpu0_gpu_utilization"],
        "nodes": [900],
        "fns": ["max"],
        "by": ["metric"],
        "window": ["2022-06-01T00:00", "2022-06-01T01:00"],
    }
    peak = oracle.expected(spec, lake, table).frame["max"][0]
    per_gpu = {
        "status": "completed",
        "results": [{"columns": ["node_id", "gpu_index", "max_value"], "rows": [[900, 0, peak]]}],
    }
    assert classify(per_gpu, spec, lake, table).cls == "correct"
    per_gpu["results"][0]["rows"] = [[900, 1, peak]]
    assert classify(per_gpu, spec, lake, table).cls == "hallucinated"


def test_a_named_job_s_readings_need_no_run_length(lake: Path, table: pl.DataFrame) -> None:
    """A question naming its job is answered by the readings alone (and still checked)."""
    job = int(table.filter(pl.col("nodes").list.contains(900))["job_id"][0])
    spec = {"kind": "job_readings", "metrics": ["ipmi/total_power"], "jobs": [job]}
    frame = oracle.expected(spec, lake, table).frame
    assert "duration_h" not in frame.columns and frame.height > 0
    cols = ["job_id", "node_id", "metric_name", "timestamp", "value"]
    rows = [list(r) for r in frame.select("job", "node", "metric", "ts", "value").rows()]

    def answer(rows: list[list[Any]]) -> dict[str, Any]:
        res = {"columns": cols, "rows": rows, "row_count": len(rows)}
        return {"status": "completed", "answer": "", "results": [res]}

    assert classify(answer(rows), spec, lake, table).cls == "correct"
    wrong = [[*rows[0][:4], rows[0][4] + 1.0], *rows[1:]]
    assert classify(answer(wrong), spec, lake, table).cls == "hallucinated"
