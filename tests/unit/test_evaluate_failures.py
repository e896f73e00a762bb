"""The harness explains every answer it does not count correct: its class and one line of why,
taken from the answer (its refusal, clarification or failure message) or from the oracle (the
diff of a wrong value, what an incomplete answer lacks), and a code step that made nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from baseline_lake import write_baseline_lake

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from devset import oracle
from evalkit.classify import classify
from evalkit.report import Row, explanations, failures, rows_from_json, summary_line
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
    res = {"columns": ["node_id", "metric_name", "timestamp", "value"], "rows": rows,
           "row_count": len(rows)}  # fmt: skip
    return {"status": "completed", "answer": "", "results": [res], **extra}


def _rows(lake: Path, table: pl.DataFrame) -> list[list[Any]]:
    frame = oracle.expected(SPEC, lake, table).frame
    return [list(r) for r in frame.select("node", "metric", "ts", "value").rows()]


def _row(qid: str, answer: dict[str, Any], lake: Path, table: pl.DataFrame,
         code_ok: bool | None = None) -> Row:  # fmt: skip
    return Row(qid, "nsa", classify(answer, SPEC, lake, table), Run(answer, 0.1, code_ok=code_ok))


def test_each_answer_not_counted_correct_gets_its_class_and_one_line(
    lake: Path, table: pl.DataFrame, tmp_path: Path
) -> None:
    rows = _rows(lake, table)
    wrong = [[*rows[0][:3], rows[0][3] + 7.0], *rows[1:]]
    refusal = "I could not use 'failled' in\n  the question (rephrase it)"
    tasks = [{"name": "retrieve: …", "status": "completed", "detail": ""},
             {"name": "chart: a line plot", "status": "failed",
              "detail": "the script exited 1:\nKeyError: 'value'"}]  # fmt: skip
    made = [
        _row("OK", _answer(rows), lake, table),
        _row("WRONG", _answer(wrong), lake, table),
        _row("SHORT", _answer(rows[:-3]), lake, table),
        _row("REFUSED", {"status": "rejected", "answer": refusal}, lake, table),
        _row("ASKED", {"status": "clarification", "answer": "which node?"}, lake, table),
        _row("NOCHART", _answer(rows, tasks=tasks), lake, table, code_ok=False),
    ]
    found = {e["id"]: e for e in explanations(made, "nsa")}
    assert set(found) == {"WRONG", "SHORT", "REFUSED", "ASKED", "NOCHART"}
    assert [found[q]["class"] for q in ("WRONG", "SHORT", "REFUSED", "ASKED", "NOCHART")] == [
        "hallucinated", "incomplete", "failed", "clarification", "code-failed"]  # fmt: skip
    assert all("\n" not in e["reason"] and e["reason"] for e in found.values())
    assert "differs in" in found["WRONG"]["reason"] and "expected" in found["WRONG"]["reason"]
    assert f"{len(rows) - 3} of {len(rows)} rows" in found["SHORT"]["reason"]
    assert "I could not use 'failled' in the question" in found["REFUSED"]["reason"]
    assert "which node?" in found["ASKED"]["reason"]
    assert "chart: a line plot failed: the script exited 1: KeyError" in found["NOCHART"]["reason"]
    # The summary line's count and the explained answers agree: every one not counted is listed.
    assert "nsa=1/6" in summary_line("e2e", made, ["nsa"])
    printed = failures(made, "nsa").splitlines()
    assert printed[0] == "nsa: 5 not correct" and len(printed) == 6
    # A JSON record read back (--merge) explains the same answers the same way.
    record = {"rows": [r.to_json() for r in made]}
    again = rows_from_json(json.loads(json.dumps(record)))
    assert explanations(again, "nsa") == explanations(made, "nsa")
